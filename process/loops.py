"""How long a process's event loop was held: a probe that asks to wake every ``interval`` and
records how late it woke.

A late wake is the loop held by work that did not yield (a long step of the controller's
cycle, a collection), or the process not run at all by a busy machine: the figure is an upper
bound on the loop's longest hold. ``longest`` is the most since the probe started.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

INTERVAL_SECONDS: Final = 0.1


class LoopProbe:
    def __init__(
        self, interval: float = INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self.clock = clock
        self.longest = 0.0
        """Seconds: the latest the probe ever woke."""

    async def run(self) -> None:
        while True:
            planned = self.clock() + self.interval
            await asyncio.sleep(self.interval)
            late = self.clock() - planned
            if late > self.longest:
                self.longest = late
