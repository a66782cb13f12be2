"""Dispatch over random sequences of events: submit (ordinary work, work too big for any quota,
work that has waited past starvationSeconds, the trials of a sweep), finish, change a limit,
pause, swap a member of a running pod group (delete a released member, create members with
other requests), add a node, and dispatch. The cluster has a node inventory: work no node could
hold is never released.

After every decision the checks of the snapshot properties hold, the release is applied as
the controller would (the workloads start running), and asking again at once releases nothing.
Lowering a limit below what runs never stops running work, and nothing more joins that scope.
A cluster with room and a pending workload that fits every limit releases something unless a
legitimate hold keeps it (a StrictFIFO queue stops only at eligible work: never at work that its
own workflow's limit holds); and starving claims move the round-robin turn only in turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from policy import keys
from policy.dispatching import Decision, Turns, dispatch
from policy.model import Ordering, Policy, Queue, Snapshot, State, Team, Workload
from policy.pods import Phase, Pod
from policy.quantities import EMPTY
from policy.workloads import group_workloads
from tests.property.oracle import (
    can_never_run,
    excused,
    failing_layers,
    limit_breaches,
    no_node,
    starving,
    usage_after,
)
from tests.property.snapshots import (
    GPU,
    NOW,
    QUEUES,
    TEAMS,
    WORKFLOW_MAX,
    WORKFLOWS,
    applied,
    make_inventory,
    make_workload,
    node_gpus,
)
from tests.property.test_dispatch_properties import reasons_are_true

small_limits = st.one_of(st.none(), st.integers(0, 4))
gpu_quotas = st.one_of(
    st.just(MappingProxyType({})), st.builds(lambda g: MappingProxyType({GPU: g * 1000}), st.integers(0, 10))
)


class Cluster(RuleBasedStateMachine):
    """The controller's view of the world, moved by events; ``decide`` is one controller cycle."""

    snap: Snapshot
    nodes: list[int]
    turns: Turns
    counter: int

    @initialize(priorities=st.lists(st.integers(0, 2), min_size=4, max_size=4), strict=st.booleans(),
                nodes=node_gpus)
    def start(self, priorities: list[int], strict: bool, nodes: list[int]) -> None:
        queues = {
            name: Queue(
                name,
                priority=p,
                ordering=Ordering.STRICT_FIFO if strict and i == 0 else Ordering.BEST_EFFORT_FIFO,
            )
            for i, (name, p) in enumerate(zip(QUEUES, priorities, strict=True))
        }
        self.nodes = nodes
        self.snap = Snapshot(queues, {}, Policy(starvation_seconds=600), [], NOW, make_inventory(nodes))
        self.turns = Turns()
        self.counter = 0

    @rule(gpus=st.sampled_from([4, 8, 16]))
    def add_node(self, gpus: int) -> None:
        """A node joins the cluster: work it could hold may go at the next decision."""
        self.nodes = [*self.nodes, gpus]
        self.snap = replace(self.snap, nodes=make_inventory(self.nodes))

    @rule(
        queue=st.sampled_from(QUEUES),
        team=st.sampled_from(TEAMS),
        gpus=st.integers(0, 4),
        priority=st.sampled_from([0, 100]),
        workflow=st.sampled_from(["", *WORKFLOWS]),
        group=st.sampled_from([0, 0, 2]),
    )
    def submit(self, queue: str, team: str, gpus: int, priority: int, workflow: str, group: int) -> None:
        self.counter += 1
        w = make_workload(
            self.counter, queue, team, State.PENDING, gpus, 0, priority, 0,
            workflow, WORKFLOW_MAX.get(workflow), group, group,
        )  # fmt: skip
        self.snap = replace(self.snap, workloads=[*self.snap.workloads, w])

    @rule(
        queue=st.sampled_from([QUEUES[0], *QUEUES]),  # the StrictFIFO queue (if any) twice as often
        team=st.sampled_from(TEAMS),
        workflow=st.sampled_from(WORKFLOWS),
        trials=st.integers(2, 4),
    )
    def submit_sweep(self, queue: str, team: str, workflow: str, trials: int) -> None:
        """Several trials of one sweep, more than its workflow limit lets run, submitted a second
        before one piece of other work in the same queue: in a StrictFIFO queue that work stands
        behind the trials its workflow limit holds."""
        for i in range(trials + 1):
            self.counter += 1
            sweep = i < trials
            w = make_workload(
                self.counter, queue, team, State.PENDING, 1, 0, 0, 1 if sweep else 0,
                workflow if sweep else "", WORKFLOW_MAX.get(workflow) if sweep else None, 0, 1,
            )  # fmt: skip
            self.snap = replace(self.snap, workloads=[*self.snap.workloads, w])

    @rule(queue=st.sampled_from(QUEUES), team=st.sampled_from(TEAMS), gpus=st.sampled_from([11, 16]))
    def submit_impossible(self, queue: str, team: str, gpus: int) -> None:
        """More GPUs than any quota drawn here allows: impossible wherever a GPU quota is set."""
        self.counter += 1
        w = make_workload(self.counter, queue, team, State.PENDING, gpus, 0, 100, 3000, "", None, 0, 1)
        self.snap = replace(self.snap, workloads=[*self.snap.workloads, w])

    @rule(
        queue=st.sampled_from(QUEUES),
        team=st.sampled_from(TEAMS),
        gpus=st.integers(1, 6),
        workflow=st.sampled_from(["", *WORKFLOWS]),
    )
    def submit_starving(self, queue: str, team: str, gpus: int, workflow: str) -> None:
        """Work submitted long ago: past starvationSeconds at once."""
        self.counter += 1
        w = make_workload(
            self.counter, queue, team, State.PENDING, gpus, 0, 0, 1000 + self.counter,
            workflow, WORKFLOW_MAX.get(workflow), 0, 1,
        )  # fmt: skip
        self.snap = replace(self.snap, workloads=[*self.snap.workloads, w])

    @rule(pick=st.integers(0, 1000))
    def finish(self, pick: int) -> None:
        running = [w for w in self.snap.workloads if w.state is State.RUNNING]
        if running:
            done = running[pick % len(running)]
            if _pod_level(done):
                ended = [replace(p, phase=Phase.SUCCEEDED) for p in done.pods]
                self.snap = _regrouped(self.snap, done.key, [*ended, *_gated_members(self.snap, done.key)])
                return
            self.snap = replace(
                self.snap,
                workloads=[replace(w, state=State.FINISHED) if w is done else w for w in self.snap.workloads],
            )

    @rule(pick=st.integers(0, 1000), victim=st.integers(0, 7),
          joining=st.lists(st.sampled_from([0, 1, 2, 4, 8]), min_size=1, max_size=3), misfit=st.booleans())
    def swap_member(self, pick: int, victim: int, joining: list[int], misfit: bool) -> None:
        """A released member of a running pod group is deleted and members with other requests
        are created with the same group label and size: they join only through every limit. With
        ``misfit``, the first new member names another group size: it never joins."""
        groups = [w for w in self.snap.workloads
                  if w.state is State.RUNNING and w.key.startswith("ml/group:") and w.key.count("/") == 1]
        if not groups:
            return
        group = groups[pick % len(groups)]
        pods = _as_pods(group)
        del pods[victim % len(pods)]
        for gpus in joining:
            self.counter += 1
            pods.append(replace(pods[0] if pods else _as_pods(group)[0], name=f"joiner-{self.counter}",
                                uid=f"uid-joiner-{self.counter}", gated=True, phase=Phase.PENDING,
                                requests=MappingProxyType({GPU: gpus * 1000}) if gpus else EMPTY,
                                created=self.snap.now))
        if misfit:
            odd = pods[-len(joining)]
            sizes = MappingProxyType({**odd.annotations, keys.GROUP_SIZE_ANNOTATION: "9"})
            pods[-len(joining)] = replace(odd, annotations=sizes)
        self.snap = _regrouped(self.snap, group.key, [*pods, *_gated_members(self.snap, group.key)])

    @rule(queue=st.sampled_from(QUEUES), max_running=small_limits, quota=gpu_quotas)
    def change_queue(self, queue: str, max_running: int | None, quota: MappingProxyType[str, int]) -> None:
        q = replace(self.snap.queues[queue], max_running=max_running, quota=quota)
        self.snap = replace(self.snap, queues={**self.snap.queues, queue: q})

    @rule(queue=st.sampled_from(QUEUES), paused=st.booleans())
    def pause(self, queue: str, paused: bool) -> None:
        q = replace(self.snap.queues[queue], paused=paused)
        self.snap = replace(self.snap, queues={**self.snap.queues, queue: q})

    @rule(team=st.sampled_from(TEAMS[:2]), max_running=small_limits, quota=gpu_quotas)
    def change_team(self, team: str, max_running: int | None, quota: MappingProxyType[str, int]) -> None:
        self.snap = replace(self.snap, teams={**self.snap.teams, team: Team(team, max_running, quota)})

    @rule(max_running=st.one_of(st.none(), st.integers(0, 6)), quota=gpu_quotas)
    def change_policy(self, max_running: int | None, quota: MappingProxyType[str, int]) -> None:
        self.snap = replace(self.snap, policy=replace(self.snap.policy, max_running=max_running, quota=quota))

    @rule(seconds=st.sampled_from([1, 100, 700]))
    def time_passes(self, seconds: int) -> None:
        self.snap = replace(self.snap, now=self.snap.now + seconds)

    @rule()
    def decide(self) -> None:
        running_before = {w.key for w in self.snap.workloads if w.state is State.RUNNING}
        decision = dispatch(self.snap, self.turns)
        assert [w.key for w in decision.release if no_node(w, self.snap)] == []  # never released
        assert limit_breaches(self.snap, decision.release) == []
        reasons_are_true(self.snap, decision)
        releases_when_it_can(self.snap, decision)
        turns_follow_the_rotation(self.snap, self.turns, decision)
        assert not running_before & {w.key for w in decision.release}
        assert not running_before & set(decision.waiting)
        self.snap, self.turns = _applied(self.snap, decision.release), decision.turns
        assert dispatch(self.snap, self.turns).release == ()

    @invariant()
    def running_work_keeps_running(self) -> None:
        """Nothing but a finish event ends running work: usage never drops on a limit change."""
        if hasattr(self, "snap"):
            after = usage_after(self.snap)
            running: list[Workload] = [w for w in self.snap.workloads if w.state is State.RUNNING]
            assert after.count[("cluster", "")] == len(running)


