"""The invariants of dispatch, over random snapshots and random sequences of events.

"Fits" below is judged by an independent oracle (``oracle.py``), never by policy code.
"""

from __future__ import annotations

import random
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.dispatching import Decision, Turns, dispatch
from policy.keys import Reason
from policy.limits import NEVER
from policy.model import Ordering, Policy, Queue, Snapshot, State, Workload
from policy.ordering import in_queue_order
from policy.usage import tally
from tests.property.oracle import (
    Usage,
    could_run,
    eligible,
    excused,
    failing_layers,
    level,
    limit_breaches,
    never,
    no_node,
    shortfalls,
    starving,
    usage_after,
)
from tests.property.snapshots import NOW, QUEUES, any_snapshots, applied, make_workload

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
turns_ = st.builds(Turns, st.dictionaries(st.integers(0, 2), st.sampled_from(QUEUES), max_size=3))
LIMIT_REASONS = {
    Reason.WORKFLOW_LIMIT, Reason.QUEUE_PAUSED, Reason.QUEUE_LIMIT, Reason.QUEUE_QUOTA,
    Reason.TEAM_LIMIT, Reason.TEAM_QUOTA, Reason.GLOBAL_LIMIT, Reason.GLOBAL_QUOTA,
}  # fmt: skip


def pending(snap: Snapshot) -> dict[str, Workload]:
    return {w.key: w for w in snap.workloads if w.state is State.PENDING}


def reasons_are_true(snap: Snapshot, decision: Decision) -> None:
    """Every workload left waiting is kept by what its reason says, and nothing else fits.

    This is work conservation: a pending workload that fits every limit cannot be left waiting
    unless a head of higher (or starving) priority that could run now needs what it would take,
    or it stands behind its StrictFIFO queue's blocked head. Work that can never run under the
    current limits says so first of all, with the reason of the quota it exceeds, and is
    counted per queue.
    """
    after = usage_after(snap, decision.release)
    waiting = pending(snap)
    for w in decision.release:
        del waiting[w.key]
    assert set(decision.waiting) == set(waiting)
    assert dict(decision.waiting.reasons()) == {k: w.reason for k, w in decision.waiting.items()}
    # What a controller compares with a pod's condition tells a full quota from one exceeded.
    assert {k: (r, n) for k, r, n in decision.waiting.answers()} == {
        k: (w.reason, w.message.startswith(NEVER)) for k, w in decision.waiting.items()}
    assert all(decision.waiting[k] == w for k, w in decision.waiting.items())
    impossible: dict[str, int] = {}
    for key, wait in decision.waiting.items():
        w = waiting[key]
        if w.surplus:  # pods beyond the size of their running group wait for one of it to end
            assert wait.reason is Reason.WAITING_TURN and wait.message.endswith("to end"), (key, wait)
            continue
        beyond = never(w, snap)
        if beyond is not None:
            impossible[w.queue] = impossible.get(w.queue, 0) + 1
            assert wait.reason is beyond, (key, wait)
            assert wait.message.startswith("can never run under the current limits: needs "), (key, wait)
            continue
        if no_node(w, snap):
            impossible[w.queue] = impossible.get(w.queue, 0) + 1
            assert wait.reason is Reason.NO_NODE_FITS, (key, wait)
            assert "on one node" in wait.message, (key, wait)
            continue
        failing = failing_layers(w, snap, after)
        if not w.complete:
            assert wait.reason is Reason.GROUP_INCOMPLETE, (key, wait)
            continue
        if failing:
            assert wait.reason is failing[0], (key, wait, failing)
            assert not wait.message.startswith("can never run"), (key, wait)
            continue
        assert wait.reason in (Reason.HELD_FOR_PRIORITY, Reason.WAITING_TURN), (key, wait)
        assert excused(w, snap, list(waiting.values()), after), (key, wait)
        match = re.match(r"(held for|behind) (\S+)", wait.message)
        assert match, wait.message
        holder = waiting[match[2]]
        assert holder is not w and holder.key in decision.waiting
        if wait.reason is Reason.HELD_FOR_PRIORITY:
            assert could_run(holder, snap, after), (key, wait)
            assert level(snap, holder) > level(snap, w) or (
                level(snap, holder) == level(snap, w) and starving(snap, holder)
            ), (key, wait)
        else:
            assert holder.queue == w.queue
            assert snap.queues[w.queue].ordering is Ordering.STRICT_FIFO, (key, wait)
            assert decision.waiting[holder.key].position < wait.position
    assert dict(decision.waiting.impossible()) == impossible


