"""The simulated cluster: what waits and what runs, kept up to date event by event, and the
snapshot each dispatch cycle decides over.

``dispatch`` costs time in proportion to its snapshot, and a busy week has hundreds of
workloads running and waiting at every instant. So the snapshot handed to it is *compact*: it
holds only what can change the decision, built so that ``dispatch`` decides exactly what it
would over the whole cluster (a property test compares the two on random traces). It rests on
two facts about dispatch: limits compare counts (``count >= maxRunning``) and summed requests
(``used + asked > quota``); and within one decision usage only grows and holds are only added,
so a workload that does not fit when tried never fits later in the same decision.

* Pending work of a queue that is closed at the start of the cycle (missing, paused, or at its
  ``maxRunning``) is left out: dispatch releases nothing from such a queue, and nothing of it
  heads its queue or holds capacity.
* Of the pending work of an open queue, workloads alike in everything the limits read (team,
  workflow and its limit, requests: a *shape*) are interchangeable except for their order. If
  the limits at the start of the cycle let at most *k* of a shape go, only the first *k* + 1
  of that shape (in queue order) are shown: the (*k* + 1)-th cannot go, and neither can any
  after it, nor can they be a queue's head before it.
* Running work is summed, not listed: one running workload per (queue, team) holding the sum
  of their requests, for each open queue with a quota; one per team for the teams (with a Team
  object) of the pending work shown; and one for the rest of the cluster, under no queue and no
  team. Quotas read exactly the sums they read over the whole cluster.
* The summed workloads count one each, and none belongs to a workflow; so each ``maxRunning``
  (queue, team, cluster) in the snapshot is lowered by the number of running workloads the sums
  stand for, less the number of summed workloads, and each pending workload's workflow limit by
  its workflow's running members: ``count >= limit`` answers as over the whole cluster. Quotas
  are never changed, so "asks for more than the quota by itself" keeps its meaning.
* ``snapshot.queues`` holds the queues with pending work in the snapshot and one queue of every
  priority (``turns`` keeps a turn only for priorities some queue has).
* When the first workload of every shape is already over some limit, dispatch can release
  nothing (usage only grows within a decision), and no snapshot is made.

``exact=True`` gives the whole cluster instead: every pending and running workload, the limits
as they are; the reference the compact snapshot is tested against.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping
from dataclasses import replace
from typing import TypeVar

from policy.limits import queue_full
from policy.model import Ordering, Policy, Queue, Snapshot, State, Team, Workload
from policy.pods import Pod
from policy.quantities import EMPTY, Resources
from policy.usage import Ledger
from simulator.setups import Setup

_SUM_POD = (Pod("", "sum"),)
Shape = tuple[str, str, int | None, tuple[tuple[str, int], ...]]
UNBOUNDED = 1 << 62
_K = TypeVar("_K")


def shape_of(w: Workload) -> Shape:
    return (w.team, w.workflow, w.workflow_max_running, tuple(sorted(w.requests.items())))


def _order(w: Workload) -> tuple[int, float, str]:
    """Queue order: pod priority (higher first), creation time, key."""
    return (-w.priority, w.created, w.key)


def _add(into: dict[str, int], requests: Resources, sign: int = 1) -> None:
    for name, amount in requests.items():
        into[name] = into.get(name, 0) + sign * amount


class _Scope:
    """Running count and summed requests of one scope; ``version`` changes with them."""

    __slots__ = ("running", "used", "version")

    def __init__(self) -> None:
        self.running = 0
        self.used: dict[str, int] = {}
        self.version = 0

    def add(self, w: Workload, sign: int) -> None:
        self.running += sign
        self.version += 1
        _add(self.used, w.requests, sign)


def _scope(scopes: dict[_K, _Scope], name: _K) -> _Scope:
    scope = scopes.get(name)
    if scope is None:
        scope = scopes[name] = _Scope()
    return scope


def _headroom(scope: _Scope | None, max_running: int | None, quota: Resources) -> tuple[int, dict[str, int]]:
    """How many more workloads the scope's count limit lets in, and what its quota has left."""
    running, used = (scope.running, scope.used) if scope is not None else (0, {})
    count = UNBOUNDED if max_running is None else max_running - running
    return count, {name: cap - used.get(name, 0) for name, cap in quota.items()}


