"""``sluicegate report``: GPU-hours, jobs, waits and shares per team, queue or user.

    sluicegate report --trace trace.jsonl [--since 7d] [--by team|queue|user]
                      [-o table|csv|json] [--png FILE]

``--since`` is a length of time back from the end of the records (``7d``, ``36h``) or an RFC
3339 time; without it the period is everything the records hold. Records come from a trace
file (``--trace``), else from the recorder in the cluster, through the API server's service
proxy with the user's kubeconfig.

GPU-hours are the hours pods held GPUs on a node (from their binding to their end); the
quota-hours of pods released but not placed (from their release to their binding, or to their
end when never bound) are shown apart, as ``unplaced quota-hours`` (``records.accounting``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TypedDict

from cli import charting, recorder
from cli.commands import Command, CommandError
from cli.simulate import WaitsJSON, waits_json
from cli.tables import FORMATS, csv_text, json_text, number, percent, table
from policy import keys
from records.accounting import By, Line, Report, account, usage_over_time
from records.periods import format_duration, start_of
from records.sources import Source, TraceFile
from records.trace import format_time, parse_time


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", type=Path, help="read the records from this trace (JSON Lines)")
    parser.add_argument(
        "--since", help="a length back from the end of the records (7d), or an RFC 3339 time (default: all)"
    )
    parser.add_argument("--until", help="the end of the period (RFC 3339; default: the end of the records)")
    parser.add_argument("--by", choices=[b.value for b in By], default=By.TEAM.value)
    parser.add_argument("-o", "--output", choices=FORMATS, default="table")
    parser.add_argument("--png", type=Path, help="also draw GPU use over time and the waits to this PNG file")
    parser.add_argument("--gpus", type=float, help="the cluster's GPU capacity, for utilisation")
    parser.add_argument("--resource", default=keys.GPU_RESOURCE, help="the resource counted as GPUs")
    recorder.add_arguments(parser)


def source(args: argparse.Namespace) -> Source:
    if args.trace is None:
        return recorder.source(args)
    return TraceFile(args.trace)


def period(args: argparse.Namespace, src: Source) -> tuple[float, float]:
    end = src.now()
    try:
        until = parse_time(args.until) if args.until else end
    except ValueError as e:
        raise CommandError(f"--until: {e}") from e
    try:
        if args.since is None:
            since = min((r.submitted for r in src.records()), default=until)
        else:
            since = start_of(args.since, until)
    except ValueError as e:
        raise CommandError(f"--since: {e}") from e
    if since >= until and args.since is None:
        raise CommandError(f"nothing to report: no workload was submitted before the end of the period, "
                           f"{format_time(until)}")
    if since >= until:
        raise CommandError(f"--since {args.since} is not before the end of the period, {format_time(until)}")
    return since, until


def run(args: argparse.Namespace) -> int:
    if args.gpus is not None and args.gpus <= 0:
        raise CommandError("--gpus must be above 0")
    src = source(args)
    since, until = period(args, src)
    records = src.records(since)
    by = By(args.by)
    report = account(records, since=since, until=until, by=by, resource=args.resource, capacity=args.gpus)
    if args.output == "json":
        sys.stdout.write(json_text(report_json(report)))
    elif args.output == "csv":
        sys.stdout.write(csv_text(_CSV_HEADER, [_csv_row(line) for line in (*report.lines, report.total)]))
    else:
        sys.stdout.write(report_text(report))
    if args.png:
        team = usage_over_time(records, since=since, until=until, by=By.TEAM, resource=args.resource)
        queue = usage_over_time(records, since=since, until=until, by=By.QUEUE, resource=args.resource)
        charting.report_png(args.png, report, team, queue)
    return 0


def _cells(line: Line, capacity: bool) -> list[str]:
    cells = [
        line.scope,
        f"{line.jobs}",
        number(line.gpu_hours),
        number(line.quota_hours),
        percent(line.share),
        "-" if line.waits.mean is None else format_duration(line.waits.mean),
        "-" if line.waits.p95 is None else format_duration(line.waits.p95),
        f"{line.waiting}",
    ]
    return [*cells, percent(line.utilisation)] if capacity else cells


def report_text(report: Report) -> str:
    capacity = report.capacity is not None
    header = [report.by.value, "jobs", "GPU-hours", "unplaced quota-hours", "share", "mean wait", "p95 wait",
              "waiting"]
    header += ["utilisation"] if capacity else []
    span = format_duration(report.until - report.since)
    title = f"{report.resource} per {report.by.value}, {format_time(report.since)} to "
    title += f"{format_time(report.until)} ({span})\n"
    rows = [_cells(line, capacity) for line in report.lines] + [_cells(report.total, capacity)]
    return title + table(header, rows)


_CSV_HEADER = [
    "scope",
    "jobs",
    "gpu_hours",
    "share",
    "wait_mean_seconds",
    "wait_p95_seconds",
    "waiting",
    "utilisation",
    "quota_hours",
]


def _csv_row(line: Line) -> list[object]:
    def blank(v: float | None) -> object:
        return "" if v is None else v

    return [
        line.scope,
        line.jobs,
        line.gpu_hours,
        blank(line.share),
        blank(line.waits.mean),
        blank(line.waits.p95),
        line.waiting,
        blank(line.utilisation),
        line.quota_hours,
    ]


class LineJSON(TypedDict):
    scope: str
    jobs: int
    gpuHours: float
    quotaHours: float
    share: float | None
    wait: WaitsJSON
    waiting: int
    utilisation: float | None


class ReportJSON(TypedDict):
    by: str
    since: str
    until: str
    resource: str
    capacity: float | None
    lines: list[LineJSON]
    total: LineJSON


def _line_json(line: Line) -> LineJSON:
    return {
        "scope": line.scope,
        "jobs": line.jobs,
        "gpuHours": line.gpu_hours,
        "quotaHours": line.quota_hours,
        "share": line.share,
        "wait": waits_json(line.waits),
        "waiting": line.waiting,
        "utilisation": line.utilisation,
    }


def report_json(report: Report) -> ReportJSON:
    return {
        "by": report.by.value,
        "since": format_time(report.since),
        "until": format_time(report.until),
        "resource": report.resource,
        "capacity": report.capacity,
        "lines": [_line_json(line) for line in report.lines],
        "total": _line_json(report.total),
    }


COMMAND = Command(
    "report",
    "GPU-hours, jobs, waits and shares per team, queue or user",
    configure,
    run,
    description=__doc__ or "",
)
