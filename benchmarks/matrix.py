"""The benchmark matrix: every scenario, one system at a time, each on a fresh local cluster.

    python -m benchmarks.matrix                        # everything (make bench)
    python -m benchmarks.matrix --quick                # one small scenario, every system
    python -m benchmarks.matrix --scenario baseline --systems bare,kueue
    python -m benchmarks.matrix --scenario 'p1000-*'   # shell patterns over scenario names
    python -m benchmarks.matrix --report               # only rewrite RESULTS.md from saved runs

Each run's figures go to ``benchmarks/results/<scenario>/<system>.json`` as soon as it ends,
and ``benchmarks/RESULTS.md`` is rewritten from every saved run after each one, so an
interrupted matrix keeps what it measured and a later invocation adds to it. A run that breaks
a limit, loses a pod or was not managed by its system is saved as FAILED, and the command exits
with status 1 at the end.

A run starts only on a quiet machine: the 1-minute load average at most 1.0 per core
(``machine.await_quiet``), recorded in the run. Over it, the matrix waits up to
``--quiet-wait`` seconds for the load to fall, then stops with status 3 (runs already saved
stay); ``--allow-load`` starts the run anyway and its column in RESULTS.md is marked.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import machine, reporting, results
from benchmarks.bare import Bare
from benchmarks.kueue import raised, shipped
from benchmarks.results import Run
from benchmarks.running import run
from benchmarks.scenarios import ALL, QUICK, Scenario, select
from benchmarks.sluicegate import SluicegateSystem
from benchmarks.systems import System
from controlplane import deploying
from controlplane.launching import LocalCluster

HERE = Path(__file__).resolve().parent
SYSTEMS: dict[str, Callable[[], System]] = {
    "bare": Bare,
    "sluicegate": SluicegateSystem,
    "kueue": shipped,
    "kueue-qps1000": raised,
}


def say(line: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {line}", file=sys.stderr, flush=True)


def failed_run(system: System, scenario: Scenario, error: BaseException, command: str) -> Run:
    """A run that could not be measured at all (a system that did not start, a crash)."""
    return Run(
        scenario=scenario.name, system=system.key, title=system.title, version=system.version(),
        pods=scenario.pods, queues=scenario.queues, teams=scenario.teams, nodes=scenario.nodes,
        gpus_per_node=scenario.gpus_per_node, seconds=scenario.seconds, max_running=scenario.max_running,
        cap=scenario.cap, floor_seconds=scenario.floor_seconds,
        rounds_floor_seconds=scenario.rounds_floor_seconds,
        started=datetime.now(UTC).isoformat(timespec="seconds"), command=command, load_average=(0.0, 0.0),
        failures=(f"the run could not complete: {type(error).__name__}: {error}",),
        machine=machine.machine(), versions=machine.versions(),
    )


def one(
    scenario: Scenario, key: str, root: Path, command: str, profile: Path | None = None, round: int = 1,
    load: machine.Load | None = None,
) -> Run:
    """``key``'s system on ``scenario``, on a fresh cluster in ``root`` that is stopped after;
    ``load`` is the machine's load just before (``machine.await_quiet``)."""
    system = SYSTEMS[key]()
    cluster = LocalCluster(root, nodes=scenario.nodes, gpus_per_node=scenario.gpus_per_node)

    def marked(r: Run) -> Run:
        r = replace(r, round=round)
        return r if load is None else replace(r, load_before=load.average, load_allowed=load.allowed)

    try:
        system.prepare(cluster)
        cluster.up(progress=lambda line: say(f"[{scenario.name} {key}] {line}"))
        measured = run(cluster, system, scenario, command=command, progress=say, profile=profile)
        return marked(measured)
    except Exception as e:  # a broken run is recorded and the matrix goes on
        say(f"[{scenario.name} {key}] ERROR: {type(e).__name__}: {e}")
        return marked(failed_run(system, scenario, e, command))
    finally:
        deploying.stop(root)  # Sluicegate's processes, should the system not have stopped them
        cluster.down()


def moved(run: Run, started_at: str) -> Run:
    """``run`` with a note when this repository's commit was not the one the invocation started
    at: the matrix runs Sluicegate and the harness from the work tree, so runs of one invocation
    (and so of one table) ran different code."""
    now = run.versions.get("sluicegate", "unknown")
    if now == started_at:
        return run
    return replace(run, notes=(*run.notes, f"the repository was at {started_at} when this invocation started "
                                           f"and at {now} for this run: the runs of one invocation ran "
                                           "different code"))