class VirtualCluster:
    """Pending and running workloads, and usage per queue, team, (queue, team) and cluster."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.waiting: dict[str, dict[Shape, list[Workload]]] = {}  # queue -> shape -> in queue order
        self.pending: dict[str, int] = {}  # queue -> how many wait (queues with none left out)
        self.running: dict[str, Workload] = {}
        self.counts = Ledger()  # running count per queue: what ``queue_full`` reads
        self.queues: dict[str, _Scope] = {}
        self.classes: dict[str, dict[str, _Scope]] = {}  # queue -> team -> running of both
        self.teams: dict[str, _Scope] = {}
        self.cluster = _Scope()
        self.flows: dict[str, dict[str, Workload]] = {}  # workflow -> running members
        self._sums: dict[tuple[str, str], tuple[object, Workload]] = {}
        self._lowered_limits: dict[str, tuple[int, Workload]] = {}
        self._headrooms: dict[tuple[str, str], tuple[int, tuple[int, dict[str, int]]]] = {}
        self._lowered_queues: dict[str, tuple[int, Queue]] = {}
        self._lowered_teams: dict[str, tuple[int, Team]] = {}
        self._lowered_policy: tuple[int, Policy] | None = None
        self._levels: dict[int, str] = {}
        for name, queue in setup.queues.items():
            self._levels.setdefault(queue.priority, name)  # one queue per priority

    # --- events ----------------------------------------------------------------------------

    def arrive(self, w: Workload) -> None:
        insort(self.waiting.setdefault(w.queue, {}).setdefault(shape_of(w), []), w, key=_order)
        self.pending[w.queue] = self.pending.get(w.queue, 0) + 1

    def start(self, pending: Workload, running: Workload) -> None:
        """``pending`` was released: ``running`` (its running version) now runs."""
        shapes = self.waiting[pending.queue]
        shape = shape_of(pending)
        line = shapes[shape]
        i = bisect_left(line, _order(pending), key=_order)
        assert line[i] is pending
        del line[i]
        if not line:
            del shapes[shape]
        if self.pending[pending.queue] == 1:
            del self.pending[pending.queue]
        else:
            self.pending[pending.queue] -= 1
        self._lowered_limits.pop(pending.key, None)
        self._count(running, 1)

    def finish(self, key: str) -> Workload:
        w = self.running[key]
        self._count(w, -1)
        return w

    def _count(self, w: Workload, sign: int) -> None:
        if sign > 0:
            self.running[w.key] = w
        else:
            del self.running[w.key]
        queue_running = self.counts.queue_running
        queue_running[w.queue] = queue_running.get(w.queue, 0) + sign
        _scope(self.queues, w.queue).add(w, sign)
        _scope(self.classes.setdefault(w.queue, {}), w.team).add(w, sign)
        _scope(self.teams, w.team).add(w, sign)
        self.cluster.add(w, sign)
        if w.workflow:
            members = self.flows.setdefault(w.workflow, {})
            if sign > 0:
                members[w.key] = w
            else:
                del members[w.key]

    # --- snapshots -------------------------------------------------------------------------

    def open_queues(self) -> list[str]:
        """Queues with pending work that are not closed (missing, paused, at maxRunning)."""
        queues, counts = self.setup.queues, self.counts
        return [q for q in self.pending if queue_full(queues.get(q), counts) is None]

    def snapshot(self, now: float, exact: bool = False) -> Snapshot | None:
        """What dispatch decides over now; None when it could release nothing: no open queue
        has pending work, or none of it fits under the limits as they stand."""
        setup = self.setup
        if exact:
            if not self.pending:
                return None
            workloads = [w for shapes in self.waiting.values() for line in shapes.values() for w in line]
            workloads.extend(self.running.values())
            return Snapshot(setup.queues, setup.teams, setup.policy, workloads, now)
        visible = self.open_queues()
        if not visible:
            return None
        workloads, teams, fits = self._candidates(visible)
        if not fits:
            return None
        sums, per_queue, per_team = self._summed(visible, teams)
        workloads.extend(sums)
        return Snapshot(
            self._queues(visible, per_queue), self._teams(per_team), self._policy(len(sums)), workloads, now
        )

    def _candidates(self, visible: list[str]) -> tuple[list[Workload], set[str], bool]:
        """The first k + 1 of every shape of the open queues (workflow limits lowered by the
        running members, which the snapshot shows only in sums), the teams among them that
        have limits, and whether the first of any shape fits now (if none does, dispatch
        can release nothing: usage only grows within a decision)."""
        setup, flows = self.setup, self.flows
        policy = setup.policy
        cluster_count, cluster_free = _headroom(self.cluster, policy.max_running, policy.quota)
        teams: dict[str, tuple[int, dict[str, int]]] = {}
        out: list[Workload] = []
        limited: set[str] = set()
        fits = False
        for name in visible:
            queue = setup.queues[name]
            queue_count, queue_free = self._queue_headroom(name, queue)
            base = min(queue_count, cluster_count)
            strict = queue.ordering is Ordering.STRICT_FIFO
            first: tuple[tuple[int, float, str], int, Workload] | None = None  # a strict queue's head
            any_room = False
            for (team_name, workflow, limit, _), line in self.waiting[name].items():
                room = base
                frees: tuple[dict[str, int], ...] = (queue_free, cluster_free)
                team = setup.teams.get(team_name) if team_name else None
                if team is not None:
                    limited.add(team_name)
                    headroom = teams.get(team_name)
                    if headroom is None:
                        headroom = teams[team_name] = self._team_headroom(team)
                    room = min(room, headroom[0])
                    frees = (queue_free, cluster_free, headroom[1])
                for resource, need in line[0].requests.items():
                    if need:
                        for free in frees:
                            left = free.get(resource)
                            if left is not None and left // need < room:
                                room = left // need
                members = len(flows.get(workflow, ())) if workflow and limit is not None else 0
                if limit is not None and workflow:
                    room = min(room, limit - members)
                any_room = any_room or room > 0
                if strict:
                    order = _order(line[0])
                    if first is None or order < first[0]:
                        first = (order, room, line[0])
                chosen = line if room >= len(line) else line[: max(1, room + 1)]
                if members and limit is not None:
                    out.extend(self._lowered(w, limit - members) for w in chosen)
                else:
                    out.extend(chosen)
            if first is None:
                fits = fits or any_room
            elif not fits:
                # A StrictFIFO queue stops at its first workload that does not fit, unless that
                # one could never run under the quotas (dispatch passes it over): then any may go.
                fits = first[1] > 0 or (any_room and self._never(first[2], queue))
        return out, limited, fits

    def _never(self, w: Workload, queue: Queue) -> bool:
        """Whether ``w`` asks for more than its queue's, team's or the cluster's quota alone."""
        team = self.setup.teams.get(w.team) if w.team else None
        quotas = (queue.quota, team.quota if team is not None else EMPTY, self.setup.policy.quota)
        return any(need > quota.get(name, need) for quota in quotas for name, need in w.requests.items())

    def _queue_headroom(self, name: str, queue: Queue) -> tuple[int, dict[str, int]]:
        scope = self.queues.get(name)
        version = scope.version if scope is not None else -1
        cached = self._headrooms.get(("queue", name))
        if cached is None or cached[0] != version:
            cached = self._headrooms[("queue", name)] = (
                version,
                _headroom(scope, queue.max_running, queue.quota),
            )
        return cached[1]

    def _team_headroom(self, team: Team) -> tuple[int, dict[str, int]]:
        scope = self.teams.get(team.name)
        version = scope.version if scope is not None else -1
        cached = self._headrooms.get(("team", team.name))
        if cached is None or cached[0] != version:
            cached = self._headrooms[("team", team.name)] = (
                version,
                _headroom(scope, team.max_running, team.quota),
            )
        return cached[1]

    def _lowered(self, w: Workload, limit: int) -> Workload:
        """``w`` with its workflow limit lowered to ``limit`` (cached until it changes)."""
        cached = self._lowered_limits.get(w.key)
        if cached is not None and cached[0] == limit:
            return cached[1]
        lowered = replace(w, workflow_max_running=limit)
        self._lowered_limits[w.key] = (limit, lowered)
        return lowered

    def _summed(
        self, visible: list[str], teams: set[str]
    ) -> tuple[list[Workload], dict[str, int], dict[str, int]]:
        """Summed workloads standing for all running work, and how many there are per queue
        and per team. Queue usage is read only for open queues with a quota, team usage only
        for ``teams`` (those of the pending work shown); all the rest counts for the cluster
        alone, in one sum under no queue and no team."""
        out: list[Workload] = []
        per_queue: dict[str, int] = {}
        per_team: dict[str, int] = {}
        shown_count: dict[str, int] = {}  # team -> running workloads the sums so far stand for
        shown_used: dict[str, dict[str, int]] = {}  # team -> what those sums hold
        queues, classes = self.setup.queues, self.classes
        for queue in visible:
            if not queues[queue].quota or queue not in classes:
                continue
            for team, cls in classes[queue].items():
                if cls.running:
                    out.append(self._sum(queue, team, cls.used, cls.version))
                    per_queue[queue] = per_queue.get(queue, 0) + 1
                    per_team[team] = per_team.get(team, 0) + 1
                    shown_count[team] = shown_count.get(team, 0) + cls.running
                    _add(shown_used.setdefault(team, {}), cls.used)
        for team in teams:
            scope = self.teams.get(team)
            if scope is None:
                continue
            count = scope.running - shown_count.get(team, 0)
            if count > 0:
                used = dict(scope.used)
                _add(used, shown_used.get(team, {}), -1)
                out.append(self._sum("", team, used, None))
                per_team[team] = per_team.get(team, 0) + 1
                shown_count[team] = scope.running
                shown_used[team] = scope.used
        count = self.cluster.running - sum(shown_count.values())
        if count > 0:
            used = dict(self.cluster.used)
            for part in shown_used.values():
                _add(used, part, -1)
            out.append(self._sum("", "", used, None))
        return out, per_queue, per_team

    def _sum(self, queue: str, team: str, used: Mapping[str, int], version: int | None) -> Workload:
        """A running workload of ``queue`` and ``team`` that holds ``used``.

        Cached per (queue, team): by the class's version when ``used`` is its whole sum, else
        by the amounts themselves.
        """
        cached = self._sums.get((queue, team))
        shape: object = (
            version if version is not None else tuple(sorted((k, v) for k, v in used.items() if v))
        )
        if cached is not None and cached[0] == shape:
            return cached[1]
        requests = {k: v for k, v in used.items() if v}
        w = Workload(
            key=f"(sum) {queue}/{team}",  # not a valid workload key: no clash
            namespace="",
            queue=queue,
            team=team,
            pods=_SUM_POD,
            state=State.RUNNING,
            requests=requests or EMPTY,
        )
        self._sums[(queue, team)] = (shape, w)
        return w

    def _queues(self, visible: list[str], shown: Mapping[str, int]) -> Mapping[str, Queue]:
        queues = self.setup.queues
        running = self.counts.queue_running
        out: dict[str, Queue] = {}
        for name in visible:
            queue = queues[name]
            if queue.max_running is not None:
                queue = self._lowered_queue(queue, running.get(name, 0) - shown.get(name, 0))
            out[name] = queue
        for name in self._levels.values():
            out.setdefault(name, queues[name])
        return out

    def _lowered_queue(self, queue: Queue, hidden: int) -> Queue:
        if not hidden or queue.max_running is None:
            return queue
        cached = self._lowered_queues.get(queue.name)
        if cached is None or cached[0] != hidden:
            cached = self._lowered_queues[queue.name] = (
                hidden,
                replace(queue, max_running=queue.max_running - hidden),
            )
        return cached[1]

    def _teams(self, shown: Mapping[str, int]) -> Mapping[str, Team]:
        """Teams with their maxRunning lowered by the running workloads the sums stand for."""
        out = dict(self.setup.teams)
        for name, count in shown.items():
            team = out.get(name)
            if team is None or team.max_running is None:
                continue
            hidden = self.teams[name].running - count
            if hidden:
                cached = self._lowered_teams.get(name)
                if cached is None or cached[0] != hidden:
                    lowered = replace(team, max_running=team.max_running - hidden)
                    cached = self._lowered_teams[name] = (hidden, lowered)
                out[name] = cached[1]
        return out

    def _policy(self, shown: int) -> Policy:
        policy = self.setup.policy
        hidden = self.cluster.running - shown
        if policy.max_running is None or not hidden:
            return policy
        if self._lowered_policy is None or self._lowered_policy[0] != hidden:
            self._lowered_policy = (hidden, replace(policy, max_running=policy.max_running - hidden))
        return self._lowered_policy[1]
