"""Compare this checkout's dispatch with another's, on the same snapshot, run by run.

    git archive <rev> policy benchmarks | tar -x -C /tmp/old      # the other side
    .venv/bin/python -m benchmarks.comparing --against /tmp/old [--sizes 10000] \\
        [--rounds 6] [--repeat 15] [--columns dispatch,reasons,waits]

Each round runs both checkouts in fresh processes, alternating which goes first. A process
builds the benchmark's snapshot (``benchmarks.dispatch.cluster`` of its own checkout, so both
decide over the same seeded cluster), then times, taking turns, each column and a plain sort
of the pending workloads; it reports the median per-run ratio of each column to that sort.
The ratio cancels the machine's speed at the moment, which matters on a shared machine.
Reported: the median over rounds, with the range, for each checkout, and new/old.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

_MEASURE = """
import gc, json, statistics, sys, time
from operator import attrgetter
from benchmarks.dispatch import cluster
from policy.dispatching import dispatch
from policy.model import State
size, repeat, columns = {size}, {repeat}, {columns!r}
out = {{}}
for scenario in ("burst", "steady"):
    snap = cluster(size, scenario)
    pending = [w for w in snap.workloads if w.state is State.PENDING]
    key = attrgetter("created", "key")
    runs = {{
        "dispatch": lambda: dispatch(snap),
        "reasons": lambda: sum(1 for _ in dispatch(snap).waiting.reasons()),
        "waits": lambda: sum(1 for _ in dispatch(snap).waiting.items()),
    }}
    runs = {{name: runs[name] for name in columns}}
    runs["sort"] = lambda: sorted(pending, key=key)
    times = {{name: [] for name in runs}}
    gc.collect()
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    out[scenario] = {{
        name: statistics.median(a / b for a, b in zip(times[name], times["sort"], strict=True))
        for name in columns
    }}
print(json.dumps(out))
"""


def _measure(checkout: Path, size: int, repeat: int, columns: list[str]) -> dict[str, dict[str, float]]:
    code = _MEASURE.format(size=size, repeat=repeat, columns=columns)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, check=True
    )
    result: dict[str, dict[str, float]] = json.loads(done.stdout)
    return result


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--against", required=True, type=Path, help="the other checkout (old)")
    parser.add_argument("--sizes", default="10000", help="pending workloads, comma-separated")
    parser.add_argument("--rounds", type=int, default=6, help="process pairs per size")
    parser.add_argument("--repeat", type=int, default=15, help="timed runs per process")
    parser.add_argument("--columns", default="dispatch,reasons,waits")
    args = parser.parse_args()
    columns = args.columns.split(",")
    sides = {"old": args.against.resolve(), "new": Path.cwd()}
    for size in map(int, args.sizes.split(",")):
        results: dict[str, list[dict[str, dict[str, float]]]] = {"old": [], "new": []}
        for r in range(args.rounds):
            for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                results[side].append(_measure(sides[side], size, args.repeat, columns))
        for scenario in ("burst", "steady"):
            for column in columns:
                old = [x[scenario][column] for x in results["old"]]
                new = [x[scenario][column] for x in results["new"]]
                print(
                    f"{size:>7} {scenario:6} {column + '/sort':<14}"
                    f" old {statistics.median(old):5.2f} ({min(old):.2f}-{max(old):.2f})"
                    f"  new {statistics.median(new):5.2f} ({min(new):.2f}-{max(new):.2f})"
                    f"  new/old {statistics.median(new) / statistics.median(old):.2f}"
                )


if __name__ == "__main__":
    main()
