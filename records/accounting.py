"""GPU-hour accounting over a period: per team, queue or user, from run records.

For a period ``[since, until)`` and each scope:

* ``gpu_hours`` — GPUs × the part of each run on a node (bound to finished; to ``until`` while
  it still runs) that falls inside the period, in hours. A run is one pod's: a pod group's
  GPU-hours are the sum of its released pods' (``Record.runs``), each with its own GPUs and
  times, so pods that ended early, were never released or never placed add nothing.
* ``quota_hours`` — GPUs × the part of each run released but not placed (released to bound;
  to finished, or to ``until``, when it was never bound) inside the period, in hours: quota
  held by pods that used no GPU. A run's hold (released to finished) is the sum of the two
  (``held_in``, the one rule).
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
    quota_hours: float
    """GPU-hours of quota held by released pods not (yet) placed: no GPU was used."""
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


def _part(
    start: float | None, finished: float | None, since: float, until: float
) -> tuple[float, float] | None:
    """The part of ``[start, finished)`` (to ``until`` when unfinished) inside ``[since, until)``."""
    if start is None:
        return None
    end = until if finished is None else min(finished, until)
    begin = max(start, since)
    if end < begin or (end == begin and not (since <= start < until)):
        return None
    return begin, end


def run_in(r: PodRun, since: float, until: float) -> tuple[float, float] | None:
    """The part of the run ``r``'s hold (its release to its end) inside ``[since, until)``."""
    return _part(r.released, r.finished, since, until)


def placed_in(r: PodRun, since: float, until: float) -> tuple[float, float] | None:
    """The part of the run ``r`` on a node (its binding to its end) inside ``[since, until)``."""
    return _part(r.started, r.finished, since, until)


@dataclass(frozen=True, slots=True)
class Held:
    """What one run held inside a period, in resource-seconds."""

    used: float
    """On a node: bound to finished."""
    unplaced: float
    """Released but not placed: released to bound, or to finished when never bound."""


def held_in(r: PodRun, since: float, until: float, resource: str = keys.GPU_RESOURCE) -> Held:
    """The GPU-seconds the run ``r`` used and the quota-seconds it held unplaced in ``[since,
    until)``: its hold split at its binding."""
    amount = r.amount(resource)
    hold, placed = run_in(r, since, until), placed_in(r, since, until)
    held = 0.0 if hold is None else hold[1] - hold[0]
    used = 0.0 if placed is None else placed[1] - placed[0]
    return Held(used * amount, max(0.0, held - used) * amount)


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
    unplaced: dict[str, float] = {}
    jobs: dict[str, int] = {}
    waits: dict[str, list[float]] = {}
    waiting: dict[str, int] = {}
    for r in records:
        scope = scope_of(r, by)
        ran = False
        for pod in r.runs:
            if run_in(pod, since, until) is not None:
                held = held_in(pod, since, until, resource)
                seconds[scope] = seconds.get(scope, 0.0) + held.used
                unplaced[scope] = unplaced.get(scope, 0.0) + held.unplaced
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

    def line(scope: str, secs: float, idle: float, count: int, waited: list[float], still: int) -> Line:
        return Line(
            scope=scope,
            jobs=count,
            gpu_hours=secs / 3600,
            quota_hours=idle / 3600,
            waits=Waits.of(waited),
            waiting=still,
            share=secs / total_seconds if total_seconds > 0 else None,
            utilisation=secs / (capacity * span) if capacity and span > 0 else None,
        )

    scopes = set(seconds) | set(unplaced) | set(waits) | set(waiting)
    lines = [
        line(s, seconds.get(s, 0.0), unplaced.get(s, 0.0), jobs.get(s, 0), waits.get(s, []),
             waiting.get(s, 0))
        for s in scopes
    ]
    lines.sort(key=lambda x: (-x.gpu_hours, x.scope))
    total = line(
        "total",
        total_seconds,
        math.fsum(unplaced.values()),
        sum(jobs.values()),
        [w for ws in waits.values() for w in ws],
        sum(waiting.values()),
    )
    return Report(by, since, until, resource, capacity, tuple(lines), total)


def usage_over_time(
    records: Iterable[Record], *, since: float, until: float, by: By, resource: str = keys.GPU_RESOURCE
) -> Mapping[str, tuple[list[float], list[float]]]:
    """Per scope, the GPUs in use on nodes over the period as a step function (``figures.step_series``)."""
    intervals: dict[str, list[tuple[float, float, float]]] = {}
    for r in records:
        for pod in r.runs:
            run = placed_in(pod, since, until)
            amount = pod.amount(resource)
            if run is not None and amount:
                intervals.setdefault(scope_of(r, by), []).append((run[0], run[1], amount))
    return MappingProxyType({s: step_series(iv) for s, iv in sorted(intervals.items())})
