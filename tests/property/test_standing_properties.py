"""``sluicegate pods`` and ``queues`` (``cli.standings``) say what the gate controller does, on
random clusters: namespaces that keep, lose or change their team, pods gated and released with
the team admission stamped on them, some never marked by admission, under queue and team limits.

The controller's side is a real cycle of ``GateController`` against an API server in memory
(``tests.fake_api``), its namespaces' teams given as the process gives them (``team_of``): which
pods it released, the Dispatched condition it wants on each pod left gated, and the usage its
decision counted per queue, team and cluster. The CLI's side is ``stand`` over the same objects as
the API server sends them. They agree pod by pod (released, or held with this reason and this
message) and scope by scope (running work and requests per queue, team and cluster).
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cli.standings import HELD, RELEASING, Observation, stand
from controller.metrics import ControllerMetrics
from controller.serving import gate_controller
from controller.settings import Settings
from policy.catalog import Catalog
from policy.dispatching import Decision
from policy.model import Namespace
from tests.builders import T0, MakeNamespace, MakePod, MakeQueue, MakeTeam
from tests.fake_api import FakeApi, Leader, PodCache

SETTINGS = Settings(explain_after_seconds=0.0, unplaceable_after_seconds=0.0, status_seconds=3600.0,
                    give_up_seconds=30.0, release_concurrency=4, write_concurrency=2)
NOW = T0 + 100.0  # every pod was created in the 60 s before: none has waited past starvationSeconds
NAMESPACES = ("ns0", "ns1", "ns2")
TEAMS = ("t0", "t1")
QUEUES = ("q0", "q1")

Obj = dict[str, Any]
Outcome = tuple[str, str, str]  # ("released", "", "") or ("held", reason, message)

limits = st.one_of(st.none(), st.integers(0, 3))
pods = st.lists(
    st.fixed_dictionaries({
        "namespace": st.sampled_from(NAMESPACES),
        "team": st.sampled_from(TEAMS),  # the team admission stamped
        "queue": st.sampled_from(QUEUES),
        "gated": st.booleans(),
        "marked": st.sampled_from([True, True, True, False]),
        "gpus": st.integers(0, 2),
    }),
    max_size=12,
)


def cluster(namespace_teams: dict[str, str | None], queue_limits: list[int | None],
            team_limits: list[int | None], shapes: list[dict[str, Any]]) -> Observation:
    namespaces = []
    for name, team in namespace_teams.items():
        made = MakeNamespace(name)
        namespaces.append((made.team(team) if team else made).obj())
    queues = []
    for name, limit in zip(QUEUES, queue_limits, strict=True):
        queue = MakeQueue(name).priority(1 if name == "q0" else 0)
        queues.append((queue.max_running(limit) if limit is not None else queue).obj())
    teams = []
    for name, limit in zip(TEAMS, team_limits, strict=True):
        team = MakeTeam(name)
        teams.append((team.max_running(limit) if limit is not None else team).obj())
    objs = []
    for i, shape in enumerate(shapes):
        made = (MakePod(shape["namespace"], f"p{i}").queue(shape["queue"]).team(shape["team"])
                .gpus(shape["gpus"]).created(i))
        if shape["marked"]:
            made.admitted(i)
        objs.append((made.gated() if shape["gated"] else made.running(f"node-{i}")).obj())
    return Observation(queues=queues, teams=teams, namespaces=namespaces, pods=objs, now=NOW)


async def controller_cycle(seen: Observation) -> tuple[Decision, dict[str, Outcome]]:
    """One cycle of the gate controller over what was seen: its decision, and for each pod it
    found gated whether it released it or the condition it wants on it (written in the
    background; ``Explainer.current`` is what the pod shows once the writes land)."""
    api = FakeApi()
    for obj in seen.pods:
        api.add(obj)
    cache = PodCache(api)
    cache.sync()
    catalog = Catalog.from_objects(queues=seen.queues, teams=seen.teams, presets=(), policy=None)
    teams = {ns.name: ns.team for ns in map(Namespace.parse, seen.namespaces)}
    controller = gate_controller(SETTINGS, api, cache, lambda: catalog, Leader(), ControllerMetrics(),  # type: ignore[arg-type]
                                 shown=api.shown, team_of=teams.get, wall=lambda: NOW)
    try:
        decision = controller.cycle()
        released = {p.key for w in decision.release for p in w.pods if p.gated}
        outcomes: dict[str, Outcome] = {}
        for found in cache.values():
            if not found.pod.gated:
                continue
            condition = controller.explainer.current(found)
            if found.key in released:
                outcomes[found.key] = ("released", "", "")
            elif condition is not None and condition.status == "False":
                outcomes[found.key] = ("held", condition.reason, condition.message)
    finally:
        await controller.stop()
    return decision, outcomes


@settings(max_examples=120, deadline=None)
@given(
    namespace_teams=st.fixed_dictionaries({ns: st.sampled_from([*TEAMS, None]) for ns in NAMESPACES}),
    queue_limits=st.lists(limits, min_size=2, max_size=2),
    team_limits=st.lists(limits, min_size=2, max_size=2),
    shapes=pods,
)
def test_the_clis_standing_is_the_controllers_decision(
    namespace_teams: dict[str, str | None], queue_limits: list[int | None], team_limits: list[int | None],
    shapes: list[dict[str, Any]],
) -> None:
    seen = cluster(namespace_teams, queue_limits, team_limits, shapes)
    decision, controller = asyncio.run(controller_cycle(seen))
    standing = stand(seen)

    cli: dict[str, Outcome] = {}
    for e in standing.entries:
        assert e.state in (RELEASING, HELD), e
        cli[e.key] = ("released", "", "") if e.state == RELEASING else ("held", e.reason, e.message)
    assert cli == controller

    # Running work and requests counted per queue, team and cluster, releases included.
    assert dict(standing.decision.usage.queues) == dict(decision.usage.queues)
    assert dict(standing.decision.usage.teams) == dict(decision.usage.teams)
    assert standing.decision.usage.cluster == decision.usage.cluster
    # NamespaceLeftTeam is a public reason, and only a namespace that left its team gives it.
    for key, (_, reason, _) in cli.items():
        if reason == "NamespaceLeftTeam":  # the public reason, as users read it
            pod = shapes[int(key.rsplit("/p", 1)[1])]
            assert namespace_teams[pod["namespace"]] != pod["team"]
