"""A work queue with one key: "the state changed, decide again".

The controller is level-triggered: every cycle decides from the whole current state, so an
event only needs to say *that* something changed. Many events make one cycle: the first kick
of a burst opens a short quiet period (``debounce``) that every further kick extends, up to
``longest`` after the first, and then ``wait`` returns once. Kicks that arrive while a cycle
runs make exactly one more cycle. ``kick_after`` asks for a cycle later on (a retry, a
starvation deadline, a periodic resync); only the earliest such request is kept, since the
cycle it causes sees everything anyway.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Coalescer:
    def __init__(
        self, debounce: float, longest: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not 0 <= debounce <= longest:
            raise ValueError(f"need 0 <= debounce ({debounce}) <= longest ({longest})")
        self.debounce = debounce
        self.longest = longest
        self._clock = clock
        self._kicked = asyncio.Event()
        self._first: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.kicks = 0
        """Kicks received, for tests and metrics."""
        self.wakeups = 0
        """Times ``wait`` returned: how many cycles the kicks made."""

    @property
    def pending(self) -> bool:
        return self._first is not None

    def kick(self) -> None:
        """Something changed: make sure a cycle follows. Cheap; call it from any listener."""
        self.kicks += 1
        if self._first is None:
            self._first = self._clock()
        self._kicked.set()

    def kick_after(self, seconds: float) -> None:
        """Make sure a cycle happens within ``seconds`` (sooner if something else kicks)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + max(0.0, seconds)
        if self._timer is not None and not self._timer.cancelled() and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self.kick()

    async def wait(self) -> None:
        """Return once a burst of kicks has settled (or has gone on for ``longest``)."""
        while self._first is None:
            self._kicked.clear()
            await self._kicked.wait()
        while True:
            self._kicked.clear()
            assert self._first is not None
            left = min(self.debounce, self._first + self.longest - self._clock())
            if left <= 0:
                break
            try:
                async with asyncio.timeout(left):
                    await self._kicked.wait()
            except TimeoutError:
                break
        self._first = None
        self._kicked.clear()
        self.wakeups += 1

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
