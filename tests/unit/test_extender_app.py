"""The scheduler extender's app, built in process by its factory and called the way
kube-scheduler calls it: ExtenderArgs in, ExtenderFilterResult or HostPriorityList out."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from extender.nodes import with_usage
from extender.placement_metrics import PlacementMetrics
from extender.scheduling import scheduling_app
from policy.catalog import Catalog
from policy.placing import Node
from policy.quantities import EMPTY, Resources, parse_resources
from tests.builders import MakeNode, MakePod, MakePolicy, MakeQueue

AMD = "amd.com/gpu"
Client = TestClient[Any, Any]


@dataclass
class FixedNodes:
    """A node view held still: nodes by name, and GPUs in use per node."""

    known: Mapping[str, Node]
    used: Mapping[str, Resources] = field(default_factory=dict)
    synced: bool = True

    def node(self, name: str) -> Node | None:
        node = self.known.get(name)
        return with_usage(node, self.requested(name)) if node else None

    def requested(self, name: str) -> Resources:
        return self.used.get(name, EMPTY)


def raw_node(name: str, gpus: int, resource: str = "nvidia.com/gpu", **labels: str) -> dict[str, Any]:
    node = MakeNode(name).gpus(gpus, resource)
    for key, value in labels.items():
        node.label(key, value)
    return node.obj()


def view(
    *nodes: tuple[dict[str, Any], int], synced: bool = True, resource: str = "nvidia.com/gpu"
) -> FixedNodes:
    """Nodes, each with the GPUs its bound pods already use."""
    known = {n["metadata"]["name"]: Node.parse(n) for n, _ in nodes}
    used = {n["metadata"]["name"]: parse_resources({resource: u}, where="used") for n, u in nodes if u}
    return FixedNodes(known, used, synced)


POOLED = view(
    (raw_node("a100-1", 8, pool="a100"), 0),
    (raw_node("a100-2", 8, pool="a100"), 6),
    (raw_node("t4-1", 4, pool="t4"), 2),
)
CATALOG = Catalog.from_objects(queues=[
    MakeQueue("train").node_pool({"pool": "a100"}).obj(),
    MakeQueue("anywhere").obj(),
])


async def client_for(nodes: FixedNodes, catalog: Catalog = CATALOG, **kw: Any) -> Client:
    client: Client = TestClient(TestServer(scheduling_app(nodes, lambda: catalog, **kw)))
    await client.start_server()
    return client


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    c = await client_for(POOLED)
    yield c
    await c.close()


def args(pod: MakePod, names: list[str]) -> dict[str, Any]:
    return {"Pod": pod.obj(), "Nodes": None, "NodeNames": names}


async def call(client: Client, verb: str, body: Any, status: int = 200) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post(f"/{verb}", data=data, headers={"Content-Type": "application/json"})
    assert response.status == status, await response.text()
    return await response.json()


ALL = ["a100-1", "a100-2", "t4-1"]


# --- filter -------------------------------------------------------------------------------


async def test_filter_keeps_a_queues_pods_on_its_pool_and_says_why_the_others_fail(client: Client) -> None:
    result = await call(client, "filter", args(MakePod("ml", "p").queue("train").gpus(1), ALL))

    assert result["NodeNames"] == ["a100-1", "a100-2"]
    assert result["FailedAndUnresolvableNodes"] == {"t4-1": "not in the node pool of queue train (pool=a100)"}
    assert result["FailedNodes"] == {}
    assert "Error" not in result


async def test_filter_passes_every_node_for_a_queue_without_a_pool_or_a_pod_without_a_queue(
    client: Client,
) -> None:
    for pod in (MakePod("ml", "p").queue("anywhere").gpus(1), MakePod("ml", "q").gpus(1)):
        result = await call(client, "filter", args(pod, ALL))
        assert result["NodeNames"] == ALL
        assert result["FailedAndUnresolvableNodes"] == {}


async def test_filter_answers_only_about_the_candidates_it_was_sent(client: Client) -> None:
    result = await call(client, "filter", args(MakePod("ml", "p").queue("train").gpus(1), ["t4-1"]))

    assert result["NodeNames"] == []
    assert list(result["FailedAndUnresolvableNodes"]) == ["t4-1"]


async def test_a_node_the_view_does_not_know_yet_fails_a_pooled_pod_but_not_a_free_one(
    client: Client,
) -> None:
    candidates = ["a100-1", "new-node"]
    pooled = await call(client, "filter", args(MakePod("ml", "p").queue("train").gpus(1), candidates))
    free = await call(client, "filter", args(MakePod("ml", "q").gpus(1), candidates))

    assert pooled["NodeNames"] == ["a100-1"]
    assert pooled["FailedAndUnresolvableNodes"] == {
        "new-node": "node new-node is not known to the scheduler extender yet"
    }
    assert free["NodeNames"] == ["a100-1", "new-node"]


async def test_filter_of_whole_nodes_answers_whole_nodes() -> None:
    """Without nodeCacheCapable the scheduler sends Nodes and reads Nodes back; labels come
    from the nodes it sent."""
    nodes = [raw_node("x", 8, pool="a100"), raw_node("y", 8, pool="t4")]
    c = await client_for(view())
    try:
        body = {"Pod": MakePod("ml", "p").queue("train").gpus(1).obj(), "Nodes": {"items": nodes}}
        result = await call(c, "filter", body)
    finally:
        await c.close()

    assert result["Nodes"] == {"items": [nodes[0]]}
    assert "NodeNames" not in result
    assert result["FailedAndUnresolvableNodes"] == {"y": "not in the node pool of queue train (pool=a100)"}


# --- prioritize ---------------------------------------------------------------------------


async def test_prioritize_packs_a_pod_onto_the_node_it_leaves_with_the_fewest_free_gpus() -> None:
    c = await client_for(view((raw_node("two-free", 8), 6), (raw_node("eight-free", 8), 0)))
    try:
        result = await call(c, "prioritize", args(MakePod("ml", "p").gpus(2), ["eight-free", "two-free"]))
    finally:
        await c.close()

    assert result == [{"Host": "eight-free", "Score": 4}, {"Host": "two-free", "Score": 10}]


async def test_prioritize_gives_a_node_that_cannot_fit_the_pod_and_an_unknown_node_nothing(
    client: Client,
) -> None:
    result = await call(client, "prioritize", args(MakePod("ml", "p").gpus(4), ["a100-2", "a100-1", "gone"]))

    assert result == [
        {"Host": "a100-2", "Score": 0},  # 2 of 8 free
        {"Host": "a100-1", "Score": 6},  # 8 free, 4 left after
        {"Host": "gone", "Score": 0},
    ]


async def test_prioritize_packs_the_gpu_resources_the_policy_manages() -> None:
    nodes = view((raw_node("m1", 4, AMD), 3), (raw_node("m2", 4, AMD), 0), resource=AMD)
    amd = Catalog.from_objects(policy=MakePolicy().set_spec(managedResources=["nvidia.com/gpu", AMD]).obj())
    pod = MakePod("ml", "p").gpus(1, AMD)
    managed, unmanaged = await client_for(nodes, amd), await client_for(nodes)
    try:
        packed = await call(managed, "prioritize", args(pod, ["m1", "m2"]))
        ignored = await call(unmanaged, "prioritize", args(pod, ["m1", "m2"]))
    finally:
        await managed.close()
        await unmanaged.close()

    assert packed == [{"Host": "m1", "Score": 10}, {"Host": "m2", "Score": 7}]
    # Not a GPU resource by the default Policy: both nodes look alike (GPU-less) to packing.
    assert ignored == [{"Host": "m1", "Score": 10}, {"Host": "m2", "Score": 10}]


# --- when the extender cannot judge -------------------------------------------------------

MALFORMED = [
    ("a body that is not JSON", b"{not json", "the body is not JSON"),
    ("a list instead of ExtenderArgs", [1, 2], "expected an ExtenderArgs object, got list"),
    ("no Pod", {"NodeNames": ["a100-1"]}, "Pod is missing or not an object"),
    ("NodeNames that are not names", {"Pod": MakePod("ml", "p").obj(), "NodeNames": "a100-1"},
     "NodeNames must be a list of node names"),
    ("no candidates at all", {"Pod": MakePod("ml", "p").obj(), "NodeNames": None, "Nodes": None},
     "neither NodeNames nor Nodes was sent"),
    ("Nodes without names", {"Pod": MakePod("ml", "p").obj(), "Nodes": {"items": [{"metadata": {}}]}},
     "Nodes must be a NodeList whose items are named Nodes"),
    ("a pod whose requests are not quantities",
     {"Pod": MakePod("ml", "p").request("nvidia.com/gpu", "lots").obj(), "NodeNames": ["a100-1"]},
     "Pod cannot be read: Pod ml/p: containers[0].resources.requests.nvidia.com/gpu"),
]


@pytest.mark.parametrize(("body", "says"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
async def test_a_malformed_request_is_answered_with_an_error_never_a_fault(
    client: Client, body: Any, says: str
) -> None:
    filtered = await call(client, "filter", body)  # 200: the scheduler reads Error
    scored = await call(client, "prioritize", body, status=400)

    assert filtered.keys() == {"Error"} and filtered["Error"].startswith("malformed ExtenderArgs: ")
    assert says in filtered["Error"]
    assert scored == filtered


async def test_a_body_over_the_bound_is_refused_before_it_is_read() -> None:
    c = await client_for(POOLED, max_body_bytes=4096)
    big = args(MakePod("ml", "p").annotation("padding", "x" * 5000), ALL)
    try:
        filtered = await call(c, "filter", big)
        scored = await call(c, "prioritize", big, status=413)
    finally:
        await c.close()

    assert filtered == {"Error": "the request body is larger than 4096 bytes"}
    assert scored == filtered


async def test_before_its_cache_has_synced_the_extender_steps_aside() -> None:
    c = await client_for(view((raw_node("a100-1", 8, pool="a100"), 0), synced=False))
    pod = args(MakePod("ml", "p").queue("train").gpus(1), ["a100-1"])
    try:
        filtered = await call(c, "filter", pod)
        scored = await call(c, "prioritize", pod, status=503)
    finally:
        await c.close()

    assert "has not listed nodes, pods, Queues and the Policy yet" in filtered["Error"]
    assert scored == filtered


async def test_a_queue_that_cannot_be_read_is_an_error_not_a_free_pass() -> None:
    broken = Catalog.from_objects(queues=[MakeQueue("train").set_spec(nodePool="a100").obj()])
    c = await client_for(POOLED, broken)
    try:
        filtered = await call(c, "filter", args(MakePod("ml", "p").queue("train").gpus(1), ALL))
    finally:
        await c.close()

    assert filtered["Error"].startswith("queue train cannot be read, so its node pool is unknown: ")
    assert "NodeNames" not in filtered


async def test_other_paths_and_methods_are_routing_answers(client: Client) -> None:
    assert (await client.post("/bind", data=b"{}")).status == 404
    assert (await client.get("/filter")).status == 405


class BrokenNodes(FixedNodes):
    def node(self, name: str) -> Node | None:
        raise RuntimeError("a bug")


async def test_a_fault_of_the_extender_is_a_500_with_an_error_for_either_verb() -> None:
    c = await client_for(BrokenNodes({}))
    try:
        for verb in ("filter", "prioritize"):
            answer = await call(c, verb, args(MakePod("ml", "p").gpus(1), ["a100-1"]), status=500)
            assert answer == {"Error": "internal error; the scheduler extender's log has the details"}
    finally:
        await c.close()


def sample(metrics: PlacementMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_every_call_is_counted_by_outcome_so_a_silently_skipped_extender_shows() -> None:
    metrics = PlacementMetrics()
    c = await client_for(POOLED, metrics=metrics)
    try:
        await call(c, "filter", args(MakePod("ml", "p").queue("train").gpus(1), ALL))
        await call(c, "prioritize", args(MakePod("ml", "p").gpus(1), ALL))
        await call(c, "filter", b"{")
        await call(c, "prioritize", b"{", status=400)
        await c.post("/bind", data=b"{}")
    finally:
        await c.close()

    requests = "sluicegate_extender_requests_total"
    assert sample(metrics, requests, verb="filter", outcome="answered") == 1
    assert sample(metrics, requests, verb="prioritize", outcome="answered") == 1
    assert sample(metrics, requests, verb="filter", outcome="malformed") == 1
    assert sample(metrics, requests, verb="prioritize", outcome="malformed") == 1
    assert sample(metrics, "sluicegate_extender_duration_seconds_count", verb="filter") == 2
    assert sample(metrics, "sluicegate_extender_nodes_left_out_total") == 1  # t4-1
