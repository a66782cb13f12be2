"""Strict priority over shared capacity: what a waiting head holds from lower priorities, and when
it holds nothing."""

from __future__ import annotations

import pytest

from policy.dispatching import dispatch
from policy.keys import Reason
from tests.builders import MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot
from tests.unit.test_dispatching import Case, check, gated, running

R = Reason
BIG_SHORT = (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4")
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
            "big": BIG_SHORT,
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
        waiting={"big": BIG_SHORT},
    ),
    Case(
        "a head short of its own team's quota holds nothing of the cluster's from other teams",
        [
            running("r0", queue="high").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("other", queue="low", team="nlp").gpus(4),
        ],
        queues=HIGH_LOW,
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().quota(gpus=12),
        released=["other"],
        waiting={"big": BIG_SHORT},
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
        waiting={"big": BIG_SHORT},
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
        "a head held back by its own team's maxRunning holds nothing: another team takes the cluster GPUs",
        [
            running("r0", queue="high"),
            running("r1", queue="low", team="nlp").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("other", queue="low", team="nlp").gpus(1),
        ],
        queues=HIGH_LOW,
        teams=[MakeTeam("vision").max_running(1)],
        policy=MakePolicy().quota(gpus=8),
        released=["other"],
        waiting={"big": (R.TEAM_LIMIT, "team vision: 1/1 running")},
    ),
    Case(
        "a head held back by its own workflow holds nothing",
        [
            running("r0", queue="high").workflow("sweep", 1),
            running("r1", queue="low", team="nlp").gpus(6),
            gated("big", queue="high").gpus(4).workflow("sweep", 1),
            gated("other", queue="low", team="nlp").gpus(1),
        ],
        queues=HIGH_LOW,
        policy=MakePolicy().quota(gpus=8),
        released=["other"],
        waiting={"big": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 1/1 running")},
    ),
    Case(
        "a head keeps the last free slot of its team from lower priorities, so that it can still run",
        [
            running("r0", queue="high"),
            running("r1", queue="low", team="nlp").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("mine", queue="low").requests(cpu="1"),
            gated("theirs", queue="low", team="nlp", at=1).requests(cpu="1"),
        ],
        queues=HIGH_LOW,
        teams=[MakeTeam("vision").max_running(2)],
        policy=MakePolicy().quota(gpus=8),
        released=["theirs"],
        waiting={
            "big": (R.GLOBAL_QUOTA, "cluster: 6/8 nvidia.com/gpu in use, needs 4"),
            "mine": (
                R.HELD_FOR_PRIORITY,
                "held for ml/big in higher-priority queue high (priority 10): "
                "it needs the last free slot of team vision",
            ),
        },
    ),
    Case(
        "a head keeps the last free slot of the cluster from lower priorities",
        [
            running("r0", queue="low", team="nlp").gpus(6),
            gated("big", queue="high").gpus(4),
            gated("cpu", queue="low", team="nlp").requests(cpu="1"),
        ],
        queues=HIGH_LOW,
        policy=MakePolicy().quota(gpus=8).max_running(2),
        waiting={
            "big": (R.GLOBAL_QUOTA, "cluster: 6/8 nvidia.com/gpu in use, needs 4"),
            "cpu": (
                R.HELD_FOR_PRIORITY,
                "held for ml/big in higher-priority queue high (priority 10): "
                "it needs the last free slot of the cluster",
            ),
        },
    ),
    Case(
        "a head keeps quota it needs but is not yet short of: lower work may take only what it leaves",
        [
            running("r0", queue="low", team="nlp").gpus(6),
            gated("big", queue="high").gpus(4).requests(cpu="2"),
            gated("modest", queue="low", at=0).requests(cpu="1"),
            gated("hungry", queue="low", at=1).requests(cpu="4"),
        ],
        queues=HIGH_LOW,
        teams=[MakeTeam("vision").quota(cpu=6)],
        policy=MakePolicy().quota(gpus=8),
        released=["modest"],
        waiting={
            "big": (R.GLOBAL_QUOTA, "cluster: 6/8 nvidia.com/gpu in use, needs 4"),
            "hungry": (
                R.HELD_FOR_PRIORITY,
                "held for ml/big in higher-priority queue high (priority 10): it waits for team vision cpu",
            ),
        },
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
            "big": BIG_SHORT,
            "small": (R.QUEUE_LIMIT, "queue low: 1/1 running"),
        },
    ),
]


@pytest.mark.parametrize("case", HOLDS, ids=lambda c: c.id)
def test_holds(case: Case) -> None:
    check(case)


def test_a_hold_for_another_namespace_names_its_queue_and_priority_not_its_pod() -> None:
    """One team's pods never read another's names: the head that holds is named only when it is
    of the waiting pod's own namespace."""
    pods = [
        MakePod("nlp-research", "dmitri-private-llm-finetune").queue("notebooks").team("nlp").gpus(4).gated(),
        MakePod("vision-research", "train").queue("vision-train").team("vision").gpus(1).gated(),
        MakePod("nlp-research", "mine").queue("nlp-train").team("nlp").gpus(1).gated(),
    ]
    queues = [MakeQueue("notebooks").priority(20).max_running(5), MakeQueue("vision-train").priority(10),
              MakeQueue("nlp-train").priority(10)]
    policy = MakePolicy().quota(gpus=4)
    busy = MakePod("other", "busy").queue("vision-train").team("vision").gpus(1).running("n1")
    decision = dispatch(snapshot([*pods, busy], queues, [MakeTeam("vision"), MakeTeam("nlp")], policy))
    assert decision.release == ()
    theirs = decision.waiting["vision-research/train"].message
    assert theirs == ("held for work of another namespace in higher-priority queue notebooks (priority 20): "
                      "it waits for cluster nvidia.com/gpu")
    assert "dmitri" not in theirs
    assert decision.waiting["nlp-research/mine"].message == (
        "held for nlp-research/dmitri-private-llm-finetune in higher-priority queue notebooks (priority 20): "
        "it waits for cluster nvidia.com/gpu")


def test_behind_a_strict_fifo_head_of_another_namespace_names_no_pod() -> None:
    head = MakePod("nlp-research", "secret-head").queue("shared").team("nlp").gpus(4).gated().created(0)
    mine = MakePod("vision-research", "small").queue("shared").team("vision").gpus(1).gated().created(1)
    queues = [MakeQueue("shared").strict().quota(gpus=4)]
    busy = MakePod("nlp-research", "busy").queue("shared").team("nlp").gpus(1).running("n1")
    decision = dispatch(snapshot([head, mine, busy], queues, [MakeTeam("vision"), MakeTeam("nlp")]))
    wait = decision.waiting["vision-research/small"]
    assert (wait.reason, wait.message) == (
        R.WAITING_TURN, "behind work of another namespace at the head of StrictFIFO queue shared")
