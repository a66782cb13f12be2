"""Start estimates on the controller: ``simulator.estimating.estimate`` at a bounded share of a core.

The visibility API's board (``controller.visibility``) offers each snapshot it builds to
``Estimator.offer``. An estimate starts from it only when none is running and the ``Pace``
allows, in a worker thread, off the dispatch path, with the holds learned so far
(``controller.holds``); meanwhile, and until it ends, boards carry the last estimates, stamped
with when they were made (``Estimates.made``). So estimates are made only while someone reads
the board, never more often than the board is built, and their CPU is at most ``share`` of one
core however deep the backlog (benchmarks/README.md, "Expected start times", has what one costs
at 10,000 pending).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from policy.model import Snapshot
from policy.ordering import Turns
from records.durations import Durations
from simulator.estimating import Estimate, estimate

log = logging.getLogger(__name__)

SHARE: Final = 0.1
"""The share of one core estimates may take at most (``--estimate-cpu-share``): a tenth."""


@dataclass(frozen=True, slots=True)
class Estimates:
    """One estimate's answers, by workload key, and the wall time of the snapshot it started from."""

    made: float
    by_key: Mapping[str, Estimate]


class Pace:
    """The next estimate may start only once ``factor`` × the last one's CPU time has passed
    since the last one ended: estimates take at most 1 / (``factor`` + 1) of one core. Pure:
    times are given."""

    def __init__(self, share: float = SHARE) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"a share of a core is in (0, 1], not {share}")
        self.factor = (1 - share) / share
        self.next = -float("inf")

    def due(self, now: float) -> bool:
        return now >= self.next

    def spent(self, ended: float, cpu: float) -> None:
        """An estimate ended at ``ended`` (the clock ``due`` reads) after ``cpu`` CPU seconds."""
        self.next = ended + self.factor * cpu


class Estimator:
    """The last estimates, and at most one being made."""

    def __init__(
        self,
        durations: Callable[[], Durations],
        *,
        share: float = SHARE,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.thread_time,
    ) -> None:
        self.durations = durations
        self.pace = Pace(share)
        self.clock = clock
        self.cpu = cpu
        self.latest: Estimates | None = None
        self.made = 0  # estimates made by this process
        self.spent = 0.0  # their CPU seconds
        self._task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def offer(self, snapshot: Snapshot) -> bool:
        """Start an estimate from ``snapshot`` if none runs and the pace allows; whether it did."""
        if self.busy or not self.pace.due(self.clock()):
            return False
        self._task = asyncio.create_task(self._make(snapshot, self.durations()), name="start estimates")
        return True

    async def wait(self) -> None:
        """Until the estimate being made (if any) has ended."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def _timed(self, snapshot: Snapshot, durations: Durations) -> tuple[dict[str, Estimate], float]:
        began = self.cpu()
        made = estimate(snapshot, Turns(), durations)
        return made, self.cpu() - began

    async def _make(self, snapshot: Snapshot, durations: Durations) -> None:
        cpu = 0.0
        try:
            # The round-robin turn lives in the leader's memory: from the first queue by name, as
            # the board's decision starts.
            made, cpu = await asyncio.to_thread(self._timed, snapshot, durations)
        except Exception:
            log.exception("estimating start times failed; the board keeps the last estimates")
            return
        finally:
            self.pace.spent(self.clock(), cpu)
        self.latest = Estimates(snapshot.now, made)
        self.made += 1
        self.spent += cpu
        log.debug("estimated %d waiting workloads' starts in %.3fs CPU from %d holds; the next in %.1fs "
                  "at the earliest", len(made), cpu, len(durations), max(0.0, self.pace.next - self.clock()))
