"""Queue, Team and Policy status at a bounded rate, and the gauges, from each cycle's figures.

Every cycle hands over its ``Figures`` (cheap: a reference). The gauges are set at once, so a
scrape sees the last cycle. Status is written by a loop of its own, at most once every
``interval`` seconds, and only for the objects whose status is due: not what the watch shows
(someone else wrote the status, an earlier leader's write landed late, the object was deleted
and created again, the figures changed): level-triggered, so once the cluster is quiet every
status is the truth, and a new leader writes only the statuses that are wrong. An object the
watch does not show (yet, or any more) is not written. A few requests at a time, and at most
``budget`` objects a round: those never tried first, then those tried longest ago (a write that
fails waits its turn like the others, so statuses that keep failing cannot starve the rest), so
every due status is written within a few rounds. A busy
cluster's statuses thus cost at most ``budget`` writes per ``interval`` however many pods come
and go and however many queues there are (100 busy queues at the defaults: each queue's status
about 10 s old at most).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Final

from controller.metrics import ControllerMetrics
from controller.statuses import Figures, Status, units
from kube.connecting import ApiError, Connection, KubeError
from kube.resources import POLICIES, QUEUES, TEAMS, Resource
from kube.writing import write_status
from policy import keys

log = logging.getLogger(__name__)

MANAGER: Final = "sluicegate-controller"
CONCURRENCY: Final = 4

Key = tuple[str, str]  # (plural, name)
Shown = Callable[[Resource, str], Status | None]
"""An object's status as the watch last showed it ({} when it has none); None when the watch
does not show the object."""


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
        shown: Shown,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.connection = connection
        self.metrics = metrics
        self.interval = interval
        self.budget = budget
        self._leading = leading
        self._policy_exists = policy_exists
        self._shown = shown
        self._wall = wall
        self._figures: Figures | None = None
        self._tried: dict[Key, int] = {}  # the round of the last attempt, landed or not
        self._round = 0
        self._slots = asyncio.Semaphore(CONCURRENCY)

    def clear(self) -> None:
        """Forget what was tried (a new term as leader starts from what the watch shows) and
        the figures: only the leader exports them."""
        self._tried.clear()
        self._figures = None
        self.metrics.forget_figures()

    # --- gauges ---------------------------------------------------------------------------

    def update(self, figures: Figures, waiting: Mapping[tuple[str, str], int], unplaceable: Counter[str],
               now: float, impossible: Mapping[str, int],
               waiting_since: Mapping[tuple[str, str], float] | None = None,
               unplaceable_workloads: Mapping[str, int] | None = None,
               never_runs: Mapping[tuple[str, str, str], int] | None = None,
               resources: AbstractSet[str] | None = None) -> None:
        """The gauges from a cycle: ``waiting`` counts pending workloads by (queue, reason),
        gated strays (``NamespaceLeftTeam``) included; ``waiting_since`` gives the creation time
        of the oldest of each; usage is reported for ``resources`` only (all, when None):
        ``policy.usage.reported_resources``."""
        self._figures = figures
        m = self.metrics
        tally = figures.tally
        m.queue_pending.replace({(q,): u.pending for q, u in tally.queues.items()})
        m.queue_running.replace({(q,): u.running for q, u in tally.queues.items()})
        shown = (lambda r: True) if resources is None else resources.__contains__
        m.queue_usage.replace({(q, r): units(a)
                               for q, u in tally.queues.items() for r, a in u.requests.items() if shown(r)})
        m.queue_oldest.replace({(q,): 0.0 if u.oldest_pending is None else max(0.0, now - u.oldest_pending)
                                for q, u in tally.queues.items()})
        m.queue_waiting.replace({labels: float(n) for labels, n in waiting.items()})
        m.queue_oldest_waiting.replace({labels: max(0.0, now - created)
                                        for labels, created in (waiting_since or {}).items()})
        m.queue_impossible.replace({(q,): impossible.get(q, 0)
                                   for q in {*figures.queue_status, *tally.queues, *impossible}})
        m.impossible_causes.replace({labels: float(n) for labels, n in (never_runs or {}).items()})
        teams = set(tally.teams) | set(figures.teams) | set(figures.team_status)
        m.team_pending.replace({(t,): figures.teams[t].pending if t in figures.teams else 0 for t in teams})
        m.team_running.replace({(t,): tally.team(t).running for t in teams})
        m.team_usage.replace({(t, r): units(a)
                              for t, u in tally.teams.items() for r, a in u.requests.items() if shown(r)})
        m.unplaceable.replace({(q,): unplaceable.get(q, 0) for q in {*tally.queues, *unplaceable}})
        unplaced = unplaceable_workloads or {}
        m.unplaceable_workloads.replace({(q,): unplaced.get(q, 0) for q in {*tally.queues, *unplaced}})
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
        """Write the statuses that are due, at most ``budget`` of them, longest untried first;
        how many were attempted."""
        self._round += 1
        targets = self._targets(figures)
        present = {(r.plural, n) for r, n, _ in targets}
        self._tried = {k: n for k, n in self._tried.items() if k in present}  # deleted: forgotten
        chosen = stalest([t for t in targets if self._due(*t)], self._tried, self.budget)
        if chosen:
            await asyncio.gather(*(self._write_one(r, n, s) for r, n, s in chosen))
        return len(chosen)

    def _due(self, resource: Resource, name: str, status: Status) -> bool:
        """Not what the object shows: level-triggered, so a status someone else wrote, an
        earlier leader's late write, an object created again are put right, and a new leader
        writes only what is wrong. Every write is awaited within its round and rounds are
        ``interval`` apart, so the watch has shown a write by the next round; a watch further
        behind costs a repeated write, never a wrong status. An object the watch does not show
        has nothing to write to (gone, or created a moment ago: due once the watch shows it)."""
        shown = self._shown(resource, name)
        return shown is not None and shown != status

    async def _write_one(self, resource: Resource, name: str, status: Status) -> None:
        async with self._slots:
            if not self._leading():
                return
            self._tried[(resource.plural, name)] = self._round
            try:
                await write_status(self.connection, resource, name, status, manager=MANAGER)
            except ApiError as e:
                self.metrics.failed("status", e.status)
                log.warning("could not write the status of %s %s: %s", resource.kind, name, e)
            except KubeError as e:
                self.metrics.failed("status", 0)
                log.warning("could not write the status of %s %s: %s", resource.kind, name, e)


def stalest(
    due: Sequence[tuple[Resource, str, Status]], tried: Mapping[Key, int], budget: int
) -> list[tuple[Resource, str, Status]]:
    """The ``budget`` due statuses to write this round: those never tried first, then by the
    round they were last tried (oldest first); ties keep their order (queues, teams, Policy)."""
    return sorted(due, key=lambda d: tried.get((d[0].plural, d[1]), -1))[:budget]
