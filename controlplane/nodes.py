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


# Dynamic Resource Allocation: each fake node also publishes its GPUs as devices of a fake
# driver, one pool per node, and one DeviceClass selects them, so kube-scheduler allocates a
# ResourceClaim's devices from them (no driver process runs: allocation is the scheduler's
# alone, and kwok reports the pod running once it is bound). A Policy counts them as
# nvidia.com/gpu with `deviceClasses: {gpu.nvidia.com: nvidia.com/gpu}`.
DRA_DRIVER = "gpu.nvidia.com"
DEVICE_CLASS = "gpu.nvidia.com"


def device_class() -> dict[str, Any]:
    """The DeviceClass that selects every device of the fake driver."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]},
    }


def resource_slice(node: str, gpus: int) -> dict[str, Any]:
    """The node's GPUs as ``gpus`` devices of the fake driver, in a pool named after the node."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRA_DRIVER}"},
        "spec": {
            "driver": DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(gpus)],
        },
    }
