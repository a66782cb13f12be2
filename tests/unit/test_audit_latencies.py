"""Latency and drain figures over hand-built records, whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from audit.checking import Cap, Limits
from audit.latencies import Latency, creation_to_release, drain, freed_to_release, percentile
from tests.audit_stories import Story


@pytest.mark.parametrize(
    ("samples", "p", "expected"),
    [([], 50, 0.0), ([5.0], 99, 5.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.0), ([1.0, 2.0, 3.0, 4.0], 95, 4.0),
     ([float(i) for i in range(1, 101)], 99, 99.0), ([float(i) for i in range(1, 101)], 50, 50.0)],
    ids=["no-samples", "one-sample", "median-of-four", "p95-of-four", "p99-of-a-hundred", "p50-of-a-hundred"],
)
def test_percentiles_are_nearest_rank(samples: list[float], p: float, expected: float) -> None:
    assert percentile(samples, p) == expected


def test_creation_to_release_counts_only_pods_whose_gated_creation_was_seen() -> None:
    story = Story().pod("fast", 1.0).pod("slow", 1.0)
    story.pod("old", 0.0, preexisting=True).pod("bypass", 2, gated=False)
    story.release("fast", 1.25).release("slow", 3.0).release("old", 0.5)
    found = creation_to_release(story.record())
    assert (found.count, found.p50, found.max) == (2, 0.25, 2.0)


def test_freed_slot_to_next_release_pairs_each_freed_slot_with_the_next_release() -> None:
    story = Story()
    for name in ("a", "b", "c", "d", "e"):
        story.pod(name)
    story.lifecycle("a", 1.0, 3.0).lifecycle("b", 1.0, 3.5)  # cap 2: c waits for a, d for b
    story.lifecycle("c", 3.02, 6.0).lifecycle("d", 3.6, 6.0)
    story.lifecycle("e", 6.05, 8.0)  # c and d free slots at 6.0; only e waits: one pairing
    found = freed_to_release(story.record())
    assert found.count == 3
    assert [round(x, 3) for x in (found.p50, found.max)] == [0.05, 0.1]


def test_a_slot_freed_with_nobody_waiting_has_no_next_release() -> None:
    story = Story().pod("a").lifecycle("a", 1, 2).pod("late", 5).release("late", 5.5)
    assert freed_to_release(story.record()) == Latency()


def test_drain_runs_from_the_first_release_to_the_last_finish() -> None:
    story = Story()
    for i in range(5):
        story.pod(f"p{i}").lifecycle(f"p{i}", 1 + i, 3 + i)
    found = drain(story.record())
    assert (found.seconds, found.releases, found.releases_per_second, found.last_finish) == (6, 5, 1.25, 7)
    assert drain(story.record(), since=0.0).seconds == 7


def test_a_freed_slot_pairs_only_with_a_release_of_its_own_queue_when_queues_have_limits() -> None:
    # One pod at a time per queue. a1 finishing frees nothing anyone waits for: only b2 waits,
    # and queue b is full until b1 finishes at 5; b2's release at 5.1 answers that slot.
    story = Story().pod("a1", queue="a").pod("b1", queue="b").pod("b2", queue="b")
    story.lifecycle("a1", 0.1, 2.0).lifecycle("b1", 0.1, 5.0).lifecycle("b2", 5.1, 7.0)
    limits = Limits(queues={"a": Cap(running=1), "b": Cap(running=1)})
    found = freed_to_release(story.record(), limits)
    assert (found.count, round(found.max, 3)) == (1, 0.1)


def test_a_finish_below_every_limit_frees_no_slot_when_limits_are_given() -> None:
    # The limit is 5 and one pod runs: a2 waits for whatever removes gates, not for a slot.
    story = Story().pod("a1").pod("a2").lifecycle("a1", 0.1, 2.0).lifecycle("a2", 3.0, 5.0)
    assert freed_to_release(story.record(), Limits(queues={"a": Cap(running=5)})) == Latency()
    assert freed_to_release(story.record(), Limits(cluster=Cap(running=1))).count == 1


def test_a_finish_that_frees_a_slot_in_a_queue_and_in_the_total_at_once_is_one_slot() -> None:
    # At most 1 per queue and 2 in all: a1's finish frees a slot in queue a and in the total
    # at once; a2 takes it. The same for a2's finish and a3.
    story = Story().pod("a1").pod("b1", queue="b").pod("a2").pod("a3")
    story.lifecycle("a1", 0.1, 2.0).lifecycle("b1", 0.1, 5.0)
    story.lifecycle("a2", 2.1, 4.0).lifecycle("a3", 4.05, 6.0)
    limits = Limits(cluster=Cap(running=2), queues={"a": Cap(running=1), "b": Cap(running=1)})
    found = freed_to_release(story.record(), limits)
    assert (found.count, round(found.p50, 3), round(found.max, 3)) == (2, 0.05, 0.1)
