"""Scheduler-extender decisions: node pools kept by filter, GPUs packed by prioritize."""

from __future__ import annotations

import pytest

from policy.fields import InvalidObject
from policy.placing import Node, filter_nodes, prioritize, score
from policy.pods import Pod
from tests.builders import MakeNode, MakePod, MakeQueue

AMD = "amd.com/gpu"


def node(name: str, gpus: int = 0, used: int = 0, **labels: str) -> Node:
    bound = [MakePod("ml", f"{name}-used").gpus(used).running(name).model()] if used else []
    raw = MakeNode(name).gpus(gpus) if gpus else MakeNode(name)
    for key, value in labels.items():
        raw.label(key, value)
    return Node.parse(raw.obj(), bound)


def pod(gpus: int = 0, queue: str = "a") -> Pod:
    p = MakePod("ml", "p").gated()
    if queue:
        p.queue(queue)
    return (p.gpus(gpus) if gpus else p.requests(cpu="1")).model()


NODES = [node("a100-1", 8, pool="a100"), node("a100-2", 8, pool="a100", zone="b"), node("t4-1", 4, pool="t4")]

FILTERS = [
    (
        "a queue without a node pool may use every node",
        MakeQueue("a"),
        pod(1),
        ["a100-1", "a100-2", "t4-1"],
        {},
    ),
    (
        "a queue's pool keeps its work on matching nodes and says why the others fail",
        MakeQueue("a").node_pool({"pool": "a100"}),
        pod(1),
        ["a100-1", "a100-2"],
        {"t4-1": "not in the node pool of queue a (pool=a100)"},
    ),
    (
        "match expressions count too",
        MakeQueue("a").node_pool(matchExpressions=[{"key": "zone", "operator": "In", "values": ["b"]}]),
        pod(1),
        ["a100-2"],
        {
            "a100-1": "not in the node pool of queue a (zone in (b))",
            "t4-1": "not in the node pool of queue a (zone in (b))",
        },
    ),
    (
        "a pool that no node matches fails every node",
        MakeQueue("a").node_pool(
            {"pool": "h100"}, matchExpressions=[{"key": "spot", "operator": "DoesNotExist"}]
        ),
        pod(1),
        [],
        {n.name: "not in the node pool of queue a (pool=h100,!spot)" for n in NODES},
    ),
    (
        "a pod that names no queue is not Sluicegate's to place",
        MakeQueue("a").node_pool({"pool": "a100"}),
        pod(1, queue=""),
        ["a100-1", "a100-2", "t4-1"],
        {},
    ),
]


@pytest.mark.parametrize(
    ("queue", "the_pod", "kept", "failed"), [f[1:] for f in FILTERS], ids=[f[0] for f in FILTERS]
)
def test_filter(queue: MakeQueue, the_pod: Pod, kept: list[str], failed: dict[str, str]) -> None:
    result = filter_nodes(the_pod, queue.model(), NODES)
    assert list(result.names) == kept
    assert dict(result.failed) == failed


def test_a_queue_that_does_not_exist_leaves_every_node() -> None:
    assert filter_nodes(pod(1, queue="gone"), None, NODES).names == ("a100-1", "a100-2", "t4-1")


SCORES = [
    ("the node the pod fills exactly scores highest", pod(2), node("n", 8, used=6), 10),
    ("each GPU left free costs a point", pod(1), node("n", 8, used=4), 7),
    ("an empty 8-GPU node taking one GPU is a poor fit", pod(1), node("n", 8), 3),
    ("a node that cannot fit the pod scores 0", pod(4), node("n", 8, used=6), 0),
    ("a node without GPUs cannot fit a GPU pod", pod(1), node("n"), 0),
    ("a fitting node never scores below 1", pod(1), node("n", 16), 1),
    ("a pod asking no GPU prefers a node without GPUs", pod(0), node("n"), 10),
    ("a pod asking no GPU next prefers a GPU node with every GPU busy", pod(0), node("n", 8, used=8), 9),
    ("a pod asking no GPU avoids nodes with free GPUs", pod(0), node("n", 8, used=2), 3),
]


@pytest.mark.parametrize(
    ("the_pod", "the_node", "expected"), [s[1:] for s in SCORES], ids=[s[0] for s in SCORES]
)
def test_score(the_pod: Pod, the_node: Node, expected: int) -> None:
    assert score(the_pod, the_node) == expected


def test_prioritize_prefers_the_node_left_with_fewest_free_gpus() -> None:
    nodes = [
        node("empty", 8),
        node("half", 8, used=4),
        node("nearly-full", 8, used=6),
        node("full", 8, used=8),
    ]
    assert prioritize(pod(2), nodes) == {"empty": 4, "half": 8, "nearly-full": 10, "full": 0}


def test_other_managed_gpu_resources_count_when_named() -> None:
    amd_pod = MakePod("ml", "p").queue("a").gpus(1, AMD).model()
    amd_node = Node.parse(MakeNode("m").gpus(2, AMD).obj())
    assert score(amd_pod, amd_node, ("nvidia.com/gpu", AMD)) == 9
    assert score(amd_pod, amd_node) == 10  # not a managed GPU resource: placed like CPU work


def test_a_node_counts_only_the_live_pods_bound_to_it() -> None:
    pods = [
        MakePod("ml", "here").gpus(2).running("n1").model(),
        MakePod("ml", "done").gpus(4).running("n1").finished().model(),
        MakePod("ml", "elsewhere").gpus(4).running("n2").model(),
        MakePod("ml", "unplaced").gpus(4).model(),
        MakePod("ml", "sidecar").gpus(1).init_container("init", resources={"requests": {"cpu": "2"}})
        .running("n1").model(),
    ]  # fmt: skip
    parsed = Node.parse(MakeNode("n1").gpus(8).obj(), pods)
    assert parsed.free("nvidia.com/gpu") == 5000
    assert parsed.requested["cpu"] == 2000
    assert parsed.labels["kubernetes.io/hostname"] == "n1"


def test_a_node_with_a_bad_quantity_is_refused_with_its_name() -> None:
    with pytest.raises(InvalidObject, match=r"Node n1: status\.allocatable\.cpu"):
        Node.parse(MakeNode("n1").allocatable("cpu", "lots").obj())
