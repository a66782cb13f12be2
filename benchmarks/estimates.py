"""How accurate and how cheap are expected start times (``simulator.estimating``)?

    .venv/bin/python -m benchmarks.estimates                       # both runs, then the cost
    .venv/bin/python -m benchmarks.estimates --run week --points 50 --samples 0    # quicker
    .venv/bin/python -m benchmarks.estimates --cost-only --pending 10000 --cost-samples 0,10

Accuracy. A run is replayed through the simulator (``simulate``): that replay is what
"actually" happened, each workload's start its release there. Estimates are taken as a
controller would take them, from the state at an instant *t* (what runs and since when, what
waits, the round-robin turns the last cycle left, the holds of the work that had ended by *t*,
and nothing of the future), at each workload's submission and every 30 s after it until its
release (``--every``; on the 30 s grid of the run, so that one estimate serves every workload
waiting at that instant). A week has too many of those instants to take all; a seeded sample
of ``--points`` submissions and ``--points`` grid instants is taken (all of them for a small
run). Reported for each way of estimating, over the points whose workload the run released:

* ``|p50 err| / wait``: the median of |estimated start − actual start| / the actual wait, over
  the points of workloads that waited more than a minute (the figure asked: at most 25 %);
* ``in band``: how often the actual start was inside [p10, p90], all points and those of
  waits over a minute (asked: at least 80 %);
* the median absolute error in seconds, and how many points had no estimate (unknown).

The ways: quantile holds (three replays at the shapes' p10, p50, p90 holds: the default),
``--samples N`` replays with drawn holds, and the naive estimate: position in its queue × the
queue's mean hold / the queue's slots (its ``maxRunning``, else its GPU quota over the
workload's GPUs, else the cluster's), which has no band.

The runs (no recorded real trace is stored in the repository; both are synthetic traces
replayed by the simulator, which is what the estimator replays too):

* ``fidelity``: the fidelity scene of tests/e2e/test_recorder.py (three queues, two teams, a
  sweep with a workflow limit, pod priorities, 200 pods of 1.5–3.4 s one every 0.2 s), with
  its times stretched ×60 (minutes, not seconds) so that "waits over a minute" and "every
  30 s" mean what they mean in a working cluster;
* ``week``: 10,000 workloads over a week (``records.synthesizing``: log-normal holds with a
  median of 12 minutes, 1/2/4/8 GPUs, 2 % sweeps) on 8 queues and 4 teams sized so that the
  busy queues wait for hours.

Cost: the CPU time of one ``estimate`` at ``--pending`` pending workloads (10,000), from the
week's workloads all waiting, with its limits full of running work (the middle replay stops a
day ahead or after 1,000 releases, ``simulator.estimating.HORIZON`` and ``MOST``, and the other
two once they have released what it released). The controller runs an estimate at most every
``k`` × its CPU time (``controller.estimates.Pace``): the line after the cost says how often
that is at a tenth of a core.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from controller.estimates import SHARE, Pace
from policy import keys
from policy.dispatching import Turns, dispatch
from policy.model import Ordering, Policy, Queue, Snapshot, State, Team, Workload
from records.distributions import parse_counts, parse_durations
from records.durations import Durations, gpus_of, shape_of_record
from records.synthesizing import WEEK, even_plan, synthesize
from records.trace import Phase, Record
from simulator.estimating import Estimate, estimate
from simulator.setups import Setup
from simulator.simulating import Replay, Run, record_workload, simulate

GPU = keys.GPU_RESOURCE
START = 1_767_571_200.0  # 2026-01-05T00:00:00Z, a Monday
MINUTE = 60.0


def _gpus(n: int) -> MappingProxyType[str, int]:
    return MappingProxyType({GPU: n * 1000})


# --- the runs -------------------------------------------------------------------------------


def fidelity_run(stretch: float = 60.0) -> tuple[list[Record], Setup]:
    """The fidelity scene (tests/e2e/test_recorder.py) as a trace, times × ``stretch``."""
    records = []
    for n in range(200):
        i = n % 10
        seconds = (1.5 + (n * 7 % 20) / 10) * stretch
        submitted = START + n * 0.2 * stretch
        if i < 2:
            queue, team, ns, name = "urgent", "vision", "vision", f"u{n:03d}"
        elif i in (2, 3, 4, 9):
            queue, team, ns, name = "train", "vision", "vision", f"t{n:03d}"
        else:
            queue, team, ns, name = "tune", "nlp", "nlp", f"n{n:03d}"
        records.append(
            Record(
                namespace=ns,
                name=name,
                queue=queue,
                submitted=submitted,
                phase=Phase.SUCCEEDED,
                team=team,
                workflow="sweep" if i == 2 else "",
                workflow_max_running=2 if i == 2 else None,
                priority=1000 if n % 7 == 3 else 0,
                requests=_gpus(1),
                released=submitted,
                bound=submitted,
                finished=submitted + seconds,
            )
        )
    queues = {
        "urgent": Queue("urgent", priority=10, max_running=3),
        "train": Queue("train", max_running=5),
        "tune": Queue("tune", max_running=5),
    }
    teams = {"vision": Team("vision", max_running=10), "nlp": Team("nlp", max_running=4)}
    return records, Setup(MappingProxyType(queues), MappingProxyType(teams), Policy(), "fidelity scene")


def week_run(workloads: int = 10_000, seed: int = 1) -> tuple[list[Record], Setup]:
    records = synthesize(
        even_plan(
            queues=8,
            teams=4,
            workloads=workloads,
            durations=parse_durations("lognormal(12m, 1.0)"),
            gpus=parse_counts("1:6,2:3,4:2,8:1"),
            start=START,
            span=WEEK * workloads / 10_000,
            skew=0.5,
            sweep_fraction=0.02,
            sweep_trials=parse_counts("uniform(10, 40)"),
            sweep_max_running=4,
            priorities=(10, 5, 5, 0),
            seed=seed,
        )
    )
    queues = {
        f"queue-{i:02d}": Queue(
            f"queue-{i:02d}",
            priority=(10, 5, 5, 0)[i % 4],
            max_running=6,
            quota=_gpus(16),
            ordering=Ordering.STRICT_FIFO if i % 4 == 3 else Ordering.BEST_EFFORT_FIFO,
        )
        for i in range(8)
    }
    teams = {f"team-{t:02d}": Team(f"team-{t:02d}", quota=_gpus(28)) for t in range(4)}
    return records, Setup(MappingProxyType(queues), MappingProxyType(teams), Policy(quota=_gpus(56)), "week")


# --- the state at an instant ----------------------------------------------------------------


@dataclass
class Actual:
    """The run, as what each estimate is judged against, and what was known at each instant."""

    run: Run
    setup: Setup
    cycles: list[float] = field(default_factory=list)  # instants of the run's cycles
    turns: list[Turns] = field(default_factory=list)  # the turns each left
    workloads: dict[str, Workload] = field(default_factory=dict)
    ended: list[Replay] = field(default_factory=list)  # by finish time
    finishes: list[float] = field(default_factory=list)  # their finish times

    @classmethod
    def of(cls, records: Sequence[Record], setup: Setup) -> Actual:
        cycles: list[float] = []
        turns: list[Turns] = []

        def observe(now: float, t: Turns) -> None:
            cycles.append(now)
            turns.append(t)

        run = simulate(records, setup, observe=observe)
        actual = cls(run, setup, cycles, turns)
        actual.workloads = {r.record.key: record_workload(r.record) for r in run.replays}
        actual.ended = sorted(
            (r for r in run.replays if r.finished is not None), key=lambda r: r.finished or 0
        )
        actual.finishes = [r.finished or 0.0 for r in actual.ended]
        return actual

    def snapshot(self, t: float) -> tuple[Snapshot, Turns, dict[str, float]]:
        """The state just before the run's cycle at ``t`` (if any): released before ``t`` and
        not finished before it runs; submitted by ``t`` and not released before it waits."""
        workloads: list[Workload] = []
        since: dict[str, float] = {}
        for r in self.run.replays:
            if r.record.submitted > t:
                continue
            w = self.workloads[r.record.key]
            if r.released is not None and r.released < t:
                if r.finished is not None and r.finished < t:
                    continue
                workloads.append(replace(w, state=State.RUNNING))
                since[w.key] = r.released
            else:
                workloads.append(w)
        i = bisect_left(self.cycles, t)
        turns = self.turns[i - 1] if i else Turns()
        s = self.setup
        return Snapshot(s.queues, s.teams, s.policy, workloads, t), turns, since

    def durations(self, t: float) -> Durations:
        """The holds of the work that had ended before ``t``."""
        d = Durations()
        for r in self.ended[: bisect_left(self.finishes, t)]:
            d.add(shape_of_record(r.record), r.duration)
        return d


def naive(snapshot: Snapshot, durations: Durations) -> dict[str, float]:
    """Position in its queue × the queue's mean hold / the queue's slots, from now."""
    by_queue: dict[str, list[Workload]] = {}
    for w in snapshot.workloads:
        if w.state is State.PENDING:
            by_queue.setdefault(w.queue, []).append(w)
    out = {}
    for name, line in by_queue.items():
        line.sort(key=lambda w: (-w.priority, w.created, w.key))
        mean = durations.mean(name)
        queue = snapshot.queues.get(name)
        for position, w in enumerate(line, 1):
            if mean is None or queue is None:
                continue
            slots = queue.max_running
            if slots is None:
                quota = queue.quota.get(GPU) or snapshot.policy.quota.get(GPU)
                slots = (quota // 1000) // max(1, gpus_of(w.requests)) if quota else 1
            out[w.key] = snapshot.now + position * mean / max(1, slots)
    return out


# --- accuracy -------------------------------------------------------------------------------


@dataclass
class Score:
    ratios: list[float] = field(default_factory=list)  # |p50 err| / wait, waits over a minute
    errors: list[float] = field(default_factory=list)  # |p50 err|, seconds, all points
    inside: int = 0
    inside_long: int = 0
    points: int = 0
    long: int = 0
    unknown: int = 0

    def add(self, at: float, p10: float | None, p50: float | None, p90: float | None, r: Replay) -> None:
        assert r.released is not None and r.wait is not None
        if p50 is None:
            self.unknown += 1
            return
        self.points += 1
        error = abs(p50 - r.released)
        self.errors.append(error)
        banded = p10 is not None and p90 is not None and p10 - 1e-6 <= r.released <= p90 + 1e-6
        self.inside += banded
        if r.wait > MINUTE:
            self.long += 1
            self.inside_long += banded
            self.ratios.append(error / r.wait)

    def line(self, name: str) -> str:
        ratio = f"{statistics.median(self.ratios):6.1%}" if self.ratios else "     -"
        mae = f"{statistics.median(self.errors):7.0f} s" if self.errors else "      -"
        band = f"{self.inside / self.points:6.1%}" if self.points else "     -"
        band_long = f"{self.inside_long / self.long:6.1%}" if self.long else "     -"
        return (
            f"{name:<22} {ratio}   {band} {band_long}   {mae}   {self.points:>6} points "
            f"({self.long} of waits > 1 min), {self.unknown} unknown"
        )


def instants(actual: Actual, every: float, points: int, seed: int) -> dict[float, list[str]]:
    """Estimate instants -> the keys scored at each: submissions and the ``every`` grid."""
    rnd = random.Random(seed)
    released = [r for r in actual.run.replays if r.released is not None]
    start = min(r.record.submitted for r in released)
    out: dict[float, list[str]] = {}
    subs = released if len(released) <= points else rnd.sample(released, points)
    for r in subs:
        out.setdefault(r.record.submitted, []).append(r.record.key)
    grid: dict[float, list[str]] = {}
    for r in released:
        assert r.released is not None
        k = int((r.record.submitted - start) // every) + 1
        while start + k * every < r.released:
            grid.setdefault(start + k * every, []).append(r.record.key)
            k += 1
    chosen = sorted(grid) if len(grid) <= points else rnd.sample(sorted(grid), points)
    for t in chosen:
        out.setdefault(t, []).extend(grid[t])
    return out


def accuracy(name: str, records: list[Record], setup: Setup, args: argparse.Namespace) -> None:
    actual = Actual.of(records, setup)
    waits = [r.wait for r in actual.run.replays if r.wait is not None]
    print(
        f"\n{name}: {len(records):,} workloads, {actual.run.cycles:,} cycles; waits p50 "
        f"{statistics.median(waits):.0f} s, over a minute {sum(w > MINUTE for w in waits) / len(waits):.0%}"
    )
    chosen = instants(actual, args.every, args.points, args.seed)
    print(f"{len(chosen):,} estimate instants, {sum(map(len, chosen.values())):,} points")
    by_key = actual.run.by_key()
    ways = ["quantile holds"] + ([f"{args.samples} drawn holds"] if args.samples else [])
    scores = {w: Score() for w in [*ways, "naive"]}
    cpu = dict.fromkeys(ways, 0.0)
    for t in sorted(chosen):
        snapshot, turns, since = actual.snapshot(t)
        durations = actual.durations(t)
        results: dict[str, dict[str, Estimate]] = {}
        for way in ways:
            began = time.process_time()
            results[way] = estimate(
                snapshot,
                turns,
                durations,
                released=since,
                samples=args.samples if way != ways[0] else 0,
                seed=args.seed,
            )
            cpu[way] += time.process_time() - began
        guess = naive(snapshot, durations)
        for key in chosen[t]:
            r = by_key[key]
            for way in ways:
                e = results[way][key]
                scores[way].add(t, e.p10, e.p50, e.p90, r)
            g = guess.get(key)
            scores["naive"].add(t, None, g, None, r)
    print(f"{'':<22} |p50 err|/wait  in band (all, >1 min)  median |err|")
    for way, score in scores.items():
        print(score.line(way))
    for way in ways:
        print(f"{way}: {cpu[way] / len(chosen) * 1000:.1f} ms CPU per estimate (mean over the instants)")


# --- cost -----------------------------------------------------------------------------------


def cost(pending: int, samples: Sequence[int], seed: int) -> None:
    records, setup = week_run(pending, seed)
    actual = [record_workload(r) for r in records]
    now = max(w.created for w in actual) + 1
    snapshot = Snapshot(setup.queues, setup.teams, setup.policy, actual, now)
    first = dispatch(snapshot, Turns())  # fill the limits with running work
    gone = {w.key for w in first.release}
    rnd = random.Random(seed)
    since = {k: now - rnd.uniform(0, 3600) for k in gone}
    workloads = [replace(w, state=State.RUNNING) if w.key in gone else w for w in actual]
    # as many pending as asked: the released ones are replaced by more of the same queues
    more = week_run(pending + len(gone), seed + 1)[0][: len(gone)]
    workloads += [
        record_workload(replace(r, name=f"more-{r.name}", submitted=min(r.submitted, now - 1))) for r in more
    ]
    snapshot = Snapshot(setup.queues, setup.teams, setup.policy, workloads, now)
    waiting = sum(w.state is State.PENDING for w in workloads)
    durations = Durations.learn(records)
    print(f"\ncost: {waiting:,} pending, {len(gone)} running, {len(durations):,} holds recorded")
    for n in samples:
        began, wall = time.process_time(), time.perf_counter()
        out = estimate(snapshot, first.turns, durations, released=since, samples=n, seed=seed)
        spent, wall = time.process_time() - began, time.perf_counter() - wall
        how = "quantile holds (3 replays)" if n == 0 else f"{n} drawn holds"
        known = sum(e.known for e in out.values())
        print(f"estimate, {how:<26} {spent:7.2f} s CPU {wall:7.2f} s wall; {known:,} known")
        if n == 0:
            pace = Pace(SHARE)
            pace.spent(0.0, spent)
            print(f"  at the controller's share ({SHARE:.0%} of a core): an estimate at most every "
                  f"{pace.next + spent:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", choices=("fidelity", "week", "both"), default="both")
    parser.add_argument("--workloads", type=int, default=10_000, help="the week's workloads")
    parser.add_argument("--points", type=int, default=120, help="sampled submissions, and grid instants")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between estimates of one workload")
    parser.add_argument(
        "--samples", type=int, default=20, help="also estimate with this many drawn replays (0: not)"
    )
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument(
        "--cost-samples", default="0", help="ways to time at --pending, e.g. 0,10 (0: quantile holds)"
    )
    parser.add_argument("--cost-only", action="store_true")
    parser.add_argument("--no-cost", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    if not args.cost_only:
        if args.run in ("fidelity", "both"):
            accuracy("fidelity scene ×60", *fidelity_run(), args)
        if args.run in ("week", "both"):
            accuracy(f"week of {args.workloads:,}", *week_run(args.workloads, args.seed), args)
    if not args.no_cost:
        cost(args.pending, [int(n) for n in args.cost_samples.split(",")], args.seed)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
