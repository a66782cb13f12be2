"""``sluicegate simulate``: replay a trace under proposed Queues, Teams and Policy, and compare.

    sluicegate simulate --trace trace.jsonl --policy proposed/ [--baseline current/]
                        [--gpus N] [-o table|json] [--png FILE]

Without ``--baseline`` the comparison is with the trace as it was recorded.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict

from cli import charting
from cli.commands import Command, CommandError
from cli.tables import json_text, percent, signed, table
from policy import keys
from records.figures import Waits
from records.periods import format_duration
from records.trace import Record, format_time, load, span
from simulator.outcomes import Comparison, Delta, Figures, Summary, compare, summarize
from simulator.setups import Setup, load_setup
from simulator.simulating import Run, recorded, simulate


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace", type=Path, required=True, help="a trace (JSON Lines): records export or synth"
    )
    parser.add_argument(
        "--policy", type=Path, required=True, help="directory of the proposed Queue, Team, Policy YAML"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="directory of the current objects (default: the trace as it was recorded)",
    )
    parser.add_argument(
        "--gpus", type=float, help="the cluster's GPU capacity (default: the Policy's GPU quota)"
    )
    parser.add_argument("--resource", default=keys.GPU_RESOURCE, help="the resource counted as GPUs")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--png", type=Path, help="also draw the waits and the GPUs in use to this PNG file")
    parser.add_argument(
        "--exact", action="store_true", help="hand dispatch the whole cluster every cycle (slow; same answer)"
    )
    parser.add_argument(
        "--reaction", type=float, default=0.0, metavar="SECONDS",
        help="the controller's reaction time: each cycle runs this long after its first event (default 0)",
    )


def _capacity(args: argparse.Namespace, setups: Sequence[Setup]) -> tuple[float | None, str]:
    if args.gpus is not None:
        if args.gpus <= 0:
            raise CommandError("--gpus must be above 0")
        return args.gpus, "--gpus"
    for setup in setups:
        cap = setup.policy.quota.get(args.resource)
        if cap:
            return cap / 1000, f"Policy quota of {args.resource} in {setup.source}"
    return None, ""


def run(args: argparse.Namespace) -> int:
    with args.trace.open(encoding="utf-8") as stream:
        trace = load(stream, source=str(args.trace))
    if not trace:
        raise CommandError(f"{args.trace}: the trace has no workloads")
    proposed_setup = load_setup(args.policy)
    baseline_setup = load_setup(args.baseline) if args.baseline else None
    capacity, capacity_from = _capacity(args, [s for s in (proposed_setup, baseline_setup) if s])
    if args.reaction < 0:
        raise CommandError("--reaction must not be negative")
    proposed = simulate(trace, proposed_setup, exact=args.exact, reaction=args.reaction)
    baseline = (simulate(trace, baseline_setup, exact=args.exact, reaction=args.reaction) if baseline_setup
                else recorded(trace))
    comparison = compare(
        summarize(proposed, capacity, args.resource), summarize(baseline, capacity, args.resource)
    )
    notes = _notes(trace, proposed, proposed_setup, comparison, capacity)
    if args.output == "json":
        sys.stdout.write(json_text(_json(args, trace, proposed, comparison, capacity_from, notes)))
    else:
        sys.stdout.write(_text(args, trace, proposed, comparison, capacity_from, notes))
    if args.png:
        charting.simulation_png(args.png, comparison, proposed, baseline, args.resource)
    return 0


def _notes(
    trace: Sequence[Record], run: Run, setup: Setup, comparison: Comparison, capacity: float | None
) -> list[str]:
    notes = []
    if run.skipped:
        notes.append(f"{len(run.skipped)} workloads never ran in the trace: no duration to replay, left out")
    if run.censored:
        notes.append(f"{run.censored} workloads were still running when the trace ended: replayed until then")
    missing = sorted({r.queue for r in trace} - set(setup.queues))
    if missing:
        notes.append(
            f"queues in the trace but not in {setup.source}: {', '.join(missing)} (their work never runs)"
        )
    unreleased = comparison.proposed.cluster.unreleased
    if unreleased:
        notes.append(f"{unreleased} workloads are never released under {setup.source}")
    peak = comparison.proposed.cluster.peak
    if capacity is not None and peak > capacity:
        notes.append(
            f"up to {peak:g} GPUs run at once under {setup.source}, more than the capacity of {capacity:g}: "
            "the simulator does not model placement, so these would wait for kube-scheduler"
        )
    return notes


# --- table ----------------------------------------------------------------------------------

_HEADER = [
    "",
    "workloads",
    "wait p50",
    "Δ",
    "wait p95",
    "Δ",
    "wait max",
    "Δ",
    "GPU util",
    "Δ",
    "makespan",
    "Δ",
]


def _duration(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def _delta(seconds: float | None) -> str:
    return "-" if seconds is None else signed(format_duration(seconds))


def _row(name: str, f: Figures, d: Delta | None) -> list[str]:
    waits = f.waits
    count = f"{f.workloads}" + (f" ({f.unreleased} never)" if f.unreleased else "")
    if d is None:
        return [
            name,
            count,
            _duration(waits.p50),
            "",
            _duration(waits.p95),
            "",
            _duration(waits.max),
            "",
            percent(f.utilisation),
            "",
            _duration(f.makespan),
            "",
        ]
    util = "-" if d.utilisation is None else signed(f"{d.utilisation * 100:.1f}%")
    return [
        name,
        count,
        _duration(waits.p50),
        _delta(d.wait_p50),
        _duration(waits.p95),
        _delta(d.wait_p95),
        _duration(waits.max),
        _delta(d.wait_max),
        percent(f.utilisation),
        util,
        _duration(f.makespan),
        _delta(d.makespan),
    ]


def _section(title: str, figures: Mapping[str, Figures], deltas: Mapping[str, Delta]) -> str:
    rows = [_row(name, f, deltas.get(name)) for name, f in figures.items()]
    return table([title, *_HEADER[1:]], rows)


def _text(
    args: argparse.Namespace,
    trace: Sequence[Record],
    run: Run,
    c: Comparison,
    capacity_from: str,
    notes: list[str],
) -> str:
    p, b = c.proposed, c.baseline
    start, end = span(trace)
    lines = [
        f"trace {args.trace}: {len(trace)} workloads, {len(run.replays)} replayed, "
        f"{format_time(start)} to {format_time(end)}",
        f"proposed: {p.label} ({p.cycles} dispatch cycles); baseline: {b.label}"
        + (f" ({b.cycles} dispatch cycles)" if b.cycles else ""),
        f"GPU capacity: {p.capacity:g} ({capacity_from})"
        if p.capacity
        else "GPU capacity: unknown (give --gpus)",
        "Δ: proposed minus baseline",
        "",
        _section("queue", p.queues, c.queues),
        _section("team", p.teams, c.teams),
        table(["", *_HEADER[1:]], [_row("cluster", p.cluster, c.cluster)]),
    ]
    lines.extend(f"note: {n}" for n in notes)
    return "\n".join(lines) + ("\n" if notes else "")


# --- JSON -----------------------------------------------------------------------------------


class WaitsJSON(TypedDict):
    count: int
    meanSeconds: float | None
    p50Seconds: float | None
    p95Seconds: float | None
    maxSeconds: float | None


class FiguresJSON(TypedDict):
    workloads: int
    unreleased: int
    wait: WaitsJSON
    gpuHours: float
    quotaHours: float
    utilisation: float | None
    makespanSeconds: float | None
    peakGpus: float


class SummaryJSON(TypedDict):
    label: str
    cycles: int
    start: str
    end: str
    queues: dict[str, FiguresJSON]
    teams: dict[str, FiguresJSON]
    cluster: FiguresJSON


def waits_json(w: Waits) -> WaitsJSON:
    return {
        "count": w.count,
        "meanSeconds": w.mean,
        "p50Seconds": w.p50,
        "p95Seconds": w.p95,
        "maxSeconds": w.max,
    }


def _figures_json(f: Figures) -> FiguresJSON:
    return {
        "workloads": f.workloads,
        "unreleased": f.unreleased,
        "wait": waits_json(f.waits),
        "gpuHours": f.gpu_hours,
        "quotaHours": f.quota_hours,
        "utilisation": f.utilisation,
        "makespanSeconds": f.makespan,
        "peakGpus": f.peak,
    }


def _summary_json(s: Summary) -> SummaryJSON:
    return {
        "label": s.label,
        "cycles": s.cycles,
        "start": format_time(s.window[0]),
        "end": format_time(s.window[1]),
        "queues": {n: _figures_json(f) for n, f in s.queues.items()},
        "teams": {n: _figures_json(f) for n, f in s.teams.items()},
        "cluster": _figures_json(s.cluster),
    }


def _delta_json(d: Delta) -> dict[str, float | int | None]:
    return {
        "waitMeanSeconds": d.wait_mean,
        "waitP50Seconds": d.wait_p50,
        "waitP95Seconds": d.wait_p95,
        "waitMaxSeconds": d.wait_max,
        "utilisation": d.utilisation,
        "makespanSeconds": d.makespan,
        "unreleased": d.unreleased,
    }


def _json(
    args: argparse.Namespace,
    trace: Sequence[Record],
    run: Run,
    c: Comparison,
    capacity_from: str,
    notes: list[str],
) -> dict[str, object]:
    start, end = span(trace)
    return {
        "trace": {
            "file": str(args.trace),
            "start": format_time(start),
            "end": format_time(end),
            "workloads": len(trace),
            "replayed": len(run.replays),
            "skipped": len(run.skipped),
            "censored": run.censored,
        },
        "capacity": {"resource": args.resource, "gpus": c.proposed.capacity, "from": capacity_from or None},
        "proposed": _summary_json(c.proposed),
        "baseline": _summary_json(c.baseline),
        "difference": {
            "queues": {n: _delta_json(d) for n, d in c.queues.items()},
            "teams": {n: _delta_json(d) for n, d in c.teams.items()},
            "cluster": _delta_json(c.cluster),
        },
        "notes": notes,
    }


COMMAND = Command(
    "simulate",
    "replay a trace under proposed Queues, Teams and Policy: waits, GPU use, makespan",
    configure,
    run,
    description=__doc__ or "",
)
