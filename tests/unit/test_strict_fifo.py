"""A StrictFIFO queue passes over work held by its own workflow's limit (a sweep at its limit):
FIFO order holds among the rest, which it never stops for such work."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.dispatching import dispatch
from policy.keys import Reason
from policy.model import State
from tests.builders import MakeQueue, MakeTeam, snapshot
from tests.unit.test_dispatching import Case, check, gated, running

R = Reason

CASES = [
    Case(
        "a sweep at its limit at the head of a StrictFIFO queue is passed over; the work behind it goes",
        [
            running("t0").workflow("sweep", 1),
            gated("t1").workflow("sweep", 1),
            gated("t2", at=1).workflow("sweep", 1),
            gated("other", at=2),
        ],
        queues=[MakeQueue("a").strict()],
        released=["other"],
        waiting={
            "t1": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 1/1 running"),
            "t2": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 1/1 running"),
        },
    ),
    Case(
        "a sweep that reaches its limit in the decision is passed over from then on",
        [
            gated("t1").workflow("sweep", 1),
            gated("t2", at=1).workflow("sweep", 1),
            gated("other", at=2),
        ],
        queues=[MakeQueue("a").strict()],
        released=["t1", "other"],
        waiting={"t2": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 1/1 running")},
    ),
    Case(
        "past a sweep at its limit, the queue still stops at the first eligible work that does not fit",
        [
            running("t0").workflow("sweep", 1).gpus(2),
            gated("t1").workflow("sweep", 1),
            gated("big", at=1).gpus(4),
            gated("small", at=2).gpus(1),
        ],
        queues=[MakeQueue("a").strict().quota(gpus=4)],
        waiting={
            "t1": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 1/1 running"),
            "big": (R.QUEUE_QUOTA, "queue a: 2/4 nvidia.com/gpu in use, needs 4"),
            "small": (R.WAITING_TURN, "behind ml/big at the head of StrictFIFO queue a"),
        },
    ),
    Case(
        "a StrictFIFO head whose workflow another queue fills later in the decision lets its queue go on",
        [
            running("t0").workflow("sweep", 2),
            gated("t1").workflow("sweep", 2),
            gated("w", team="audio", at=1),
            gated("u", queue="b", team="audio", at=2).workflow("sweep", 2),
        ],
        queues=[MakeQueue("a").strict(), MakeQueue("b")],
        teams=[MakeTeam("vision").max_running(1)],
        released=["u", "w"],
        waiting={"t1": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 2/2 running")},
    ),
    Case(
        "a StrictFIFO head whose workflow a lower priority fills lets its queue go on",
        [
            running("t0").workflow("sweep", 2),
            gated("t1").workflow("sweep", 2),
            gated("w", team="audio", at=1),
            gated("u", queue="b", team="audio", at=2).workflow("sweep", 2),
        ],
        queues=[MakeQueue("a").strict().priority(10), MakeQueue("b")],
        teams=[MakeTeam("vision").max_running(1)],
        released=["u", "w"],
        waiting={"t1": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 2/2 running")},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_strict_fifo_and_workflow_limits(case: Case) -> None:
    decision = check(case)
    # The decision leaves nothing for the next one to find: asking again releases nothing.
    snap = snapshot(case.pods, case.queues, case.teams, case.policy, now=case.now)
    done = {w.key for w in decision.release}
    started = [replace(w, state=State.RUNNING) if w.key in done else w for w in snap.workloads]
    after = replace(snap, workloads=started)
    assert dispatch(after, decision.turns).release == ()
