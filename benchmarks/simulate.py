"""Time the what-if simulator on a synthetic week: 100,000 workloads across 50 queues.

    .venv/bin/python -m benchmarks.simulate [--workloads 100000] [--queues 50] [--seed 1]
    .venv/bin/python -m benchmarks.simulate --workloads 20000 --profile   # cProfile instead
    .venv/bin/python -m benchmarks.simulate --workloads 5000 --check      # also the exact replay

A smaller trace keeps the rate of 100,000 a week over a shorter period, under the same setup.

The trace (``records.synthesizing``, seeded): Poisson arrivals per queue over a week, queue *i*
getting a share of 1/√(i+1); durations log-normal with a median of 12 minutes (mean about 20);
1, 2, 4 or 8 GPUs (6:3:2:1); 2 % of arrivals are sweeps of 10 to 40 trials with
``workflowMaxRunning: 4`` (about a third of all workloads). That offers about 460 GPUs of work
on average.

The setup: 50 queues over priorities 10, 5, 5, 0, 0 (every fifth StrictFIFO), each with
``maxRunning: 24`` and a 48-GPU quota; 10 teams with a 128-GPU quota each; the cluster's Policy
has a 640-GPU quota. Busy queues and teams hit their limits daily; the cluster runs at about
70 % of its capacity.

Reported: the time to make the trace, to write and read it back as JSON Lines, and to replay it
(wall clock and CPU time of this process, so that a machine shared with other work still gives
a fair figure), with the number of dispatch cycles and what the replay found.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import time
from types import MappingProxyType

from policy import keys
from policy.model import Ordering, Policy, Queue, Team
from records.distributions import parse_counts, parse_durations
from records.figures import Waits
from records.periods import format_duration
from records.synthesizing import WEEK, even_plan, synthesize
from records.trace import Record, load, write
from simulator.outcomes import summarize
from simulator.setups import Setup
from simulator.simulating import Run, simulate

GPU = keys.GPU_RESOURCE
START = 1_767_571_200.0  # 2026-01-05T00:00:00Z, a Monday
PRIORITIES = (10, 5, 5, 0, 0)
TEAMS = 10
CAPACITY = 640


def trace(workloads: int, queues: int, seed: int) -> list[Record]:
    """``workloads`` at the rate of 100,000 a week: a smaller trace is a shorter period."""
    return synthesize(
        even_plan(
            queues=queues,
            teams=TEAMS,
            workloads=workloads,
            durations=parse_durations("lognormal(12m, 1.0)"),
            gpus=parse_counts("1:6,2:3,4:2,8:1"),
            start=START,
            span=WEEK * workloads / 100_000,
            skew=0.5,
            sweep_fraction=0.02,
            sweep_trials=parse_counts("uniform(10, 40)"),
            sweep_max_running=4,
            priorities=PRIORITIES,
            seed=seed,
        )
    )


def setup(queues: int) -> Setup:
    width = max(2, len(str(queues - 1)))

    def gpus(n: int) -> MappingProxyType[str, int]:
        return MappingProxyType({GPU: n * 1000})

    made = {
        f"queue-{i:0{width}d}": Queue(
            f"queue-{i:0{width}d}",
            priority=PRIORITIES[i % len(PRIORITIES)],
            max_running=24,
            quota=gpus(48),
            ordering=Ordering.STRICT_FIFO if i % 5 == 4 else Ordering.BEST_EFFORT_FIFO,
        )
        for i in range(queues)
    }
    teams = {f"team-{t:02d}": Team(f"team-{t:02d}", quota=gpus(128)) for t in range(TEAMS)}
    return Setup(MappingProxyType(made), MappingProxyType(teams), Policy(quota=gpus(CAPACITY)), "benchmark")


def _timed(what: str, fn: object) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn() if callable(fn) else None
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{what:<34} {wall:8.2f} s wall {cpu:8.2f} s CPU")
    return result, wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the replay instead")
    parser.add_argument(
        "--check", action="store_true", help="also replay exactly (whole snapshots) and compare"
    )
    args = parser.parse_args()
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    records, _, _ = _timed(
        f"synthesize {args.workloads:,} workloads", lambda: trace(args.workloads, args.queues, args.seed)
    )
    assert isinstance(records, list)
    text = io.StringIO()
    _timed("write the trace (JSON Lines)", lambda: write(records, text))
    print(f"{'':<34} {len(text.getvalue()) / 2**20:8.1f} MiB")
    _timed("read it back", lambda: load(io.StringIO(text.getvalue())))
    limits = setup(args.queues)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(simulate, records, limits)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
        return
    run, _, cpu = _timed("replay", lambda: simulate(records, limits))
    assert isinstance(run, Run)
    summary = summarize(run, capacity=CAPACITY)
    cluster = summary.cluster
    span = summary.window[1] - summary.window[0]
    print(
        f"{run.cycles:,} dispatch cycles ({run.cycles / cpu:,.0f} per CPU-second, "
        f"{cpu / max(1, run.cycles) * 1e6:.0f} µs each); {len(run.order):,} released; "
        f"peak {cluster.peak:g} GPUs of {CAPACITY}; utilisation {cluster.utilisation or 0:.1%} "
        f"over {format_duration(span)}"
    )
    print(f"waits: {_waits(cluster.waits)}")
    busiest = max(summary.queues.items(), key=lambda kv: kv[1].waits.p95 or 0)
    print(f"longest p95 wait: {busiest[0]}: {_waits(busiest[1].waits)}")
    if args.check:
        exact, _, _ = _timed("replay, whole snapshots", lambda: simulate(records, limits, exact=True))
        assert isinstance(exact, Run)
        same = exact.order == run.order and exact.replays == run.replays
        print(f"the same releases at the same instants: {same}")


def _waits(w: Waits) -> str:
    def f(v: float | None) -> str:
        return "-" if v is None else format_duration(v)

    return f"p50 {f(w.p50)}, p95 {f(w.p95)}, max {f(w.max)}, mean {f(w.mean)}"


if __name__ == "__main__":
    main()
