"""Starving heads: they claim first, hold what they need from their peers, and nothing more."""

from __future__ import annotations

import pytest

from policy.keys import Reason
from tests.builders import T0, MakePolicy, MakeQueue, MakeTeam
from tests.unit.test_dispatching import Case, check, gated, running

R = Reason
PEERS = [MakeQueue("a"), MakeQueue("b")]
"""Two queues of equal priority."""
BIG_SHORT = (R.TEAM_QUOTA, "team vision: 6/8 nvidia.com/gpu in use, needs 4")
STARVING_BIG = "held for ml/big in queue a, waiting 60s (over starvationSeconds 30): "

STARVING = [
    Case(
        "an equal-priority peer's head holds nothing until it starves",
        [
            running("r0", queue="a").gpus(6),
            gated("big", queue="a", at=30).gpus(4),
            gated("small", queue="b").gpus(1),
        ],
        queues=PEERS,
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
        queues=PEERS,
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        waiting={
            "big": BIG_SHORT,
            "small": (R.HELD_FOR_PRIORITY, STARVING_BIG + "it waits for team vision nvidia.com/gpu"),
        },
    ),
    Case(
        "a starving head that fits goes before its peers take their turns",
        [gated("small", queue="a", at=50).gpus(1), gated("big", queue="b", at=0).gpus(4)],
        queues=PEERS,
        teams=[MakeTeam("vision").quota(gpus=4)],
        policy=MakePolicy().starvation_seconds(30),
        released=["big"],
        waiting={"small": (R.TEAM_QUOTA, "team vision: 4/4 nvidia.com/gpu in use, needs 1")},
    ),
    Case(
        "a starving head holds what it needs; the rest of its BestEffortFIFO queue keeps flowing",
        [
            running("r0").gpus(6),
            gated("big", at=0).gpus(4),
            gated("small", at=50).gpus(1),
            gated("cpu", at=51).requests(cpu="1"),
        ],
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        released=["cpu"],
        waiting={
            "big": BIG_SHORT,
            "small": (R.HELD_FOR_PRIORITY, STARVING_BIG + "it waits for team vision nvidia.com/gpu"),
        },
    ),
    Case(
        "a starving head keeps the last free slot of its own queue from the work behind it",
        [
            running("r0").gpus(6),
            gated("big", at=0).gpus(4),
            gated("cpu", at=50).requests(cpu="1"),
        ],
        queues=[MakeQueue("a").max_running(2)],
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        waiting={
            "big": BIG_SHORT,
            "cpu": (R.HELD_FOR_PRIORITY, STARVING_BIG + "it needs the last free slot of queue a"),
        },
    ),
    Case(
        "a starving StrictFIFO head still stops its queue",
        [
            running("r0").gpus(6),
            gated("big", at=0).gpus(4),
            gated("cpu", at=50).requests(cpu="1"),
        ],
        queues=[MakeQueue("a").strict()],
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        waiting={
            "big": BIG_SHORT,
            "cpu": (R.WAITING_TURN, "behind ml/big at the head of StrictFIFO queue a"),
        },
    ),
    Case(
        "a starving head leaves its workflow's slots to others while more than one is free",
        [
            running("r0", queue="b").gpus(6),
            gated("big", queue="a", at=0).gpus(4).workflow("sweep", 4),
            gated("trial", queue="b", at=1).workflow("sweep", 4),
        ],
        queues=PEERS,
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        released=["trial"],
        waiting={"big": BIG_SHORT},
    ),
    Case(
        "a starving head keeps the last free slot of its workflow from other queues",
        [
            running("r0", queue="b").gpus(6).workflow("sweep", 2),
            gated("big", queue="a", at=0).gpus(4).workflow("sweep", 2),
            gated("trial", queue="b", at=1).workflow("sweep", 2),
        ],
        queues=PEERS,
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().starvation_seconds(30),
        waiting={
            "big": BIG_SHORT,
            "trial": (R.HELD_FOR_PRIORITY, STARVING_BIG + "it needs the last free slot of workflow ml/sweep"),
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
        queues=PEERS,
        policy=MakePolicy().starvation_seconds(30).quota(gpus=4),
        released=["younger"],
        waiting={"older": (R.GLOBAL_QUOTA, "cluster: 4/4 nvidia.com/gpu in use, needs 4")},
    ),
    Case(
        "a starving head held back by its own team's maxRunning holds nothing from its peers",
        [
            running("r0", queue="a"),
            running("r1", queue="b", team="nlp").gpus(6),
            gated("big", queue="a", at=0).gpus(4),
            gated("peer", queue="b", team="nlp", at=50).gpus(1),
        ],
        queues=PEERS,
        teams=[MakeTeam("vision").max_running(1)],
        policy=MakePolicy().quota(gpus=8).starvation_seconds(30),
        released=["peer"],
        waiting={"big": (R.TEAM_LIMIT, "team vision: 1/1 running")},
    ),
]


@pytest.mark.parametrize("case", STARVING, ids=lambda c: c.id)
def test_starving(case: Case) -> None:
    check(case)


def test_starvation_counts_from_creation_to_the_snapshots_now() -> None:
    young = Case(
        "",
        [
            running("r0", queue="a").gpus(6),
            gated("big", queue="a", at=0).gpus(4),
            gated("small", queue="b").gpus(1),
        ],
        queues=PEERS,
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
        "big": BIG_SHORT,
        "small": (
            R.HELD_FOR_PRIORITY,
            "held for ml/big in queue a, waiting 601s (over starvationSeconds 600): "
            "it waits for team vision nvidia.com/gpu",
        ),
    }
    check(young)
