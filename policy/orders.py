"""Each queue's waiting work in queue order, kept from one dispatch decision to the next.

A decision needs the snapshot's pending work grouped by queue and each group in queue order;
gathering is a pass over every workload and sorting is most of the cost when many queues can
release (a burst), yet between two decisions only a few workloads arrive, change or leave.
``Orders`` keeps what the last decision gathered: the workloads it saw, its running ones, and
each queue's pending ones in queue order. The next decision (``gather``) finds what is new and
what is gone by identity, in a few C-level passes; drops what is gone from the kept orders,
sorts only what is new and merges it in. The controller rebuilds only the workloads whose pods
changed (``controller.snapshots``), so an unchanged workload is the very same object in the next
snapshot and a changed one is a new object, which counts as new here.

The answer is exactly what gathering and sorting from scratch gives. Queue order (pod priority,
creation time, key) is a total order when workload keys are unique in a snapshot, as they are,
so the sorted list is the same whatever order a decision starts from; the running work is the
same set, and what a decision does with it (sums, and stragglers sorted by pod) does not
depend on its order. The kept state only makes a decision cheaper: with ``Orders()`` (or none),
it gives the same answer. Kept workloads stay referenced, so an identity seen in one snapshot
is never another object's in the next.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import filterfalse
from types import MappingProxyType

from policy.model import State, Workload
from policy.ordering import sort_in_queue_order
from policy.usage import Ledger

# Past this share of new work, gathering from scratch beats merging what is new into the kept
# orders one workload at a time (each merge costs a binary search and a copy of the queue).
FRESH_SHARE = 0.25

_NOTHING: Mapping[int, Workload] = MappingProxyType({})


def queue_rank(w: Workload) -> tuple[int, float, str]:
    """Queue order as one key: higher pod priority first, then creation time, then key."""
    return -w.priority, w.created, w.key


Gathered = tuple[dict[str, list[Workload]], list[Workload], Ledger]
"""Pending work by queue (each in queue order, queues by name), the running work, and the
running work counted (a ``Ledger`` the caller copies with ``Ledger.load``, never changes)."""


class Orders:
    """What one decision gathered, for the next to start from. Immutable once made."""

    __slots__ = ("_counted", "_queues", "_running", "_seen", "fresh_share")

    def __init__(
        self,
        seen: Mapping[int, Workload] = _NOTHING,
        running: Sequence[Workload] = (),
        queues: Mapping[str, Sequence[Workload]] | None = None,
        *,
        fresh_share: float = FRESH_SHARE,
        counted: Ledger | None = None,
    ) -> None:
        self.fresh_share = fresh_share
        """Past this share of new workloads in a snapshot, ``gather`` starts from scratch."""
        self._seen = seen  # id -> every workload of the snapshot (it keeps them alive)
        self._running = tuple(running)
        self._queues: Mapping[str, tuple[Workload, ...]] = MappingProxyType(
            {name: tuple(order) for name, order in (queues or {}).items()}
        )
        self._counted = counted if counted is not None else _counted(self._running)
        """The running work counted: kept too, since between two decisions little starts or ends."""

    def __len__(self) -> int:
        """How many workloads are kept."""
        return len(self._seen)

    def order(self, queue: str) -> tuple[Workload, ...]:
        """``queue``'s pending work in queue order, as kept."""
        return self._queues.get(queue, ())

    def gather(self, workloads: Sequence[Workload]) -> tuple[Gathered, Orders]:
        """The pending work of ``workloads`` by queue in queue order, the running work counted,
        and the orders to keep for the next decision (each queue's pending work is kept as
        gathered here, this decision's releases included: the next snapshot shows them running).

        What is new and what is gone are found by identity in passes over dicts keyed by id (C
        loops); what is gone only when the count says some kept workload is missing."""
        kept = self._seen
        seen = dict(zip(map(id, workloads), workloads, strict=True))
        new = [seen[i] for i in filterfalse(kept.__contains__, seen)]
        if not kept or len(new) > self.fresh_share * len(workloads):
            by_queue, running = _fresh(workloads)
            counted = _counted(running)
            return (by_queue, running, counted), self._next(seen, running, by_queue, counted)
        gone: list[Workload] = []
        if len(seen) - len(new) == len(kept):  # every kept workload is still there
            if not new:
                return (self._by_queue(), list(self._running), self._counted), self
        else:
            gone = [kept[i] for i in filterfalse(seen.__contains__, kept)]
        by_queue, running, counted = self._update(gone, new)
        return (by_queue, running, counted), self._next(seen, running, by_queue, counted)

    def _next(
        self, seen: Mapping[int, Workload], running: list[Workload], by_queue: dict[str, list[Workload]],
        counted: Ledger,
    ) -> Orders:
        return Orders(seen, running, by_queue, fresh_share=self.fresh_share, counted=counted)

    def _by_queue(self) -> dict[str, list[Workload]]:
        return {name: list(order) for name, order in self._queues.items()}

    def _update(self, gone: list[Workload], new: list[Workload]) -> Gathered:
        pending, is_running = State.PENDING, State.RUNNING
        touched = {w.queue for w in gone if w.state is pending}
        ended = {id(w) for w in gone if w.state is is_running}
        by_queue = {name: list(order) for name, order in self._queues.items()}
        for w in gone:
            if w.state is pending:
                _remove(by_queue, w)
        for name in touched:
            if not by_queue.get(name, True):
                del by_queue[name]
        running = [w for w in self._running if id(w) not in ended] if ended else list(self._running)
        started: list[Workload] = []
        arrived: defaultdict[str, list[Workload]] = defaultdict(list)
        for w in new:
            if w.state is pending:
                arrived[w.queue].append(w)
            elif w.state is is_running:
                started.append(w)
        running.extend(started)
        for name, fresh in arrived.items():
            sort_in_queue_order(fresh)
            by_queue[name] = _merge(by_queue.get(name, []), fresh)
        if ended:  # counting what ended back out is not exact (a sum of zero, an empty scope)
            counted = _counted(running)
        elif started:
            counted = Ledger()
            counted.load(self._counted)
            counted.run_all(started)
        else:
            counted = self._counted
        return {name: by_queue[name] for name in sorted(by_queue)}, running, counted