def _pod_level(w: Workload) -> bool:
    """Whether ``w`` is made of pods as admission writes them (a swapped group), not a stand-in."""
    return bool(w.pods) and bool(w.pods[0].queue)


def _as_pods(w: Workload) -> list[Pod]:
    """The pods of running group ``w`` as admission wrote them, released; a stand-in group's
    requests all on its first pod."""
    if _pod_level(w):
        return [p for p in w.pods if not p.gated]
    name = w.key.split("group:", 1)[1]
    labels = {keys.QUEUE_LABEL: w.queue, keys.TEAM_LABEL: w.team, keys.GROUP_LABEL: name}
    notes = {keys.GROUP_SIZE_ANNOTATION: str(w.group_size)}
    if w.workflow:
        labels[keys.WORKFLOW_LABEL] = w.workflow.split("/", 1)[1]
        notes[keys.WORKFLOW_MAX_RUNNING_ANNOTATION] = str(w.workflow_max_running)
    return [
        Pod("ml", f"{name}-{j}", uid=f"uid-{name}-{j}", labels=MappingProxyType(labels),
            annotations=MappingProxyType(notes), requests=w.requests if j == 0 else EMPTY,
            priority=w.priority, created=w.created, phase=Phase.RUNNING)
        for j in range(len(w.pods))
    ]  # fmt: skip


