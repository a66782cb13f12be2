"""What a run means for each queue and team: waits, GPU use, makespan; and how two runs differ.

Per scope (a queue, a team, the cluster), over the workloads the run replayed:

* ``waits`` — from submission to release, over the workloads released (``records.figures``);
  ``unreleased`` counts those the run never released (a queue missing from the setup, a
  workload larger than a quota by itself, ``maxRunning: 0``).
* ``gpu_hours`` — GPUs × the time each workload ran on a node, in hours; ``quota_hours`` — GPUs
  × the time it held quota released but not placed. A replayed workload holds its slot as it
  did in the trace, and that hold splits at each pod's binding as the trace's did
  (``records.accounting.held_in``, the report's rule): a workload never placed in the trace
  uses no GPU in the replay either.
* ``utilisation`` — GPU-hours over the cluster's capacity × the run's window (the first
  submission to the last finish of the whole run); a queue's figure is its share of the
  cluster's capacity over that window, so the queues' figures add up to the cluster's. None
  without a capacity.
* ``makespan`` — from the scope's first submission to its last finish; None when some of its
  work never finished.
* ``peak`` — the most GPUs the scope had in use at once. The simulator does not model
  placement, so a cluster peak above the capacity means the policy lets more run than fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from policy import keys
from records.accounting import Held, held_in
from records.figures import Waits, peak
from simulator.simulating import Replay, Run


@dataclass(frozen=True, slots=True)
class Figures:
    workloads: int
    unreleased: int
    waits: Waits
    gpu_hours: float
    quota_hours: float
    utilisation: float | None
    makespan: float | None
    peak: float


@dataclass(frozen=True, slots=True)
class Summary:
    label: str
    queues: Mapping[str, Figures]
    teams: Mapping[str, Figures]
    cluster: Figures
    window: tuple[float, float]  # first submission, last finish
    capacity: float | None  # GPUs
    resource: str
    cycles: int


def _held(replay: Replay, resource: str) -> Held:
    """What ``replay`` held over its recorded hold (the trace's release, for as long as it is
    replayed), pod by pod: the same wherever the replay puts it in time."""
    r = replay.record
    assert r.released is not None  # only released records are replayed
    until = r.released + replay.duration
    used = unplaced = 0.0
    for pod in r.runs:
        h = held_in(pod, r.released, until, resource)
        used, unplaced = used + h.used, unplaced + h.unplaced
    return Held(used, unplaced)


def _figures(
    replays: list[Replay], resource: str, capacity: float | None, window: tuple[float, float]
) -> Figures:
    intervals = [
        (r.released, r.finished, r.record.amount(resource))
        for r in replays
        if r.released is not None and r.finished is not None
    ]
    held = [_held(r, resource) for r in replays if r.released is not None]
    gpu_seconds = sum(h.used for h in held)
    span = window[1] - window[0]
    unreleased = sum(r.released is None for r in replays)
    unfinished = any(r.finished is None for r in replays)
    makespan = None
    if replays and not unfinished:
        makespan = max(r.finished or 0.0 for r in replays) - min(r.record.submitted for r in replays)
    return Figures(
        workloads=len(replays),
        unreleased=unreleased,
        waits=Waits.of(w for r in replays if (w := r.wait) is not None),
        gpu_hours=gpu_seconds / 3600,
        quota_hours=sum(h.unplaced for h in held) / 3600,
        utilisation=gpu_seconds / (capacity * span) if capacity and span > 0 else None,
        makespan=makespan,
        peak=peak(intervals),
    )


def _grouped(replays: Iterable[Replay], scope: str) -> dict[str, list[Replay]]:
    out: dict[str, list[Replay]] = {}
    for r in replays:
        name = r.record.queue if scope == "queue" else (r.record.team or "(no team)")
        out.setdefault(name, []).append(r)
    return dict(sorted(out.items()))


def summarize(run: Run, capacity: float | None, resource: str = keys.GPU_RESOURCE) -> Summary:
    """The figures of ``run`` per queue, per team and for the cluster."""
    replays = list(run.replays)
    start = min((r.record.submitted for r in replays), default=0.0)
    end = max((r.finished for r in replays if r.finished is not None), default=start)
    window = (start, end)
    return Summary(
        label=run.label,
        queues=MappingProxyType(
            {q: _figures(rs, resource, capacity, window) for q, rs in _grouped(replays, "queue").items()}
        ),
        teams=MappingProxyType(
            {t: _figures(rs, resource, capacity, window) for t, rs in _grouped(replays, "team").items()}
        ),
        cluster=_figures(replays, resource, capacity, window),
        window=window,
        capacity=capacity,
        resource=resource,
        cycles=run.cycles,
    )


@dataclass(frozen=True, slots=True)
class Delta:
    """Proposed minus baseline, per figure; None where either side has no figure."""

    wait_mean: float | None
    wait_p50: float | None
    wait_p95: float | None
    wait_max: float | None
    utilisation: float | None
    makespan: float | None
    unreleased: int


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def difference(proposed: Figures, baseline: Figures) -> Delta:
    p, b = proposed.waits, baseline.waits
    return Delta(
        wait_mean=_minus(p.mean, b.mean),
        wait_p50=_minus(p.p50, b.p50),
        wait_p95=_minus(p.p95, b.p95),
        wait_max=_minus(p.max, b.max),
        utilisation=_minus(proposed.utilisation, baseline.utilisation),
        makespan=_minus(proposed.makespan, baseline.makespan),
        unreleased=proposed.unreleased - baseline.unreleased,
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    proposed: Summary
    baseline: Summary
    queues: Mapping[str, Delta]
    teams: Mapping[str, Delta]
    cluster: Delta


def compare(proposed: Summary, baseline: Summary) -> Comparison:
    """Scope by scope, for the scopes both runs have (both replay the same trace)."""
    return Comparison(
        proposed=proposed,
        baseline=baseline,
        queues=MappingProxyType(
            {q: difference(f, baseline.queues[q]) for q, f in proposed.queues.items() if q in baseline.queues}
        ),
        teams=MappingProxyType(
            {t: difference(f, baseline.teams[t]) for t, f in proposed.teams.items() if t in baseline.teams}
        ),
        cluster=difference(proposed.cluster, baseline.cluster),
    )
