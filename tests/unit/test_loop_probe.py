"""The controller's event-loop probe: a loop held by work that does not yield shows as a late
wake at least as long as the hold, less one interval; the benchmark reports the longest."""

from __future__ import annotations

import asyncio
import time

from benchmarks.sluicegate import loop_note
from controller.metrics import ControllerMetrics
from process.loops import LoopProbe


async def test_a_loop_held_for_three_tenths_of_a_second_shows_as_at_least_two_tenths() -> None:
    probe = LoopProbe(interval=0.1)
    task = asyncio.create_task(probe.run())
    await asyncio.sleep(0.15)  # the probe is asleep, with a wake planned
    time.sleep(0.3)  # work that does not yield
    await asyncio.sleep(0.25)  # the probe wakes, late
    task.cancel()
    assert probe.longest >= 0.3 - 0.1


def test_the_controller_exports_the_longest_block_and_the_benchmark_notes_it() -> None:
    metrics = ControllerMetrics()
    probe = LoopProbe()
    probe.longest = 0.0375
    metrics.loop_longest_block.set_function(lambda: probe.longest)
    assert metrics.registry.get_sample_value("sluicegate_event_loop_longest_block_seconds") == 0.0375
    assert loop_note(0.0375).startswith("the controllers' longest event-loop block: 38 ms")
