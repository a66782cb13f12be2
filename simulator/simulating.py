"""Replay a trace in virtual time through the controller's own decision, ``dispatch``.

The rules of the replay (docs/reference/recorder-and-records.md, "The replay"):

* Each workload arrives at its recorded ``submitted`` time, whole (a pod group with all its
  pods), with its recorded queue, team, workflow, priority and requests. It counts toward the
  queue and the team admission stamped on it (``policy.membership``); a setup has no
  namespaces, so none leaves its team and every record counts where it was recorded.
* A dispatch cycle runs at every instant at which something happens: an arrival or a
  completion. Events at the same instant make one cycle (completions, then arrivals), as the
  controller's debounce coalesces a burst. There is no fixed tick; nothing else changes the
  state between events.
* ``turns`` (the round-robin state) is carried from each cycle to the next, as the controller
  keeps it in memory.
* A released workload counts as running at once, and holds its slot for as long as it held
  it in the trace: from release to finish (finished − released; dispatch counts a workload
  running from its release, so the time Kubernetes took to place it is part of the hold);
  then it finishes and frees its slot. A workload still running when the trace ends ran at
  least until then: it is replayed for that long (``censored``). A workload that never ran in
  the trace has no duration to replay and is left out (``skipped``), and said so.
* The simulator models dispatch, not placement: a released workload starts at once, as if
  kube-scheduler always found room. It does read the setup's Nodes, if it has any, as
  dispatch does (``policy.inventory``): a workload that no node could hold is never released
  (``no_node``), and since a setup's nodes never change it takes no part in any cycle. A
  record keeps a group's requests summed, so each pod of a group is judged as asking an even
  share of them (rounded up). A setup without Nodes takes every pod to fit some node.

The snapshot is built incrementally: each workload is converted to the policy model once (a
pending and a running version), running work is kept in one dict, pending work per queue in
arrival order. Two trims keep a cycle small without changing what ``dispatch`` releases: the
pending work of a queue that is closed at the start of the cycle (missing, paused, or at
``maxRunning``) is left out of the snapshot, since dispatch neither releases from such a queue
nor lets it hold capacity; and requests keep only the resources some quota names, the only
ones limits and holds read. A cycle with no pending work in an open queue cannot release
anything and is not run. ``simulator.compacting`` has the rest: sums for running work, the
first few of each shape, and idle queues (their own limits stop all their work) left out or
shown as one placeholder, remembered until an event touches them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from policy import keys
from policy.dispatching import Turns, dispatch
from policy.inventory import Inventory
from policy.model import State, Workload
from policy.pods import Pod
from policy.quantities import EMPTY, Resources
from records.trace import Record, last_time
from simulator.clusters import VirtualCluster
from simulator.compacting import Compactor
from simulator.setups import Setup


@dataclass(frozen=True, slots=True)
class Replay:
    """One workload of a run: its record, and when it was released and finished (None: never)."""

    record: Record
    released: float | None
    finished: float | None
    duration: float  # how long it runs once released

    @property
    def wait(self) -> float | None:
        return None if self.released is None else self.released - self.record.submitted


@dataclass(frozen=True, slots=True)
class Run:
    """A replay of a trace under one setup (or the trace as it was recorded)."""

    label: str
    replays: tuple[Replay, ...]  # in trace order
    order: tuple[str, ...]  # workload keys in the order they were released
    skipped: tuple[Record, ...] = ()  # never ran in the trace: no duration to replay
    censored: int = 0  # still running when the trace ended: replayed until then
    cycles: int = 0  # dispatch decisions made
    no_node: tuple[str, ...] = ()  # keys of the workloads no node of the setup could hold: never released

    def by_key(self) -> Mapping[str, Replay]:
        return {r.record.key: r for r in self.replays}


def run_duration(r: Record, end: float) -> float | None:
    """How long ``r`` holds its slot once released: from its release to its finish; until
    ``end`` if still running; None when it was never released (nothing to replay)."""
    if r.released is None:
        return None
    if r.finished is not None:
        return r.finished - r.released
    return max(0.0, end - r.released)


def recorded(records: Sequence[Record], label: str = "recorded") -> Run:
    """The trace as it happened, in the shape of a run: the baseline when none is given."""
    end = last_time(records)
    replays: list[Replay] = []
    skipped: list[Record] = []
    censored = 0
    for r in records:
        duration = run_duration(r, end)
        if duration is None:
            skipped.append(r)
            continue
        censored += r.finished is None
        assert r.released is not None
        finished = r.finished if r.finished is not None else end
        replays.append(Replay(r, r.released, finished, duration))
    order = sorted((r for r in replays if r.released is not None), key=lambda r: (r.released, r.record.key))
    return Run(label, tuple(replays), tuple(r.record.key for r in order), tuple(skipped), censored)


def quota_resources(setup: Setup) -> frozenset[str]:
    """The resources some quota of ``setup`` names: the only ones limits and holds read."""
    names: set[str] = set(setup.policy.quota)
    for queue in setup.queues.values():
        names.update(queue.quota)
    for team in setup.teams.values():
        names.update(team.quota)
    return frozenset(names)


_PODS: dict[tuple[int, bool], tuple[Pod, ...]] = {}


def _pods(size: int, gated: bool) -> tuple[Pod, ...]:
    """Placeholder pods: dispatch counts a workload's pods and reads whether they are gated."""
    pods = _PODS.get((size, gated))
    if pods is None:
        pods = _PODS[(size, gated)] = tuple(Pod("", f"pod-{i}", gated=gated) for i in range(size))
    return pods


