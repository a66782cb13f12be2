"""Admission reads the DRA claims a pod names from the webhook's cache (``webhook.claims``):
no API request per claim; the first claim the cache lacks (one created a moment before its pod)
is read once, and a pod naming more than ``MOST_CLAIMS`` is read no further."""

from __future__ import annotations

from typing import Any

from kube.connecting import ApiError
from policy.devices import CLAIM, MOST_CLAIMS, TEMPLATE, pod_devices
from policy.model import Policy
from policy.reviews import POD, Operation, Request
from tests.builders import MakePod
from webhook.claims import ClaimReader

SPEC = {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
MAPPED = Policy(device_classes={"gpu.nvidia.com": "nvidia.com/gpu"})


class Watched:
    """The cache's claims and templates, by (kind, name), of namespace ``vision``."""

    def __init__(self, held: dict[tuple[str, str], Any]) -> None:
        self.held = held

    def spec(self, kind: str, name: str, namespace: str) -> Any:
        return self.held.get((kind, name)) if namespace == "vision" else None


class Server:
    """The API server: it has ``objects`` by path, and counts the GETs."""

    def __init__(self, objects: dict[str, Any]) -> None:
        self.objects = objects
        self.gets: list[str] = []

    async def get(self, path: str, query: Any = None) -> Any:
        self.gets.append(path)
        if path not in self.objects:
            raise ApiError(404, "NotFound", path)
        return self.objects[path]


def creating(pod: MakePod) -> Request:
    return Request(Operation.CREATE, POD, "alice", frozenset(), pod.obj())


def reader(
    held: dict[tuple[str, str], Any], objects: dict[str, Any] | None = None
) -> tuple[ClaimReader, Server]:
    server = Server(objects or {})
    return ClaimReader(server, Watched(held)), server  # type: ignore[arg-type]


async def test_claims_the_cache_holds_cost_no_request() -> None:
    pod = MakePod.submitted(namespace="vision")
    for i in range(MOST_CLAIMS):
        pod.claim(f"g{i}", claim=f"c{i}")
    read, server = reader({(CLAIM, f"c{i}"): SPEC for i in range(MOST_CLAIMS)})

    found = await read.claims(creating(pod), "vision", MAPPED)

    assert len(found) == MOST_CLAIMS and all(spec == SPEC for spec in found.values())
    assert server.gets == []


async def test_only_the_first_claim_the_cache_lacks_is_read_from_the_api_server() -> None:
    pod = MakePod.submitted(namespace="vision").claim("a", claim="new").claim("b", template="t").claim(
        "c", claim="also-new")
    path = "/apis/resource.k8s.io/v1/namespaces/vision/resourceclaims/new"
    read, server = reader({(TEMPLATE, "t"): SPEC}, {path: {"spec": SPEC}})

    found = await read.claims(creating(pod), "vision", MAPPED)

    assert found == {(CLAIM, "new"): SPEC, (TEMPLATE, "t"): SPEC, (CLAIM, "also-new"): None}
    assert server.gets == [path]


async def test_a_pod_naming_too_many_claims_is_read_no_further() -> None:
    pod = MakePod.submitted(namespace="vision")
    for i in range(MOST_CLAIMS + 1):
        pod.claim(f"g{i}", claim=f"c{i}")
    read, server = reader({})

    assert await read.claims(creating(pod), "vision", MAPPED) == {}
    assert server.gets == []


def test_admission_refuses_a_pod_naming_too_many_claims_with_a_way_out() -> None:
    pod = MakePod.submitted(namespace="vision")
    for i in range(MOST_CLAIMS + 1):
        pod.claim(f"g{i}", claim=f"c{i}")
    refusal = pod_devices(pod.obj()["spec"], {}, MAPPED.device_classes)
    assert refusal == (f"spec.resourceClaims names 33 claims; a pod may name at most {MOST_CLAIMS}: ask for "
                       "several devices in one claim (count: N) instead")
