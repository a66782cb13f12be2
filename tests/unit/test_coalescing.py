"""The dispatch loop's work queue: a burst of changes makes one cycle, changes during a cycle make
exactly one more, and a delayed kick arrives on its own.

The queue's rules are about time (a quiet period, a longest wait), so these tests run on an
event loop whose clock is virtual: it moves only when every task waits, straight to the next
timer. A sleep of 1 ms is 1 ms, however busy the machine, and the counts below are exact.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

from controller.coalescing import Coalescer

T = TypeVar("T")


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` starts at 0 and jumps to each timer when nothing else can
    run. No I/O: a wait with no timer to jump to is a deadlock, and fails."""

    def __init__(self) -> None:
        super().__init__(selectors.SelectSelector())
        self.now = 0.0
        real = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> list[Any]:
            if timeout is None:
                raise RuntimeError("every task waits and no timer is due: the test would hang")
            self.now += max(0.0, timeout)
            return list(real(0))

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self.now


def in_virtual_time(main: Coroutine[Any, Any, T]) -> T:
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


def coalescer(debounce: float, longest: float) -> Coalescer:
    return Coalescer(debounce, longest, clock=asyncio.get_running_loop().time)


async def cycles_after(queue: Coalescer, kicking: asyncio.Task[None], seconds: float) -> int:
    woke = 0

    async def loop() -> None:
        nonlocal woke
        while True:
            await queue.wait()
            woke += 1

    task = asyncio.create_task(loop())
    await kicking
    await asyncio.sleep(seconds)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return woke


def test_a_burst_of_a_hundred_changes_makes_one_cycle() -> None:
    async def main() -> tuple[int, int]:
        queue = coalescer(debounce=0.02, longest=0.5)

        async def burst() -> None:
            for _ in range(100):
                queue.kick()
                await asyncio.sleep(0.001)

        return await cycles_after(queue, asyncio.create_task(burst()), 0.1), queue.kicks

    assert in_virtual_time(main()) == (1, 100)


def test_changes_that_never_stop_still_make_a_cycle_every_longest_seconds() -> None:
    async def main() -> int:
        queue = coalescer(debounce=0.05, longest=0.1)

        async def steady() -> None:
            for _ in range(50):
                queue.kick()
                await asyncio.sleep(0.01)  # never quiet for the debounce

        return await cycles_after(queue, asyncio.create_task(steady()), 0.2)

    # Kicks every 10 ms for half a second: a cycle each 0.1 s of it, and none after.
    assert in_virtual_time(main()) == 5


def test_changes_during_a_cycle_make_exactly_one_more() -> None:
    async def main() -> Coalescer:
        queue = coalescer(debounce=0.0, longest=0.0)
        queue.kick()
        await queue.wait()
        for _ in range(10):  # the cycle runs; changes arrive meanwhile
            queue.kick()
        await queue.wait()
        return queue

    queue = in_virtual_time(main())
    assert queue.wakeups == 2
    assert not queue.pending


def test_a_delayed_kick_wakes_the_loop_and_only_the_earliest_is_kept() -> None:
    async def main() -> tuple[int, float]:
        queue = coalescer(debounce=0.0, longest=0.0)
        queue.kick_after(5.0)
        queue.kick_after(0.02)
        queue.kick_after(1.0)
        async with asyncio.timeout(1.0):
            await queue.wait()
        woke_at = asyncio.get_running_loop().time()
        queue.close()
        return queue.kicks, woke_at

    kicks, woke_at = in_virtual_time(main())
    assert kicks == 1
    assert abs(woke_at - 0.02) < 1e-9
