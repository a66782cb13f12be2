"""The gate controller's cycle at 10k and 100k pending pods, and how long it blocks its event loop.

    .venv/bin/python -m benchmarks.cycle [--sizes 10000,100000] [--seconds 20] [--profile 100000]

The controller runs as ``python -m controller`` runs it (``GateController.run``: the coalescing
queue, the cycles, the gate removals, the conditions and events, the gauges) on an asyncio
loop, with two stand-ins for the cluster: the managed pods come from a store in memory that
plays the pod reflector (a released pod shows ungated a moment after its patch, and the
controller hears of each change as it would from the watch), and the API server answers every
write at once. The work is the dispatch benchmark's cluster (``benchmarks.dispatch``) as pods:
100 queues, 10 teams, 1,000 running pods and ``size`` pending ones.

Phases, on one loop: **start** (the first cycles over the whole backlog, with every pending
pod's condition to write); **steady** (``--seconds`` of churn: every 50 ms, 5 running pods
finish and 5 new pods arrive, so each cycle releases a few); **burst** (every queue's
``maxRunning`` is raised by 2 at once, then churn goes on until the burst is out).

Meanwhile a probe task asks to wake every 5 ms and records how late it woke (wall time: it
includes the machine not running the process at all) and how much CPU the loop's thread used
since its last wake (the loop held); ``gc.callbacks`` record the garbage collector's pauses.
Reported per phase: cycles run and their wall time (median and longest, from the controller's
own histogram of cycle time), the 99th percentile and longest of both probe figures, and the
longest collection, against an idle loop in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import itertools
import math
import os
import platform
import pstats
import random
import statistics
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from benchmarks.dispatch import NOW, QUEUES, RUNNING, TEAMS
from controller.managed import Dispatched, ManagedPod
from controller.metrics import ControllerMetrics
from controller.serving import gate_controller
from controller.settings import Settings
from kube.reflecting import Change
from policy import keys
from policy.catalog import Catalog
from policy.model import Ordering, Policy, Queue, Team
from policy.pods import Phase as PodPhase
from policy.pods import Pod

GPU = keys.GPU_RESOURCE
PROBE_SECONDS = 0.005
CHURN_SECONDS = 0.05
CHURN_PODS = 5
PATCH_SECONDS = 0.002  # how long a gate removal takes to show in the watch


def catalog(raised: int = 0) -> Catalog:
    """The dispatch benchmark's queues, teams and Policy; ``raised``: more room in every queue."""
    per_queue = RUNNING // QUEUES
    queues = {
        f"queue-{i:03d}": Queue(
            name=f"queue-{i:03d}",
            priority=(10, 5, 5, 0, 0)[i % 5],
            max_running=per_queue + raised,
            quota=MappingProxyType({GPU: 64_000}),
            ordering=Ordering.STRICT_FIFO if i % 5 == 4 else Ordering.BEST_EFFORT_FIFO,
        )
        for i in range(QUEUES)
    }
    teams = {f"team-{t}": Team(f"team-{t}", quota=MappingProxyType({GPU: 400_000})) for t in range(TEAMS)}
    policy = Policy(max_running=RUNNING + 150, quota=MappingProxyType({GPU: 3_600_000}))
    return Catalog(queues=queues, teams=teams, policy=policy)


def make_pod(rnd: random.Random, n: int, queue: int, gated: bool, created: float) -> ManagedPod:
    team = f"team-{queue % TEAMS}"
    gpus = rnd.choice((1, 1, 1, 2, 2, 4))
    labels = {keys.QUEUE_LABEL: f"queue-{queue:03d}", keys.TEAM_LABEL: team}
    notes = {keys.SUBMITTER_ANNOTATION: '{"user":"alice","groups":[]}'}
    pod = Pod(
        namespace=f"ml-{team}", name=f"p{n:06d}", uid=f"uid-{n}", labels=MappingProxyType(labels),
        annotations=MappingProxyType(notes), requests=MappingProxyType({GPU: gpus * 1000}),
        priority=rnd.choice((0, 0, 0, 0, 100)), created=created,
        phase=PodPhase.PENDING if gated else PodPhase.RUNNING,
        gated=gated, node_name="" if gated else "node-1",
    )
    return ManagedPod(pod, (keys.GATE,) if gated else ())


@dataclass
class Store:
    """Plays the pod reflector: the managed pods by uid, and the listener it tells of changes."""

    pods: dict[str, ManagedPod] = field(default_factory=dict)
    listener: Any = None
    resource_version: str = "1"

    def items(self) -> Iterator[tuple[str, ManagedPod]]:
        return ((uid, p) for uid, p in self.pods.items())

    def values(self) -> Iterator[ManagedPod]:
        return (p for p in self.pods.values())

    def get(self, uid: str) -> ManagedPod | None:
        return self.pods.get(uid)

    def version(self, uid: str) -> str:
        return "1"

    def put(self, new: ManagedPod) -> None:
        old = self.pods.get(new.uid)
        self.pods[new.uid] = new
        self.listener(Change("MODIFIED" if old is not None else "ADDED", new.uid, new.key, old, new))

    def remove(self, uid: str) -> None:
        old = self.pods.pop(uid)
        self.listener(Change("DELETED", uid, old.key, old, None))


