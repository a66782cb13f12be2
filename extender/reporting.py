"""Queue, Team and Policy status at a bounded rate, and the gauges, from each cycle's figures.

Every cycle hands over its ``Figures`` (cheap: a reference). The gauges are set at once, so a
scrape sees the last cycle. Status is written by a loop of its own, at most once every
``interval`` seconds, and only for the objects whose status changed since this replica last
wrote it (all of them once after it becomes leader; an object gone from the figures is
forgotten, so one deleted and created again is written again), a few requests at a time, and at most
``budget`` objects a round: those never written first, then those written longest ago, so
every changed status is written within a few rounds. A busy cluster's statuses thus cost at
most ``budget`` writes per ``interval`` however many pods come and go and however many queues
there are (100 busy queues at the defaults: each queue's status about 10 s old at most).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Final, NamedTuple

from extender.metrics import ControllerMetrics
from extender.statuses import Figures, Status, units
from kube.connecting import ApiError, Connection, KubeError
from kube.resources import POLICIES, QUEUES, TEAMS, Resource
from kube.writing import apply_status
from policy import keys

log = logging.getLogger(__name__)

MANAGER: Final = "sluicegate-controller"
CONCURRENCY: Final = 4


class Reporter:
    def __init__(
        self,
        connection: Connection,
        metrics: ControllerMetrics,
        *,
        interval: float,
        budget: int,
        leading: Callable[[], bool],
        policy_exists: Callable[[], bool],
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.connection = connection
        self.metrics = metrics
        self.interval = interval
        self.budget = budget
        self._leading = leading
        self._policy_exists = policy_exists
        self._wall = wall
        self._figures: Figures | None = None
        self._written: dict[tuple[str, str], Written] = {}  # (plural, name): last write
        self._round = 0
        self._slots = asyncio.Semaphore(CONCURRENCY)
        self.writes = 0

    def clear(self) -> None:
        """Forget what was written (a new term as leader writes every status once) and the
        figures: only the leader exports them."""
        self._written.clear()
        self._figures = None
        self.metrics.forget_figures()

    # --- gauges ---------------------------------------------------------------------------

    def update(self, figures: Figures, waiting: Mapping[tuple[str, str], int], unplaceable: Counter[str],
               now: float, impossible: Mapping[str, int]) -> None:
        self._figures = figures
        m = self.metrics
        tally = figures.tally
        m.queue_pending.replace({(q,): u.pending for q, u in tally.queues.items()})
        m.queue_running.replace({(q,): u.running for q, u in tally.queues.items()})
        m.queue_usage.replace({(q, r): units(a)
                               for q, u in tally.queues.items() for r, a in u.requests.items()})
        m.queue_oldest.replace({(q,): 0.0 if u.oldest_pending is None else max(0.0, now - u.oldest_pending)
                                for q, u in tally.queues.items()})
        m.queue_waiting.replace({labels: float(n) for labels, n in waiting.items()})
        m.queue_impossible.replace({(q,): impossible.get(q, 0)
                                   for q in {*figures.queue_status, *tally.queues, *impossible}})
        teams = set(tally.teams) | set(figures.teams) | set(figures.team_status)
        m.team_pending.replace({(t,): figures.teams[t].pending if t in figures.teams else 0 for t in teams})
        m.team_running.replace({(t,): tally.team(t).running for t in teams})
        m.team_usage.replace({(t, r): units(a)
                              for t, u in tally.teams.items() for r, a in u.requests.items()})
        m.unplaceable.replace({(q,): unplaceable.get(q, 0) for q in {*tally.queues, *unplaceable}})
        m.cluster_running.set(tally.cluster.running)
        m.cluster_pending.set(figures.cluster.pending)

    # --- status ---------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if self._figures is None or not self._leading():
                continue
            try:
                await self.write(self._figures)
            except Exception:  # one bad round must not end status reporting
                log.exception("writing status failed")

    def _targets(self, figures: Figures) -> list[tuple[Resource, str, Status]]:
        out = [(QUEUES, name, s) for name, s in figures.queue_status.items()]
        out += [(TEAMS, name, s) for name, s in figures.team_status.items()]
        if self._policy_exists():
            out.append((POLICIES, keys.POLICY_NAME, figures.cluster_status))
        return out

    async def write(self, figures: Figures) -> int:
        """Write the statuses that changed since they were last written, at most ``budget`` of
        them, longest unwritten first; how many were attempted."""
        self._round += 1
        targets = self._targets(figures)
        present = {(r.plural, n) for r, n, _ in targets}
        self._written = {k: w for k, w in self._written.items() if k in present}  # deleted: forgotten
        changed = [(r, n, s) for r, n, s in targets if (w := self._written.get((r.plural, n))) is None
                   or w.status != s]
        chosen = stalest(changed, self._written, self.budget)
        if chosen:
            await asyncio.gather(*(self._write_one(r, n, s) for r, n, s in chosen))
        return len(chosen)

    async def _write_one(self, resource: Resource, name: str, status: Status) -> None:
        async with self._slots:
            if not self._leading():
                return
            try:
                await apply_status(self.connection, resource, name, status, manager=MANAGER)
            except ApiError as e:
                self.metrics.failed("status", e.status)
                log.warning("could not write the status of %s %s: %s", resource.kind, name, e)
                return
            except KubeError as e:
                self.metrics.failed("status", 0)
                log.warning("could not write the status of %s %s: %s", resource.kind, name, e)
                return
        self._written[(resource.plural, name)] = Written(status, self._round)
        self.writes += 1


class Written(NamedTuple):
    """An object's status as this replica last wrote it, and the round it was written in."""

    status: Status
    round: int


def stalest(
    changed: Sequence[tuple[Resource, str, Status]], written: Mapping[tuple[str, str], Written], budget: int
) -> list[tuple[Resource, str, Status]]:
    """The ``budget`` changed statuses to write this round: those never written first, then by the
    round they were last written (oldest first); ties keep their order (queues, teams, Policy)."""
    def last(c: tuple[Resource, str, Status]) -> int:
        w = written.get((c[0].plural, c[1]))
        return -1 if w is None else w.round

    return sorted(changed, key=last)[:budget]
