"""Invariants of the what-if simulator.

The simulator hands dispatch a compact snapshot (``simulator.clusters``): sums instead of the
running workloads, lowered count limits, only the pending work that can matter, and no cycle
where nothing can have changed. The first property is the one that makes it a faithful
simulator: on any trace and setup it releases exactly what handing dispatch the whole cluster
at every event releases, in the same order at the same instants. If dispatch ever starts to
read running work in another way, this is the test that says so.
"""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import keys
from policy.model import Ordering, Policy, Queue, Team
from records.trace import Phase, Record
from simulator.outcomes import summarize
from simulator.setups import Setup
from simulator.simulating import simulate

GPU = keys.GPU_RESOURCE
T0 = 1_700_000_000.0
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEWER = settings(SETTINGS, max_examples=40)

counts = st.one_of(st.none(), st.none(), st.integers(0, 4))
quotas = st.one_of(
    st.just(MappingProxyType({})),
    st.builds(lambda g: MappingProxyType({GPU: g * 1000}), st.integers(0, 10)),
    st.builds(
        lambda g, c: MappingProxyType({GPU: g * 1000, "cpu": c * 1000}), st.integers(0, 10), st.integers(0, 8)
    ),
)


@st.composite
def setups(draw: st.DrawFn) -> Setup:
    queues = {
        name: Queue(
            name,
            priority=draw(st.sampled_from([0, 0, 5])),
            max_running=draw(counts),
            quota=draw(quotas),
            ordering=draw(st.sampled_from(list(Ordering))),
            paused=draw(st.integers(0, 9)) == 0,
        )
        for name in ("q0", "q1", "q2", "q3")[: draw(st.integers(1, 4))]
    }
    teams = {name: Team(name, draw(counts), draw(quotas)) for name in ("t0", "t1") if draw(st.booleans())}
    policy = Policy(
        max_running=draw(st.one_of(st.none(), st.integers(0, 8))),
        quota=draw(quotas),
        starvation_seconds=draw(st.sampled_from([20, 600])),
    )
    return Setup(MappingProxyType(queues), MappingProxyType(teams), policy, "random")


@st.composite
def traces(draw: st.DrawFn) -> list[Record]:
    out = []
    t = 0.0
    for i in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([0, 0, 1, 3, 10]))
        workflow = draw(st.sampled_from(["", "", "", "s0", "s1"]))
        group = draw(st.sampled_from(["", "", "", "", f"g{i}"]))
        kind = draw(st.sampled_from(["ran", "ran", "ran", "ran", "running", "never"]))
        runs = draw(st.sampled_from([0, 1, 5, 20, 60]))
        submitted = T0 + t
        released = submitted + draw(st.sampled_from([0, 0, 2])) if kind != "never" else None
        out.append(
            Record(
                namespace="ml",
                name=f"w{i:02d}",
                queue=draw(st.sampled_from(["q0", "q1", "q2", "q3", "gone"])),
                submitted=submitted,
                phase={"ran": Phase.SUCCEEDED, "running": Phase.RUNNING, "never": Phase.PENDING}[kind],
                team=draw(st.sampled_from(["t0", "t1", "t2", ""])),
                workflow=workflow,
                workflow_max_running=draw(st.sampled_from([None, 1, 2])) if workflow else None,
                group=group,
                group_size=draw(st.integers(2, 3)) if group else 1,
                priority=draw(st.sampled_from([0, 0, 10])),
                requests=MappingProxyType(
                    {
                        GPU: draw(st.integers(0, 4)) * 1000,
                        "cpu": draw(st.integers(0, 3)) * 1000,
                        "memory": 1000,
                    }
                ),
                released=released,
                bound=released,
                finished=released + runs if kind == "ran" and released is not None else None,
            )
        )
    return out


@SETTINGS
@given(traces(), setups())
def test_the_compact_snapshot_releases_exactly_what_the_whole_cluster_would(
    trace: list[Record], setup: Setup
) -> None:
    compact = simulate(trace, setup)
    whole = simulate(trace, setup, exact=True)
    assert compact.order == whole.order
    assert compact.replays == whole.replays
    assert compact.cycles <= whole.cycles


