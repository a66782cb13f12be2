"""Limits that change during a run: a release is judged against the limit in force, a lowered
limit never makes the pods already running a violation, and a change is given the grace it
takes to reach the controller."""

from __future__ import annotations

from audit.checking import Cap, Limits, Scope
from audit.timelines import Timeline, loosest, violations_over
from tests.audit_stories import Story

TWO = Limits(queues={"a": Cap(running=2)})
FOUR = Limits(queues={"a": Cap(running=4)})
ONE = Limits(queues={"a": Cap(running=1)})


def four_running_from(at: float) -> Story:
    story = Story()
    for i in range(4):
        story.pod(f"p{i}").lifecycle(f"p{i}", at + i / 10, 50)
    return story


def test_releases_after_a_raise_are_judged_against_the_raised_limit() -> None:
    record = four_running_from(20).record()
    assert violations_over(record, Timeline(TWO).then(10, FOUR)) == []


def test_releases_over_the_limit_before_it_was_raised_are_violations() -> None:
    record = four_running_from(1).record()
    found = violations_over(record, Timeline(TWO).then(10, FOUR))
    assert [(v.scope, v.name, v.count, v.limit) for v in found] == [
        (Scope.QUEUE, "a", 3, 2), (Scope.QUEUE, "a", 4, 2)]


def test_pods_already_running_when_a_limit_is_lowered_are_no_violation() -> None:
    story = four_running_from(1)
    story.pod("late").lifecycle("late", 60, 70)  # released once the others ended: 1 running
    assert violations_over(story.record(), Timeline(FOUR).then(10, ONE)) == []


def test_a_release_over_a_lowered_limit_after_the_grace_is_a_violation() -> None:
    story = Story()
    story.pod("p0").lifecycle("p0", 1, 50).pod("p1").lifecycle("p1", 30, 50)
    (found,) = violations_over(story.record(), Timeline(FOUR, grace=5).then(10, ONE))
    assert (found.pod, found.count, found.limit) == ("ns/p1", 2, 1)


def test_within_the_grace_a_release_is_judged_against_the_looser_of_old_and_new() -> None:
    story = Story()
    story.pod("p0").lifecycle("p0", 1, 50).pod("p1").lifecycle("p1", 12, 50)
    assert violations_over(story.record(), Timeline(FOUR, grace=5).then(10, ONE)) == []


def test_unlimited_is_the_loosest_cap() -> None:
    assert loosest([Cap(running=2, gpus=4), Cap(running=None, gpus=8)]) == Cap(running=None, gpus=8)
