"""Dispatch decisions, one rule per case: what is released, and what every other pod is told."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from policy.dispatching import Decision, Turns, dispatch
from policy.keys import Reason
from tests.builders import T0, MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot

R = Reason


def gated(name: str, queue: str = "a", team: str = "vision", at: float = 0) -> MakePod:
    return MakePod("ml", name).queue(queue).team(team).gated().created(at)


def running(name: str, queue: str = "a", team: str = "vision") -> MakePod:
    return MakePod("ml", name).queue(queue).team(team).running("node-1")


@dataclass
class Case:
    id: str
    pods: list[MakePod]
    queues: list[MakeQueue] = field(default_factory=lambda: [MakeQueue("a")])
    teams: list[MakeTeam] = field(default_factory=list)
    policy: MakePolicy | None = None
    released: list[str] = field(default_factory=list)
    waiting: dict[str, tuple[Reason, str]] = field(default_factory=dict)
    now: float = T0 + 60


def decide(case: Case, turns: Turns | None = None) -> Decision:
    snap = snapshot(case.pods, case.queues, case.teams, case.policy, now=case.now)
    return dispatch(snap, turns)


def check(case: Case) -> Decision:
    decision = decide(case)
    assert [w.key for w in decision.release] == [f"ml/{k}" for k in case.released]
    told = {key: (wait.reason, wait.message) for key, wait in decision.waiting.items()}
    assert told == {f"ml/{k}": v for k, v in case.waiting.items()}
    return decision


LIMITS = [
    Case("a lone gated pod in an open queue is released", [gated("p0")], released=["p0"]),
    Case(
        "running and finished pods are not released again, and finished ones hold no slot",
        [running("r0"), MakePod("ml", "f0").queue("a").finished(), gated("p0")],
        queues=[MakeQueue("a").max_running(2)],
        released=["p0"],
    ),
    Case(
        "a queue without maxRunning releases everything that waits",
        [gated(f"p{i}", at=i) for i in range(4)],
        released=["p0", "p1", "p2", "p3"],
    ),
    Case(
        "maxRunning 0 releases nothing",
        [gated("p0")],
        queues=[MakeQueue("a").max_running(0)],
        waiting={"p0": (R.QUEUE_LIMIT, "queue a: 0/0 running")},
    ),
    Case(
        "maxRunning counts running workloads and this decision's own releases",
        [running("r0"), gated("p0", at=1), gated("p1", at=2), gated("p2", at=3)],
        queues=[MakeQueue("a").max_running(2)],
        released=["p0"],
        waiting={
            "p1": (R.QUEUE_LIMIT, "queue a: 2/2 running"),
            "p2": (R.QUEUE_LIMIT, "queue a: 2/2 running"),
        },
    ),
    Case(
        "a queue quota caps the summed requests of running work",
        [running("r0").gpus(6), gated("p0").gpus(4)],
        queues=[MakeQueue("a").quota(gpus=8)],
        waiting={"p0": (R.QUEUE_QUOTA, "queue a: 6/8 nvidia.com/gpu in use, needs 4")},
    ),
    Case(
        "a quota caps only the resources it names",
        [running("r0").gpus(8), gated("p0").gpus(4)],
        queues=[MakeQueue("a").quota(cpu="4")],
        released=["p0"],
    ),
    Case(
        "quota in milli-units: a fractional CPU request is counted exactly",
        [
            running("r0").requests(cpu="1500m"),
            gated("p0").requests(cpu="600m"),
            gated("p1", at=1).requests(cpu="500m"),
        ],
        queues=[MakeQueue("a").quota(cpu="2")],
        released=["p1"],
        waiting={"p0": (R.QUEUE_QUOTA, "queue a: 2/2 cpu in use, needs 600m")},
    ),
    Case(
        "quota messages give memory in binary units, as people write it",
        [running("r0").requests(memory="10Gi"), gated("p0").requests(memory="8Gi")],
        queues=[MakeQueue("a").quota(memory="16Gi")],
        waiting={"p0": (R.QUEUE_QUOTA, "queue a: 10Gi/16Gi memory in use, needs 8Gi")},
    ),
    Case(
        "a paused queue releases nothing and keeps its running work",
        [running("r0"), gated("p0")],
        queues=[MakeQueue("a").paused()],
        waiting={"p0": (R.QUEUE_PAUSED, "queue a is paused")},
    ),
    Case(
        "a queue that does not exist reads as paused and says so",
        [gated("p0", queue="gone")],
        waiting={"p0": (R.QUEUE_PAUSED, 'queue "gone" does not exist')},
    ),
    Case(
        "a pod that names no queue waits",
        [MakePod("ml", "p0").gated()],
        waiting={"p0": (R.QUEUE_PAUSED, "the pod names no queue")},
    ),
    Case(
        "a workflow launches no more than its workflow-max-running",
        [
            running("r0").workflow("sweep", 2),
            running("r1").workflow("sweep", 2),
            gated("p0").workflow("sweep", 2),
            gated("p1", at=1),
        ],
        released=["p1"],
        waiting={"p0": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 2/2 running")},
    ),
    Case(
        "a workflow's limit counts this decision's releases",
        [gated(f"p{i}", at=i).workflow("sweep", 2) for i in range(3)],
        released=["p0", "p1"],
        waiting={"p2": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 2/2 running")},
    ),
    Case(
        "one workflow, one limit: a pod without the annotation is bound by its workflow's",
        [
            running("r0").workflow("sweep", 2),
            gated("p0").workflow("sweep"),
            gated("p1", at=1).workflow("sweep"),
        ],
        released=["p0"],
        waiting={"p1": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 2/2 running")},
    ),
    Case(
        "one workflow, one limit: the smallest any of its pending or running pods carries",
        [
            running("r0").workflow("sweep", 5),
            gated("p0").workflow("sweep", 2),
            gated("p1", at=1).workflow("sweep", 5),
        ],
        released=["p0"],
        waiting={"p1": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 2/2 running")},
    ),
    Case(
        "a finished pod's workflow limit binds no more",
        [
            MakePod("ml", "done").queue("a").team("vision").workflow("sweep", 1).finished(),
            running("r0").workflow("sweep", 3),
            gated("p0").workflow("sweep", 3),
        ],
        released=["p0"],
    ),
    Case(
        "a team's maxRunning counts its work in every queue",
        [running("r0", queue="b"), gated("p0")],
        queues=[MakeQueue("a"), MakeQueue("b")],
        teams=[MakeTeam("vision").max_running(1)],
        waiting={"p0": (R.TEAM_LIMIT, "team vision: 1/1 running")},
    ),
    Case(
        "a team quota caps the team's summed requests",
        [running("r0", queue="b").gpus(30), gated("p0").gpus(4), gated("p1", at=1).gpus(2)],
        queues=[MakeQueue("a"), MakeQueue("b")],
        teams=[MakeTeam("vision").quota(gpus=32)],
        released=["p1"],
        waiting={"p0": (R.TEAM_QUOTA, "team vision: 32/32 nvidia.com/gpu in use, needs 4")},
    ),
    Case(
        "a team without a Team object has no team limit",
        [running("r0", team="nlp").gpus(64), gated("p0", team="nlp").gpus(8)],
        teams=[MakeTeam("vision").max_running(0)],
        released=["p0"],
    ),
    Case(
        "the cluster's maxRunning caps every queue and team together",
        [running("r0", queue="b", team="nlp"), gated("p0"), gated("p1", at=1)],
        queues=[MakeQueue("a"), MakeQueue("b")],
        policy=MakePolicy().max_running(2),
        released=["p0"],
        waiting={"p1": (R.GLOBAL_LIMIT, "cluster: 2/2 running")},
    ),
    Case(
        "the cluster's quota caps the summed requests of all running work",
        [running("r0", team="nlp").gpus(60), gated("p0").gpus(8)],
        policy=MakePolicy().quota(gpus=64),
        waiting={"p0": (R.GLOBAL_QUOTA, "cluster: 60/64 nvidia.com/gpu in use, needs 8")},
    ),
]

LOWERED = [
    Case(
        "a limit lowered below what runs keeps the running work and releases nothing more",
        [running("r0"), running("r1"), running("r2"), gated("p0")],
        queues=[MakeQueue("a").max_running(1)],
        waiting={"p0": (R.QUEUE_LIMIT, "queue a: 3/1 running")},
    ),
    Case(
        "a quota lowered below what runs says by how much it is over",
        [running("r0").gpus(10), gated("p0").gpus(1), gated("p1", at=1).requests(cpu="1")],
        queues=[MakeQueue("a").quota(gpus=8)],
        released=["p1"],
        waiting={"p0": (R.QUEUE_QUOTA, "queue a: 10/8 nvidia.com/gpu in use, needs 1")},
    ),
]

PRECEDENCE = [
    Case(
        "workflow comes before queue: both full, the workflow is named",
        [running("r0").workflow("sweep", 1), gated("p0").workflow("sweep", 1)],
        queues=[MakeQueue("a").max_running(1)],
        waiting={"p0": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 1/1 running")},
    ),
    Case(
        "queue comes before team",
        [running("r0"), gated("p0")],
        queues=[MakeQueue("a").max_running(1)],
        teams=[MakeTeam("vision").max_running(1)],
        waiting={"p0": (R.QUEUE_LIMIT, "queue a: 1/1 running")},
    ),
    Case(
        "a paused queue is named before its full limit",
        [running("r0"), gated("p0")],
        queues=[MakeQueue("a").max_running(1).paused()],
        waiting={"p0": (R.QUEUE_PAUSED, "queue a is paused")},
    ),
    Case(
        "queue limit comes before queue quota",
        [running("r0").gpus(8), gated("p0").gpus(1)],
        queues=[MakeQueue("a").max_running(1).quota(gpus=8)],
        waiting={"p0": (R.QUEUE_LIMIT, "queue a: 1/1 running")},
    ),
    Case(
        "team limit comes before team quota",
        [running("r0").gpus(8), gated("p0").gpus(1)],
        teams=[MakeTeam("vision").max_running(1).quota(gpus=8)],
        waiting={"p0": (R.TEAM_LIMIT, "team vision: 1/1 running")},
    ),
    Case(
        "team comes before the cluster",
        [running("r0").gpus(8), gated("p0").gpus(1)],
        teams=[MakeTeam("vision").quota(gpus=8)],
        policy=MakePolicy().max_running(1).quota(gpus=8),
        waiting={"p0": (R.TEAM_QUOTA, "team vision: 8/8 nvidia.com/gpu in use, needs 1")},
    ),
    Case(
        "cluster count comes before cluster quota",
        [running("r0").gpus(8), gated("p0").gpus(1)],
        policy=MakePolicy().max_running(1).quota(gpus=8),
        waiting={"p0": (R.GLOBAL_LIMIT, "cluster: 1/1 running")},
    ),
    Case(
        "an incomplete group is named before any limit",
        [gated("p0").group("g", 3)],
        queues=[MakeQueue("a").paused()],
        waiting={"group:g": (R.GROUP_INCOMPLETE, "group g: 1/3 pods")},
    ),
]

GROUPS = [
    Case(
        "a pod group waits until all its pods exist",
        [gated("w0").group("g", 4), gated("w1").group("g", 4)],
        waiting={"group:g": (R.GROUP_INCOMPLETE, "group g: 2/4 pods")},
    ),
    Case(
        "a complete group is released whole, as one workload",
        [gated(f"w{i}").group("g", 3) for i in range(3)],
        queues=[MakeQueue("a").max_running(1)],
        released=["group:g"],
    ),
    Case(
        "a group's requests are summed against quota: all or none",
        [running("r0").gpus(4), *(gated(f"w{i}").group("g", 3).gpus(2) for i in range(3))],
        queues=[MakeQueue("a").quota(gpus=8)],
        waiting={"group:g": (R.QUEUE_QUOTA, "queue a: 4/8 nvidia.com/gpu in use, needs 6")},
    ),
    Case(
        "finished pods of a running group free their GPUs, but the group keeps its slot until all end",
        [
            MakePod("ml", "w0").queue("a").team("vision").group("g", 4).gpus(2).running("node-1"),
            *(MakePod("ml", f"w{i}").queue("a").team("vision").group("g", 4).gpus(2).finished()
              for i in range(1, 4)),
            gated("p0").gpus(6),
            gated("p1", at=1),
        ],
        queues=[MakeQueue("a").quota(gpus=8).max_running(2)],
        released=["p0"],
        waiting={"p1": (R.QUEUE_LIMIT, "queue a: 2/2 running")},
    ),
    Case(
        "a group whose pods name different queues is not released, and says so",
        [gated("w0", queue="a").group("g", 2), gated("w1", queue="b", at=1).group("g", 2)],
        queues=[MakeQueue("a"), MakeQueue("b")],
        waiting={"group:g": (R.GROUP_INCOMPLETE, "group g: its pods name different queues: a, b")},
    ),
    Case(
        "a group whose pods name different workflows is not released, and says so",
        [gated("w0").group("g", 2).workflow("sweep"), gated("w1", at=1).group("g", 2)],
        waiting={
            "group:g": (R.GROUP_INCOMPLETE, "group g: its pods name different workflows: (none), sweep")
        },
    ),
    Case(
        "a disagreeing group does not block a StrictFIFO queue",
        [gated("w0").group("g", 2).workflow("x"), gated("w1").group("g", 2).workflow("y"), gated("p", at=1)],
        queues=[MakeQueue("a").strict()],
        released=["p"],
        waiting={"group:g": (R.GROUP_INCOMPLETE, "group g: its pods name different workflows: x, y")},
    ),
    Case(
        "an incomplete group does not block a StrictFIFO queue",
        [gated("w0").group("g", 2), gated("p1", at=1)],
        queues=[MakeQueue("a").strict()],
        released=["p1"],
        waiting={"group:g": (R.GROUP_INCOMPLETE, "group g: 1/2 pods")},
    ),
]


@pytest.mark.parametrize("case", LIMITS + LOWERED + PRECEDENCE + GROUPS, ids=lambda c: c.id)
def test_limits(case: Case) -> None:
    check(case)