def _counted(running: Iterable[Workload]) -> Ledger:
    ledger = Ledger()
    ledger.run_all(running)
    return ledger


def _fresh(workloads: Iterable[Workload]) -> tuple[dict[str, list[Workload]], list[Workload]]:
    """Gathering from scratch: one pass, then a sort of each queue."""
    by_queue: defaultdict[str, list[Workload]] = defaultdict(list)
    running: list[Workload] = []
    pending, is_running = State.PENDING, State.RUNNING
    for w in workloads:
        state = w.state
        if state is pending:
            by_queue[w.queue].append(w)
        elif state is is_running:
            running.append(w)
    for order in by_queue.values():
        sort_in_queue_order(order)
    return {name: by_queue[name] for name in sorted(by_queue)}, running


def _remove(by_queue: dict[str, list[Workload]], w: Workload) -> None:
    """Take ``w`` out of its queue's order: found by binary search (queue order is total)."""
    order = by_queue.get(w.queue)
    if order is None:
        return
    rank = queue_rank(w)
    at = bisect_left(order, rank, key=queue_rank)
    if at < len(order) and order[at] is w:
        del order[at]
    else:  # not where its rank says: look by identity (never expected)
        by_queue[w.queue] = [x for x in order if x is not w]


def _merge(order: list[Workload], fresh: list[Workload]) -> list[Workload]:
    """``order`` and ``fresh``, both in queue order, as one list in queue order."""
    if not order:
        return fresh
    out: list[Workload] = []
    start = 0
    for w in fresh:
        at = bisect_right(order, queue_rank(w), lo=start, key=queue_rank)
        out.extend(order[start:at])
        out.append(w)
        start = at
    out.extend(order[start:])
    return out
