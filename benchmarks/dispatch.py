"""Time one dispatch decision over 1k, 10k and 100k pending workloads.

    .venv/bin/python -m benchmarks.dispatch [--sizes 1000,10000,100000] [--profile 10000]

The cluster: 100 queues over 3 priorities (a fifth of them StrictFIFO), 10 teams with GPU
quotas, a cluster GPU quota and maxRunning, and 1,000 running workloads. Pending work is
spread unevenly over the queues (a few are deep), asks 1, 2, 4 or 8 GPUs, and some of it
belongs to capped sweeps or to pod groups. Each queue is allowed a little more than it runs,
so a decision has real work to release, then stops at queue, team and cluster limits.

Reported per size: the decision (``dispatch``), reading every answer it gives (every
``Wait`` with its position, as the controller does to write conditions), and a baseline in
the same process: sorting the same pending workloads once with Python's sort, so that the
machine's speed cancels out of the ratio. Times are the median of several runs.

**kept** is the decision as the controller takes it: starting from the queue orders that the
previous decision kept (``policy.orders``). That decision saw the cycle before: 1% of today's
pending work had not arrived yet, and 10 of today's running workloads were still pending (it
released them; here they are new objects, running).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import math
import os
import platform
import pstats
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from operator import attrgetter
from types import MappingProxyType

from policy import keys
from policy.dispatching import Orders, dispatch
from policy.model import Ordering, Policy, Queue, Snapshot, State, Team, Workload
from policy.pods import Pod

GPU = keys.GPU_RESOURCE
QUEUES = 100
TEAMS = 10
RUNNING = 1_000
NOW = 1_700_000_000.0


def _workload(rnd: random.Random, i: int, queue: Queue, state: State, team: str) -> Workload:
    gpus = rnd.choice((1, 1, 1, 2, 2, 4, 8))
    requests = MappingProxyType({GPU: gpus * 1000, "cpu": gpus * 4000})
    workflow = f"ml-{team}/sweep-{i % 7}" if i % 5 == 0 else ""
    group_size = 4 if i % 50 == 0 else 1
    present = group_size if i % 100 == 0 else 1  # half the groups are still missing pods
    pods = tuple(Pod(f"ml-{team}", f"p{i}-{j}", gated=state is State.PENDING) for j in range(present))
    return Workload(
        key=f"ml-{team}/group:g{i}" if group_size > 1 else f"ml-{team}/p{i}",
        namespace=f"ml-{team}",
        queue=queue.name,
        team=team,
        pods=pods,
        state=state,
        requests=requests,
        priority=rnd.choice((0, 0, 0, 0, 100)),
        created=NOW - rnd.randrange(86_400),
        workflow=workflow,
        workflow_max_running=8 if workflow else None,
        group_size=group_size,
    )


SCENARIOS = {
    "burst": "every queue has room for 2 more (limits were just raised, or a quiet cluster)",
    "steady": "10 workloads finished since the last cycle: 10 queues have room for 1 more",
}


def cluster(pending: int, scenario: str = "burst", seed: int = 7) -> Snapshot:
    """The benchmark's snapshot: ``pending`` waiting workloads and ``RUNNING`` running ones."""
    rnd = random.Random(seed)
    per_queue = RUNNING // QUEUES
    queues = [
        Queue(
            name=f"queue-{i:03d}",
            priority=(10, 5, 5, 0, 0)[i % 5],
            max_running=per_queue + 2 if scenario == "burst" else per_queue + (i % 10 == 3),
            quota=MappingProxyType({GPU: 64_000}),
            ordering=Ordering.STRICT_FIFO if i % 5 == 4 else Ordering.BEST_EFFORT_FIFO,
        )
        for i in range(QUEUES)
    ]
    teams = [Team(f"team-{t}", quota=MappingProxyType({GPU: 400_000})) for t in range(TEAMS)]
    weights = [1 / (i + 1) for i in range(QUEUES)]  # a few deep queues, a long shallow tail
    workloads = []
    for i in range(RUNNING):
        queue = queues[i % QUEUES]
        workloads.append(_workload(rnd, i, queue, State.RUNNING, f"team-{i % QUEUES % TEAMS}"))
    chosen = rnd.choices(range(QUEUES), weights=weights, k=pending)
    for n, q in enumerate(chosen):
        workloads.append(_workload(rnd, RUNNING + n, queues[q], State.PENDING, f"team-{q % TEAMS}"))
    rnd.shuffle(workloads)
    return Snapshot(
        queues={q.name: q for q in queues},
        teams={t.name: t for t in teams},
        policy=Policy(max_running=RUNNING + 150, quota=MappingProxyType({GPU: 3_600_000})),
        workloads=workloads,
        now=NOW,
    )


