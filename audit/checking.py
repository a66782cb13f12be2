"""Checks over a record: pure functions, no I/O.

*Running* means released and not finished: a pod joins the running set at its (first)
UNGATED event and leaves it at SUCCEEDED, FAILED or DELETED. Counts are of *workloads*, as
Sluicegate's limits count them: a pod group counts once while any of its pods runs; GPUs are
summed over the running pods. Workflows are namespace-qualified (``ns/name``). Times are the
recorder's monotonic seconds; messages show them relative to the start of the record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol

from audit.records import TERMINAL, Event, Kind, PodInfo, Record


class Scope(StrEnum):
    CLUSTER = "cluster"
    QUEUE = "queue"
    TEAM = "team"
    WORKFLOW = "workflow"


ScopeKey = tuple[Scope, str]
CLUSTER: ScopeKey = (Scope.CLUSTER, "")


def scopes(pod: PodInfo) -> list[ScopeKey]:
    """Every scope whose limits a pod counts against."""
    out = [CLUSTER, (Scope.QUEUE, pod.queue), (Scope.TEAM, pod.team)]
    if pod.workflow:
        out.append((Scope.WORKFLOW, pod.workflow_key))
    return out


@dataclass(frozen=True, slots=True)
class Counts:
    running: int = 0
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class Step:
    """The running set changed: ``pod`` joined it (released) or left it (finished)."""

    event: Event
    pod: PodInfo
    joined: bool
    counts: Mapping[ScopeKey, Counts]
    """After the step, for every scope the pod counts against."""


class _Sweep:
    """Walks a record's events, keeping the running set and its counts per scope."""

    def __init__(self, record: Record) -> None:
        self.pods = record.pods
        self.running: set[str] = set()
        self.done: set[str] = set()
        self.workload_pods: Counter[str] = Counter()
        self.count: Counter[ScopeKey] = Counter()
        self.gpus: Counter[ScopeKey] = Counter()
        self.members: dict[ScopeKey, set[str]] = {}

    def apply(self, event: Event) -> Step | None:
        pod = self.pods.get(event.uid)
        if pod is None:
            return None
        if event.kind is Kind.UNGATED and event.uid not in self.running and event.uid not in self.done:
            joined = True
            self.running.add(event.uid)
            self.workload_pods[pod.workload] += 1
            change = 1 if self.workload_pods[pod.workload] == 1 else 0
        elif event.kind in TERMINAL and event.uid not in self.done:
            self.done.add(event.uid)
            if event.uid not in self.running:
                return None
            joined = False
            self.running.discard(event.uid)
            self.workload_pods[pod.workload] -= 1
            change = -1 if self.workload_pods[pod.workload] == 0 else 0
        else:
            return None
        keys = scopes(pod)
        for key in keys:
            self.count[key] += change
            self.gpus[key] += pod.gpus if joined else -pod.gpus
            members = self.members.setdefault(key, set())
            if joined:
                members.add(event.uid)
            else:
                members.discard(event.uid)
        return Step(event, pod, joined, counts={k: Counts(self.count[k], self.gpus[k]) for k in keys})


def steps(record: Record) -> Iterator[Step]:
    """Every change of the running set, in order."""
    sweep = _Sweep(record)
    for event in record.events:
        step = sweep.apply(event)
        if step is not None:
            yield step


def running_sets(record: Record) -> Iterator[tuple[Event, frozenset[str]]]:
    """The running set (uids) after every event that changed it."""
    sweep = _Sweep(record)
    for event in record.events:
        if sweep.apply(event) is not None:
            yield event, frozenset(sweep.running)


def running_at(record: Record, at: float) -> frozenset[str]:
    """The pods (uids) running just after the monotonic instant ``at``."""
    sweep = _Sweep(record)
    for event in record.events:
        if event.at > at:
            break
        sweep.apply(event)
    return frozenset(sweep.running)


# --- peaks and limits -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Peak:
    running: int = 0
    running_at: float = 0.0
    gpus: int = 0
    gpus_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Peaks:
    cluster: Peak
    queues: Mapping[str, Peak]
    teams: Mapping[str, Peak]
    workflows: Mapping[str, Peak]


def peaks(record: Record) -> Peaks:
    best: dict[ScopeKey, Peak] = {}
    for step in steps(record):
        if not step.joined:
            continue
        for key, counts in step.counts.items():
            peak = best.get(key, Peak())
            if counts.running > peak.running:
                peak = Peak(counts.running, step.event.at, peak.gpus, peak.gpus_at)
            if counts.gpus > peak.gpus:
                peak = Peak(peak.running, peak.running_at, counts.gpus, step.event.at)
            best[key] = peak

    def of(scope: Scope) -> dict[str, Peak]:
        return {name: p for (s, name), p in best.items() if s is scope}

    return Peaks(best.get(CLUSTER, Peak()), of(Scope.QUEUE), of(Scope.TEAM), of(Scope.WORKFLOW))


@dataclass(frozen=True, slots=True)
class Cap:
    """A maxRunning (workloads) and a GPU quota; None is unlimited."""

    running: int | None = None
    gpus: int | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    cluster: Cap = Cap()
    queues: Mapping[str, Cap] = field(default_factory=dict)
    teams: Mapping[str, Cap] = field(default_factory=dict)
    workflows: Mapping[str, Cap] = field(default_factory=dict)
    """Keyed ``namespace/workflow``."""

    def cap(self, key: ScopeKey) -> Cap:
        scope, name = key
        if scope is Scope.CLUSTER:
            return self.cluster
        table = {Scope.QUEUE: self.queues, Scope.TEAM: self.teams, Scope.WORKFLOW: self.workflows}[scope]
        return table.get(name, Cap())


