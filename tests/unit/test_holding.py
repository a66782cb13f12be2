"""Strict priority over shared capacity, and starving heads that hold from their peers."""

from __future__ import annotations

import pytest

from policy.keys import Reason
from tests.builders import T0, MakePolicy, MakeQueue, MakeTeam
from tests.unit.test_dispatching import Case, check, gated, running

R = Reason
HIGH_LOW = [MakeQueue("high").priority(10), MakeQueue("low").priority(1)]
TEAM_HOLD = (
    "held for ml/big in higher-priority queue high (priority 10): it waits for team vision nvidia.com/gpu"
)
CLUSTER_HOLD = (
    "held for ml/big in higher-priority queue high (priority 10): it waits for cluster nvidia.com/gpu"
)

HOLDS = [
    Case(
        "a higher queue's head short of team GPUs keeps lower work of that team off them",
        [
            running("r0", queue="high").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("small", queue="low").gpus(1),
        ],
        queues=HIGH_LOW,
        teams=[MakeTeam("vision").quota(gpus=8)],
        waiting={
            "big": (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4"),
            "small": (R.HELD_FOR_PRIORITY, TEAM_HOLD),
        },
    ),
    Case(
        "a team hold leaves other teams alone",
        [
            running("r0", queue="high").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("other", queue="low", team="nlp").gpus(1),
        ],
        queues=HIGH_LOW,
        teams=[MakeTeam("vision").quota(gpus=8)],
        released=["other"],
        waiting={"big": (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4")},
    ),
    Case(
        "a hold covers only the resources the head is short of",
        [
            running("r0", queue="high").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("cpu-only", queue="low").requests(cpu="2"),
        ],
        queues=HIGH_LOW,
        teams=[MakeTeam("vision").quota({"nvidia.com/gpu": 8, "cpu": 64})],
        released=["cpu-only"],
        waiting={"big": (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4")},
    ),
    Case(
        "a higher queue's head short of cluster GPUs keeps every lower queue off them",
        [
            running("r0", queue="high").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("small", queue="low", team="nlp").gpus(1),
        ],
        queues=HIGH_LOW,
        policy=MakePolicy().quota(gpus=8),
        waiting={
            "big": (R.GLOBAL_QUOTA, "cluster: 6/8 nvidia.com/gpu in use, needs 4"),
            "small": (R.HELD_FOR_PRIORITY, CLUSTER_HOLD),
        },
    ),
    Case(
        "a head stopped by its own queue holds nothing shared",
        [
            running("r0", queue="high").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("small", queue="low").gpus(1),
        ],
        queues=[MakeQueue("high").priority(10).max_running(1), MakeQueue("low").priority(1)],
        teams=[MakeTeam("vision").quota(gpus=8)],
        released=["small"],
        waiting={"big": (R.QUEUE_LIMIT, "queue high: 1/1 running")},
    ),
    Case(
        "a paused higher queue holds nothing",
        [
            running("r0", queue="low").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("small", queue="low").gpus(1),
        ],
        queues=[MakeQueue("high").priority(10).paused(), MakeQueue("low").priority(1)],
        teams=[MakeTeam("vision").quota(gpus=8)],
        released=["small"],
        waiting={"big": (R.QUEUE_PAUSED, "queue high is paused")},
    ),
    Case(
        "lower work that its own limit stops is told that limit, not the hold",
        [
            running("r0", queue="high").gpus(6),
            running("r1", queue="low", team="nlp"),
            gated("big", queue="high").gpus(4),
            gated("small", queue="low").gpus(1),
        ],
        queues=[MakeQueue("high").priority(10), MakeQueue("low").priority(1).max_running(1)],
        teams=[MakeTeam("vision").quota(gpus=8)],
        waiting={
            "big": (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4"),
            "small": (R.QUEUE_LIMIT, "queue low: 1/1 running"),
        },
    ),
    Case(
        "an equal-priority peer's head holds nothing until it starves",
        [
            running("r0", queue="a").gpus(6),
            gated("big", queue="a", at=30).gpus(4),
            gated("small", queue="b").gpus(1),
        ],
        queues=[MakeQueue("a"), MakeQueue("b")],
        teams=[MakeTeam("vision").quota(gpus=8)],
        released=["small"],
        waiting={"big": (R.TEAM_QUOTA, "team vision: 7/8 nvidia.com/gpu in use, needs 4")},
    ),
    Case(
        "a head that has waited past starvationSeconds holds from its equal-priority peers",
        [
            running("r0", queue="a").gpus(6),
            gated("big", queue="a", at=0).gpus(4),
            gated("small", queue="b").gpus(1),
        ],
        queues=[MakeQueue("a"), MakeQueue("b")],
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        waiting={
            "big": (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4"),
            "small": (
                R.HELD_FOR_PRIORITY,
                "held for ml/big in queue a, waiting 60s (over starvationSeconds 30): "
                "it waits for team vision nvidia.com/gpu",
            ),
        },
    ),
    Case(
        "a starving head that fits goes before its peers take their turns",
        [gated("small", queue="a", at=50).gpus(1), gated("big", queue="b", at=0).gpus(4)],
        queues=[MakeQueue("a"), MakeQueue("b")],
        teams=[MakeTeam("vision").quota(gpus=4)],
        policy=MakePolicy().starvation_seconds(30),
        released=["big"],
        waiting={"small": (R.TEAM_QUOTA, "team vision: 4/4 nvidia.com/gpu in use, needs 1")},
    ),
    Case(
        "the work behind a starving head in its own queue waits behind it, held when it wants the same",
        [
            running("r0").gpus(6),
            gated("big", at=0).gpus(4),
            gated("small", at=50).gpus(1),
            gated("cpu", at=51).requests(cpu="1"),
        ],
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        waiting={
            "big": (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4"),
            "small": (
                R.HELD_FOR_PRIORITY,
                "held for ml/big in queue a, waiting 60s (over starvationSeconds 30): "
                "it waits for team vision nvidia.com/gpu",
            ),
            "cpu": (R.WAITING_TURN, "behind ml/big in queue a, which has waited over starvationSeconds"),
        },
    ),
    Case(
        "a starving head keeps its workflow's next slot from other queues",
        [
            running("r0", queue="b").gpus(6),
            gated("big", queue="a", at=0).gpus(4).workflow("sweep", 2),
            gated("trial", queue="b", at=1).workflow("sweep", 2),
        ],
        queues=[MakeQueue("a"), MakeQueue("b")],
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        waiting={
            "big": (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4"),
            "trial": (
                R.HELD_FOR_PRIORITY,
                "held for ml/big in queue a, waiting 60s (over starvationSeconds 30): "
                "it needs a slot of workflow ml/sweep",
            ),
        },
    ),
    Case(
        "a head held back by its own workflow does not starve its queue",
        [
            running("r0").workflow("sweep", 1),
            gated("trial", at=0).workflow("sweep", 1),
            gated("other", at=50),
        ],
        policy=MakePolicy().starvation_seconds(30),
        released=["other"],
        waiting={"trial": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 1/1 running")},
    ),
    Case(
        "starving heads claim in turn order, not by age, so that deep old queues still alternate",
        [gated("younger", queue="a", at=10).gpus(4), gated("older", queue="b", at=5).gpus(4)],
        queues=[MakeQueue("a"), MakeQueue("b")],
        policy=MakePolicy().starvation_seconds(30).quota(gpus=4),
        released=["younger"],
        waiting={"older": (R.GLOBAL_QUOTA, "cluster: 4/4 nvidia.com/gpu in use, needs 4")},
    ),
]


@pytest.mark.parametrize("case", HOLDS, ids=lambda c: c.id)
def test_holds(case: Case) -> None:
    check(case)


def test_starvation_counts_from_creation_to_the_snapshots_now() -> None:
    young = Case(
        "",
        [
            running("r0", queue="a").gpus(6),
            gated("big", queue="a", at=0).gpus(4),
            gated("small", queue="b").gpus(1),
        ],
        queues=[MakeQueue("a"), MakeQueue("b")],
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(600),
        now=T0 + 600,
        released=["small"],
        waiting={"big": (R.TEAM_QUOTA, "team vision: 7/8 nvidia.com/gpu in use, needs 4")},
    )
    check(young)
    young.now = T0 + 601
    young.released = []
    young.waiting = {
        "big": (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4"),
        "small": (
            R.HELD_FOR_PRIORITY,
            "held for ml/big in queue a, waiting 601s (over starvationSeconds 600): "
            "it waits for team vision nvidia.com/gpu",
        ),
    }
    check(young)
