"""Helpers for the scheduler-extender e2e tests: the extender as its own process
(``python -m extender``) in make up's process table, calls to it over TLS as
kube-scheduler makes them, and fake GPU nodes that one test owns."""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any, Final

from controlplane.deploying import LocalSluicegate
from controlplane.nodes import gpu_node
from controlplane.services import EXTENDER_PORT, Launch, Service, server_arguments

# Labels that tie nodes to one test (pods select them; queues' node pools name them).
RUN_LABEL: Final = "e2e.sluicegate.dev/run"
POOL_LABEL: Final = "e2e.sluicegate.dev/pool"
RUNS_FOR: Final = "pod-complete.stage.kwok.x-k8s.io/delay"


def extender_arguments(launch: Launch) -> list[str]:
    return [*server_arguments(launch, EXTENDER_PORT), "--log-level", "DEBUG"]


EXTENDER: Final = Service(
    name="extender",
    module="extender",
    # The controller's account: the extender runs in the controller's process, with its RBAC.
    account="sluicegate-controller",
    ports=(EXTENDER_PORT, "metrics"),
    arguments=extender_arguments,
)
"""The extender alone, as one more row of make up's process table."""


def call(sluicegate: LocalSluicegate, verb: str, args: dict[str, Any]) -> Any:
    """POST ExtenderArgs the way kube-scheduler does, trusting only the extender's CA."""
    context = ssl.create_default_context(cafile=str(sluicegate.tls.ca_cert))
    url = f"https://127.0.0.1:{sluicegate.port(EXTENDER.name, EXTENDER_PORT)}/{verb}"
    request = urllib.request.Request(url, data=json.dumps(args).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        return json.load(answer)


def fake_node(name: str, gpus: int, run: str, pool: str) -> dict[str, Any]:
    """A kwok node of ``gpus`` GPUs that belongs to one test run, in one pool."""
    node = gpu_node(0, gpus, {RUN_LABEL: run, POOL_LABEL: pool})
    node["metadata"]["name"] = name
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return node


def gpu_pod(name: str, gpus: int, run: str, *, queue: str = "", node: str = "", cpu: str = "1",
            runs_for: str = "1h") -> dict[str, Any]:
    """A pod asking ``gpus`` GPUs on the run's nodes; bound to ``node`` directly when given (so
    kube-scheduler never sees it), else left to the scheduler; no scheduling gate."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{
            "name": "train",
            "image": "registry.invalid/train:1",
            "resources": {"requests": {"cpu": cpu}, "limits": {"nvidia.com/gpu": str(gpus)}},
        }],
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["nodeSelector"] = {RUN_LABEL: run}
    labels = {"sluicegate.dev/queue": queue} if queue else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": {RUNS_FOR: runs_for}},
        "spec": spec,
    }


def schedulable(node: dict[str, Any]) -> bool:
    """Ready, and without the taints a node carries until the node controller sees it Ready."""
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return ready and not node.get("spec", {}).get("taints")


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return None