@st.composite
def crowds(draw: st.DrawFn) -> tuple[list[Record], Setup]:
    """Many queues of few priorities, each soon held back by its own small limits, heads that
    starve within seconds: the round-robin and starving claims among queues that can release
    nothing (which the compact snapshot shows as one idle queue, or none)."""
    names = [f"q{i}" for i in range(draw(st.integers(3, 7)))]
    queues = {
        name: Queue(
            name,
            priority=draw(st.sampled_from([0, 0, 5])),
            max_running=draw(st.one_of(st.none(), st.integers(1, 3))),
            quota=MappingProxyType({GPU: draw(st.integers(1, 4)) * 1000}),
            ordering=draw(st.sampled_from(list(Ordering))),
        )
        for name in names
    }
    teams = {"t0": Team("t0", draw(counts), draw(quotas))}
    policy = Policy(
        max_running=draw(st.one_of(st.none(), st.integers(2, 10))),
        quota=MappingProxyType({GPU: draw(st.integers(2, 12)) * 1000}),
        starvation_seconds=draw(st.sampled_from([0, 5, 20])),
    )
    out = []
    t = 0.0
    for i in range(draw(st.integers(5, 60))):
        t += draw(st.sampled_from([0, 1, 2, 5]))
        workflow = draw(st.sampled_from(["", "", "", "s0"]))
        submitted = T0 + t
        out.append(
            Record(
                namespace="ml",
                name=f"w{i:02d}",
                queue=draw(st.sampled_from(names)),
                submitted=submitted,
                phase=Phase.SUCCEEDED,
                team=draw(st.sampled_from(["t0", "t1"])),
                workflow=workflow,
                workflow_max_running=draw(st.sampled_from([None, 1, 2])) if workflow else None,
                priority=draw(st.sampled_from([0, 0, 10])),
                requests=MappingProxyType({GPU: draw(st.integers(1, 3)) * 1000}),
                released=submitted,
                bound=submitted,
                finished=submitted + draw(st.sampled_from([1, 3, 10, 30])),
            )
        )
    return out, Setup(MappingProxyType(queues), MappingProxyType(teams), policy, "crowded")


@SETTINGS
@given(crowds())
def test_the_compact_snapshot_keeps_the_turns_of_crowded_queues(crowd: tuple[list[Record], Setup]) -> None:
    trace, setup = crowd
    compact = simulate(trace, setup)
    whole = simulate(trace, setup, exact=True)
    assert compact.order == whole.order
    assert compact.replays == whole.replays


@FEWER
@given(traces(), setups())
def test_no_scope_ever_runs_more_than_its_limits_allow(trace: list[Record], setup: Setup) -> None:
    """Replaying the release and finish times, no instant has a queue, team or the cluster over
    its maxRunning or GPU quota (work that was already over a lowered limit never exists here:
    the replay starts empty)."""
    run = simulate(trace, setup)
    events = sorted(
        [(r.released, 1, r) for r in run.replays if r.released is not None]
        + [(r.finished, -1, r) for r in run.replays if r.finished is not None],
        key=lambda e: (e[0], e[1]),
    )
    running: dict[str, int] = {}
    gpus: dict[str, int] = {}
    for _, sign, r in events:
        rec = r.record
        scopes = [f"queue/{rec.queue}", "cluster"] + ([f"team/{rec.team}"] if rec.team else [])
        for scope in scopes:
            running[scope] = running.get(scope, 0) + sign
            gpus[scope] = gpus.get(scope, 0) + sign * rec.requests.get(GPU, 0)
        if sign < 0:
            continue
        queue = setup.queues[rec.queue]
        assert queue.max_running is None or running[f"queue/{rec.queue}"] <= queue.max_running
        assert GPU not in queue.quota or gpus[f"queue/{rec.queue}"] <= queue.quota[GPU]
        team = setup.teams.get(rec.team)
        if team is not None:
            assert team.max_running is None or running[f"team/{rec.team}"] <= team.max_running
            assert GPU not in team.quota or gpus[f"team/{rec.team}"] <= team.quota[GPU]
        policy = setup.policy
        assert policy.max_running is None or running["cluster"] <= policy.max_running
        assert GPU not in policy.quota or gpus["cluster"] <= policy.quota[GPU]


@FEWER
@given(traces(), setups())
def test_every_replayed_workload_is_counted_once_and_waits_are_never_negative(
    trace: list[Record], setup: Setup
) -> None:
    run = simulate(trace, setup)
    assert len(run.replays) + len(run.skipped) == len(trace)
    assert len(set(run.order)) == len(run.order) == sum(r.released is not None for r in run.replays)
    assert all(r.wait is None or r.wait >= 0 for r in run.replays)
    summary = summarize(run, capacity=8)
    assert sum(f.workloads for f in summary.queues.values()) == summary.cluster.workloads == len(run.replays)
