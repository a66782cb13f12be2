"""Summary figures shared by the report and the simulator: percentiles, waits, GPU use over time.

Percentiles are by the nearest-rank method: the p-th percentile of n values is the smallest
value that at least p % of them do not exceed (the ⌈p·n/100⌉-th smallest). It is always one of
the values, so a figure can be checked by hand against the records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile of ``ordered`` (sorted ascending); None when empty."""
    if not ordered:
        return None
    rank = max(1, math.ceil(p * len(ordered) / 100))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class Waits:
    """How long workloads waited to be released, in seconds."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, waits: Iterable[float]) -> Waits:
        ordered = sorted(waits)
        if not ordered:
            return cls()
        return cls(
            count=len(ordered),
            mean=math.fsum(ordered) / len(ordered),
            p50=percentile(ordered, 50),
            p95=percentile(ordered, 95),
            max=ordered[-1],
        )


def step_series(intervals: Iterable[tuple[float, float, float]]) -> tuple[list[float], list[float]]:
    """Amount in use over time from ``(start, end, amount)`` intervals, as a step function.

    Returns the instants at which the amount changes and the amount from each instant on; an
    interval counts from its start (inclusive) to its end (exclusive).
    """
    changes: dict[float, float] = {}
    for start, end, amount in intervals:
        if end <= start or not amount:
            continue
        changes[start] = changes.get(start, 0.0) + amount
        changes[end] = changes.get(end, 0.0) - amount
    times = sorted(changes)
    levels: list[float] = []
    level = 0.0
    for t in times:
        level += changes[t]
        levels.append(round(level, 9))
    return times, levels


def binned(
    times: Sequence[float], levels: Sequence[float], start: float, end: float, bins: int
) -> list[float]:
    """The mean of a step series (``step_series``) over each of ``bins`` equal bins of
    ``[start, end)``: the exact area under it in each bin, divided by the bin's length."""
    width = (end - start) / bins
    area = [0.0] * bins
    if width <= 0:
        return area
    ends = [*times[1:], end]
    for t, until, level in zip(times, ends, levels, strict=True):
        a, b = max(t, start), min(until, end)
        if b <= a or not level:
            continue
        first = max(0, int((a - start) // width))
        last = min(bins - 1, int((b - start) // width))
        for k in range(first, last + 1):
            lo, hi = max(a, start + k * width), min(b, start + (k + 1) * width)
            if hi > lo:
                area[k] += level * (hi - lo)
    return [x / width for x in area]


def peak(intervals: Iterable[tuple[float, float, float]]) -> float:
    """The most in use at any instant."""
    _, levels = step_series(intervals)
    return max(levels, default=0.0)
