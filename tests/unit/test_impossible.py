"""Work that can never run under the current limits: it holds nothing, blocks nothing, says so."""

from __future__ import annotations

import pytest

from policy.dispatching import dispatch
from policy.keys import Reason
from tests.builders import MakePolicy, MakeQueue, MakeTeam, snapshot
from tests.unit.test_dispatching import Case, check, gated, running

R = Reason
HIGH_LOW = [MakeQueue("high").priority(10), MakeQueue("low").priority(1)]
NEVER = "can never run under the current limits: "

IMPOSSIBLE = [
    Case(
        "a higher-priority workload over the cluster quota by itself holds nothing: lower work goes",
        [gated("huge", queue="high").gpus(16), gated("small", queue="low").gpus(1)],
        queues=HIGH_LOW,
        policy=MakePolicy().quota(gpus=8),
        released=["small"],
        waiting={"huge": (R.GLOBAL_QUOTA, NEVER + "needs 16 nvidia.com/gpu; cluster quota is 8")},
    ),
    Case(
        "a higher-priority workload over its team's quota by itself holds nothing",
        [gated("huge", queue="high").gpus(16), gated("small", queue="low").gpus(1)],
        queues=HIGH_LOW,
        teams=[MakeTeam("vision").quota(gpus=8)],
        released=["small"],
        waiting={"huge": (R.TEAM_QUOTA, NEVER + "needs 16 nvidia.com/gpu; team vision quota is 8")},
    ),
    Case(
        "a workload over its own queue's quota says so rather than how much is in use",
        [running("r0").gpus(2), gated("huge").gpus(16)],
        queues=[MakeQueue("a").quota(gpus=8)],
        waiting={"huge": (R.QUEUE_QUOTA, NEVER + "needs 16 nvidia.com/gpu; queue a quota is 8")},
    ),
    Case(
        "an impossible head past starvationSeconds stops neither its own queue nor its peers",
        [
            gated("huge", queue="a", at=0).gpus(16),
            gated("behind", queue="a", at=50).gpus(1),
            gated("peer", queue="b", at=50).gpus(1),
        ],
        queues=[MakeQueue("a"), MakeQueue("b")],
        policy=MakePolicy().quota(gpus=8).starvation_seconds(30),
        released=["behind", "peer"],
        waiting={"huge": (R.GLOBAL_QUOTA, NEVER + "needs 16 nvidia.com/gpu; cluster quota is 8")},
    ),
    Case(
        "an impossible workload never blocks a StrictFIFO queue",
        [gated("huge", at=0).gpus(16), gated("next", at=1).gpus(1)],
        queues=[MakeQueue("a").strict().quota(gpus=8)],
        released=["next"],
        waiting={"huge": (R.QUEUE_QUOTA, NEVER + "needs 16 nvidia.com/gpu; queue a quota is 8")},
    ),
    Case(
        "a group whose pods sum over a quota can never run, though each pod alone would fit",
        [gated(f"w{i}").group("g", 3).gpus(4) for i in range(3)],
        queues=[MakeQueue("a").quota(gpus=8)],
        waiting={"group:g": (R.QUEUE_QUOTA, NEVER + "needs 12 nvidia.com/gpu; queue a quota is 8")},
    ),
    Case(
        "a group with more pods than maxRunning is one workload, and runs",
        [gated(f"w{i}").group("g", 4) for i in range(4)],
        queues=[MakeQueue("a").max_running(1)],
        released=["group:g"],
    ),
    Case(
        "a group whose present pods already sum over a quota says so before it is complete",
        [gated(f"w{i}").group("g", 4).gpus(5) for i in range(2)],
        queues=[MakeQueue("a").quota(gpus=8)],
        waiting={"group:g": (R.QUEUE_QUOTA, NEVER + "needs 10 nvidia.com/gpu; queue a quota is 8")},
    ),
    Case(
        "never is told before the limits that stop the work for now",
        [running("r0"), gated("huge").gpus(16)],
        teams=[MakeTeam("vision").max_running(1)],
        policy=MakePolicy().quota(gpus=8).max_running(1),
        waiting={"huge": (R.GLOBAL_QUOTA, NEVER + "needs 16 nvidia.com/gpu; cluster quota is 8")},
    ),
    Case(
        "never is told before a full queue's limit, however long the queue stays full",
        [running("r0"), gated("huge").gpus(16), gated("fine", at=1).gpus(1)],
        queues=[MakeQueue("a").max_running(1)],
        policy=MakePolicy().quota(gpus=8),
        waiting={
            "huge": (R.GLOBAL_QUOTA, NEVER + "needs 16 nvidia.com/gpu; cluster quota is 8"),
            "fine": (R.QUEUE_LIMIT, "queue a: 1/1 running"),
        },
    ),
    Case(
        "never is told before a paused queue, and before its workflow's limit",
        [running("r0", queue="b").workflow("sweep", 1), gated("huge").gpus(16).workflow("sweep", 1)],
        queues=[MakeQueue("a").paused(), MakeQueue("b")],
        policy=MakePolicy().quota(gpus=8),
        waiting={"huge": (R.GLOBAL_QUOTA, NEVER + "needs 16 nvidia.com/gpu; cluster quota is 8")},
    ),
    Case(
        "the first quota it exceeds in layer order is named: team before cluster",
        [gated("huge").gpus(16)],
        teams=[MakeTeam("vision").quota(gpus=4)],
        policy=MakePolicy().quota(gpus=8),
        waiting={"huge": (R.TEAM_QUOTA, NEVER + "needs 16 nvidia.com/gpu; team vision quota is 4")},
    ),
    Case(
        "a quota of 0 on a resource means work that asks for it can never run",
        [gated("gpu").gpus(1), gated("cpu", at=1).requests(cpu="1")],
        queues=[MakeQueue("a").quota(gpus=0)],
        released=["cpu"],
        waiting={"gpu": (R.QUEUE_QUOTA, NEVER + "needs 1 nvidia.com/gpu; queue a quota is 0")},
    ),
    Case(
        "memory is told in binary units",
        [gated("huge").requests(memory="64Gi")],
        teams=[MakeTeam("vision").quota(memory="16Gi")],
        waiting={"huge": (R.TEAM_QUOTA, NEVER + "needs 64Gi memory; team vision quota is 16Gi")},
    ),
    Case(
        "maxRunning 0 is a stop, not impossibility: the queue limit is told",
        [gated("p0").gpus(1)],
        queues=[MakeQueue("a").max_running(0)],
        waiting={"p0": (R.QUEUE_LIMIT, "queue a: 0/0 running")},
    ),
]


