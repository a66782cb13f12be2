"""What one run measured, as plain data that is written to and read from JSON.

A run is one system on one scenario. ``failures`` holds every correctness problem found (a
limit exceeded, a pod lost or released twice, a pod the system did not manage): a run with
failures is reported as FAILED, its figures shown only to help find the bug.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Seconds. A run's file keeps these fields of an ``audit.latencies.Latency`` (not its mean):
    they are the schema of the results on disk, which RESULTS.md is written from, so they stay
    apart from the computation."""

    count: int = 0
    p50: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    max: float = 0.0


@dataclass(frozen=True, slots=True)
class Usage:
    """One process of the system: CPU seconds during the run and its peak resident memory."""

    cpu_seconds: float
    peak_rss_mib: float


@dataclass(frozen=True, slots=True)
class Run:
    scenario: str
    system: str
    title: str
    version: str
    pods: int
    queues: int
    teams: int
    nodes: int
    gpus_per_node: int
    seconds: float
    max_running: int
    """Per queue."""
    cap: int
    """All queues together (the bare ungater's cap)."""
    floor_seconds: float
    rounds_floor_seconds: float
    started: str
    """UTC, ISO 8601."""
    command: str
    load_average: tuple[float, float]
    """The machine's 1-minute load average at the start of the load and at the end."""
    load_before: float | None = None
    """The 1-minute load average just before the run's cluster started (None in runs saved before
    it was recorded): at most one per core, unless ``load_allowed``."""
    load_allowed: bool = False
    """Started over that bound, with ``--allow-load``: the report marks its column."""
    failures: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    """What the system's own account says that the figures do not (never a failure)."""
    submit_seconds: float = 0.0
    refused: int = 0
    drain_seconds: float = 0.0
    """From the first pod's creation to the last pod's end."""
    releases_per_second: float = 0.0
    """Releases over the span from the first release to the last."""
    creation_to_release: Percentiles = field(default_factory=Percentiles)
    freed_to_release: Percentiles = field(default_factory=Percentiles)
    """From a slot freed (a pod finished while others waited) to the next release."""
    peak_running: int = 0
    peak_queue_running: int = 0
    """The most running in any one queue at once."""
    processes: dict[str, Usage] = field(default_factory=dict)
    requests: float = 0.0
    """API requests the system made during the run (its FlowSchemas' increase)."""
    requests_by_kind: dict[str, float] = field(default_factory=dict)
    requests_all: float = 0.0
    """API requests every client made during the run (every FlowSchema)."""
    control_plane_cpu_seconds: dict[str, float] = field(default_factory=dict)
    webhooks: dict[str, tuple[float, float]] | None = None
    """Admission webhook calls during the run as the API server counts them, by webhook name:
    (calls, seconds it waited for their answers); None in runs saved before it was measured."""
    relists: int = 0
    round: int = 1
    """Which repetition of the scenario (``--repeat``): the systems take turns in every round."""
    machine: dict[str, str] = field(default_factory=dict)
    """CPU model, cores, memory, kernel."""
    versions: dict[str, str] = field(default_factory=dict)
    """Kubernetes, etcd, kwok, Kueue, Go, Python and this repository's commit."""

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def cpu_seconds(self) -> float:
        return sum(u.cpu_seconds for u in self.processes.values())

    @property
    def peak_rss_mib(self) -> float:
        """The largest of the system's processes (for Sluicegate, the controller or webhook)."""
        return max((u.peak_rss_mib for u in self.processes.values()), default=0.0)

    @property
    def requests_per_pod(self) -> float:
        return self.requests / self.pods if self.pods else 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Run:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["creation_to_release"] = Percentiles(**values.get("creation_to_release", {}))
        values["freed_to_release"] = Percentiles(**values.get("freed_to_release", {}))
        values["processes"] = {k: Usage(**v) for k, v in values.get("processes", {}).items()}
        values["failures"] = tuple(values.get("failures", ()))
        values["notes"] = tuple(values.get("notes", ()))
        values["load_average"] = tuple(values.get("load_average", (0.0, 0.0)))
        if values.get("webhooks") is not None:
            values["webhooks"] = {k: (float(v[0]), float(v[1])) for k, v in values["webhooks"].items()}
        return cls(**values)


def path(directory: Path, scenario: str, system: str, round: int = 1) -> Path:
    """``<scenario>/<system>.json`` for the first round, ``<system>.<round>.json`` after."""
    return directory / scenario / (f"{system}.json" if round == 1 else f"{system}.{round}.json")


def save(directory: Path, run: Run) -> Path:
    file = path(directory, run.scenario, run.system, run.round)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(run.to_json(), indent=2) + "\n")
    return file


def load_all(directory: Path) -> list[Run]:
    """Every run saved under ``directory``."""
    return [Run.from_json(json.loads(f.read_text())) for f in sorted(directory.glob("*/*.json"))]
