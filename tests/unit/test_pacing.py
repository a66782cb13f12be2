"""Work written as steps: run at once, or paced on the event loop so that other work goes on
between its batches, with its pure part in a worker thread, and stopped when told to."""

from __future__ import annotations

import asyncio
import threading

from controller.pacing import Offload, Steps, batches, run_paced, run_through


def counting(items: list[int], seen: list[int], threads: list[str]) -> Steps[int]:
    """Sums ``items`` in batches; the squares are worked out off the loop."""
    total = 0
    for batch in batches(items, 3):
        yield None
        seen.extend(batch)
        total += sum(batch)

    def squares() -> int:
        threads.append(threading.current_thread().name)
        return sum(i * i for i in items)

    squared: int = yield Offload(squares)
    return total + squared


def test_run_through_runs_every_step_and_the_offloaded_work_on_the_callers_thread() -> None:
    seen: list[int] = []
    threads: list[str] = []
    assert run_through(counting(list(range(10)), seen, threads)) == 45 + 285
    assert seen == list(range(10))
    assert threads == [threading.current_thread().name]


async def test_paced_work_lets_other_tasks_run_between_its_batches_and_offloads_to_a_thread() -> None:
    seen: list[int] = []
    threads: list[str] = []
    ticks: list[int] = []

    async def other() -> None:
        while True:
            ticks.append(len(seen))  # how far the paced work had got when this ran
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    result = await run_paced(counting(list(range(30)), seen, threads), 0.0, lambda: True)
    task.cancel()
    assert result == sum(range(30)) + sum(i * i for i in range(30))
    assert seen == list(range(30))
    assert any(0 < t < 30 for t in ticks), "the other task ran while the work was half done"
    assert threads and threads[0] != threading.current_thread().name


async def test_paced_work_stops_at_its_next_pause_once_told_to_and_is_closed() -> None:
    seen: list[int] = []
    closed: list[bool] = []

    def work() -> Steps[int]:
        try:
            for batch in batches(list(range(100)), 10):
                yield None
                seen.extend(batch)
            return len(seen)
        finally:
            closed.append(True)

    asked = 0

    def still() -> bool:
        nonlocal asked
        asked += 1
        return asked < 3

    assert await run_paced(work(), 0.0, still) is None
    assert seen == list(range(20)), "two batches ran, then it stopped at the third pause"
    assert closed == [True]


async def test_paced_work_that_fits_in_one_slice_never_pauses() -> None:
    seen: list[int] = []
    ticks: list[int] = []

    async def other() -> None:
        while True:
            ticks.append(len(seen))
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    await asyncio.sleep(0)
    ticks.clear()
    result = await run_paced(counting(list(range(30)), seen, []), 60.0, lambda: True)
    task.cancel()
    assert result == sum(range(30)) + sum(i * i for i in range(30))
    assert all(t in (0, 30) for t in ticks), "no other task ran between its batches"