def summary(r: Run) -> str:
    if not r.ok:
        return f"FAILED ({len(r.failures)} problem(s))"
    return (f"drain {r.drain_seconds:.1f}s (floor {r.floor_seconds:.1f}s), "
            f"{r.releases_per_second:.1f} releases/s, "
            f"creation->release p99 {r.creation_to_release.p99:.2f}s, CPU {r.cpu_seconds:.1f}s, "
            f"RSS {r.peak_rss_mib:.0f} MiB, {r.requests_per_pod:.2f} requests/pod")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.matrix", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", metavar="PATTERN",
                        help="scenarios to run (shell patterns; repeatable); default: all: "
                             + ", ".join(s.name for s in ALL))
    parser.add_argument("--quick", action="store_true",
                        help=f"only the '{QUICK.name}' scenario ({QUICK.note})")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated, in the order to run (default: %(default)s)")
    parser.add_argument("--results", type=Path, default=HERE / "results", help="where runs are saved")
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md", help="the report to write")
    parser.add_argument("--report", action="store_true", help="only write the report from saved runs")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run each scenario N times, the systems taking turns in each round; the "
                             "report shows each system's median run and every round's drain")
    parser.add_argument("--round", type=int, default=1, metavar="K",
                        help="number the rounds from K (to add rounds to saved ones; default 1)")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="sample the systems' Python processes with py-spy during the load, into DIR "
                             "(the figures of a sampled run carry the sampling's cost)")
    parser.add_argument("--allow-load", action="store_true",
                        help=f"start runs even while the load average is over {machine.QUIET_PER_CORE:g} per "
                             "core; their columns in the report are marked")
    parser.add_argument("--quiet-wait", type=float, default=900.0, metavar="SECONDS",
                        help="how long to wait for a loaded machine to fall quiet before a run, then stop "
                             "(default: %(default)s)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.systems.split(",") if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; known: {', '.join(SYSTEMS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    command = "python -m benchmarks.matrix" + "".join(f" {shlex.quote(a)}" for a in (argv or sys.argv[1:]))
    if args.report:
        reporting.write(args.output, results.load_all(args.results))
        return 0
    try:
        scenarios = [QUICK] if args.quick else select(args.scenario) if args.scenario else list(ALL)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    keys = args.systems.split(",")
    rounds = range(args.round, args.round + max(1, args.repeat))
    cells = [(s, r, k) for s in scenarios for r in rounds for k in keys]
    m = machine.machine()
    say(f"{len(cells)} runs: {len(scenarios)} scenario(s) x {len(rounds)} round(s) x {len(keys)} system(s) "
        f"on {m['cores']} cores, "
        f"{m['memory']}; results in {args.results}, report {args.output}")
    started = time.monotonic()
    started_at = machine.commit()
    failed = []
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as tmp:
        for index, (scenario, round, key) in enumerate(cells, 1):
            say(f"=== run {index}/{len(cells)}: {scenario.name} ({reporting.describe(scenario)}) with {key}"
                + (f", round {round}" if len(rounds) > 1 or round > 1 else ""))
            load = machine.await_quiet(machine.cores(), patience=args.quiet_wait, allow=args.allow_load,
                                       say=say)
            if not load.quiet and not load.allowed:
                say(f"REFUSED: the load average is {load.average:.2f}, over {load.bound:.1f}, after "
                    f"{args.quiet_wait:.0f}s: runs on a loaded machine cannot be compared; stop what "
                    "loads it, or pass --allow-load to mark the runs instead")
                return 3
            if load.allowed:
                say(f"load average {load.average:.2f} is over {load.bound:.1f}: running anyway "
                    "(--allow-load), and the run is marked")
            outcome = one(scenario, key, Path(tmp) / "cluster", command, args.profile, round, load)
            outcome = moved(outcome, started_at)
            results.save(args.results, outcome)
            reporting.write(args.output, results.load_all(args.results))
            elapsed = time.monotonic() - started
            say(f"=== {scenario.name} {key}: {summary(outcome)}; {elapsed / 60:.0f} min so far")
            if not outcome.ok:
                failed.append(outcome)
    for r in failed:
        say(f"FAILED {r.scenario} {r.system}: " + "; ".join(r.failures))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
