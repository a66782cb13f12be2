"""The benchmark scenarios: how many pods, queues, teams and fake GPU nodes, and the limits.

Pure data. Every pod asks for one whole GPU and runs ``seconds`` under kwok; pod *i* goes to
queue ``i mod Q`` and team ``(i div Q) mod T`` (``audit.loading``). Each queue may run at most
``max_running`` pods at once (with a GPU quota of as many GPUs); the bare ungater is held to
each queue's limit too, and to their sum in all.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

GPUS_PER_NODE = 8


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    pods: int
    queues: int
    nodes: int
    max_running: int
    """Per queue: the Queue's maxRunning, the ClusterQueue's ``pods`` quota, the GPU quota."""
    teams: int = 2
    seconds: float = 2.0
    """How long kwok runs each pod once it is bound."""
    gpus_per_node: int = GPUS_PER_NODE
    note: str = ""

    @property
    def cap(self) -> int:
        """Running pods the limits allow in all: the bare ungater's cap."""
        return self.queues * self.max_running

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def floor_seconds(self) -> float:
        return floor(self.pods, self.seconds, self.cap)

    @property
    def rounds_floor_seconds(self) -> float:
        """The lower bound in whole pods: the busiest queue runs ceil(its pods / its limit)
        pods one after another on each of its slots."""
        busiest = math.ceil(self.pods / self.queues)
        return math.ceil(busiest / self.max_running) * self.seconds

    def check(self) -> None:
        if self.cap > self.gpus:
            raise ValueError(f"{self.name}: the limits allow {self.cap} pods but the nodes have "
                             f"{self.gpus} GPUs: placement, not policy, would bound the run")
        if min(self.pods, self.queues, self.nodes, self.max_running, self.teams) < 1:
            raise ValueError(f"{self.name}: every count must be at least 1")


def floor(pods: int, seconds: float, cap: int) -> float:
    """The fluid lower bound of a drain: pods x seconds / cap (the issue's 62.5 s for the
    baseline), and never less than one pod's run. No schedule beats it; whole pods make the
    true bound a little higher (``rounds_floor_seconds``)."""
    return max(seconds, pods * seconds / cap)


BASELINE = Scenario(
    name="baseline", pods=1000, queues=1, nodes=16, max_running=32, teams=2, seconds=2.0,
    note="the issue's baseline: 16 nodes x 8 GPUs, 1,000 1-GPU pods of 2 s, at most 32 running",
)

QUICK = Scenario(
    name="quick", pods=100, queues=2, nodes=8, max_running=4, teams=2, seconds=1.0,
    note="a small run for development (make bench-quick)",
)


def limit_per_queue(nodes: int, queues: int) -> int:
    """Half the cluster's GPUs shared evenly by the queues: the limits never exceed what the
    nodes hold, so a run measures the queueing layer and not placement."""
    return max(1, nodes * GPUS_PER_NODE // (2 * queues))


def matrix(
    pods: Sequence[int] = (100, 1000, 5000),
    queues: Sequence[int] = (10, 100),
    nodes: Sequence[int] = (64, 512),
) -> list[Scenario]:
    """Every combination, smallest work first."""
    return [
        Scenario(name=f"p{p}-q{q}-n{n}", pods=p, queues=q, nodes=n,
                 max_running=limit_per_queue(n, q), teams=4, seconds=2.0)
        for p in pods for n in nodes for q in queues
    ]


ALL: tuple[Scenario, ...] = (BASELINE, *matrix())

LARGE = Scenario(
    name="p20000-q100-n1000", pods=20000, queues=100, nodes=1000,
    max_running=limit_per_queue(1000, 100), teams=4, seconds=2.0,
    note="20,000 pods over 100 queues on 1,000 nodes: the controller's memory and event loop at scale "
         "(make bench-large: bare, Sluicegate and Kueue tuned; not in make bench)",
)
"""Chosen by name only (``--scenario p20000-q100-n1000``): Kueue as shipped would take hours."""

NAMED: tuple[Scenario, ...] = (QUICK, LARGE)
"""Scenarios outside ``ALL`` that ``select`` still finds by name."""


def select(patterns: Iterable[str], scenarios: Sequence[Scenario] = ALL) -> list[Scenario]:
    """The scenarios whose names match any of the shell patterns (``p1000-*``), in their order."""
    wanted = list(patterns)
    known = (*scenarios, *NAMED)
    chosen = [s for s in known if any(fnmatch.fnmatchcase(s.name, p) for p in wanted)]
    unknown = [p for p in wanted if not any(fnmatch.fnmatchcase(s.name, p) for s in known)]
    if unknown:
        raise ValueError(f"no scenario matches {', '.join(unknown)}; known: "
                         f"{', '.join(s.name for s in known)}")
    return chosen
