"""The dispatch loop's work queue: a burst of changes makes one cycle, changes during a cycle make
exactly one more, and a delayed kick arrives on its own."""

from __future__ import annotations

import asyncio

from extender.coalescing import Coalescer


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


async def test_a_burst_of_a_hundred_changes_makes_one_cycle() -> None:
    queue = Coalescer(debounce=0.02, longest=0.5)

    async def burst() -> None:
        for _ in range(100):
            queue.kick()
            await asyncio.sleep(0.001)

    assert await cycles_after(queue, asyncio.create_task(burst()), 0.1) == 1
    assert queue.kicks == 100


async def test_changes_that_never_stop_still_make_a_cycle_every_longest_seconds() -> None:
    queue = Coalescer(debounce=0.05, longest=0.1)

    async def steady() -> None:
        for _ in range(50):
            queue.kick()
            await asyncio.sleep(0.01)  # never quiet for the debounce

    woke = await cycles_after(queue, asyncio.create_task(steady()), 0.2)
    assert 3 <= woke <= 8


async def test_changes_during_a_cycle_make_exactly_one_more() -> None:
    queue = Coalescer(debounce=0.0, longest=0.0)
    queue.kick()
    await queue.wait()
    for _ in range(10):  # the cycle runs; changes arrive meanwhile
        queue.kick()
    await queue.wait()
    assert queue.wakeups == 2
    assert not queue.pending


async def test_a_delayed_kick_wakes_the_loop_and_only_the_earliest_is_kept() -> None:
    queue = Coalescer(debounce=0.0, longest=0.0)
    queue.kick_after(5.0)
    queue.kick_after(0.02)
    queue.kick_after(1.0)
    async with asyncio.timeout(1.0):
        await queue.wait()
    assert queue.kicks == 1
    queue.close()
