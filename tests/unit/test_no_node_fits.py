"""Work that no node could hold, even empty: it is never released, holds nothing, blocks
nothing, and says why with ``NoNodeFits`` and numbers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from policy.dispatching import Decision, dispatch
from policy.inventory import Inventory
from policy.keys import Reason
from policy.placing import Node
from policy.quantities import parse
from tests.builders import MakeNode, MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot
from tests.unit.test_dispatching import gated, running

R = Reason
GPU = "nvidia.com/gpu"
EIGHTS = [MakeNode("gpu-1").gpus(8), MakeNode("gpu-2").gpus(8)]
POOLED = [MakeNode("a-1").gpus(8).label("pool", "a"), MakeNode("b-1").gpus(16).label("pool", "b")]
TOO_BIG = "needs 16 nvidia.com/gpu on one node; the largest node of the cluster has 8"


@dataclass
class Case:
    id: str
    pods: list[MakePod]
    nodes: Sequence[MakeNode | Node]
    queues: list[MakeQueue] = field(default_factory=lambda: [MakeQueue("a")])
    teams: list[MakeTeam] = field(default_factory=list)
    policy: MakePolicy | None = None
    released: list[str] = field(default_factory=list)
    waiting: dict[str, tuple[Reason, str]] = field(default_factory=dict)


def check(case: Case) -> Decision:
    snap = snapshot(case.pods, case.queues, case.teams, case.policy, nodes=case.nodes)
    decision = dispatch(snap)
    assert [w.key for w in decision.release] == [f"ml/{k}" for k in case.released]
    told = {key: (wait.reason, wait.message) for key, wait in decision.waiting.items()}
    assert told == {f"ml/{k}": v for k, v in case.waiting.items()}
    return decision


def busy(node: MakeNode, **requested: int) -> Node:
    """``node`` with pods bound to it that ask for ``requested`` (GPUs by default)."""
    shape = node.model()
    used = {GPU if name == "gpus" else name: parse(amount) for name, amount in requested.items()}
    return Node(shape.name, shape.labels, shape.allocatable, used, shape.taints)


def _affinity(
    expression: dict[str, object] | None, name_field: dict[str, object] | None = None
) -> dict[str, object]:
    term: dict[str, object] = {}
    if expression:
        term["matchExpressions"] = [expression]
    if name_field:
        term["matchFields"] = [name_field]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


CASES = [
    Case(
        "a 16-GPU pod on 8-GPU nodes waits with NoNodeFits; work behind it goes",
        [gated("huge", at=0).gpus(16), gated("small", at=1).gpus(1)],
        EIGHTS,
        released=["small"],
        waiting={"huge": (R.NO_NODE_FITS, TOO_BIG)},
    ),
    Case(
        "a node that could hold it lets it go",
        [gated("huge").gpus(16)],
        [*EIGHTS, MakeNode("gpu-16").gpus(16)],
        released=["huge"],
    ),
    Case(
        "a cordoned node still counts: the pod is released and waits for Kubernetes",
        [gated("huge").gpus(16)],
        [*EIGHTS, MakeNode("gpu-16").gpus(16).cordoned()],
        released=["huge"],
    ),
    Case(
        "a node busy with other work still counts",
        [gated("huge").gpus(16)],
        [busy(MakeNode("gpu-16").gpus(16), gpus=16)],
        released=["huge"],
    ),
    Case(
        "only the queue's node pool counts, and the message names it",
        [gated("huge").gpus(16)],
        POOLED,
        queues=[MakeQueue("a").node_pool({"pool": "a"})],
        waiting={"huge": (R.NO_NODE_FITS, "needs 16 nvidia.com/gpu on one node; "
                                          "the largest node of queue a's node pool (pool=a) has 8")},
    ),
    Case(
        "a pool with no node at all says so",
        [gated("p").gpus(1)],
        POOLED,
        queues=[MakeQueue("a").node_pool({"pool": "c"})],
        waiting={"p": (R.NO_NODE_FITS, "no node is in queue a's node pool (pool=c)")},
    ),
    Case(
        "the pod's node selector counts",
        [gated("p").gpus(1).spec(nodeSelector={"pool": "z"})],
        POOLED,
        waiting={"p": (R.NO_NODE_FITS, "no node of the cluster matches pool=z")},
    ),
    Case(
        "the pod's required node affinity counts, by label and by node name",
        [
            gated("by-label", at=0).gpus(16).spec(affinity=_affinity({"key": "pool", "operator": "In",
                                                                      "values": ["a"]})),
            gated("by-name", at=1).gpus(16).spec(affinity=_affinity(None, {"key": "metadata.name",
                                                                          "operator": "In",
                                                                          "values": ["b-1"]})),
        ],
        POOLED,
        released=["by-name"],
        waiting={"by-label": (R.NO_NODE_FITS, "needs 16 nvidia.com/gpu on one node; "
                                              "the largest node of the cluster has 8")},
    ),
    Case(
        "a taint the pod does not tolerate keeps it off; a toleration lets it go",
        [
            gated("plain", at=0).gpus(1),
            gated("tolerant", at=1).gpus(1).spec(tolerations=[{"key": "gpu", "operator": "Exists"}]),
        ],
        [MakeNode("t-1").gpus(8).taint("gpu", "only", "NoSchedule")],
        released=["tolerant"],
        waiting={"plain": (R.NO_NODE_FITS, "every node of the cluster it may use has a taint "
                                           "it does not tolerate (gpu=only:NoSchedule)")},
    ),
    Case(
        "a PreferNoSchedule taint keeps nothing off",
        [gated("p").gpus(1)],
        [MakeNode("t-1").gpus(8).taint("gpu", "", "PreferNoSchedule")],
        released=["p"],
    ),
    Case(
        "each resource fits some node, but no node has all of them",
        [gated("p").gpus(8).requests(cpu="64")],
        [MakeNode("gpu").gpus(8), MakeNode("cpu").allocatable("cpu", "96")],
        waiting={"p": (R.NO_NODE_FITS, "needs 8 nvidia.com/gpu, 64 cpu on one node; "
                                       "no node of the cluster has all of them")},
    ),
    Case(
        "it holds nothing: a higher-priority pod no node fits lets lower work have the GPUs",
        [running("r0", queue="low").gpus(8), gated("huge", queue="high").gpus(16),
         gated("small", queue="low").gpus(8)],
        EIGHTS,
        queues=[MakeQueue("high").priority(10), MakeQueue("low").priority(1)],
        policy=MakePolicy().quota(gpus=16),
        released=["small"],
        waiting={"huge": (R.NO_NODE_FITS, TOO_BIG)},
    ),
    Case(
        "it blocks nothing: a StrictFIFO queue passes over it",
        [gated("huge", at=0).gpus(16), gated("next", at=1).gpus(1)],
        EIGHTS,
        queues=[MakeQueue("a").strict()],
        released=["next"],
        waiting={"huge": (R.NO_NODE_FITS, TOO_BIG)},
    ),
    Case(
        "a group waits whole when one of its pods fits no node, naming that pod",
        [gated("w0").group("g", 2).gpus(8), gated("w1").group("g", 2).gpus(16)],
        EIGHTS,
        waiting={"group:g": (R.NO_NODE_FITS, "pod w1: " + TOO_BIG)},
    ),
    Case(
        "a quota the pod exceeds by itself is told first: it would not run on a bigger node either",
        [gated("huge").gpus(16)],
        EIGHTS,
        queues=[MakeQueue("a").quota(gpus=8)],
        waiting={"huge": (R.QUEUE_QUOTA, "can never run under the current limits: "
                                         "needs 16 nvidia.com/gpu; queue a quota is 8")},
    ),
    Case(
        "NoNodeFits is told before the limits that stop work for now",
        [running("r0"), gated("huge").gpus(16)],
        EIGHTS,
        queues=[MakeQueue("a").max_running(1)],
        waiting={"huge": (R.NO_NODE_FITS, TOO_BIG)},
    ),
    Case(
        "with no node known at all, nothing is held back for want of one",
        [gated("huge").gpus(16)],
        [],
        released=["huge"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_no_node_fits(case: Case) -> None:
    check(case)


def test_it_counts_as_work_that_can_never_run() -> None:
    decision = check(CASES[0])
    assert decision.waiting.impossible() == {"a": 1}
    # What the controller compares with the pod's condition: the reason alone tells it, and
    # ``never`` (True only for a message beginning "can never run") stays False.
    assert list(decision.waiting.answers()) == [("ml/huge", R.NO_NODE_FITS, False)]


def test_its_team_uses_nothing() -> None:
    decision = check(CASES[0])
    assert decision.usage.team("vision").requests.get(GPU, 0) == 1000  # small's one GPU alone


def test_an_answer_is_worked_out_once_per_shape() -> None:
    nodes = Inventory(n.model() for n in EIGHTS)
    pods = [gated(f"p{i}").gpus(16).model() for i in range(50)]
    answers = {nodes.pod_refusal(p, MakeQueue("a").model()) for p in pods}
    assert answers == {TOO_BIG}
    assert len(nodes._answers) == 1
