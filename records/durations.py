"""How long work holds its slot, learned from run records: what start-time estimates draw on.

A workload's *hold* is the replay's duration (``simulator.simulating.run_duration``): from its
release to its end, ``finished − released``, since dispatch counts it running from its release,
placed or not. Holds are kept sorted per *shape*, the facts known of a workload before it runs:
its queue, its workflow (namespace-qualified, ``ns/name``; empty for none) and the GPUs it asks
(``keys.GPU_RESOURCE``, whole units, summed over a group's pods).

A shape that has fewer than ``least`` holds recorded takes a prior instead: its queue's holds,
then the cluster's (every hold recorded). So a sweep's trials are judged by the trials of the
same sweep that have ended, a new sweep by its queue, and a queue nothing has ended in yet by
the cluster. With nothing recorded at all there is nothing to say (``of`` answers None).

Two facts of the workload narrow its hold (``Holds.quantile``, ``Holds.draw``):

* what it has run already: a workload released ``elapsed`` seconds ago holds for what the
  recorded holds longer than ``elapsed`` have left (``d − elapsed``); one that has outlived
  every recorded hold of its shape is taken to hold for a fresh hold of that shape again;
* ``activeDeadlineSeconds``: the kubelet ends a pod that runs longer, so no hold exceeds it.

Percentiles are nearest-rank (``records.figures.percentile``): always a recorded hold, or the
deadline. Everything here is pure; ``learn`` reads records, ``add`` takes one hold at a time
so a replay can learn as work ends.
"""

from __future__ import annotations

import random
from bisect import bisect_right, insort
from collections.abc import Iterable
from dataclasses import dataclass

from policy import keys
from policy.quantities import Resources
from records.figures import percentile
from records.trace import Record

DurationShape = tuple[str, str, int]  # queue, workflow (ns/name or ""), GPUs asked

LEAST = 3
"""Holds a shape needs before its own count: fewer, and its queue's (then the cluster's) speak
for it. Three is the fewest from which a p10 and a p90 differ from the extremes' neighbours."""


def gpus_of(requests: Resources) -> int:
    """Whole GPUs asked (``keys.GPU_RESOURCE``, milli-units in the model), rounded up."""
    return -(-requests.get(keys.GPU_RESOURCE, 0) // 1000)


def shape_of_record(r: Record) -> DurationShape:
    return (r.queue, f"{r.namespace}/{r.workflow}" if r.workflow else "", gpus_of(r.requests))


@dataclass(frozen=True, slots=True)
class Holds:
    """Recorded holds of one shape (or its prior), in seconds, ascending."""

    ordered: list[float]
    level: str  # "shape", "queue" or "cluster": which holds these are
    total: float  # the sum of ``ordered``

    def _left(self, elapsed: float) -> tuple[list[float], float]:
        i = bisect_right(self.ordered, elapsed)
        if i == len(self.ordered):
            return self.ordered, 0.0  # outlived every recorded hold: a fresh hold again
        return self.ordered[i:], elapsed

    def quantile(self, p: float, elapsed: float = 0.0, deadline: float | None = None) -> float:
        """The ``p``-th percentile of what is left of the hold after ``elapsed`` seconds,
        no longer than ``deadline`` (seconds from its release) allows."""
        left, gone = self._left(elapsed)
        value = percentile(left, p)
        assert value is not None
        return _bounded(value - gone, elapsed, deadline)

    def mean(self, elapsed: float = 0.0, deadline: float | None = None) -> float:
        """The mean of what is left of the hold after ``elapsed`` seconds, each recorded hold
        no longer than ``deadline`` allows."""
        if elapsed <= 0 and deadline is None:
            return self.total / len(self.ordered)
        left, gone = self._left(elapsed)
        return sum(_bounded(v - gone, elapsed, deadline) for v in left) / len(left)

    def draw(self, rnd: random.Random, elapsed: float = 0.0, deadline: float | None = None) -> float:
        """One recorded hold at random (of those longer than ``elapsed``): what is left of it."""
        left, gone = self._left(elapsed)
        return _bounded(left[int(rnd.random() * len(left))] - gone, elapsed, deadline)


def _bounded(left: float, elapsed: float, deadline: float | None) -> float:
    if deadline is not None:
        left = min(left, deadline - elapsed)
    return max(0.0, left)


class Durations:
    """Holds by shape, by queue and for the whole cluster, kept sorted as they are added."""

    def __init__(self, least: int = LEAST) -> None:
        self.least = least
        self.shapes: dict[DurationShape, list[float]] = {}
        self.queues: dict[str, list[float]] = {}
        self.cluster: list[float] = []
        self._sums: dict[DurationShape | str, float] = {}  # shape or queue -> sum of its holds
        self._sum = 0.0

    @classmethod
    def learn(cls, records: Iterable[Record], least: int = LEAST) -> Durations:
        """The holds of every record that was released and has ended."""
        durations = cls(least)
        for r in records:
            if r.released is not None and r.finished is not None:
                durations.add(shape_of_record(r), r.finished - r.released)
        return durations

    @classmethod
    def of_holds(cls, holds: Iterable[tuple[DurationShape, float]], least: int = LEAST) -> Durations:
        """The holds given, each with its shape: as ``add`` one at a time would keep them, sorted
        once at the end."""
        durations = cls(least)
        for shape, seconds in holds:
            durations.shapes.setdefault(shape, []).append(seconds)
            durations.queues.setdefault(shape[0], []).append(seconds)
            durations.cluster.append(seconds)
        for shape, held in durations.shapes.items():
            held.sort()
            durations._sums[shape] = sum(held)
        for queue, held in durations.queues.items():
            held.sort()
            durations._sums[queue] = sum(held)
        durations.cluster.sort()
        durations._sum = sum(durations.cluster)
        return durations

    def add(self, shape: DurationShape, seconds: float) -> None:
        insort(self.shapes.setdefault(shape, []), seconds)
        insort(self.queues.setdefault(shape[0], []), seconds)
        insort(self.cluster, seconds)
        self._sums[shape[0]] = self._sums.get(shape[0], 0.0) + seconds
        self._sums[shape] = self._sums.get(shape, 0.0) + seconds
        self._sum += seconds

    def __len__(self) -> int:
        return len(self.cluster)

    def of(self, shape: DurationShape) -> Holds | None:
        """The holds that speak for ``shape``: its own, its queue's, the cluster's; None when
        nothing at all is recorded."""
        own = self.shapes.get(shape)
        if own is not None and len(own) >= self.least:
            return Holds(own, "shape", self._sums[shape])
        queue = self.queues.get(shape[0])
        if queue is not None and len(queue) >= self.least:
            return Holds(queue, "queue", self._sums[shape[0]])
        if self.cluster:
            return Holds(self.cluster, "cluster", self._sum)
        return None

    def mean(self, queue: str) -> float | None:
        """The mean hold of ``queue`` (the cluster's when it has too few): the naive estimate's."""
        count = len(self.queues.get(queue, ()))
        if count >= self.least:
            return self._sums[queue] / count
        return self._sum / len(self.cluster) if self.cluster else None
