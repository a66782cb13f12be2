"""Latency and throughput figures over a record: pure functions, no I/O.

Every time is the recorder's own observation (its watch saw the change), so figures compare
like with like whichever system released the pods. Percentiles are nearest-rank.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from audit.checking import CLUSTER, Limits, ScopeKey, scopes
from audit.records import TERMINAL, Kind, PodInfo, Record


@dataclass(frozen=True, slots=True)
class Latency:
    """Seconds; all zero when there are no samples."""

    count: int = 0
    p50: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    max: float = 0.0
    mean: float = 0.0

    @classmethod
    def of(cls, samples: Sequence[float]) -> Latency:
        if not samples:
            return cls()
        ordered = sorted(samples)
        return cls(len(ordered), percentile(ordered, 50), percentile(ordered, 95), percentile(ordered, 99),
                   ordered[-1], sum(ordered) / len(ordered))

    def milliseconds(self) -> str:
        return (f"p50 {self.p50 * 1000:.0f} ms, p95 {self.p95 * 1000:.0f} ms, p99 {self.p99 * 1000:.0f} ms, "
                f"max {self.max * 1000:.0f} ms (n={self.count})")


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest rank: the smallest sample with at least p% of the samples at or below it."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def creation_to_release(record: Record) -> Latency:
    """From the pod's creation to the removal of its gates, for pods created gated while the
    recorder watched (pods already there at the start, or created ungated, have no such wait)."""
    created: dict[str, float] = {}
    samples = []
    for event in record.events:
        pod = record.pods.get(event.uid)
        if pod is None or pod.preexisting or not pod.gates:
            continue
        if event.kind is Kind.CREATED:
            created[event.uid] = event.at
        elif event.kind is Kind.UNGATED and event.uid in created:
            samples.append(event.at - created.pop(event.uid))
    return Latency.of(samples)


@dataclass(slots=True)
class _Slot:
    at: float
    taken: bool = False


def freed_to_release(record: Record, limits: Limits | None = None) -> Latency:
    """From a slot freed to the next release that could take it: the reaction time of whatever
    removes gates, when a limit is what holds pods back.

    Without ``limits``, any released pod finishing while gated pods wait frees a slot, and each
    slot pairs with the first release after it, first freed first (one cap over every pod).
    With ``limits``, slots belong to the scopes that have a running cap (``checking.scopes``):
    a finish frees a slot in a scope only if that scope was at its cap just before and gated
    pods of that scope wait, and a release pairs with the earliest freed slot of its own
    scopes. So a finish in a queue nobody waits for, or below every limit, frees no slot, and a
    release in one queue never answers a slot freed in another. Pods are counted one by one
    (the benchmarks make no pod groups)."""

    def keys(pod: PodInfo) -> list[ScopeKey]:
        if limits is None:
            return [CLUSTER]
        return [k for k in scopes(pod) if limits.cap(k).running is not None]

    def cap(key: ScopeKey) -> int | None:
        return None if limits is None else limits.cap(key).running

    pending: set[str] = set()
    running: set[str] = set()
    done: set[str] = set()
    waiting: Counter[ScopeKey] = Counter()
    busy: Counter[ScopeKey] = Counter()
    # A freed slot is one, though its finish may free it in several scopes (a queue at its cap
    # and the total at its cap): each scope holds the same token, and a token taken through one
    # is skipped in the others.
    freed: dict[ScopeKey, deque[_Slot]] = defaultdict(deque)
    samples = []
    for event in record.events:
        pod = record.pods.get(event.uid)
        if pod is None:
            continue
        mine = keys(pod)
        if event.kind is Kind.CREATED and pod.gates:
            pending.add(event.uid)
            waiting.update(mine)
        elif event.kind is Kind.UNGATED and event.uid not in running and event.uid not in done:
            if event.uid in pending:
                pending.discard(event.uid)
                waiting.subtract(mine)
            running.add(event.uid)
            busy.update(mine)
            for key in mine:
                while freed[key] and freed[key][0].taken:
                    freed[key].popleft()
            oldest = min((k for k in mine if freed[k]), key=lambda k: freed[k][0].at, default=None)
            if oldest is not None:
                slot = freed[oldest].popleft()
                slot.taken = True
                samples.append(event.at - slot.at)
        elif event.kind in TERMINAL and event.uid not in done:
            done.add(event.uid)
            if event.uid in pending:
                pending.discard(event.uid)
                waiting.subtract(mine)
            if event.uid in running:
                running.discard(event.uid)
                slot = _Slot(event.at)
                for key in mine:
                    limit = cap(key)
                    if waiting[key] > 0 and (limit is None or busy[key] >= limit):
                        freed[key].append(slot)
                busy.subtract(mine)
    return Latency.of(samples)


@dataclass(frozen=True, slots=True)
class Drain:
    """From ``since`` (default: the first release) until the last pod finished."""

    seconds: float
    releases: int
    releases_per_second: float
    """Releases over the span from the first release to the last."""
    first_release: float
    last_release: float
    last_finish: float


def drain(record: Record, since: float | None = None) -> Drain:
    releases = [e.at for e in record.events if e.kind is Kind.UNGATED and e.uid in record.pods]
    finishes = [e.at for e in record.events if e.kind in TERMINAL and e.uid in record.pods]
    if not releases:
        return Drain(0.0, 0, 0.0, 0.0, 0.0, 0.0)
    first, last = releases[0], releases[-1]
    end = max(finishes, default=last)
    start = first if since is None else since
    span = last - first
    rate = len(releases) / span if span > 0 else 0.0
    return Drain(end - start, len(releases), rate, first, last, end)
