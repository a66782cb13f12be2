"""A pod's requests as Kubernetes v1.36 counts them (``PodRequests``), pod-level resources included.

The cases restate the rules of upstream's helper and of the API server's defaulting, as facts:
pod-level requests (cpu, memory, huge pages) replace the containers' total of the same
resource; a pod-level request of anything else counts for nothing; a pod-level limit without
a request stands in for it (cpu and memory: only when no container asks for the resource);
overhead comes on top.
"""

from __future__ import annotations

import pytest

from policy.dispatching import dispatch
from policy.keys import Reason
from tests.builders import MakePod, MakeQueue, snapshot

Mi = 2**20 * 1000  # milli-units of one MiB
Gi = 2**30 * 1000
HP2 = "hugepages-2Mi"
HP1 = "hugepages-1Gi"


def pod() -> MakePod:
    return MakePod("ml", "p")


def asks(**requests: str) -> dict[str, dict[str, str]]:
    return {"requests": dict(requests)}


REQUESTS = [
    ("nothing asked, nothing counted", pod(), {}),
    ("a pod-level memory request alone counts",
     pod().pod_resources(requests={"memory": "2Mi"}), {"memory": 2 * Mi}),
    ("a pod-level memory request and a container's cpu request both count",
     pod().requests(cpu="2m").pod_resources(requests={"memory": "2Mi"}), {"memory": 2 * Mi, "cpu": 2}),
    ("a pod-level request of another resource counts for nothing; the container's stands",
     pod().request("ephemeral-storage", "3Mi").pod_resources(requests={"ephemeral-storage": "2Mi"}),
     {"ephemeral-storage": 3 * Mi}),
    ("a pod-level request of another resource counts for nothing, even alone",
     pod().requests(memory="3Mi").pod_resources(requests={"ephemeral-storage": "2Mi"}), {"memory": 3 * Mi}),
    ("pod-level requests replace the containers' total of the same resources",
     pod().requests(cpu="2m", memory="3Mi").pod_resources(requests={"cpu": "8m", "memory": "6Mi"}),
     {"cpu": 8, "memory": 6 * Mi}),
    ("without pod-level requests, a sidecar and a later init container count as the scheduler counts",
     pod().requests(cpu="2m", memory="3Mi")
     .init_container("proxy", restartPolicy="Always", resources=asks(cpu="4m", memory="5Mi"))
     .init_container("setup", resources=asks(cpu="8m", memory="6Mi")),
     {"cpu": 12, "memory": 11 * Mi}),
    ("pod-level requests replace that total too, init and sidecar containers included",
     pod().requests(cpu="2m", memory="3Mi")
     .init_container("proxy", restartPolicy="Always", resources=asks(cpu="4m", memory="5Mi"))
     .init_container("setup", resources=asks(cpu="8m", memory="6Mi"))
     .pod_resources(requests={"cpu": "18m", "memory": "15Mi"}),
     {"cpu": 18, "memory": 15 * Mi}),
    ("pod-level huge pages count, with memory",
     pod().pod_resources(requests={"memory": "10Mi", HP2: "2Mi"}, limits={HP2: "2Mi"}),
     {"memory": 10 * Mi, HP2: 2 * Mi}),
    ("pod-level huge pages of several sizes count, each",
     pod().pod_resources(requests={"cpu": "1", HP2: "2Mi", HP1: "1Gi"}, limits={HP2: "2Mi", HP1: "1Gi"}),
     {"cpu": 1000, HP2: 2 * Mi, HP1: Gi}),
    ("pod-level huge pages replace the containers' of that size",
     pod().request(HP2, "6Mi").limit(HP2, "6Mi")
     .pod_resources(requests={"cpu": "1", HP2: "10Mi"}, limits={HP2: "10Mi"}),
     {"cpu": 1000, HP2: 10 * Mi}),
    ("sizes and resources the pod level leaves out come from the containers",
     pod().requests(memory="4Mi").request(HP1, "1Gi").limit(HP1, "1Gi")
     .pod_resources(requests={"cpu": "1", HP2: "10Mi"}, limits={HP2: "10Mi"}),
     {"cpu": 1000, "memory": 4 * Mi, HP2: 10 * Mi, HP1: Gi}),
    ("a pod-level memory limit without a request is the request when no container asks for memory",
     pod().requests(cpu="1").pod_resources(limits={"memory": "1Gi"}), {"cpu": 1000, "memory": Gi}),
    ("a pod-level cpu limit without a request leaves the containers' cpu request",
     pod().requests(cpu="1").pod_resources(limits={"cpu": "4"}), {"cpu": 1000}),
    ("a pod-level huge pages limit without a request is the request, whatever the containers ask",
     pod().request(HP2, "2Mi").limit(HP2, "2Mi").pod_resources(limits={HP2: "4Mi"}), {HP2: 4 * Mi}),
    ("a GPU at pod level counts for nothing: extended resources are asked for by containers",
     pod().gpus(1).pod_resources(requests={"nvidia.com/gpu": "8"}), {"nvidia.com/gpu": 1000}),
    ("overhead comes on top of pod-level requests",
     pod().pod_resources(requests={"cpu": "2"}).spec(overhead={"cpu": "250m"}), {"cpu": 2250}),
]  # fmt: skip


@pytest.mark.parametrize(("made", "expected"), [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
def test_pod_requests(made: MakePod, expected: dict[str, int]) -> None:
    assert dict(made.model().requests) == expected


def test_moving_requests_to_the_pod_level_does_not_evade_a_cpu_quota() -> None:
    pods = [
        MakePod("ml", "r0").queue("a").pod_resources(requests={"cpu": "2"}).running("n1"),
        MakePod("ml", "p0").queue("a").pod_resources(requests={"cpu": "3"}).gated(),
    ]
    wait = dispatch(snapshot(pods, [MakeQueue("a").quota(cpu="4")])).waiting["ml/p0"]
    assert (wait.reason, wait.message) == (Reason.QUEUE_QUOTA, "queue a: 2/4 cpu in use, needs 3")
