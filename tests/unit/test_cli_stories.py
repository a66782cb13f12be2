"""``sluicegate explain`` stories (no cluster): why a released pod waited, from the controller's
events, and why a failed pod failed, in its first line."""

from __future__ import annotations

from typing import Any

from cli.stories import FINISHED, render, tell
from policy import keys
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
