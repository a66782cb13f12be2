"""PNG charts for people who would rather look than read (matplotlib, the Agg backend).

matplotlib is an optional dependency (``pip install 'sluicegate[charts]'``); it is imported
only when a chart is asked for. Figures are drawn at a fixed size, ``WIDTH`` × ``HEIGHT``
pixels, so a chart always fits the same slot in a page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.commands import CommandError
from records.accounting import Report
from records.figures import binned, step_series
from simulator.outcomes import Comparison
from simulator.simulating import Run

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH, HEIGHT, DPI = 1200, 900, 100
TOP = 8  # scopes drawn by name; the rest are summed as "other"
BINS = 600  # points across a time axis: the mean GPUs in use over each


def _figure(rows: int) -> tuple[Figure, list[Axes]]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError as e:
        raise CommandError("--png needs matplotlib: pip install 'sluicegate[charts]'") from e
    figure = Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI, layout="constrained")
    axes = figure.subplots(rows, 1, squeeze=False)
    return figure, [row[0] for row in axes]


def _save(figure: Figure, path: Path) -> None:
    try:
        figure.savefig(path, dpi=DPI, format="png")
    except OSError as e:
        raise CommandError(f"{path}: {e.strerror or e}") from e


def _dates(times: Sequence[float]) -> Any:
    """Epoch seconds as numpy datetimes (UTC, microseconds), which matplotlib draws as dates."""
    import numpy

    return (numpy.array(times, dtype=float) * 1e6).astype("datetime64[us]")


def _binned(
    series: Mapping[str, tuple[list[float], list[float]]], start: float, end: float
) -> tuple[list[float], dict[str, list[float]]]:
    """Every series as its mean over ``BINS`` equal bins (exact areas), the top ``TOP`` by
    GPU-hours by name and the rest summed as "other"."""
    width = (end - start) / BINS
    grid = [start + i * width for i in range(BINS)]
    values = {name: binned(times, levels, start, end, BINS) for name, (times, levels) in series.items()}
    ranked = sorted(values, key=lambda n: -sum(values[n]))
    kept = {n: values[n] for n in ranked[:TOP]}
    rest = ranked[TOP:]
    if rest:
        kept["other"] = [sum(values[n][i] for n in rest) for i in range(BINS)]
    return grid, kept


def _stacked(
    ax: Axes,
    title: str,
    series: Mapping[str, tuple[list[float], list[float]]],
    start: float,
    end: float,
    capacity: float | None,
) -> None:
    grid, values = _binned(series, start, end)
    if values:
        ax.stackplot(_dates(grid), list(values.values()), labels=list(values), step="post")
        ax.legend(loc="upper left", fontsize="small", ncols=3)
    if capacity:
        ax.axhline(capacity, color="black", linestyle="--", linewidth=1)
    ax.set_title(title)
    ax.set_ylabel("GPUs in use (mean per bin)")


def report_png(
    path: Path,
    report: Report,
    by_team: Mapping[str, tuple[list[float], list[float]]],
    by_queue: Mapping[str, tuple[list[float], list[float]]],
) -> None:
    """GPU use over time per team and per queue, and the waits per line of ``report``."""
    figure, (teams, queues, waits) = _figure(3)
    _stacked(teams, "GPUs in use per team", by_team, report.since, report.until, report.capacity)
    _stacked(queues, "GPUs in use per queue", by_queue, report.since, report.until, report.capacity)
    lines = [line for line in report.lines if line.waits.count][: TOP * 2]
    names = [line.scope for line in lines]
    positions = list(range(len(lines)))
    waits.bar(
        [p - 0.2 for p in positions], [(line.waits.mean or 0) / 60 for line in lines], width=0.4, label="mean"
    )
    waits.bar(
        [p + 0.2 for p in positions], [(line.waits.p95 or 0) / 60 for line in lines], width=0.4, label="p95"
    )
    waits.set_xticks(positions, names, rotation=30, ha="right", fontsize="small")
    waits.set_ylabel("minutes")
    waits.set_title(f"Wait from submission to release, per {report.by.value}")
    if lines:
        waits.legend(fontsize="small")
    _save(figure, path)


def simulation_png(path: Path, c: Comparison, proposed: Run, baseline: Run, resource: str) -> None:
    """p95 wait per queue under both, and the cluster's GPUs in use over time under both."""
    figure, (waits, use) = _figure(2)
    names = sorted(set(c.proposed.queues) | set(c.baseline.queues))
    positions = list(range(len(names)))

    def p95(summary: Any, name: str) -> float:
        f = summary.queues.get(name)
        return (f.waits.p95 or 0) / 60 if f is not None else 0.0

    waits.bar(
        [p - 0.2 for p in positions], [p95(c.baseline, n) for n in names], width=0.4, label=c.baseline.label
    )
    waits.bar(
        [p + 0.2 for p in positions], [p95(c.proposed, n) for n in names], width=0.4, label=c.proposed.label
    )
    waits.set_xticks(positions, names, rotation=30, ha="right", fontsize="small")
    waits.set_ylabel("p95 wait, minutes")
    waits.set_title("p95 wait per queue")
    waits.legend(fontsize="small")
    for run in (baseline, proposed):
        times, levels = step_series(
            (r.released, r.finished, r.record.amount(resource))
            for r in run.replays
            if r.released is not None and r.finished is not None
        )
        if times:
            start, end = c.proposed.window[0], max(c.proposed.window[1], c.baseline.window[1])
            width = (end - start) / BINS
            grid = [start + i * width for i in range(BINS)]
            use.step(_dates(grid), binned(times, levels, start, end, BINS), where="post", label=run.label)
    if c.proposed.capacity:
        use.axhline(c.proposed.capacity, color="black", linestyle="--", linewidth=1, label="capacity")
    use.set_ylabel("GPUs in use (mean per bin)")
    use.set_title("GPUs in use in the cluster")
    use.legend(fontsize="small")
    _save(figure, path)
