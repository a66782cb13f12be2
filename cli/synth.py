"""``sluicegate records synth``: a synthetic trace, for planning without history.

    sluicegate records synth --queues 50 --teams 10 --workloads 100000 --days 7 \\
        --durations 'lognormal(12m, 1.0)' --gpus '1:6,2:3,4:2,8:1' --sweeps 0.02 --seed 1 > trace.jsonl

Arrivals are a Poisson process per queue; durations and GPU counts are drawn from the given
distributions (docs/records.md lists the forms); a share of arrivals are sweeps: several
trials under one workflow label with a workflowMaxRunning. The same options and seed give the
same trace.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cli.commands import Command, CommandError
from policy import keys
from records.distributions import Distribution, parse_counts, parse_durations
from records.periods import parse_duration
from records.synthesizing import even_plan, synthesize
from records.trace import parse_time, write

DEFAULT_START = "2026-01-05T00:00:00Z"  # a Monday: a fixed default keeps a seed's trace the same

_T = TypeVar("_T")


def _parsed(parse: Callable[[str], _T], option: str, text: str) -> _T:
    try:
        return parse(text)
    except ValueError as e:
        raise CommandError(f"{option}: {e}") from e


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queues", type=int, default=10, help="how many queues (queue-00, queue-01, ...)")
    parser.add_argument(
        "--teams", type=int, default=3, help="how many teams; queues are dealt to them in turn"
    )
    parser.add_argument("--workloads", type=int, default=1000, help="how many workloads in all")
    parser.add_argument("--days", default="7", help="over how long: days, or a length such as 36h")
    parser.add_argument(
        "--start", default=DEFAULT_START, help=f"the first instant (RFC 3339; default {DEFAULT_START})"
    )
    parser.add_argument("--durations", default="lognormal(12m, 1.0)", help="how long each workload runs")
    parser.add_argument("--gpus", default="1:6,2:3,4:2,8:1", help="GPUs per workload")
    parser.add_argument(
        "--skew", type=float, default=0.0, help="queue i gets a share of 1/(i+1)^skew (0: even)"
    )
    parser.add_argument("--priorities", default="0", help="queue priorities, dealt in turn, e.g. 10,5,0")
    parser.add_argument(
        "--sweeps", type=float, default=0.0, help="the share of arrivals that are sweeps (0 to 1)"
    )
    parser.add_argument("--sweep-trials", default="uniform(10, 40)", help="trials per sweep")
    parser.add_argument("--sweep-max-running", type=int, default=4, help="each sweep's workflowMaxRunning")
    parser.add_argument("--resource", default=keys.GPU_RESOURCE, help="the GPU resource name")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--file", type=Path, help="write here instead of standard output")


def run(args: argparse.Namespace) -> int:
    if args.queues < 1 or args.teams < 1 or args.workloads < 0:
        raise CommandError("--queues and --teams must be at least 1, --workloads not negative")
    if not 0 <= args.sweeps <= 1:
        raise CommandError("--sweeps is a share of arrivals, from 0 to 1")
    days = args.days
    span = (
        float(days) * 86400 if days.replace(".", "", 1).isdigit() else _parsed(parse_duration, "--days", days)
    )
    if span <= 0:
        raise CommandError("--days must be above 0")
    gpus: Distribution = _parsed(parse_counts, "--gpus", args.gpus)
    priorities = _parsed(lambda t: [int(p) for p in t.split(",")], "--priorities", args.priorities)
    plan = even_plan(
        queues=args.queues,
        teams=args.teams,
        workloads=args.workloads,
        durations=_parsed(parse_durations, "--durations", args.durations),
        gpus=gpus,
        start=_parsed(parse_time, "--start", args.start),
        span=span,
        skew=args.skew,
        sweep_fraction=args.sweeps,
        sweep_trials=_parsed(parse_counts, "--sweep-trials", args.sweep_trials),
        sweep_max_running=args.sweep_max_running,
        priorities=priorities,
        seed=args.seed,
        resource=args.resource,
    )
    records = synthesize(plan)
    if args.file is None:
        write(records, sys.stdout)
    else:
        with args.file.open("w", encoding="utf-8") as stream:
            write(records, stream)
    return 0


COMMAND = Command(
    "synth", "write a synthetic trace (Poisson arrivals per queue)", configure, run, description=__doc__ or ""
)
