"""Time the scheduler extender's answers for clusters of 100, 1,000 and 5,000 GPU nodes.

    .venv/bin/python -m benchmarks.extender [--sizes 100,1000,5000] [--rounds 30]

The node view is built the way the process builds it (every node's pods fed through the
pod-change listener), half of the nodes in the queue's pool. Reported per size, as medians:
``filter`` and ``prioritize`` as kube-scheduler calls them (``NodeNames`` of every node, a pod
whose queue has a pool), each both as the decision alone (``Placement``, the view read and
the policy called, no HTTP) and as a whole HTTP round trip to the app on loopback (aiohttp
client and server in one process, no TLS), which adds JSON and the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from extender.messages import Args, read_args
from extender.nodes import Usage, bound_pod, node_shape
from extender.scheduling import Placement, scheduling_app
from kube.reflecting import Change
from policy.catalog import Catalog
from policy.placing import Node
from policy.quantities import Resources

POOL = "pool"


class View:
    """``ClusterNodes`` without the reflectors: converted nodes and the same usage totals."""

    def __init__(self, nodes: dict[str, Node], usage: Usage) -> None:
        self.nodes, self.usage, self.synced = nodes, usage, True

    def node(self, name: str) -> Node | None:
        shape = self.nodes.get(name)
        return Node(shape.name, shape.labels, shape.allocatable, self.usage.of(name)) if shape else None

    def requested(self, name: str) -> Resources:
        return self.usage.of(name)


def constant(catalog: Catalog) -> Callable[[], Catalog]:
    return lambda: catalog


def cluster(size: int) -> tuple[View, Catalog, bytes]:
    nodes, usage = {}, Usage()
    for i in range(size):
        name = f"gpu-{i:05d}"
        nodes[name] = node_shape({
            "metadata": {"name": name, "labels": {POOL: "a" if i % 2 else "b", "zone": f"z{i % 3}"}},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}},
        })
        for j in range(i % 4):  # 0 to 3 pods of 2 GPUs each
            pod = bound_pod({"spec": {"nodeName": name, "containers": [
                {"name": "m", "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"cpu": "4"}}}]},
                "status": {"phase": "Running"}})
            usage.changed(Change("ADDED", f"{name}-{j}", f"ml/{name}-{j}", None, pod))
    catalog = Catalog.from_objects(queues=[{"metadata": {"name": "train"},
                                            "spec": {"nodePool": {"matchLabels": {POOL: "a"}}}}])
    asked = {"metadata": {"namespace": "ml", "name": "p", "labels": {"sluicegate.dev/queue": "train"}},
             "spec": {"containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    body = json.dumps({"Pod": asked, "Nodes": None, "NodeNames": list(nodes)}).encode()
    return View(nodes, usage), catalog, body


def median_ms(run: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def decisions(placement: Placement, decoded: Args, rounds: int) -> dict[str, float]:
    return {
        "filter": median_ms(lambda: placement.filter(decoded), rounds),
        "prioritize": median_ms(lambda: placement.prioritize(decoded), rounds),
    }


async def round_trips(view: View, catalog: Catalog, body: bytes, rounds: int) -> dict[str, float]:
    out = {}
    async with TestClient(TestServer(scheduling_app(view, lambda: catalog))) as client:
        for verb in ("filter", "prioritize"):
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                response = await client.post(f"/{verb}", data=body)
                await response.read()
                times.append(time.perf_counter() - started)
            out[verb] = statistics.median(times) * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.extender")
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print(f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; medians of {args.rounds} rounds, ms")
    print(f"{'nodes':>6} {'filter':>8} {'prioritize':>11} {'filter HTTP':>12} {'prioritize HTTP':>16}")
    for size in (int(s) for s in args.sizes.split(",")):
        view, catalog, body = cluster(size)
        decide = decisions(Placement(view, constant(catalog)), read_args(body), args.rounds)
        http = asyncio.run(round_trips(view, catalog, body, args.rounds))
        print(f"{size:>6} {decide['filter']:>8.2f} {decide['prioritize']:>11.2f} "
              f"{http['filter']:>12.2f} {http['prioritize']:>16.2f}")


if __name__ == "__main__":
    main()
