"""``sluicegate explain`` stories (no cluster): why a released pod waited, from the controller's
events, and why a failed pod failed, in its first line."""

from __future__ import annotations

import re
from typing import Any

from cli.stories import FINISHED, render, tell
from policy import keys
from policy.pods import format_admitted_at
from tests.builders import T0, MakePod, timestamp

Obj = dict[str, Any]


def hold_event(reason: str, message: str, at: float) -> Obj:
    return {"type": "Normal", "reason": reason, "action": "Hold", "message": message,
            "eventTime": timestamp(T0 + at), "reportingComponent": "sluicegate-controller"}


def test_a_released_pod_keeps_why_it_waited_from_the_controllers_events_in_time_order() -> None:
    released = (MakePod("vision-research", "trial-15").queue("sweeps").team("vision").gpus(1)
                .created(0).admitted(0).annotation(keys.DISPATCHED_AT_ANNOTATION, timestamp(T0 + 20))
                .running("n1").obj())
    events = [hold_event("GlobalLimit", "cluster: 32/32 running", 9),
              hold_event("WorkflowLimit", "workflow vision-research/lr-sweep: 4/4 running", 1)]
    text = render(tell(released, events, None))
    story = text[text.index("Story:"):]
    first = story.index("held: WorkflowLimit: workflow vision-research/lr-sweep: 4/4 running")
    second = story.index("held: GlobalLimit: cluster: 32/32 running")
    assert story.index("admitted to queue sweeps") < first < second < story.index("released by queue sweeps")


def test_a_released_pod_tells_its_last_hold_from_the_held_annotation_before_its_release() -> None:
    released = (MakePod("vision-research", "trial-16").queue("sweeps").team("vision").gpus(1)
                .created(0).admitted(0).annotation(keys.DISPATCHED_AT_ANNOTATION, timestamp(T0 + 20))
                .annotation(keys.HELD_ANNOTATION, "QueueLimit: queue sweeps: 4/4 running")
                .running("n1").obj())
    text = render(tell(released, [], None))
    story = text[text.index("Story:"):]
    held = story.index("held: QueueLimit: queue sweeps: 4/4 running")
    assert story.index("admitted to queue sweeps") < held < story.index("released by queue sweeps")
    assert story.count("held: ") == 1


def test_a_held_pod_does_not_tell_its_current_hold_twice() -> None:
    held = MakePod("vision-research", "p1").queue("train").team("vision").gated().obj()
    held["status"]["conditions"] = [{"type": keys.CONDITION, "status": "False", "reason": "QueueLimit",
                                     "message": "queue train: 1/1 running"}]
    text = render(tell(held, [hold_event("QueueLimit", "queue train: 1/1 running", 1)], None, "forbidden"))
    assert text.count("held: QueueLimit: queue train: 1/1 running") == 1


def test_a_failed_pod_says_why_in_its_first_line() -> None:
    failed = MakePod("vision-research", "oom").queue("train").team("vision").node("n1").obj()
    failed["status"].update({"phase": "Failed", "message": "boom", "containerStatuses": [
        {"name": "main", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                                  "finishedAt": timestamp(T0 + 5)}}}]})
    story = tell(failed, [], None)
    assert story.state == FINISHED
    assert story.headline.startswith("finished: Failed (OOMKilled, exit code 137: boom) at ")


def test_a_pod_in_a_namespace_without_the_team_label_is_said_to_be_outside_sluicegate() -> None:
    free = MakePod("plain", "free-1").queue("whatever").gpus(1).obj()
    story = tell(free, [], None, connected=False)
    assert story.headline == f"namespace plain is not connected to Sluicegate (no {keys.TEAM_LABEL} label)"
    assert ("Queue", "whatever (label ignored)") in story.facts
    assert "admitted to queue" not in render(story) and "Waiting:" not in render(story)