class Api:
    """Answers every write at the loop's next turn, and shows it in the store as the watch
    would: a condition at once, a gate removal ``PATCH_SECONDS`` later."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.by_name: dict[tuple[str, str], str] = {}
        self.patches = 0
        self.writes = 0

    async def get(self, path: str, query: Any = None) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    async def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                      content_type: str = "application/json", timeout: float = 0) -> dict[str, Any]:
        await asyncio.sleep(0)  # a real request always waits for its answer, letting others run
        parts = path.split("/")
        if method == "PATCH" and len(parts) == 7 and parts[3] == "namespaces" and parts[5] == "pods":
            self.patches += 1
            uid = self.by_name.get((parts[4], parts[6]))
            if uid is not None:
                asyncio.get_running_loop().call_later(PATCH_SECONDS, self._ungated, uid)
            return {}
        self.writes += 1
        if method == "PATCH" and len(parts) == 8 and parts[7] == "status":  # the watch shows it
            uid = self.by_name.get((parts[4], parts[6]))
            found = self.store.pods.get(uid) if uid is not None else None
            if found is not None:
                c = body["status"]["conditions"][0]
                self.store.put(replace(found, condition=Dispatched(c["status"], c["reason"], c["message"])))
        return dict(body) if isinstance(body, Mapping) else {}

    def _ungated(self, uid: str) -> None:
        found = self.store.pods.get(uid)
        if found is not None and found.pod.gated:
            pod = replace(found.pod, gated=False, phase=PodPhase.PENDING,
                          annotations=MappingProxyType({**found.pod.annotations,
                                                        keys.DISPATCHED_AT_ANNOTATION: "now"}))
            self.store.put(replace(found, pod=pod, gates=()))


class Leader:
    leading = True
    identity = "benchmark"


@dataclass
class Collections:
    """The garbage collector's pauses (``gc.callbacks``), on whichever thread they happen."""

    pauses: list[float] = field(default_factory=list)
    _started: float = 0.0

    def __call__(self, phase: str, info: Mapping[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)

    def take(self) -> list[float]:
        out, self.pauses = self.pauses, []
        return out


@dataclass
class Probe:
    """Wakes every ``PROBE_SECONDS`` and records how late (wall time), and how much CPU the
    loop's thread used since its last wake: the first is what a request waiting on the loop
    sees, including the machine not running the process at all; the second is the loop held."""

    late: list[float] = field(default_factory=list)
    held: list[float] = field(default_factory=list)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + PROBE_SECONDS
            cpu = time.thread_time()
            await asyncio.sleep(PROBE_SECONDS)
            self.late.append(loop.time() - due)
            self.held.append(time.thread_time() - cpu)

    def take(self) -> tuple[list[float], list[float]]:
        out = self.late, self.held
        self.late, self.held = [], []
        return out

class World:
    """The controller over ``size`` pending pods and ``RUNNING`` running ones, and the churn."""

    def __init__(self, size: int, settings: Settings) -> None:
        self.rnd = random.Random(7)
        self.store = Store()
        self.api = Api(self.store)
        self.catalog = catalog()
        self.metrics = ControllerMetrics()
        self.controller = gate_controller(settings, self.api, self.store, lambda: self.catalog,  # type: ignore[arg-type]
                                         Leader(), self.metrics,
                                         shown=lambda resource, name: None)  # no status round runs here
        self.store.listener = self.controller.pod_changed
        self.count = itertools.count()
        weights = [1 / (i + 1) for i in range(QUEUES)]  # a few deep queues, a long shallow tail
        for i in range(RUNNING):
            self._add(self.rnd, i % QUEUES, gated=False)
        for q in self.rnd.choices(range(QUEUES), weights=weights, k=size):
            self._add(self.rnd, q, gated=True)
        self.weights = weights

    def _add(self, rnd: random.Random, queue: int, gated: bool, created: float | None = None) -> ManagedPod:
        n = next(self.count)
        at = created if created is not None else NOW - rnd.randrange(86_400)
        managed = make_pod(rnd, n, queue, gated, at)
        self.api.by_name[(managed.pod.namespace, managed.pod.name)] = managed.uid
        self.store.put(managed)  # as the reflector's list or watch adds it
        return managed

    def churn(self, now: float) -> None:
        """A few running pods finish and as many new ones arrive."""
        running = [uid for uid, p in itertools.islice(self.store.pods.items(), 0, 4 * RUNNING)
                   if not p.pod.gated]
        for uid in self.rnd.sample(running, min(CHURN_PODS, len(running))):
            self.store.remove(uid)
        for _ in range(CHURN_PODS):
            q = self.rnd.choices(range(QUEUES), weights=self.weights)[0]
            self._add(self.rnd, q, gated=True, created=now)


class Timings:
    """Stands in for the controller's cycle histogram: keeps every observation, and passes it on."""

    def __init__(self, histogram: Any) -> None:
        self.histogram = histogram
        self.seconds: list[float] = []

    def observe(self, seconds: float) -> None:
        self.seconds.append(seconds)
        self.histogram.observe(seconds)

    def take(self) -> list[float]:
        out, self.seconds = self.seconds, []
        return out


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else math.nan


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    cycles: list[float]
    probed: tuple[list[float], list[float]]  # lateness, loop CPU between wakes
    collections: list[float]  # the garbage collector's pauses (wall time)

    def row(self) -> str:
        ms = 1e3
        late, held = self.probed
        median = statistics.median(self.cycles) * ms if self.cycles else math.nan
        longest = max(self.cycles, default=math.nan) * ms
        return (f"{self.name:<24} {len(self.cycles):>6} {median:>9.1f} {longest:>9.1f} {len(late):>7} "
                f"{_p99(late) * ms:>8.1f} {max(late, default=math.nan) * ms:>8.1f} "
                f"{_p99(held) * ms:>8.1f} {max(held, default=math.nan) * ms:>8.1f} "
                f"{max(self.collections, default=math.nan) * ms:>7.1f}")


HEADER = (f"{'phase':<24} {'cycles':>6} {'cycle p50':>9} {'cycle max':>9} {'probes':>7} "
          f"{'late p99':>8} {'late max':>8} {'held p99':>8} {'held max':>8} {'gc max':>7}   (ms)")


async def _churn(world: World, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        world.churn(time.time())
        await asyncio.sleep(CHURN_SECONDS)


async def _quiet(world: World, most: float) -> None:
    """Until the writes the controller queued are out (or ``most`` seconds)."""
    end = time.monotonic() + most
    controller = world.controller
    while time.monotonic() < end and (len(controller.explainer) or len(controller.releaser)):
        await asyncio.sleep(0.05)


async def measure(size: int, seconds: float) -> tuple[list[Phase], str]:
    gc.collect()  # the previous size's world (in reference cycles), before any freeze keeps it
    settings = Settings(status_seconds=3600.0)
    world = World(size, settings)
    timings = Timings(world.metrics.cycle)
    world.metrics.cycle = timings  # type: ignore[assignment]
    gc.collect()
    probe = Probe()
    probing = asyncio.create_task(probe.run())
    collections = Collections()
    gc.callbacks.append(collections)
    phases = []

    await asyncio.sleep(1.0)
    phases.append(Phase("idle loop", [], probe.take(), collections.take()))

    started = time.monotonic()
    whole: list[float] = []
    while time.monotonic() - started < seconds / 2 or len(whole) < 3:  # as before: a cycle at once
        world.churn(time.time())
        t = time.perf_counter()
        world.controller.cycle()
        whole.append(time.perf_counter() - t)
        await asyncio.sleep(min(whole[-1], 0.5))
    timings.take()
    phases.append(Phase("whole cycles (before)", whole, probe.take(), collections.take()))
    await _quiet(world, 60.0)
    probe.take()
    collections.take()

    running = asyncio.create_task(world.controller.run())
    await _churn(world, seconds)
    phases.append(Phase("paced: steady", timings.take(), probe.take(), collections.take()))

    world.catalog = catalog(raised=2)
    world.controller.queue.kick()
    await _churn(world, seconds / 2)
    phases.append(Phase("paced: burst (+2/queue)", timings.take(), probe.take(), collections.take()))

    running.cancel()
    probing.cancel()
    await asyncio.gather(running, probing, return_exceptions=True)
    gc.callbacks.remove(collections)
    await world.controller.stop()
    gc.collect()  # what a collection would free anyway, then what only the freezes kept
    freezes = world.controller.freezer.freezes
    gc.unfreeze()
    stuck = gc.collect()
    return phases, (f"{freezes} freezes; unreachable objects they had kept from the collector: {stuck} "
                    f"(of {len(gc.get_objects())} tracked)")


def profile(size: int) -> None:
    async def cycles() -> None:
        world = World(size, Settings(status_seconds=3600.0))
        world.controller.cycle()
        await _quiet(world, 60.0)
        world.churn(time.time())
        profiler = cProfile.Profile()
        profiler.enable()
        world.controller.cycle()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        await world.controller.stop()

    asyncio.run(cycles())


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", default="10000,100000", help="pending pods, comma-separated")
    parser.add_argument("--seconds", type=float, default=20.0, help="of steady churn per size")
    parser.add_argument("--profile", type=int, default=0, help="profile one steady cycle of this size")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f} at start")  # fmt: skip
    for size in map(int, args.sizes.split(",")):
        phases, frozen = asyncio.run(measure(size, args.seconds))
        print(f"\n{size} pending pods, {RUNNING} running, {QUEUES} queues "
              f"(load average {os.getloadavg()[0]:.1f})")
        print(HEADER)
        for phase in phases:
            print(phase.row())
        print(frozen)


if __name__ == "__main__":
    main()
