"""GPU-hour accounting over a period: per team, queue or user, from run records.

For a period ``[since, until)`` and each scope:

* ``gpu_hours`` — GPUs × the part of each run (bound, or released, to finished; to ``until``
  while it still runs) that falls inside the period, in hours. A run is one pod's: a pod
  group's GPU-hours are the sum of its released pods' (``Record.runs``), each with its own
  GPUs and times, so pods that ended early or were never released add nothing after that.
* ``jobs`` — workloads one of whose runs overlaps the period.
* ``waits`` — from submission to release, for the workloads released inside the period (mean,
  p95 by nearest rank; ``records.figures``). ``waiting`` counts those still pending at
  ``until``.
* ``share`` — the scope's GPU-hours over everyone's in the period; ``utilisation`` — over the
  cluster's capacity × the period, when the capacity is known.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from policy import keys
from records.figures import Waits, step_series
from records.trace import PodRun, Record

NO_TEAM = "(no team)"
NO_USER = "(unknown)"


class By(StrEnum):
    TEAM = "team"
    QUEUE = "queue"
    USER = "user"


def scope_of(r: Record, by: By) -> str:
    if by is By.QUEUE:
        return r.queue
    if by is By.TEAM:
        return r.team or NO_TEAM
    return r.submitter or NO_USER


@dataclass(frozen=True, slots=True)
class Line:
    """One scope's figures over the period."""

    scope: str
    jobs: int
    gpu_hours: float
    waits: Waits
    waiting: int
    share: float | None
    utilisation: float | None


@dataclass(frozen=True, slots=True)
class Report:
    by: By
    since: float
    until: float
    resource: str
    capacity: float | None
    lines: tuple[Line, ...]  # by GPU-hours, most first
    total: Line


def run_in(r: PodRun, since: float, until: float) -> tuple[float, float] | None:
    """The part of the run ``r`` inside ``[since, until)``, if any."""
    started = r.started
    if started is None:
        return None
    end = until if r.finished is None else min(r.finished, until)
    start = max(started, since)
    if end < start or (end == start and not (since <= started < until)):
        return None
    return start, end


def account(
    records: Iterable[Record],
    *,
    since: float,
    until: float,
    by: By = By.TEAM,
    resource: str = keys.GPU_RESOURCE,
    capacity: float | None = None,
) -> Report:
    """The report for the period: one line per scope that ran or waited in it, and the total."""
    seconds: dict[str, float] = {}
    jobs: dict[str, int] = {}
    waits: dict[str, list[float]] = {}
    waiting: dict[str, int] = {}
    for r in records:
        scope = scope_of(r, by)
        ran = False
        for pod in r.runs:
            run = run_in(pod, since, until)
            if run is not None:
                seconds[scope] = seconds.get(scope, 0.0) + (run[1] - run[0]) * pod.amount(resource)
                ran = True
        if ran:
            jobs[scope] = jobs.get(scope, 0) + 1
        if r.released is not None and since <= r.released < until:
            waits.setdefault(scope, []).append(r.released - r.submitted)
        elif (
            r.submitted < until
            and (r.released is None or r.released >= until)
            and not (r.finished is not None and r.finished < until)
        ):
            waiting[scope] = waiting.get(scope, 0) + 1
    total_seconds = math.fsum(seconds.values())
    span = until - since

    def line(scope: str, secs: float, count: int, waited: list[float], still: int) -> Line:
        return Line(
            scope=scope,
            jobs=count,
            gpu_hours=secs / 3600,
            waits=Waits.of(waited),
            waiting=still,
            share=secs / total_seconds if total_seconds > 0 else None,
            utilisation=secs / (capacity * span) if capacity and span > 0 else None,
        )

    scopes = set(seconds) | set(waits) | set(waiting)
    lines = [
        line(s, seconds.get(s, 0.0), jobs.get(s, 0), waits.get(s, []), waiting.get(s, 0)) for s in scopes
    ]
    lines.sort(key=lambda x: (-x.gpu_hours, x.scope))
    total = line(
        "total",
        total_seconds,
        sum(jobs.values()),
        [w for ws in waits.values() for w in ws],
        sum(waiting.values()),
    )
    return Report(by, since, until, resource, capacity, tuple(lines), total)


def usage_over_time(
    records: Iterable[Record], *, since: float, until: float, by: By, resource: str = keys.GPU_RESOURCE
) -> Mapping[str, tuple[list[float], list[float]]]:
    """Per scope, the GPUs in use over the period as a step function (``figures.step_series``)."""
    intervals: dict[str, list[tuple[float, float, float]]] = {}
    for r in records:
        for pod in r.runs:
            run = run_in(pod, since, until)
            amount = pod.amount(resource)
            if run is not None and amount:
                intervals.setdefault(scope_of(r, by), []).append((run[0], run[1], amount))
    return MappingProxyType({s: step_series(iv) for s, iv in sorted(intervals.items())})