def _members(snap: Snapshot, key: str) -> list[Workload]:
    return [w for w in snap.workloads if w.key == key or w.key.startswith(key + "/")]


def _gated_members(snap: Snapshot, key: str) -> list[Pod]:
    return [p for w in _members(snap, key) if _pod_level(w) for p in w.pods if p.gated]


def _regrouped(snap: Snapshot, key: str, pods: Sequence[Pod]) -> Snapshot:
    """``snap`` with the workloads of group ``key`` made again from its ``pods``, as the
    controller builds them (``policy.workloads``)."""
    gone = {w.key for w in _members(snap, key)}
    kept = [w for w in snap.workloads if w.key not in gone]
    return replace(snap, workloads=[*kept, *group_workloads(key, pods)])


def _applied(snap: Snapshot, released: Sequence[Workload]) -> Snapshot:
    """``applied``, with the pods of a swapped group released for real and its workloads made
    again: pods that joined become part of their running group."""
    stand_ins = [w for w in released if not _pod_level(w)]
    snap = applied(snap, stand_ins)
    for w in released:
        if _pod_level(w):
            group = w.key.split("/joining")[0]
            ungated = {p.uid for p in w.pods}
            pods = [replace(p, gated=False) if p.uid in ungated else p
                    for m in _members(snap, group) for p in m.pods]
            snap = _regrouped(snap, group, pods)
    return snap