def earlier(snap: Snapshot, seed: int = 11) -> Snapshot:
    """The snapshot the cycle before decided over: 1% of the pending work had not arrived, and
    10 workloads running now were pending (that cycle released them)."""
    rnd = random.Random(seed)
    pending = [w for w in snap.workloads if w.state is State.PENDING]
    running = [w for w in snap.workloads if w.state is State.RUNNING]
    late = set(map(id, rnd.sample(pending, len(pending) // 100)))
    released = set(map(id, rnd.sample(running, 10)))
    workloads = [
        replace(w, state=State.PENDING, pods=tuple(replace(p, gated=True) for p in w.pods))
        if id(w) in released
        else w
        for w in snap.workloads
        if id(w) not in late
    ]
    return replace(snap, workloads=workloads)


def _interleaved(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Seconds per run of each, taking turns, so that a slow spell of the machine hits all alike."""
    gc.collect()  # start alike; collections during the runs are part of the cost
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def _read_every_reason(snap: Snapshot) -> int:
    return sum(1 for _ in dispatch(snap).waiting.reasons())


def _read_every_wait(snap: Snapshot) -> int:
    return sum(1 for _ in dispatch(snap).waiting.items())


def measure(size: int, scenario: str) -> dict[str, float]:
    snap = cluster(size, scenario)
    pending = [w for w in snap.workloads if w.state is State.PENDING]
    by_time = attrgetter("created", "key")
    repeat = max(5, min(40, 200_000 // size))
    decision = dispatch(snap)
    kept = dispatch(earlier(snap), None, Orders()).orders
    times = _interleaved(
        {
            "dispatch": lambda: dispatch(snap),
            "with_reasons": lambda: _read_every_reason(snap),
            "with_waits": lambda: _read_every_wait(snap),
            "kept": lambda: dispatch(snap, None, kept),
            "kept_reasons": lambda: sum(1 for _ in dispatch(snap, None, kept).waiting.reasons()),
            "baseline": lambda: sorted(pending, key=by_time),
        },
        repeat,
    )
    out = {name: statistics.median(t) for name, t in times.items()}
    for name, column in (("ratio", "dispatch"), ("kept_ratio", "kept")):
        out[name] = statistics.median(d / b for d, b in zip(times[column], times["baseline"], strict=True))
    return {"pending": size, "released": len(decision.release), **out}


def report(scenario: str, rows: list[dict[str, float]]) -> None:
    print(f"\n{scenario}: {SCENARIOS[scenario]}")
    print(
        f"{'pending':>8} {'released':>8} {'dispatch':>10} {'per release':>12} {'+ reasons':>10} "
        f"{'+ waits':>10} {'sort':>9} {'dispatch/sort':>14} {'kept':>9} {'kept+reasons':>12} "
        f"{'kept/sort':>10}"
    )
    ms = 1e3
    for r in rows:
        per = r["dispatch"] / r["released"] * 1e6 if r["released"] else float("nan")
        print(
            f"{int(r['pending']):>8} {int(r['released']):>8} {r['dispatch'] * ms:>8.2f}ms {per:>10.1f}µs "
            f"{r['with_reasons'] * ms:>8.2f}ms {r['with_waits'] * ms:>8.2f}ms {r['baseline'] * ms:>7.2f}ms "
            f"{r['ratio']:>14.2f} {r['kept'] * ms:>7.2f}ms {r['kept_reasons'] * ms:>10.2f}ms "
            f"{r['kept_ratio']:>10.2f}"
        )
    for a, b in itertools.pairwise(rows):
        n, m = a["pending"], b["pending"]
        print(
            f"growth {int(n)} -> {int(m)}: dispatch x{b['dispatch'] / a['dispatch']:.1f}, "
            f"+ reasons x{b['with_reasons'] / a['with_reasons']:.1f}, "
            f"+ waits x{b['with_waits'] / a['with_waits']:.1f}, "
            f"kept x{b['kept'] / a['kept']:.1f}, "
            f"sort x{b['baseline'] / a['baseline']:.1f}, n log n x{(m * math.log(m)) / (n * math.log(n)):.1f}"
        )


def profile(size: int, scenario: str) -> None:
    snap = cluster(size, scenario)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        _read_every_wait(snap)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="pending workloads, comma-separated")
    parser.add_argument("--scenarios", default="burst,steady", help=f"of {', '.join(SCENARIOS)}")
    parser.add_argument("--profile", type=int, default=0, help="profile one size instead of timing")
    args = parser.parse_args()
    scenarios = args.scenarios.split(",")
    if args.profile:
        profile(args.profile, scenarios[0])
        return
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f} at start")  # fmt: skip
    for scenario in scenarios:
        report(scenario, [measure(int(s), scenario) for s in args.sizes.split(",")])


if __name__ == "__main__":
    main()
