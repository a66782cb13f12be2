"""Kept queue orders change what a decision costs, never what it decides.

Over random sequences of events (work arrives, changes, is deleted or finishes; limits, pauses,
orderings and priorities change; the controller lists the snapshot in another order; time
passes), every decision is taken twice on the same snapshot: from scratch, and starting from
the ``Orders`` an earlier decision kept (the last one, or an older one, as a controller that
skipped a cycle would hold). Both must be equal in everything they answer: what is released and
in which order, every waiting workload's reason, message and position, the turns, the usage,
the starving claims and the count of work that can never run.
"""

from __future__ import annotations

import random
from dataclasses import replace
from types import MappingProxyType

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from policy.dispatching import Decision, Orders, Turns, dispatch
from policy.model import Ordering, Policy, Queue, Snapshot, State, Team
from tests.property.snapshots import GPU, NOW, QUEUES, TEAMS, WORKFLOW_MAX, WORKFLOWS, applied, make_workload

small_limits = st.one_of(st.none(), st.integers(0, 4))
gpu_quotas = st.one_of(
    st.just(MappingProxyType({})), st.builds(lambda g: MappingProxyType({GPU: g * 1000}), st.integers(0, 10))
)


def _ident(n: int) -> int:
    """Workload ``n``'s number in its key: unique, and keys do not arrive in their own order."""
    return n * 7919 % 100_003


def same_decision(plain: Decision, kept: Decision) -> None:
    assert [w.key for w in kept.release] == [w.key for w in plain.release]
    assert kept.release == plain.release
    assert list(kept.waiting.items()) == list(plain.waiting.items())
    assert sorted(kept.waiting.reasons()) == sorted(plain.waiting.reasons())
    assert kept.waiting.impossible() == plain.waiting.impossible()
    assert kept.turns == plain.turns
    assert kept.usage == plain.usage
    assert kept.claimed == plain.claimed