def test_the_story_runs_on_one_clock_the_release_before_the_schedulers_answer_that_followed_it() -> None:
    """The controller stamps to the microsecond; kube-scheduler's event and condition to the whole
    second. The pod was gated at creation, so its PodScheduled condition went False then
    (SchedulingGated) and keeps that transition's second when the scheduler later says
    Unschedulable; its event is in the second of the release, truncated below it."""
    pod = (MakePod("vision-research", "big-1").queue("train").team("vision").gpus(8)
           .created(0).admitted(0.25)
           .annotation(keys.DISPATCHED_AT_ANNOTATION, format_admitted_at(T0 + 30.75))
           .ungated().unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.").obj())
    pod["status"]["conditions"][-1]["lastTransitionTime"] = timestamp(T0)
    failed = {"type": "Warning", "reason": "FailedScheduling", "source": {"component": "default-scheduler"},
              "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
              "firstTimestamp": timestamp(T0 + 30), "lastTimestamp": timestamp(T0 + 30)}
    held = hold_event("QueueLimit", "queue train: 1/1 running", 30.5)
    held["eventTime"] = format_admitted_at(T0 + 30.5)
    story = tell(pod, [failed, held], None)
    lines = [m.what for m in story.timeline]
    release = next(i for i, w in enumerate(lines) if w.startswith("released by queue train"))
    cannot = next(i for i, w in enumerate(lines) if w.startswith("kube-scheduler cannot place it"))
    assert lines.index("held: QueueLimit: queue train: 1/1 running") < release < cannot
    text = render(story)
    after_story = text[text.index("Story:"):].splitlines()[1:]
    printed = [line.split()[0] for line in after_story if line.startswith("  2")]
    assert len(printed) == len(story.timeline) + len(story.events)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p) for p in printed), printed
    told = printed[:len(story.timeline)]
    assert told == sorted(told)  # in time order: no line reads earlier than the one before it
    assert told[cannot] == timestamp(T0 + 30)  # the scheduler's own second, not the gate's


def visible_item(position: int, ahead: int, expected: Obj | None = None) -> Obj:
    """The pod as the visibility API serves it."""
    item: Obj = {"metadata": {"name": "p1", "namespace": "vision-research"}, "queue": "sweeps",
                 "position": position, "workloadsAhead": ahead, "reason": "QueueLimit",
                 "message": "queue sweeps: 2/2 running"}
    if expected is not None:
        item["expectedStart"] = expected
    return item


def test_a_reader_of_one_namespace_learns_the_position_from_the_visibility_api() -> None:
    held = MakePod("vision-research", "p1").queue("sweeps").team("vision").gated().obj()
    text = render(tell(held, [], None, "forbidden", visible=visible_item(4, 3)))
    assert text.splitlines()[0] == "held by Sluicegate: QueueLimit: queue sweeps: 2/2 running"
    assert "  position 4 in its queue\n  after 3 workloads ahead in queue sweeps\n" in text
    assert "expected to start" not in text and "start time" not in text  # the API said nothing of it
    assert "position and what is ahead unknown" not in text


def test_the_expected_start_is_said_when_the_controller_estimated_it() -> None:
    held = MakePod("vision-research", "p1").queue("sweeps").team("vision").gated().obj()
    expected = {"p10Seconds": 540, "p50Seconds": 840, "p90Seconds": 1860}
    story = tell(held, [], None, "forbidden", visible=visible_item(1, 0, expected))
    assert "  after 0 workloads ahead in queue sweeps\n" in render(story)
    assert "  expected to start in about 14m (9–31m)\n" in render(story)
    assert story.as_json()["hold"]["expectedStart"] == "expected to start in about 14m (9–31m)"


def test_an_unknown_start_says_why() -> None:
    held = MakePod("vision-research", "p1").queue("sweeps").team("vision").gated().obj()
    story = tell(held, [], None, "forbidden", visible=visible_item(1, 0, {"unknown": "its queue is paused"}))
    assert "  start time unknown: its queue is paused\n" in render(story)
