"""The figures every report and simulation is built from: percentiles, waits, GPUs in use."""

from __future__ import annotations

import pytest

from records.figures import Waits, binned, peak, percentile, step_series


def test_percentiles_are_nearest_rank_so_always_one_of_the_values() -> None:
    values = [0.0, 100.0, 200.0, 300.0]
    assert [percentile(values, p) for p in (1, 25, 50, 51, 95, 100)] == [0, 0, 100, 200, 300, 300]
    assert percentile([], 50) is None
    assert Waits.of([300, 0, 100, 200]) == Waits(count=4, mean=150, p50=100, p95=300, max=300)
    assert Waits.of([]) == Waits()


def test_gpus_in_use_step_up_at_starts_and_down_at_ends() -> None:
    """2 GPUs over [0, 10), 1 over [5, 20), a zero-length run and a run with no GPUs count nothing."""
    times, levels = step_series([(0, 10, 2), (5, 20, 1), (7, 7, 4), (8, 9, 0)])
    assert (times, levels) == ([0, 5, 10, 20], [2, 3, 1, 0])
    assert peak([(0, 10, 2), (5, 20, 1)]) == 3


@pytest.mark.parametrize(
    ("start", "end", "bins", "means"),
    [
        (0, 20, 4, [2, 3, 1, 1]),
        (0, 20, 3, [pytest.approx(2.25), pytest.approx(2), pytest.approx(1)]),  # 15 GPU-s over 20/3 s ...
        (-10, 30, 4, [0, 2.5, 1, 0]),
    ],
    ids=["bins on the changes", "bins across the changes", "bins beyond the runs"],
)
def test_binned_means_keep_the_area_exactly(start: float, end: float, bins: int, means: list[float]) -> None:
    times, levels = step_series([(0, 10, 2), (5, 20, 1)])
    result = binned(times, levels, start, end, bins)
    assert result == means
    assert sum(result) * (end - start) / bins == pytest.approx(2 * 10 + 1 * 15)