def releases_when_it_can(snap: Snapshot, decision: Decision) -> None:
    """A cluster with free capacity and a pending workload that fits under every limit, and no
    legitimate hold on it, releases something.

    Legitimate: a head of higher priority (or one of equal priority past starvationSeconds) that
    could run now (not impossible; its workflow, queue and team count have room) needs what the
    workload would take; or the workload stands behind the head of its StrictFIFO queue. An
    impossible head, or one held back by its own workflow, team count or paused queue, is no
    excuse.
    """
    if decision.release:
        return
    usage = usage_after(snap)
    waiting = [w for w in snap.workloads if w.state is State.PENDING]
    for w in waiting:
        if not w.complete or can_never_run(w, snap) or failing_layers(w, snap, usage):
            continue
        assert excused(w, snap, waiting, usage), (w.key, decision.waiting[w.key])


def turns_follow_the_rotation(snap: Snapshot, turns: Turns, decision: Decision) -> None:
    """Per priority, the turn ends on the queue that released last in turn. A starving claim
    counts as a turn only when it was that queue's turn anyway (the next active queue by name
    after the turn), so a starving queue never moves the others' rotation."""
    released_before = {w.key for w in snap.workloads if w.state is State.RUNNING}
    assert not released_before & set(decision.claimed)
    by_key = {w.key: w for w in decision.release}
    assert all(starving(snap, by_key[k]) for k in decision.claimed)
    running = usage_after(snap)
    pending_queues = {w.queue for w in snap.workloads if w.state is State.PENDING}
    for level in {q.priority for q in snap.queues.values()}:
        active = sorted(
            q.name
            for q in snap.queues.values()
            if q.priority == level
            and q.name in pending_queues
            and not q.paused
            and (q.max_running is None or running.count[("queue", q.name)] < q.max_running)
        )
        turn = turns.last.get(level)
        for w in decision.release:
            if snap.queues[w.queue].priority != level or w.joins:  # joining pods take no turn
                continue
            if w.key in decision.claimed:
                following = active[0] if turn is None else next((n for n in active if n > turn), active[0])
                if w.queue == following:
                    turn = w.queue
            else:
                turn = w.queue
        assert decision.turns.last.get(level) == turn, (level, turns, decision.turns, decision.claimed)


Cluster.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_dispatch_over_random_events = Cluster.TestCase
