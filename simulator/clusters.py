"""The simulated cluster: what waits and what runs, kept up to date event by event.

Pending work is kept per queue and per *shape* (team, workflow and its limit, requests: all
the limits read of a workload), each in queue order; running work with its usage per queue,
team, (queue, team), workflow and the whole cluster. ``whole(now)`` is the snapshot of all of
it; ``simulator.compacting`` makes the smaller one the replay hands dispatch.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import TypeVar

from policy.limits import queue_full
from policy.model import Snapshot, Workload
from policy.quantities import Resources
from policy.usage import Ledger
from simulator.setups import Setup

Shape = tuple[str, str, int | None, tuple[tuple[str, int], ...]]
_K = TypeVar("_K")


def shape_of(w: Workload) -> Shape:
    return (w.team, w.workflow, w.workflow_max_running, tuple(sorted(w.requests.items())))


def queue_order(w: Workload) -> tuple[int, float, str]:
    """Queue order: pod priority (higher first), creation time, key."""
    return (-w.priority, w.created, w.key)


def add_requests(into: dict[str, int], requests: Resources, sign: int = 1) -> None:
    for name, amount in requests.items():
        into[name] = into.get(name, 0) + sign * amount


class Scope:
    """Running count and summed requests of one scope; ``version`` changes with them."""

    __slots__ = ("running", "used", "version")

    def __init__(self) -> None:
        self.running = 0
        self.used: dict[str, int] = {}
        self.version = 0

    def add(self, w: Workload, sign: int) -> None:
        self.running += sign
        self.version += 1
        add_requests(self.used, w.requests, sign)


def scope_in(scopes: dict[_K, Scope], name: _K) -> Scope:
    scope = scopes.get(name)
    if scope is None:
        scope = scopes[name] = Scope()
    return scope


class VirtualCluster:
    """Pending and running workloads, and usage per queue, team, (queue, team) and cluster."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.waiting: dict[str, dict[Shape, list[Workload]]] = {}  # queue -> shape -> in queue order
        self.pending: dict[str, int] = {}  # queue -> how many wait (queues with none left out)
        self.open: dict[str, None] = {}  # queues with pending work that are not closed, as a set
        self.running: dict[str, Workload] = {}
        self.counts = Ledger()  # running count per queue: what ``queue_full`` reads
        self.queues: dict[str, Scope] = {}
        self.classes: dict[str, dict[str, Scope]] = {}  # queue -> team -> running of both
        self.teams: dict[str, Scope] = {}
        self.total = Scope()  # the whole cluster
        self.flows: dict[str, dict[str, Workload]] = {}  # workflow -> running members
        # Queues whose pending work or own limits (the queue's usage, the count of a team with a
        # maxRunning, the running members of a workflow) may have changed since ``touched`` was
        # last cleared: what decides whether a queue is idle (``simulator.compacting``).
        self.touched: set[str] = set()
        self._counted = {name for name, team in setup.teams.items() if team.max_running is not None}
        self._team_queues: dict[str, set[str]] = {}  # team -> queues that had pending work of it
        self._flow_queues: dict[str, set[str]] = {}  # workflow -> queues that had pending work of it

    # --- events ----------------------------------------------------------------------------

    def arrive(self, w: Workload) -> None:
        queue = w.queue
        insort(self.waiting.setdefault(queue, {}).setdefault(shape_of(w), []), w, key=queue_order)
        self.pending[queue] = self.pending.get(queue, 0) + 1
        self._reopen(queue)
        self.touched.add(queue)
        if w.team in self._counted:
            self._team_queues.setdefault(w.team, set()).add(queue)
        if w.workflow:
            queues = self._flow_queues.setdefault(w.workflow, set())
            if queue not in queues:
                queues.add(queue)
                if len(queues) > 1:  # its work may now fill it from another queue (``shared``)
                    self.touched.update(queues)

    def start(self, pending: Workload, running: Workload) -> None:
        """``pending`` was released: ``running`` (its running version) now runs."""
        shapes = self.waiting[pending.queue]
        shape = shape_of(pending)
        line = shapes[shape]
        i = bisect_left(line, queue_order(pending), key=queue_order)
        assert line[i] is pending
        del line[i]
        if not line:
            del shapes[shape]
        if self.pending[pending.queue] == 1:
            del self.pending[pending.queue]
        else:
            self.pending[pending.queue] -= 1
        self._count(running, 1)
        self._reopen(pending.queue)

    def run(self, running: Workload) -> None:
        """``running`` runs already (it was released before the replay began)."""
        self._count(running, 1)
        self._reopen(running.queue)

    def finish(self, key: str) -> Workload:
        w = self.running[key]
        self._count(w, -1)
        self._reopen(w.queue)
        return w

    def _reopen(self, queue: str) -> None:
        """Note whether ``queue`` is open: it has pending work and is not closed."""
        if queue in self.pending and queue_full(self.setup.queues.get(queue), self.counts) is None:
            self.open[queue] = None
        else:
            self.open.pop(queue, None)

    def _count(self, w: Workload, sign: int) -> None:
        if sign > 0:
            self.running[w.key] = w
        else:
            del self.running[w.key]
        queue_running = self.counts.queue_running
        queue_running[w.queue] = queue_running.get(w.queue, 0) + sign
        scope_in(self.queues, w.queue).add(w, sign)
        scope_in(self.classes.setdefault(w.queue, {}), w.team).add(w, sign)
        scope_in(self.teams, w.team).add(w, sign)
        self.total.add(w, sign)
        self.touched.add(w.queue)
        if w.team in self._counted:
            self.touched.update(self._team_queues.get(w.team, ()))
        if w.workflow:
            members = self.flows.setdefault(w.workflow, {})
            if sign > 0:
                members[w.key] = w
            else:
                del members[w.key]
            self.touched.update(self._flow_queues.get(w.workflow, ()))

    def shared(self, workflow: str) -> bool:
        """Whether ``workflow`` has had pending work in more than one queue: then one queue's
        releases may fill it within a decision, where another queue's head belongs to it."""
        return len(self._flow_queues.get(workflow, ())) > 1

    # --- snapshots -------------------------------------------------------------------------

    def open_queues(self) -> list[str]:
        """Queues with pending work that are not closed (missing, paused, at maxRunning)."""
        return list(self.open)

    def whole(self, now: float) -> Snapshot | None:
        """Every pending and running workload, the limits as they are; None when nothing waits."""
        if not self.pending:
            return None
        setup = self.setup
        workloads = [w for shapes in self.waiting.values() for line in shapes.values() for w in line]
        workloads.extend(self.running.values())
        return Snapshot(setup.queues, setup.teams, setup.policy, workloads, now)
