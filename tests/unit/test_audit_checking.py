"""The audit checks over hand-built records, including records that break limits, so every
check is shown to fail when it should, not only to pass."""

from __future__ import annotations

import pytest

from audit.checking import (
    Alternation,
    Cap,
    Limits,
    Scope,
    alternation,
    lost,
    peaks,
    released_twice,
    running_at,
    running_sets,
    violations,
)
from audit.loading import Submission
from audit.records import Kind
from tests.audit_stories import Story

QUEUE_A_TWO = Limits(queues={"a": Cap(running=2)})


def two_at_a_time() -> Story:
    """Queue a, cap 2: p3 is released only when p1 finishes."""
    story = Story()
    for name in ("p1", "p2", "p3"):
        story.pod(name, 0.0)
    return story.lifecycle("p1", 1, 3).lifecycle("p2", 1, 4).lifecycle("p3", 3.2, 5)


def test_a_queue_that_never_exceeds_its_cap_has_no_violation() -> None:
    assert violations(two_at_a_time().record(), QUEUE_A_TWO) == []


def test_a_third_release_while_two_still_run_is_a_violation_with_its_instant_and_counts() -> None:
    story = Story()
    for name in ("p1", "p2", "p3"):
        story.pod(name, 0.0)
    record = story.lifecycle("p1", 1, 3).lifecycle("p2", 1, 4).lifecycle("p3", 2, 5).record()

    (found,) = violations(record, QUEUE_A_TWO)

    assert (found.scope, found.name, found.measure, found.count, found.limit) == (
        Scope.QUEUE, "a", "running", 3, 2,
    )
    assert (found.at, found.pod, found.running) == (2, "ns/p3", ("ns/p1", "ns/p2", "ns/p3"))
    assert str(found) == (
        "queue a: 3 running > limit 2 at +2.000s (released ns/p3; running: ns/p1, ns/p2, ns/p3)"
    )


def test_every_release_over_the_limit_is_reported_not_only_the_first() -> None:
    story = Story()
    for i in range(4):
        story.pod(f"p{i}").lifecycle(f"p{i}", 1 + i / 10, 9)
    found = violations(story.record(), Limits(cluster=Cap(running=2)))
    assert [(v.scope, v.count, v.pod) for v in found] == [
        (Scope.CLUSTER, 3, "ns/p2"), (Scope.CLUSTER, 4, "ns/p3"),
    ]


def test_a_slot_freed_at_the_same_instant_before_the_next_release_is_not_a_violation() -> None:
    story = Story().pod("p1").pod("p2").pod("p3")
    story.lifecycle("p1", 1, 3).lifecycle("p2", 1, 4).lifecycle("p3", 3, 5)  # p1 ends, then p3 starts
    assert violations(story.record(), QUEUE_A_TWO) == []


def test_a_pod_group_counts_once_against_maxRunning_but_its_gpus_add_up() -> None:
    story = Story()
    for i in range(3):
        story.pod(f"g{i}", group="g", gpus=2).lifecycle(f"g{i}", 1, 4)
    story.pod("solo").lifecycle("solo", 1, 4)
    record = story.record()

    assert violations(record, Limits(queues={"a": Cap(running=2)})) == []
    peak = peaks(record).queues["a"]
    assert (peak.running, peak.gpus) == (2, 7)
    (over,) = violations(record, Limits(queues={"a": Cap(gpus=6)}))
    assert (over.measure, over.count, over.limit, over.pod) == ("gpus", 7, 6, "ns/solo")


def test_a_team_gpu_quota_is_broken_by_the_release_that_goes_over_it() -> None:
    story = Story()
    story.pod("x", queue="a", team="vision", gpus=2).pod("y", queue="b", team="vision", gpus=2)
    story.pod("z", queue="c", team="vision", gpus=1).pod("other", queue="c", team="nlp", gpus=8)
    story.lifecycle("x", 1, 9).lifecycle("y", 2, 9).lifecycle("other", 2.5, 9).lifecycle("z", 3, 9)

    found = violations(story.record(), Limits(teams={"vision": Cap(gpus=4), "nlp": Cap(gpus=8)}))

    assert [(v.scope, v.name, v.count, v.pod) for v in found] == [(Scope.TEAM, "vision", 5, "ns/z")]


def test_workflows_are_namespace_qualified_so_two_sweeps_named_alike_do_not_share_a_limit() -> None:
    story = Story()
    for ns in ("ml-a", "ml-b"):
        for i in range(2):
            story.pod(f"t{i}", namespace=ns, workflow="sweep").lifecycle(f"t{i}", 1, 5, namespace=ns)
    record = story.record()

    both_two = Limits(workflows={"ml-a/sweep": Cap(running=2), "ml-b/sweep": Cap(running=2)})
    assert violations(record, both_two) == []
    a_one = Limits(workflows={"ml-a/sweep": Cap(running=1)})
    assert [v.name for v in violations(record, a_one)] == ["ml-a/sweep"]
    assert set(peaks(record).workflows) == {"ml-a/sweep", "ml-b/sweep"}