class KeptOrders(RuleBasedStateMachine):
    snap: Snapshot
    turns: Turns
    orders: list[Orders]  # every Orders kept so far, the newest last
    counter: int

    @initialize(
        priorities=st.lists(st.integers(0, 2), min_size=4, max_size=4),
        strict=st.lists(st.booleans(), min_size=4, max_size=4),
        fresh_share=st.sampled_from([0.25, 1.0, 1.0]),  # 1.0: always merge into what is kept
        backlog=st.lists(
            st.tuples(st.sampled_from(QUEUES), st.sampled_from(TEAMS), st.integers(0, 4),
                      st.sampled_from([0, 100]), st.sampled_from([0, 5, 1000])),
            max_size=30,
        ),
    )
    def start(self, priorities: list[int], strict: list[bool], fresh_share: float,
              backlog: list[tuple[str, str, int, int, int]]) -> None:  # fmt: skip
        queues = {
            name: Queue(name, priority=p, ordering=Ordering.STRICT_FIFO if s else Ordering.BEST_EFFORT_FIFO)
            for name, p, s in zip(QUEUES, priorities, strict, strict=True)
        }
        self.counter = len(backlog) - 1
        workloads = [
            make_workload(_ident(i), queue, team, State.PENDING, gpus, 0, priority, age, "", None, 0, 1)
            for i, (queue, team, gpus, priority, age) in enumerate(backlog)
        ]
        self.snap = Snapshot(queues, {}, Policy(max_running=6, starvation_seconds=600), workloads, NOW)
        self.turns = Turns()
        self.orders = [Orders(fresh_share=fresh_share)]

    @rule(
        queue=st.sampled_from([*QUEUES, "gone"]),
        team=st.sampled_from(TEAMS),
        gpus=st.integers(0, 12),
        priority=st.sampled_from([0, 0, 100]),
        age=st.sampled_from([0, 0, 5, 1000]),
        workflow=st.sampled_from(["", "", *WORKFLOWS]),
        group=st.sampled_from([0, 0, 0, 2]),
        present=st.integers(1, 2),
        count=st.integers(1, 6),
    )
    def submit(self, queue: str, team: str, gpus: int, priority: int, age: int, workflow: str,
               group: int, present: int, count: int) -> None:  # fmt: skip
        """Work arrives, several at once, some at the same time and priority as others."""
        arrived = []
        for _ in range(count):
            self.counter += 1
            arrived.append(make_workload(
                _ident(self.counter), queue, team, State.PENDING, gpus, 0, priority, age,
                workflow, WORKFLOW_MAX.get(workflow), group, present,
            ))  # fmt: skip
        self.snap = replace(self.snap, workloads=[*self.snap.workloads, *arrived])

    @rule(pick=st.integers(0, 1000), priority=st.sampled_from([0, 50, 100]), age=st.integers(0, 1200))
    def change_pending(self, pick: int, priority: int, age: int) -> None:
        """A pending workload's pod changed: a new object with the same key, maybe a new place."""
        pending = [w for w in self.snap.workloads if w.state is State.PENDING]
        if pending:
            old = pending[pick % len(pending)]
            new = replace(old, priority=priority, created=NOW - age)
            self.snap = replace(self.snap, workloads=[new if w is old else w for w in self.snap.workloads])

    @rule(pick=st.integers(0, 1000), queue=st.sampled_from(QUEUES))
    def move_pending(self, pick: int, queue: str) -> None:
        pending = [w for w in self.snap.workloads if w.state is State.PENDING]
        if pending:
            old = pending[pick % len(pending)]
            new = replace(old, queue=queue)
            self.snap = replace(self.snap, workloads=[new if w is old else w for w in self.snap.workloads])

    @rule(pick=st.integers(0, 1000), state=st.sampled_from([State.PENDING, State.RUNNING]))
    def delete(self, pick: int, state: State) -> None:
        some = [w for w in self.snap.workloads if w.state is state]
        if some:
            gone = some[pick % len(some)]
            self.snap = replace(self.snap, workloads=[w for w in self.snap.workloads if w is not gone])

    @rule(pick=st.integers(0, 1000))
    def finish(self, pick: int) -> None:
        running = [w for w in self.snap.workloads if w.state is State.RUNNING]
        if running:
            done = running[pick % len(running)]
            workloads = [replace(w, state=State.FINISHED) if w is done else w for w in self.snap.workloads]
            self.snap = replace(self.snap, workloads=workloads)

    @rule(seed=st.integers(0, 2**16))
    def listed_in_another_order(self, seed: int) -> None:
        workloads = list(self.snap.workloads)
        random.Random(seed).shuffle(workloads)
        self.snap = replace(self.snap, workloads=workloads)

    @rule(
        queue=st.sampled_from(QUEUES),
        max_running=small_limits,
        quota=gpu_quotas,
        priority=st.integers(0, 2),
        strict=st.booleans(),
        paused=st.sampled_from([False, False, True]),
    )
    def change_queue(self, queue: str, max_running: int | None, quota: MappingProxyType[str, int],
                     priority: int, strict: bool, paused: bool) -> None:  # fmt: skip
        ordering = Ordering.STRICT_FIFO if strict else Ordering.BEST_EFFORT_FIFO
        q = replace(self.snap.queues[queue], max_running=max_running, quota=quota, priority=priority,
                    ordering=ordering, paused=paused)  # fmt: skip
        self.snap = replace(self.snap, queues={**self.snap.queues, queue: q})

    @rule(team=st.sampled_from(TEAMS[:2]), max_running=small_limits, quota=gpu_quotas)
    def change_team(self, team: str, max_running: int | None, quota: MappingProxyType[str, int]) -> None:
        self.snap = replace(self.snap, teams={**self.snap.teams, team: Team(team, max_running, quota)})

    @rule(max_running=st.one_of(st.none(), st.integers(0, 8)), quota=gpu_quotas)
    def change_policy(self, max_running: int | None, quota: MappingProxyType[str, int]) -> None:
        self.snap = replace(self.snap, policy=replace(self.snap.policy, max_running=max_running, quota=quota))

    @rule(seconds=st.sampled_from([1, 100, 700]))
    def time_passes(self, seconds: int) -> None:
        self.snap = replace(self.snap, now=self.snap.now + seconds)

    @rule(back=st.sampled_from([1, 1, 1, 2, 5]))
    def decide(self, back: int) -> None:
        """One cycle, from the orders kept ``back`` decisions ago (1: the last one)."""
        plain = dispatch(self.snap, self.turns)
        kept = dispatch(self.snap, self.turns, self.orders[-min(back, len(self.orders))])
        same_decision(plain, kept)
        again = dispatch(self.snap, self.turns, kept.orders)  # the answer's own orders
        same_decision(plain, again)
        assert kept.orders is not None
        self.orders = [*self.orders[-4:], kept.orders]
        self.snap, self.turns = applied(self.snap, plain.release), plain.turns


KeptOrders.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_kept_orders_never_change_a_decision = KeptOrders.TestCase
