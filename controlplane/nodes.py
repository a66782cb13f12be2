"""The fake GPU nodes of the local control plane, as Node objects that kwok brings to life."""

from __future__ import annotations

from typing import Any

# Shaped like a common 8-GPU training server, so bin-packing and node pools behave realistically.
NODE_CPU = "96"
NODE_MEMORY = "1Ti"
NODE_PODS = "110"
NODE_PREFIX = "gpu-node-"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def gpu_node(index: int, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One fake node with ``gpus`` nvidia.com/gpu; kwok fills in its conditions and lease."""
    capacity = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS, "nvidia.com/gpu": str(gpus)}
    name = f"{NODE_PREFIX}{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **(labels or {}),
            },
        },
        "spec": {},
        "status": {"allocatable": dict(capacity), "capacity": dict(capacity)},
    }


def gpu_nodes(count: int, gpus: int) -> list[dict[str, Any]]:
    return [gpu_node(i, gpus) for i in range(count)]
