"""The matrix starts a run only on a quiet machine: the load average before each run, the wait
for it to fall, the refusal, ``--allow-load`` and the mark it leaves in the report."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks import machine, reporting, results
from benchmarks import matrix as matrices
from tests.unit.test_benchmark_harness import a_run


class Machine:
    """A load average that follows a script, and a clock that moves only when slept."""

    def __init__(self, loads: list[float]) -> None:
        self.loads: Iterator[float] = iter(loads)
        self.now = 0.0
        self.slept = 0.0

    def read(self) -> float:
        return next(self.loads)

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds

    def clock(self) -> float:
        return self.now


def test_on_a_quiet_machine_the_run_starts_at_once() -> None:
    box = Machine([1.9])
    load = machine.await_quiet(2, patience=600, read=box.read, sleep=box.sleep, clock=box.clock)
    assert load == machine.Load(1.9, 2.0)
    assert load.quiet and box.slept == 0


def test_a_loaded_machine_is_waited_for_until_its_load_falls_to_one_per_core() -> None:
    box = Machine([4.4, 3.1, 2.3, 2.0])
    load = machine.await_quiet(2, patience=600, read=box.read, sleep=box.sleep, clock=box.clock)
    assert load == machine.Load(2.0, 2.0)
    assert box.slept == 3 * machine.QUIET_POLL_SECONDS


def test_a_machine_that_stays_loaded_is_refused_after_the_wait() -> None:
    box = Machine([8.0] * 100)
    load = machine.await_quiet(4, patience=60, read=box.read, sleep=box.sleep, clock=box.clock)
    assert not load.quiet and not load.allowed
    assert (load.average, load.bound) == (8.0, 4.0)
    assert box.slept == 60


def test_allow_load_starts_at_once_and_says_the_load_was_over_the_bound() -> None:
    box = Machine([5.0])
    load = machine.await_quiet(2, patience=600, allow=True, read=box.read, sleep=box.sleep, clock=box.clock)
    assert load == machine.Load(5.0, 2.0, allowed=True)
    assert box.slept == 0


def test_the_matrix_refuses_to_start_on_a_loaded_machine_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    monkeypatch.setattr(machine, "cores", lambda: 2)
    monkeypatch.setattr(matrices.machine, "await_quiet",
                        lambda cores, **how: machine.Load(6.0, machine.quiet_bound(cores), how["allow"]))
    monkeypatch.setattr(matrices, "one", lambda *a, **k: started.append("run"))
    code = matrices.main(["--quick", "--systems", "bare", "--quiet-wait", "0",
                          "--results", str(tmp_path / "r"), "--output", str(tmp_path / "R.md")])
    assert code == 3
    assert started == []
    assert not (tmp_path / "r").exists()


def test_a_run_started_with_allow_load_is_marked_in_its_result_and_load_rows(tmp_path: Path) -> None:
    loaded = replace(a_run("sluicegate", "Sluicegate", 80.0), load_before=5.2, load_allowed=True)
    quiet = replace(a_run("bare", "bare ungater", 69.0), load_before=0.4)
    results.save(tmp_path, loaded)
    assert results.load_all(tmp_path) == [loaded]
    text = reporting.report([quiet, loaded])
    assert "| result | ok | ok **LOADED** (started over the quiet bound, --allow-load) |" in text
    row = next(line for line in text.splitlines() if line.startswith("| load average before the run"))
    assert row == ("| load average before the run; at the load's start → end | 0.4; 1.0 → 2.0 "
                   "| 5.2 **over the bound**; 1.0 → 2.0 |")


def test_runs_saved_before_the_load_was_recorded_say_so() -> None:
    text = reporting.report([a_run("bare", "bare ungater", 69.0)])
    assert "| load average before the run; at the load's start → end | not recorded; 1.0 → 2.0 |" in text