@SETTINGS
@given(any_snapshots(), turns_)
def test_no_release_takes_any_scope_over_its_limit(snap: Snapshot, turns: Turns) -> None:
    decision = dispatch(snap, turns)
    assert limit_breaches(snap, decision.release) == []
    assert all(w.state is State.PENDING and w.complete for w in decision.release)
    assert len({w.key for w in decision.release}) == len(decision.release)


@SETTINGS
@given(any_snapshots(), turns_)
def test_work_conserving_every_waiting_workload_is_kept_by_what_its_reason_says(
    snap: Snapshot, turns: Turns
) -> None:
    reasons_are_true(snap, dispatch(snap, turns))


@SETTINGS
@given(any_snapshots(), turns_)
def test_a_higher_priority_queues_fitting_head_is_never_passed_over(snap: Snapshot, turns: Turns) -> None:
    decision = dispatch(snap, turns)
    released = {w.key for w in decision.release}
    for queue in snap.queues.values():
        if queue.paused:
            continue
        lower = [w for w in decision.release if level(snap, w) < queue.priority]
        if not lower:
            continue
        line = [w for w in pending(snap).values() if w.queue == queue.name and w.key not in released]
        head = next((w for w in in_queue_order(line) if w.complete), None)
        if head is None:
            continue
        before = usage_after(snap, [w for w in decision.release if level(snap, w) >= queue.priority])
        wait = decision.waiting[head.key]
        assert failing_layers(head, snap, before) or wait.reason is Reason.HELD_FOR_PRIORITY, (head.key, wait)


def first_fitting_head(snap: Snapshot, decision: Decision, queue: str, usage: Usage) -> Workload | None:
    """The queue's first whole waiting workload that could run now but for shared capacity."""
    released = {w.key for w in decision.release}
    line = [w for w in pending(snap).values() if w.queue == queue and w.key not in released and w.complete]
    for w in in_queue_order(line):
        if could_run(w, snap, usage):
            return w
    return None


@SETTINGS
@given(any_snapshots(), turns_)
def test_lower_priority_work_never_takes_quota_a_higher_head_is_short_of(
    snap: Snapshot, turns: Turns
) -> None:
    decision = dispatch(snap, turns)
    for queue in snap.queues.values():
        before = usage_after(snap, [w for w in decision.release if level(snap, w) >= queue.priority])
        head = first_fitting_head(snap, decision, queue.name, before)
        if head is None:
            continue
        team = snap.teams.get(head.team)
        team_short = shortfalls(head, before.used[("team", head.team)], team.quota) if team else set()
        for w in decision.release:
            if level(snap, w) >= queue.priority:
                continue
            asks = {r for r, amount in w.requests.items() if amount}
            if team is not None and w.team == head.team:
                assert not asks & team_short, (head.key, w.key, "team", team_short)
            if team_short:
                continue  # short of its own team's quota, it holds nothing of the cluster's (record 0009)
            short = shortfalls(head, before.used[("cluster", "")], snap.policy.quota)
            assert not asks & short, (head.key, w.key, "cluster", short)


@SETTINGS
@given(any_snapshots(), turns_)
def test_a_strict_fifo_queue_releases_nothing_behind_an_eligible_workload_that_waits(
    snap: Snapshot, turns: Turns
) -> None:
    decision = dispatch(snap, turns)
    after = usage_after(snap, decision.release)
    for queue in snap.queues.values():
        if queue.ordering is not Ordering.STRICT_FIFO:
            continue
        order = in_queue_order(
            w
            for w in pending(snap).values()
            if w.queue == queue.name and w.complete and never(w, snap) is None
        )
        released = [i for i, w in enumerate(order) if w in decision.release]
        # Work whose own workflow is full is passed over: FIFO holds among the rest.
        waiting = [i for i, w in enumerate(order) if w not in decision.release and eligible(w, snap, after)]
        assert not released or not waiting or max(released) < min(waiting)


@SETTINGS
@given(any_snapshots(), turns_, st.randoms(use_true_random=False))
def test_the_same_snapshot_and_turns_give_the_same_answer(
    snap: Snapshot, turns: Turns, rnd: random.Random
) -> None:
    first = dispatch(snap, turns)
    shuffled = list(snap.workloads)
    rnd.shuffle(shuffled)
    second = dispatch(Snapshot(snap.queues, snap.teams, snap.policy, shuffled, snap.now), turns)
    assert first == second
    assert list(first.waiting.items()) == list(second.waiting.items())