@pytest.mark.parametrize("case", IMPOSSIBLE, ids=lambda c: c.id)
def test_impossible(case: Case) -> None:
    check(case)


def test_impossible_workloads_are_counted_per_queue_for_an_alert() -> None:
    snap = snapshot(
        [
            gated("huge", queue="high").gpus(16),
            gated("huge-too", queue="high", at=1).gpus(9),
            gated("fine", queue="high", at=2).gpus(1),
            gated("paused-huge", queue="low").gpus(12),
            gated("paused-fine", queue="low", at=1).gpus(1),
            *(gated(f"w{i}", queue="high", at=3).group("g", 3).gpus(5) for i in range(2)),
        ],
        [MakeQueue("high").priority(10), MakeQueue("low").paused()],
        policy=MakePolicy().quota(gpus=8),
    )
    decision = dispatch(snap)
    waiting = decision.waiting
    assert [w.key for w in decision.release] == ["ml/fine"]
    assert dict(waiting.impossible()) == {"high": 3, "low": 1}
    assert {k: w.reason for k, w in waiting.items()} == {
        "ml/huge": R.GLOBAL_QUOTA,
        "ml/huge-too": R.GLOBAL_QUOTA,
        "ml/group:g": R.GLOBAL_QUOTA,
        "ml/paused-huge": R.GLOBAL_QUOTA,
        "ml/paused-fine": R.QUEUE_PAUSED,
    }
