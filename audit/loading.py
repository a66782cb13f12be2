"""The load driver: N GPU pods over Q queues and T teams, at a set rate or as a burst.

Each team gets a namespace labelled with the system's team label (``{run}-{team}``); pod *i*
goes to queue ``i mod Q`` and to team ``(i div Q) mod T``, so every queue gets work from every
team. Pods ask for whole GPUs and run for ``seconds`` under kwok (its annotation
``pod-complete.stage.kwok.x-k8s.io/delay``). Creations go out over a bounded pool of
keep-alive connections, ``concurrency`` at a time; with a ``rate`` pod *i* is sent no earlier
than ``i / rate`` seconds after the start. A refused creation is a value in the result, not an
exception: refusals are what admission tests look for.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from audit.connection import ApiError, Connection, Credentials
from audit.naming import RUN_LABEL, SLUICEGATE, Naming
from audit.records import Obj

KWOK_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok runs no containers
PROGRESS_SECONDS = 5.0
USER_AGENT = "sluicegate-audit-load"
Progress = Callable[[str], None]


def names(prefix: str, count: int) -> tuple[str, ...]:
    """``names("q", 3) == ("q0", "q1", "q2")``."""
    return tuple(f"{prefix}{i}" for i in range(count))


def new_run() -> str:
    """A fresh run name (a DNS label), used for namespaces and the run label."""
    return f"load-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class Load:
    pods: int
    queues: tuple[str, ...] = ("q0",)
    teams: tuple[str, ...] = ("t0",)
    gpus: int = 1
    seconds: float = 2.0
    """How long kwok runs each pod once it is bound."""
    rate: float | None = None
    """Pods per second; None sends them as fast as ``concurrency`` allows (a burst)."""
    concurrency: int = 16
    run: str = field(default_factory=new_run)
    naming: Naming = SLUICEGATE
    gated: bool = False
    """Add the system's gates at creation, as an admission webhook would."""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)

    def namespace(self, team: str) -> str:
        return f"{self.run}-{team}"

    def placement(self, index: int) -> tuple[str, str]:
        """(queue, team) of pod ``index``."""
        queue = self.queues[index % len(self.queues)]
        team = self.teams[(index // len(self.queues)) % len(self.teams)]
        return queue, team

    @property
    def selector(self) -> str:
        """A label selector for this run's pods (for a recorder or an ungater)."""
        return f"{RUN_LABEL}={self.run}"


def namespace_manifest(load: Load, team: str) -> Obj:
    labels = {RUN_LABEL: load.run, **load.namespace_labels}
    if load.naming.team_label:
        labels[load.naming.team_label] = team
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": load.namespace(team), "labels": labels}}


def pod_manifest(load: Load, index: int) -> Obj:
    queue, team = load.placement(index)
    gpus = {load.naming.gpu_resource: str(load.gpus)} if load.gpus else {}
    spec: Obj = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": IMAGE, "resources": {"requests": gpus, "limits": gpus}}],
    }
    if load.gated:
        spec["schedulingGates"] = [{"name": g} for g in load.naming.gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{index:05d}",
            "namespace": load.namespace(team),
            "labels": {RUN_LABEL: load.run, load.naming.queue_label: queue, **load.labels},
            "annotations": {KWOK_DELAY_ANNOTATION: f"{load.seconds:g}s", **load.annotations},
        },
        "spec": spec,
    }


@dataclass(frozen=True, slots=True)
class Submission:
    namespace: str
    name: str
    queue: str
    team: str
    uid: str
    at: float
    """time.monotonic() when the API server answered."""


@dataclass(frozen=True, slots=True)
class Refusal:
    namespace: str
    name: str
    status: int
    message: str


@dataclass(frozen=True, slots=True)
class Submitted:
    load: Load
    pods: tuple[Submission, ...]
    refused: tuple[Refusal, ...]
    namespaces: tuple[str, ...]
    started: float
    finished: float

    @property
    def seconds(self) -> float:
        return self.finished - self.started

    @property
    def rate(self) -> float:
        return len(self.pods) / self.seconds if self.seconds > 0 else 0.0


async def prepare(connection: Connection, load: Load) -> tuple[str, ...]:
    """Create (or relabel) one namespace per team; return their names."""
    created = []
    for team in load.teams:
        manifest = namespace_manifest(load, team)
        try:
            await connection.create("/api/v1/namespaces", manifest)
        except ApiError as e:
            if e.status != 409:
                raise
            await connection.patch(f"/api/v1/namespaces/{load.namespace(team)}",
                                   {"metadata": {"labels": manifest["metadata"]["labels"]}}, kind="merge")
        created.append(load.namespace(team))
    return tuple(created)


async def submit(connection: Connection, load: Load, progress: Progress | None = None) -> Submitted:
    """Create the namespaces, then the pods; return what was accepted and what was refused."""
    namespaces = await prepare(connection, load)
    started = time.monotonic()
    accepted: list[Submission] = []
    refused: list[Refusal] = []
    indices: asyncio.Queue[int] = asyncio.Queue()
    for i in range(load.pods):
        indices.put_nowait(i)

    async def worker() -> None:
        while not indices.empty():
            i = indices.get_nowait()
            if load.rate:
                delay = started + i / load.rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            manifest = pod_manifest(load, i)
            meta = manifest["metadata"]
            queue, team = load.placement(i)
            try:
                answer = await connection.create(f"/api/v1/namespaces/{meta['namespace']}/pods", manifest)
            except ApiError as e:
                refused.append(Refusal(meta["namespace"], meta["name"], e.status, e.message))
                continue
            accepted.append(Submission(meta["namespace"], meta["name"], queue, team,
                                       answer["metadata"]["uid"], time.monotonic()))

    async def report() -> None:
        while True:
            await asyncio.sleep(PROGRESS_SECONDS)
            done = len(accepted) + len(refused)
            elapsed = time.monotonic() - started
            assert progress is not None
            progress(f"load {load.run}: {done}/{load.pods} pods sent in {elapsed:.0f}s "
                     f"({done / elapsed:.0f}/s, {len(refused)} refused)")

    reporter = asyncio.create_task(report()) if progress else None
    try:
        await asyncio.gather(*(worker() for _ in range(max(1, load.concurrency))))
    finally:
        if reporter:
            reporter.cancel()
    accepted.sort(key=lambda s: s.name)
    return Submitted(load, tuple(accepted), tuple(refused), namespaces, started, time.monotonic())


async def drive(credentials: Credentials, load: Load, progress: Progress | None = None) -> Submitted:
    """``submit`` over a connection of its own, with one keep-alive connection per worker."""
    async with Connection(credentials, user_agent=USER_AGENT, connections=load.concurrency) as connection:
        return await submit(connection, load, progress)


async def remove(connection: Connection, namespaces: tuple[str, ...]) -> None:
    """Delete a run's namespaces (and so its pods), without waiting for them to go."""
    for name in namespaces:
        try:
            await connection.delete(f"/api/v1/namespaces/{name}")
        except ApiError as e:
            if e.status != 404:
                raise
