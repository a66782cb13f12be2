"""The visibility API's answer at 10,000 pending pods: building a board, and a read.

    .venv/bin/python -m benchmarks.visibility [--pending 10000] [--reads 200]

The cluster: ``--pending`` gated pods and 1,000 running ones, one GPU to eight each, over 100
queues of three priorities (a fifth StrictFIFO, a few deep) and 10 teams, one namespace each
(so a namespace holds about a tenth of the waiting pods). Measured in one process, as the
controller's replica does it (``controller.visibility``):

- **build**: one board from the cache's pods (``build_board``: membership, workloads, the
  dispatch decision, the board), what a read costs when the last board is older than
  ``--visibility-seconds``; it runs in a worker thread, off the event loop. Median of 5.
- **read**: ``GET .../namespaces/<ns>/pendingpods`` of one namespace, and ``GET
  .../queues/<deepest queue>/pendingpods``, through the aiohttp application over loopback
  HTTP with a bearer token a stand-in API server accepts at once (so neither TLS nor the
  SubjectAccessReview, which the process remembers for 10 s per user, is in the figure; nor
  the API server's own proxy hop). The board is fresh, as it is for every read but one per
  period. p50 and p95 of ``--reads`` reads.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import time
from collections.abc import Iterator
from types import MappingProxyType

from aiohttp.test_utils import TestClient, TestServer

from controller.managed import ManagedPod
from controller.visibility import Viewer, build_app, build_board
from kube.authenticating import Identity
from kube.authorizing import Access
from kube.resources import PENDING_PODS
from policy import keys
from policy.catalog import Catalog
from policy.model import Ordering, Policy, Queue, Team
from policy.pods import Phase, Pod

GPU = keys.GPU_RESOURCE
QUEUES = 100
TEAMS = 10
RUNNING = 1_000
NOW = 1_700_000_000.0


def pods(pending: int, seed: int = 7) -> list[ManagedPod]:
    rnd = random.Random(seed)
    weights = [1 / (i + 1) for i in range(QUEUES)]  # a few deep queues, a long shallow tail
    out = []
    for i in range(RUNNING + pending):
        q = i % QUEUES if i < RUNNING else rnd.choices(range(QUEUES), weights=weights)[0]
        team = f"team-{q % TEAMS}"
        gpus = rnd.choice((1, 1, 1, 2, 2, 4, 8))
        running = i < RUNNING
        out.append(ManagedPod(Pod(
            namespace=f"ml-{team}", name=f"p{i}", uid=f"u{i}",
            labels={keys.QUEUE_LABEL: f"queue-{q:03d}", keys.TEAM_LABEL: team},
            requests=MappingProxyType({GPU: gpus * 1000}), priority=rnd.choice((0, 0, 0, 100)),
            created=NOW - rnd.randrange(86_400), phase=Phase.RUNNING if running else Phase.PENDING,
            gated=not running, node_name="n1" if running else "")))
    return out


def catalog() -> Catalog:
    queues = [Queue(name=f"queue-{i:03d}", priority=(10, 5, 5, 0, 0)[i % 5], max_running=RUNNING // QUEUES,
                    quota=MappingProxyType({GPU: 64_000}),
                    ordering=Ordering.STRICT_FIFO if i % 5 == 4 else Ordering.BEST_EFFORT_FIFO)
              for i in range(QUEUES)]
    teams = [Team(f"team-{t}", quota=MappingProxyType({GPU: 400_000})) for t in range(TEAMS)]
    return Catalog(queues={q.name: q for q in queues}, teams={t.name: t for t in teams},
                   policy=Policy(max_running=RUNNING + 150, quota=MappingProxyType({GPU: 3_600_000})))


class Source:
    """The pod reflector, as the viewer reads it."""

    def __init__(self, managed: list[ManagedPod]) -> None:
        self.managed = {m.uid: m for m in managed}

    @property
    def resource_version(self) -> str:
        return "1"

    def items(self) -> Iterator[tuple[str, ManagedPod]]:
        return iter(self.managed.items())

    def values(self) -> Iterator[ManagedPod]:
        return iter(self.managed.values())

    def get(self, uid: str) -> ManagedPod | None:
        return self.managed.get(uid)

    def version(self, uid: str) -> str:
        return "1"


class Accepting:
    """A stand-in API server that knows one token and allows everything, at once."""

    async def identity(self, token: str) -> Identity | None:
        return Identity("bench") if token == "bench" else None

    async def allowed(self, identity: Identity, access: Access) -> bool:
        return True


def _team_of(namespace: str) -> str:
    return namespace.removeprefix("ml-")


def measure_build(managed: list[ManagedPod], runs: int = 5) -> tuple[float, int]:
    teams = {f"ml-team-{t}": f"team-{t}" for t in range(TEAMS)}
    times, shown = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        made, _ = build_board(managed, catalog(), teams, NOW, None, None, 1)
        times.append(time.perf_counter() - started)
        shown = sum(len(v) for v in made.by_namespace.values())
    return statistics.median(times), shown


async def measure_reads(managed: list[ManagedPod], reads: int) -> dict[str, tuple[float, float, int]]:
    viewer = Viewer(Source(managed), catalog, _team_of, seconds=3600.0, wall=lambda: NOW)
    app = build_app(viewer, Accepting(), front_proxy=None)
    sizes: dict[str, int] = {}
    for m in managed:
        if m.pod.gated:
            sizes[m.pod.queue] = sizes.get(m.pod.queue, 0) + 1
    deepest = max(sizes, key=lambda q: sizes[q])
    paths = {
        "namespace ml-team-3": PENDING_PODS.path(namespace="ml-team-3"),
        f"queue {deepest}": f"/apis/{PENDING_PODS.group}/{PENDING_PODS.version}/queues/{deepest}/pendingpods",
    }
    out = {}
    async with TestClient(TestServer(app)) as client:
        headers = {"Authorization": "Bearer bench"}
        first = await client.get(paths["namespace ml-team-3"], headers=headers)  # builds the board
        assert first.status == 200, await first.text()
        for name, path in paths.items():
            times, items = [], 0
            for _ in range(reads):
                started = time.perf_counter()
                answer = await client.get(path, headers=headers)
                body = await answer.json()
                times.append(time.perf_counter() - started)
                assert answer.status == 200, body
                items = len(body["items"])
            times.sort()
            out[name] = (statistics.median(times), times[int(len(times) * 0.95) - 1], items)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.visibility", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=10_000, help="gated pods (default: %(default)s)")
    parser.add_argument("--reads", type=int, default=200, help="reads per path (default: %(default)s)")
    args = parser.parse_args()
    managed = pods(args.pending)
    load = os.getloadavg()[0]
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load average {load:.1f}; {args.pending} pending pods, {RUNNING} running")
    built, shown = measure_build(managed)
    print(f"build a board: {built * 1000:.0f} ms (median of 5; {shown} pods on it)")
    for name, (p50, p95, items) in asyncio.run(measure_reads(managed, args.reads)).items():
        print(f"read {name}: p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms ({items} items)")


if __name__ == "__main__":
    main()
