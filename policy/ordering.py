"""The order of waiting work: inside a queue, and between queues of equal priority.

Inside a queue: higher pod priority first, then earlier creation (FIFO), then the workload key,
so that equal workloads still have one order. Between queues of one priority: round-robin by
queue name, starting after the queue that had the last release at that priority; ``Turns``
carries that across dispatch decisions.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from types import MappingProxyType

from policy.model import Ordering, Queue, Workload

_CREATED = attrgetter("created")
_BY_TIME = attrgetter("created", "key")
_BY_PRIORITY = attrgetter("priority")


def sort_in_queue_order(workloads: list[Workload]) -> None:
    """Sort in place: pod priority (higher first), creation time, key.

    Stable passes with C-level keys beat one pass with a composed key: floats sort fastest,
    the (created, key) pass then only mends ties in nearly sorted data, and the priority pass
    (few distinct values) mostly finds runs.
    """
    workloads.sort(key=_CREATED)
    workloads.sort(key=_BY_TIME)
    workloads.sort(key=_BY_PRIORITY, reverse=True)


def in_queue_order(workloads: Iterable[Workload]) -> list[Workload]:
    out = list(workloads)
    sort_in_queue_order(out)
    return out


def rotated(names: Sequence[str], after: str | None) -> list[str]:
    """``names`` (sorted) starting with the first one after ``after`` (which may be gone)."""
    if after is None:
        return list(names)
    i = bisect_right(names, after)
    return [*names[i:], *names[:i]]


@dataclass(frozen=True, slots=True)
class Turns:
    """Round-robin state between dispatch decisions: per queue priority, the queue released last."""

    last: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))

    def rotation(self, level: int, names: Sequence[str]) -> list[str]:
        """``names`` (sorted) in the order they take turns now: from the one after the last."""
        return rotated(names, self.last.get(level))

    def advanced(self, moved: Mapping[int, str], levels: Iterable[int]) -> Turns:
        """The turns after a decision: ``moved`` levels updated, levels no queue has any more dropped."""
        live = set(levels)
        last = {level: name for level, name in self.last.items() if level in live}
        last.update(moved)
        if last == self.last:
            return self
        return Turns(MappingProxyType(dict(sorted(last.items()))))


class Line:
    """One queue's waiting workloads, and how far one dispatch decision has got through them.

    Mutable, and private to one decision; afterwards the ``Waiting`` answer reads it to explain
    each workload that stays. ``order`` is sorted only when someone needs the order.
    """

    __slots__ = (
        "blocked",
        "cursor",
        "done",
        "level",
        "name",
        "order",
        "queue",
        "released",
        "sorted",
        "stop",
        "taken",
    )

    def __init__(self, name: str, queue: Queue | None, workloads: list[Workload]) -> None:
        self.name = name
        self.queue = queue
        self.level = queue.priority if queue is not None else 0
        self.order = workloads
        self.sorted = False
        self.cursor = 0
        self.done = False
        self.released: set[str] = set()
        self.taken: list[int] = []  # indices in ``order`` of the released workloads
        self.blocked: list[int] = []  # indices tried and found not to fit, in order
        self.stop: Workload | None = None  # the workload a StrictFIFO queue stopped at

    @property
    def strict(self) -> bool:
        return self.queue is not None and self.queue.ordering is Ordering.STRICT_FIFO

    def stop_at(self, index: int) -> None:
        """The queue goes no further this decision: it waits behind ``order[index]``."""
        self.stop = self.order[index]
        self.cursor = index
        self.done = True

    def exhaust(self) -> None:
        """Every workload of the queue has been tried this decision."""
        self.cursor = len(self.order)
        self.done = True

    def ensure_sorted(self) -> list[Workload]:
        if not self.sorted:
            sort_in_queue_order(self.order)
            self.sorted = True
        return self.order
