"""The bare ungater's backlog: which gated pod goes next, within a total cap and per-queue caps."""

from __future__ import annotations

from collections import Counter

from audit.ungating import Backlog


def test_without_queue_caps_pods_go_in_the_order_first_seen_gated() -> None:
    backlog = Backlog()
    for uid, queue in (("a", "q1"), ("b", "q2"), ("c", "q1")):
        backlog.add(uid, queue)
    backlog.add("a", "q1")  # seen again: keeps its place
    assert [backlog.take(Counter()) for _ in range(4)] == ["a", "b", "c", None]


def test_a_queue_at_its_cap_is_passed_over_for_the_oldest_pod_of_a_queue_with_room() -> None:
    backlog = Backlog(queue_cap=2)
    for uid, queue in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")):
        backlog.add(uid, queue)
    busy: Counter[str] = Counter({"a": 1})
    assert backlog.take(busy) == "a1"
    busy["a"] += 1
    assert backlog.take(busy) == "b1"  # queue a is full: a2 waits although it came first
    busy["b"] += 1
    assert backlog.take(busy) is None and len(backlog) == 2
    busy["a"] -= 1  # an a finished
    assert backlog.take(busy) == "a2"


def test_a_pod_taken_away_leaves_the_backlog_and_a_pod_given_back_goes_last() -> None:
    backlog = Backlog()
    for uid in ("a", "b", "c"):
        backlog.add(uid, "")
    assert backlog.discard("b") and not backlog.discard("b") and "b" not in backlog
    assert backlog.take(Counter()) == "a"
    backlog.add("a", "")  # its patch failed: it waits again, behind c
    assert [backlog.take(Counter()), backlog.take(Counter())] == ["c", "a"]
    backlog.add("d", "")
    backlog.clear()
    assert not backlog and backlog.take(Counter()) is None
