"""Synthetic traces, for planning without history.

Each queue gets a *stream*: a Poisson process of arrivals (exponential gaps at the stream's
rate), each arrival a single workload or, with the stream's sweep fraction, a sweep: several
trials submitted at once under one workflow label with a ``workflowMaxRunning``. Durations
and GPU counts are drawn from the stream's distributions (``records.distributions``).

A synthetic workload has no policy history: it is recorded as released and bound the moment
it was submitted and finished its duration later (what an unlimited cluster would have done).
Replaying it through the simulator under a setup gives the waits that setup would cause.

Every stream draws from its own generator seeded by the plan's seed and the queue's name, so
a plan gives the same trace every time, whatever the other streams do.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from types import MappingProxyType

from policy import keys
from records.distributions import Distribution, Fixed
from records.trace import Phase, Record

WEEK = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class Stream:
    """The work that arrives at one queue."""

    queue: str
    team: str
    rate: float  # arrivals per hour (a sweep is one arrival)
    durations: Distribution
    gpus: Distribution
    namespace: str = ""  # the team's name when empty
    priority: int = 0
    sweep_fraction: float = 0.0
    sweep_trials: Distribution = field(default_factory=lambda: Fixed(10))
    sweep_max_running: int | None = 4
    users: int = 3  # distinct submitters, "<team>-user-<i>"
    resource: str = keys.GPU_RESOURCE

    @property
    def workloads_per_arrival(self) -> float:
        return 1 - self.sweep_fraction + self.sweep_fraction * self.sweep_trials.mean


@dataclass(frozen=True, slots=True)
class Plan:
    streams: tuple[Stream, ...]
    start: float  # epoch seconds
    span: float = WEEK  # seconds of arrivals
    seed: int = 1
    limit: int | None = None  # stop after this many workloads (the merged streams run past the span)


def _stream(s: Stream, plan: Plan) -> Iterator[Record]:
    """The stream's workloads in time order, without end."""
    rnd = random.Random(f"{plan.seed}/{s.queue}")
    namespace = s.namespace or s.team
    t = plan.start
    n = 0
    while True:
        t += rnd.expovariate(s.rate / 3600) if s.rate > 0 else float("inf")
        if t == float("inf"):
            return
        n += 1
        submitted = round(t, 6)
        user = f"{s.team}-user-{rnd.randrange(max(1, s.users))}"
        gpus = int(s.gpus.sample(rnd))
        sweep = rnd.random() < s.sweep_fraction
        trials = max(1, int(s.sweep_trials.sample(rnd))) if sweep else 1
        for j in range(trials):
            duration = round(max(0.0, s.durations.sample(rnd)), 6)
            yield Record(
                namespace=namespace,
                name=f"{s.queue}-{n:06d}" + (f"-t{j:03d}" if sweep else ""),
                queue=s.queue,
                submitted=submitted,
                phase=Phase.SUCCEEDED,
                team=s.team,
                workflow=f"sweep-{s.queue}-{n:06d}" if sweep else "",
                workflow_max_running=s.sweep_max_running if sweep else None,
                submitter=user,
                priority=s.priority,
                requests=MappingProxyType({s.resource: gpus * 1000}),
                released=submitted,
                bound=submitted,
                finished=round(submitted + duration, 6),
            )


def synthesize(plan: Plan) -> list[Record]:
    """The plan's trace, in submission order: every workload submitted within the span, or
    exactly ``plan.limit`` workloads (the first ones, however long that takes)."""
    merged = heapq.merge(*(_stream(s, plan) for s in plan.streams), key=lambda r: (r.submitted, r.queue))
    if plan.limit is not None:
        return list(islice(merged, plan.limit))
    end = plan.start + plan.span
    out = []
    for r in merged:
        if r.submitted >= end:
            break
        out.append(r)
    return out


def even_plan(
    *,
    queues: int,
    teams: int,
    workloads: int,
    durations: Distribution,
    gpus: Distribution,
    start: float,
    span: float = WEEK,
    skew: float = 0.0,
    sweep_fraction: float = 0.0,
    sweep_trials: Distribution | None = None,
    sweep_max_running: int | None = 4,
    priorities: Sequence[int] = (0,),
    seed: int = 1,
    resource: str = keys.GPU_RESOURCE,
) -> Plan:
    """``queues`` queues named ``queue-00``..., dealt to ``teams`` teams in turn, with rates set
    so that ``workloads`` arrive over ``span`` in all; queue *i* gets a share proportional to
    1/(i+1)^skew (0: all alike) and priority ``priorities[i % len(priorities)]``."""
    weights = [1 / (i + 1) ** skew for i in range(queues)]
    trials = sweep_trials or Fixed(10)
    width = max(2, len(str(queues - 1)))
    streams = []
    for i, weight in enumerate(weights):
        stream = Stream(
            queue=f"queue-{i:0{width}d}",
            team=f"team-{i % teams:0{max(2, len(str(teams - 1)))}d}",
            rate=0.0,
            durations=durations,
            gpus=gpus,
            priority=priorities[i % len(priorities)],
            sweep_fraction=sweep_fraction,
            sweep_trials=trials,
            sweep_max_running=sweep_max_running,
            resource=resource,
        )
        share = workloads * weight / sum(weights)
        rate = share / stream.workloads_per_arrival / (span / 3600)
        streams.append(replace(stream, rate=rate))
    return Plan(tuple(streams), start=start, span=span, seed=seed, limit=workloads)
