"""Running a long piece of work without holding the event loop: steps, pauses and offloads.

The controller shares its event loop with the watches, the gate removals, the probes and the
scheduler extender's HTTP server, so one dispatch cycle over 100k pending pods must not hold
it for its whole length. Such work is written as a generator of *steps*: it yields ``None``
between batches of its loops (a place where it may pause) and ``Offload(work)`` for a pure
computation that may run off the loop (the value of ``work()`` is sent back in). Two drivers:

* ``run_through`` runs every step at once, offloads inline, on the caller's thread: what tests
  and small clusters see, and the same code path otherwise;
* ``run_paced`` runs steps until it has held the loop for ``slice_seconds``, then lets the
  loop run everything else that is ready (``asyncio.sleep(0)``) and goes on; an offload runs
  in a worker thread while the loop stays free (the thread gives the loop the interpreter
  lock every few milliseconds, ``sys.getswitchinterval``). After every pause or offload it
  asks ``still()``, and stops the work there (closes the generator) when the answer is no.

Between two steps, anything else may have happened on the loop: work written as steps reads
only what it copied at its start, or state whose change between batches it tolerates.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, Final, TypeVar

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741

BATCH: Final = 128
"""Items a loop handles between two places where it may pause (well under a millisecond's work)."""
FEW: Final = 16
"""The same, for a loop whose items are costly (each may format a message and queue a write)."""


class Offload:
    """A step asking for ``work()`` (pure: it touches nothing the loop changes) off the loop."""

    __slots__ = ("work",)

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work


Steps = Generator[Offload | None, Any, T]


def batches(items: Sequence[I], size: int = BATCH) -> Iterator[Sequence[I]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def run_through(steps: Steps[T]) -> T:
    """Every step at once, offloads included, on this thread."""
    sent: Any = None
    while True:
        try:
            step = steps.send(sent)
        except StopIteration as done:
            result: T = done.value
            return result
        sent = step.work() if step is not None else None


async def run_paced(steps: Steps[T], slice_seconds: float, still: Callable[[], bool]) -> T | None:
    """The steps, holding the loop ``slice_seconds`` at a time; None if ``still()`` said stop."""
    sent: Any = None
    since = time.perf_counter()
    try:
        while True:
            try:
                step = steps.send(sent)
            except StopIteration as done:
                result: T = done.value
                return result
            sent = None
            if step is not None:
                sent = await asyncio.to_thread(step.work)
                step = None  # what the work holds is the steps' to let go of, not this loop's
            elif time.perf_counter() - since < slice_seconds:
                continue
            else:
                await asyncio.sleep(0)
            if not still():
                return None
            since = time.perf_counter()
    finally:
        steps.close()


class Freezer:
    """Keeps the garbage collector from scanning the cache again and again (``gc.freeze``).

    A full collection scans every object the collector tracks, with the interpreter lock held:
    at 100k cached pods (their converted pods, workloads and orders) that is hundreds of
    milliseconds during which the loop stands still, however the cycle is paced. These objects
    live long and form no reference cycles, so once ``min_changes`` new ones have come (each
    pod added or converted anew, each workload a cycle built anew) since the last freeze,
    everything tracked is moved to the permanent generation, which collections skip. What a
    full collection still scans is then at most about ``min_changes`` pods' worth of objects,
    whatever the size of the cache (a fixed bound: measured at 100k pending, a bound of half
    the cache let full collections hold the loop for 0.2 to 0.5 s).

    The controller also freezes twice in every cycle over ``OFFLOAD_WORKLOADS`` workloads or
    more (``freeze``: after copying the pods, and after the decision): such a cycle's own
    containers (the pods copied, the managed map, the snapshot, the decision's orders and
    index, 100k entries each at 100k pending) would otherwise be traversed by every young
    collection until promoted, 10 to 20 ms each on the loaded development VM.

    Frozen objects are still freed by reference counting when nothing holds them any more;
    only garbage caught in a reference cycle at the moment of a freeze stays (most exposed:
    cyclic garbage old enough to have reached the oldest generation, which waits for a full
    collection). The controller avoids making cycles (``benchmarks/cycle.py`` reports what a
    run left frozen and unreachable).
    """

    def __init__(self, min_changes: int = 5_000) -> None:
        self.min_changes = min_changes
        self.changes = 0
        self.freezes = 0

    def changed(self, count: int = 1) -> None:
        """``count`` pods were added or converted anew, or workloads built anew: freeze at once if
        enough have been (a freeze takes no time: it moves the collector's lists, whatever their
        length)."""
        self.changes += count
        if self.changes >= self.min_changes:
            self.freeze()

    def freeze(self) -> None:
        gc.freeze()
        self.changes = 0
        self.freezes += 1