def versions(w: Workload, keep: frozenset[str]) -> tuple[Workload, Workload]:
    """The pending and the running version of ``w`` that the replay keeps: placeholder pods,
    requests of the resources in ``keep`` only (``quota_resources``)."""
    requests: Resources = {k: v for k, v in w.requests.items() if k in keep} or EMPTY
    pending = replace(w, pods=_pods(len(w.pods), True), state=State.PENDING, requests=requests)
    return pending, replace(pending, pods=_pods(len(w.pods), False), state=State.RUNNING)


def record_workload(r: Record) -> Workload:
    """``r``'s workload as it waits, in the policy model (placeholder pods)."""
    return Workload(
        key=r.key,
        namespace=r.namespace,
        queue=r.queue,
        team=r.team,
        pods=_pods(r.group_size, True),
        state=State.PENDING,
        requests=r.requests,
        priority=r.priority,
        created=r.submitted,
        workflow=f"{r.namespace}/{r.workflow}" if r.workflow else "",
        workflow_max_running=r.workflow_max_running,
        group_size=r.group_size,
    )


def _no_node_fits(r: Record, setup: Setup, nodes: Inventory) -> bool:
    """Whether no node of ``nodes`` could hold a pod of ``r``'s workload, each pod asking an
    even share of the group's requests (rounded up)."""
    size = max(r.group_size, 1)
    share = MappingProxyType({name: -(-amount // size) for name, amount in r.requests.items()})
    pod = Pod(r.namespace, r.key, labels=MappingProxyType({keys.QUEUE_LABEL: r.queue}), requests=share)
    return nodes.pod_refusal(pod, setup.queues.get(r.queue)) is not None


_SLACK = 1e-3  # seconds: starvation moments this close to a cycle count as after it

_INF = float("inf")


def simulate(
    records: Sequence[Record],
    setup: Setup,
    label: str = "",
    exact: bool = False,
    reaction: float = 0.0,
    observe: Callable[[float, Turns], None] | None = None,
) -> Run:
    """Replay ``records`` under ``setup``; see the module docstring for the rules.

    ``exact`` hands dispatch the whole cluster every cycle instead of the compact snapshot
    (``simulator.compacting``): the same answer, much slower; the reference in tests.
    ``reaction`` (seconds, 0 by default) is the controller's reaction time: each cycle runs
    that long after the first event it answers, taking in every event until then (the
    controller hears of a change through its watch, waits out its debounce, then decides).
    ``observe(now, turns)`` hears the round-robin state each cycle leaves (the controller's
    ``turns`` at that instant; ``benchmarks.estimates`` starts its estimates from it).
    """
    end = last_time(records)
    keep = quota_resources(setup)
    skipped: list[Record] = []
    censored = 0
    arrivals: list[tuple[float, str]] = []
    forms: dict[str, tuple[Workload, Workload]] = {}
    durations: dict[str, float] = {}
    inventory = Inventory(setup.nodes)
    nowhere: list[str] = []
    for r in records:
        duration = run_duration(r, end)
        if duration is None:
            skipped.append(r)
            continue
        censored += r.finished is None
        forms[r.key] = versions(record_workload(r), keep)
        durations[r.key] = duration
        if inventory and _no_node_fits(r, setup, inventory):
            nowhere.append(r.key)  # passed over by every cycle, as if it were not there
            continue
        arrivals.append((r.submitted, r.key))
    arrivals.sort()

    cluster = VirtualCluster(setup)
    events = Events(cluster, forms, durations, arrivals)
    events.run(Turns(), exact=exact, reaction=reaction, observe=observe)
    released_at, finished_at, order = events.released_at, events.finished_at, events.order

    replays = tuple(
        Replay(r, released_at.get(r.key), finished_at.get(r.key), durations[r.key])
        for r in records
        if r.key in durations
    )
    return Run(
        label or setup.source, replays, tuple(order), tuple(skipped), censored, events.cycles, tuple(nowhere)
    )


class Events:
    """The replay's event loop over a virtual cluster: arrivals, completions and the dispatch
    cycles between them, from whatever the cluster holds when it starts.

    ``simulate`` starts it on an empty cluster with every workload of a trace to arrive;
    ``simulator.estimating`` starts it on the live cluster (work already running, with its
    completion times queued by ``running``, and work already waiting, which arrives at its
    submission time, all before ``start``). ``versions`` holds each workload's pending and
    running version, ``durations`` how long each holds its slot once released.
    """

    def __init__(
        self,
        cluster: VirtualCluster,
        versions: Mapping[str, tuple[Workload, Workload]],
        durations: Mapping[str, float],
        arrivals: list[tuple[float, str]],
    ) -> None:
        self.cluster = cluster
        self.versions = versions
        self.durations = durations
        self.arrivals = arrivals  # (submitted, key), sorted
        self.completions: list[tuple[float, int, str]] = []
        self.released_at: dict[str, float] = {}
        self.finished_at: dict[str, float] = {}
        self.order: list[str] = []
        self.cycles = 0
        self.cut = False  # whether ``run`` stopped at ``until`` with events still to come

    def running(self, w: Workload, until: float) -> None:
        """``w`` (its running version) runs already, and frees its slot at ``until``."""
        self.cluster.run(w)
        heapq.heappush(self.completions, (until, -1, w.key))

    def run(
        self,
        turns: Turns,
        *,
        start: float = -_INF,
        exact: bool = False,
        reaction: float = 0.0,
        until: float = _INF,
        observe: Callable[[float, Turns], None] | None = None,
        most: int | None = None,
        awaited: Collection[str] | None = None,
    ) -> Turns:
        """Run every event until nothing is left to happen, or up to ``until``; the turns of
        the last cycle.

        The first cycle runs no earlier than ``start``; ``observe(now, turns)`` hears the
        turns each cycle leaves. ``most`` stops the run (``cut``) after the cycle that brings
        its releases to that many; ``awaited`` stops it once every one of those keys has been
        released (not ``cut``: nothing asked for is left to learn)."""
        cluster = self.cluster
        compactor = Compactor(cluster)
        starvation = cluster.setup.policy.starvation_seconds
        arrivals, completions, versions = self.arrivals, self.completions, self.versions
        released_at, order = self.released_at, self.order
        nxt, total = 0, len(arrivals)
        left = None if awaited is None else {k for k in awaited if k not in released_at}
        if left is not None and not left:
            return turns
        crossed = 0  # arrivals[:crossed] have become starving by the last cycle
        last = -_INF
        while nxt < total or completions:
            now = min(arrivals[nxt][0] if nxt < total else _INF, completions[0][0] if completions else _INF)
            now = max(now + reaction, start)
            if now > until:
                self.cut = True
                break
            changed = exact
            while completions and completions[0][0] <= now:
                key = heapq.heappop(completions)[2]
                cluster.finish(key)
                self.finished_at[key] = now
                changed = True
            while nxt < total and arrivals[nxt][0] <= now:
                w = versions[arrivals[nxt][1]][0]
                cluster.arrive(w)
                changed = changed or w.queue in cluster.open
                nxt += 1
            # A workload that became starving since the last cycle may change the answer.
            while crossed < nxt and arrivals[crossed][0] + starvation <= now + _SLACK:
                moment, key = arrivals[crossed]
                changed = changed or (moment + starvation > last - _SLACK and key not in released_at)
                crossed += 1
            if not changed:
                continue  # only arrivals to closed queues: the last cycle's answer stands
            last = now
            snapshot = cluster.whole(now) if exact else compactor.snapshot(now, turns)
            if snapshot is None:
                continue
            decision = dispatch(snapshot, turns)
            self.cycles += 1
            turns = decision.turns
            if observe is not None:
                observe(now, turns)
            for w in decision.release:
                key = w.key
                cluster.start(*versions[key])
                released_at[key] = now
                order.append(key)
                heapq.heappush(completions, (now + self.durations[key], len(order), key))
                if left is not None:
                    left.discard(key)
            if left is not None and not left:
                break
            if most is not None and len(order) >= most:
                self.cut = True
                break
        return turns