Measure = Literal["running", "gpus"]


@dataclass(frozen=True, slots=True)
class Violation:
    scope: Scope
    name: str
    measure: Measure
    limit: int
    count: int
    at: float
    wall: float
    pod: str
    """The pod whose release went over the limit."""
    running: tuple[str, ...]
    """The pods running in that scope at that instant."""
    since: float = 0.0

    def __str__(self) -> str:
        where = f"{self.scope} {self.name}" if self.name else str(self.scope)
        what = "running" if self.measure == "running" else "GPUs in use"
        return (f"{where}: {self.count} {what} > limit {self.limit} at +{self.at - self.since:.3f}s "
                f"(released {self.pod}; running: {', '.join(self.running)})")


def violations(record: Record, limits: Limits) -> list[Violation]:
    """Every release that took a scope over its limit; empty when the limits held throughout."""
    return violations_under(record, lambda key, at: limits.cap(key))


def violations_under(record: Record, cap: Callable[[ScopeKey, float], Cap]) -> list[Violation]:
    """Every release that took a scope over ``cap(scope, at)``, its cap at the release's instant
    (constant for ``violations``; changing over time for ``audit.timelines``)."""
    found: list[Violation] = []
    sweep = _Sweep(record)
    for event in record.events:
        step = sweep.apply(event)
        if step is None or not step.joined:
            continue
        for key, counts in step.counts.items():
            limit_of = cap(key, event.at)
            measured: tuple[tuple[Measure, int, int | None], ...] = (
                ("running", counts.running, limit_of.running), ("gpus", counts.gpus, limit_of.gpus))
            for measure, count, limit in measured:
                if limit is not None and count > limit:
                    names = tuple(sorted(record.pods[u].key for u in sweep.members[key]))
                    found.append(Violation(key[0], key[1], measure, limit, count, event.at,
                                           event.wall, step.pod.key, names, record.started))
    return found


# --- order, duplicates, losses --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Alternation:
    max_difference: int
    at: float
    releases: Mapping[str, int]


def alternation(record: Record, queues: Sequence[str]) -> Alternation:
    """How far release counts of ``queues`` drift apart while every one of them has gated pods
    waiting: the largest (max - min) of their cumulative releases at any point of that window.
    Round-robin between saturated equal-priority queues keeps it at 1."""
    wanted = set(queues)
    pending: Counter[str] = Counter()
    gated: set[str] = set()
    released: Counter[str] = Counter({q: 0 for q in queues})
    worst, worst_at, opened = 0, record.started, False
    for event in record.events:
        pod = record.pods.get(event.uid)
        if pod is None or pod.queue not in wanted:
            continue
        if event.kind is Kind.CREATED and pod.gates:
            gated.add(event.uid)
            pending[pod.queue] += 1
        elif event.uid in gated and (event.kind is Kind.UNGATED or event.kind in TERMINAL):
            everyone_waits = all(pending[q] > 0 for q in queues)
            gated.discard(event.uid)
            pending[pod.queue] -= 1
            if event.kind is not Kind.UNGATED:
                continue
            if not everyone_waits:
                if opened:
                    break
                continue
            opened = True
            released[pod.queue] += 1
            difference = max(released.values()) - min(released.values())
            if difference > worst:
                worst, worst_at = difference, event.at
    return Alternation(worst, worst_at, dict(released))


@dataclass(frozen=True, slots=True)
class Twice:
    pod: PodInfo
    events: tuple[Event, ...]
    """Its UNGATED and GATED events."""


def released_twice(record: Record) -> list[Twice]:
    """Pods released more than once: two UNGATED events, or gates back after a release."""
    found = []
    for uid, history in record.histories().items():
        marks = tuple(e for e in history if e.kind in (Kind.UNGATED, Kind.GATED))
        if sum(e.kind is Kind.UNGATED for e in marks) > 1 or any(e.kind is Kind.GATED for e in marks):
            found.append(Twice(record.pods[uid], marks))
    return found


class Named(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Lost:
    namespace: str
    name: str
    last: str
    """The last thing recorded of it: a Kind, or "never seen"."""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.last})"


def lost(
    record: Record, submitted: Iterable[Named] | None = None, *, deleted_is_lost: bool = True
) -> list[Lost]:
    """Pods that never reached Succeeded or Failed: those ``submitted`` (default: every pod in
    the record) that were never seen, or whose last transition is not terminal. A pod deleted
    before it finished counts as lost unless ``deleted_is_lost`` is False."""
    histories = record.histories()
    latest: dict[tuple[str, str], str] = {}
    for uid in histories:  # a name reused after deletion: judge the latest pod of that name
        pod = record.pods[uid]
        latest[(pod.namespace, pod.name)] = uid
    wanted = [(s.namespace, s.name) for s in submitted] if submitted is not None else list(latest)
    found = []
    for namespace, name in wanted:
        found_uid = latest.get((namespace, name))
        if found_uid is None:
            found.append(Lost(namespace, name, "never seen"))
            continue
        kinds = [e.kind for e in histories[found_uid]]
        if Kind.SUCCEEDED in kinds or Kind.FAILED in kinds:
            continue
        if Kind.DELETED in kinds and not deleted_is_lost:
            continue
        found.append(Lost(namespace, name, kinds[-1].value if kinds else "no events"))
    return found