@SETTINGS
@given(any_snapshots(), turns_)
def test_asking_again_after_applying_the_release_releases_nothing(snap: Snapshot, turns: Turns) -> None:
    """Idempotence: when nothing changed but the release itself (same clock, no pod finished,
    no limit changed), the next decision releases nothing more."""
    first = dispatch(snap, turns)
    second = dispatch(applied(snap, first.release), first.turns)
    assert second.release == ()


@SETTINGS
@given(any_snapshots(), turns_)
def test_the_usage_reported_is_the_tally_after_the_release(snap: Snapshot, turns: Turns) -> None:
    decision = dispatch(snap, turns)
    assert decision.usage == tally(applied(snap, decision.release).workloads, snap.queues)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 4),
    st.integers(1, 3),
    st.lists(st.integers(0, 2**16), min_size=8, max_size=16),
    st.sampled_from(QUEUES),
    st.sampled_from([5, 10**6]),
)
def test_saturated_equal_queues_get_releases_within_one_of_each_other_over_any_window(
    queue_count: int, slots: int, finishing: list[int], last: str, starvation: int
) -> None:
    """Also when every head is starving: starving heads claim in turn order."""
    names = QUEUES[:queue_count]
    workloads = [
        make_workload(i * 100 + j, q, "", State.PENDING, 1, 0, 0, 1000 - j, "", None, 0, 1)
        for i, q in enumerate(names)
        for j in range(60)
    ]
    policy = Policy(max_running=slots, starvation_seconds=starvation)
    snap = Snapshot({q: Queue(q) for q in names}, {}, policy, workloads, NOW)
    turns, sequence = Turns({0: last}), []
    for seed in finishing:
        decision = dispatch(snap, turns)
        sequence += [w.queue for w in decision.release]
        snap, turns = applied(snap, decision.release), decision.turns
        running = [w for w in snap.workloads if w.state is State.RUNNING]
        done = {w.key for w in random.Random(seed).sample(running, k=seed % (len(running) + 1))}
        snap = Snapshot(snap.queues, {}, snap.policy, [w for w in snap.workloads if w.key not in done], NOW)
    for start in range(len(sequence)):
        counts = dict.fromkeys(names, 0)
        for q in sequence[start:]:
            counts[q] += 1
            assert max(counts.values()) - min(counts.values()) <= 1, sequence


@settings(max_examples=60, deadline=None)
@given(
    st.integers(3, 4),
    st.integers(1, 2),
    st.integers(1, 3),
    st.sampled_from(QUEUES),
    st.integers(10, 30),
)
def test_starving_backlogs_leave_the_other_queues_alternating(
    queue_count: int, starving_count: int, slots: int, last: str, cycles: int
) -> None:
    """Queues of equal priority; the first ``starving_count`` have old backlogs past
    starvationSeconds, the others get one fresh workload per cycle, and everything released
    finishes before the next cycle. Among the others, releases stay within one of each other
    over any window: starving claims never move their turns."""
    names = QUEUES[:queue_count]
    old, fresh = names[:starving_count], names[starving_count:]
    workloads = [
        make_workload(i * 100 + j, q, "", State.PENDING, 1, 0, 0, 5000 - j, "", None, 0, 1)
        for i, q in enumerate(old)
        for j in range(60)
    ]
    snap = Snapshot({q: Queue(q) for q in names}, {}, Policy(max_running=slots), workloads, NOW)
    turns, sequence = Turns({0: last}), []
    for cycle in range(cycles):
        arrivals = [
            make_workload(10_000 + cycle * 10 + k, q, "", State.PENDING, 1, 0, 0, 0, "", None, 0, 1)
            for k, q in enumerate(fresh)
        ]
        snap = Snapshot(snap.queues, {}, snap.policy, [*snap.workloads, *arrivals], NOW)
        decision = dispatch(snap, turns)
        sequence += [w.queue for w in decision.release if w.queue in fresh]
        gone = {w.key for w in decision.release}
        snap = Snapshot(snap.queues, {}, snap.policy, [w for w in snap.workloads if w.key not in gone], NOW)
        turns = decision.turns
    for start in range(len(sequence)):
        counts = dict.fromkeys(fresh, 0)
        for q in sequence[start:]:
            counts[q] += 1
            assert max(counts.values()) - min(counts.values()) <= 1, sequence