@pytest.mark.parametrize(
    ("case", "limits", "expected"),
    [
        ("global count", Limits(cluster=Cap(running=2)), [(Scope.CLUSTER, "", "running", 3)]),
        ("global GPUs", Limits(cluster=Cap(gpus=4)), [(Scope.CLUSTER, "", "gpus", 6)]),
        ("limits of other queues", Limits(queues={"zz": Cap(running=0)}), []),
        ("generous limits everywhere", Limits(Cap(3, 6), {"a": Cap(2, 4)}, {"t": Cap(3, 6)}), []),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_limits_across_queues(case: str, limits: Limits, expected: list[tuple[Scope, str, str, int]]) -> None:
    story = Story().pod("a1", queue="a", gpus=2).pod("a2", queue="a", gpus=2).pod("b1", queue="b", gpus=2)
    story.lifecycle("a1", 1, 5).lifecycle("a2", 2, 5).lifecycle("b1", 3, 5)
    found = violations(story.record(), limits)
    assert [(v.scope, v.name, v.measure, v.count) for v in found] == expected


def test_peaks_per_queue_team_and_cluster_with_their_instants() -> None:
    story = Story().pod("a1", queue="a", team="x", gpus=1).pod("a2", queue="a", team="y", gpus=4)
    story.pod("b1", queue="b", team="x", gpus=2)
    story.lifecycle("a1", 1, 4).lifecycle("b1", 2, 3).lifecycle("a2", 5, 6)
    p = peaks(story.record())
    assert (p.cluster.running, p.cluster.running_at, p.cluster.gpus, p.cluster.gpus_at) == (2, 2, 4, 5)
    assert {q: (v.running, v.gpus) for q, v in p.queues.items()} == {"a": (1, 4), "b": (1, 2)}
    assert {t: (v.running, v.gpus) for t, v in p.teams.items()} == {"x": (2, 3), "y": (1, 4)}


def test_the_running_set_is_released_and_not_finished() -> None:
    story = Story().pod("p1").pod("p2").pod("p3")
    story.lifecycle("p1", 1, 3).release("p2", 2).bind("p2", 2.5).delete("p3", 2.7).delete("p2", 4)
    record = story.record()
    assert running_at(record, 0.5) == frozenset()
    assert running_at(record, 2.0) == {"uid-ns-p1", "uid-ns-p2"}  # p2 holds its slot before it is bound
    assert running_at(record, 3.5) == {"uid-ns-p2"}
    assert [(e.at, sorted(s)) for e, s in running_sets(record)] == [
        (1, ["uid-ns-p1"]), (2, ["uid-ns-p1", "uid-ns-p2"]), (3, ["uid-ns-p2"]), (4, []),
    ]


def test_a_pod_created_without_a_gate_runs_from_its_creation() -> None:
    record = Story().pod("bypass", 1.5, gated=False).record()
    assert running_at(record, 1.5) == {"uid-ns-bypass"}
    (found,) = violations(record, Limits(queues={"a": Cap(running=0)}))
    assert found.pod == "ns/bypass"


def alternating(order: str) -> Story:
    """Two queues of three gated pods each, released in ``order`` ("abab..."), one a second."""
    story = Story()
    for q in "ab":
        for i in range(3):
            story.pod(f"{q}{i}", queue=q)
    seen = {"a": 0, "b": 0}
    for t, q in enumerate(order, start=1):
        story.release(f"{q}{seen[q]}", t)
        seen[q] += 1
    return story


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("ababab", 1),  # round-robin
        ("aabbab", 2),  # a took two turns in a row
        ("aaabbb", 3),  # a took every turn while b waited
        ("abaabb", 2),
    ],
    ids=["round-robin", "two-turns-in-a-row", "one-queue-takes-every-turn", "late-double-turn"],
)
def test_alternation_is_the_widest_gap_in_release_counts_while_both_queues_wait(
    order: str, expected: int
) -> None:
    assert alternation(alternating(order).record(), ["a", "b"]).max_difference == expected


def test_alternation_stops_counting_once_a_queue_has_nothing_left_to_release() -> None:
    story = alternating("ababab")
    story.pod("a9", 10, queue="a").pod("a8", 10, queue="a").release("a9", 11).release("a8", 12)
    result = alternation(story.record(), ["a", "b"])
    # b's last release came after a had run dry, and a's later pods came when b had none left
    assert result == Alternation(1, 1, {"a": 3, "b": 2})


def test_a_pod_released_once_is_not_released_twice() -> None:
    assert released_twice(two_at_a_time().record()) == []


def test_two_ungate_transitions_or_a_gate_back_after_release_are_releases_twice() -> None:
    story = Story().pod("twice").pod("regated").pod("fine")
    story.release("twice", 1).release("twice", 2).release("fine", 1)
    story.release("regated", 1).regate("regated", 3)
    found = released_twice(story.record())
    assert {t.pod.name: [e.kind for e in t.events] for t in found} == {
        "twice": [Kind.UNGATED, Kind.UNGATED],
        "regated": [Kind.UNGATED, Kind.GATED],
    }


def test_lost_pods_are_those_never_seen_or_never_terminal() -> None:
    story = Story().pod("done").pod("stuck").pod("failed").pod("gone").pod("finished-then-deleted")
    story.lifecycle("done", 1, 2).release("stuck", 1).run("stuck", 1).release("failed", 1).fail("failed", 2)
    story.release("gone", 1).delete("gone", 2)
    story.lifecycle("finished-then-deleted", 1, 2).delete("finished-then-deleted", 3)
    record = story.record()
    submitted = [Submission("ns", n, "a", "t", "", 0.0) for n in ("done", "stuck", "failed", "gone", "never")]

    assert [str(x) for x in lost(record, submitted)] == [
        "ns/stuck (running)", "ns/gone (deleted)", "ns/never (never seen)",
    ]
    assert [x.name for x in lost(record, submitted, deleted_is_lost=False)] == ["stuck", "never"]
    assert [x.name for x in lost(record)] == ["stuck", "gone"]
