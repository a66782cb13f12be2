"""The compact snapshot: what the replay hands dispatch, decided exactly as over the whole cluster.

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

``VirtualCluster.whole`` gives the whole cluster instead: every pending and running workload,
the limits as they are; the reference the compact snapshot is tested against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from policy.model import Ordering, Policy, Queue, Snapshot, State, Team, Workload
from policy.pods import Pod
from policy.quantities import EMPTY, Resources
from simulator.clusters import Scope, VirtualCluster, add_requests, queue_order

_SUM_POD = (Pod("", "sum"),)
UNBOUNDED = 1 << 62
Headroom = tuple[int, dict[str, int]]


def _headroom(scope: Scope | None, max_running: int | None, quota: Resources) -> tuple[int, dict[str, int]]:
    """How many more workloads the scope's count limit lets in, and what its quota has left."""
    running, used = (scope.running, scope.used) if scope is not None else (0, {})
    count = UNBOUNDED if max_running is None else max_running - running
    return count, {name: cap - used.get(name, 0) for name, cap in quota.items()}


def _room(headroom: Headroom, asks: tuple[tuple[str, int], ...]) -> int:
    """How many workloads asking ``asks`` fit in ``headroom``, at most."""
    room, free = headroom
    for resource, need in asks:
        if need:
            left = free.get(resource)
            if left is not None and left // need < room:
                room = left // need
    return room


class Compactor:
    """Makes compact snapshots of one ``VirtualCluster``, keeping what it can between cycles."""

    def __init__(self, cluster: VirtualCluster) -> None:
        self.cluster = cluster
        self.setup = cluster.setup
        self._sums: dict[tuple[str, str], tuple[object, Workload]] = {}
        self._lowered_limits: dict[str, tuple[int, Workload]] = {}
        self._lowered_before: dict[str, tuple[int, Workload]] = {}
        self._rooms: dict[tuple[str, str, tuple[tuple[str, int], ...]], tuple[tuple[int, int], int]] = {}
        self._lowered_queues: dict[str, tuple[int, Queue]] = {}
        self._lowered_teams: dict[str, tuple[int, Team]] = {}
        self._lowered_policy: tuple[int, Policy] | None = None
        self._levels: dict[int, str] = {}
        for name, queue in self.setup.queues.items():
            self._levels.setdefault(queue.priority, name)  # one queue per priority

    def snapshot(self, now: float) -> Snapshot | None:
        """What dispatch decides over now; None when it could release nothing: no open queue
        has pending work, or none of it fits under the limits as they stand."""
        visible = self.cluster.open_queues()
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
        setup, flows = self.setup, self.cluster.flows
        policy = setup.policy
        self._lowered_before, self._lowered_limits = self._lowered_limits, {}
        cluster = _headroom(self.cluster.total, policy.max_running, policy.quota)
        cluster_rooms: dict[tuple[tuple[str, int], ...], int] = {}  # requests -> room
        out: list[Workload] = []
        named: set[str] = set()
        fits = False
        for name in visible:
            queue = setup.queues[name]
            strict = queue.ordering is Ordering.STRICT_FIFO
            first: tuple[tuple[int, float, str], int, Workload] | None = None  # a strict queue's head
            any_room = False
            rooms: dict[tuple[str, tuple[tuple[str, int], ...]], int] = {}  # (team, requests) -> room
            for shape, line in self.cluster.waiting[name].items():
                team_name, workflow, limit, asks = shape
                if team_name:
                    named.add(team_name)
                room = rooms.get((team_name, asks))
                if room is None:
                    room = cluster_rooms.get(asks)
                    if room is None:
                        room = cluster_rooms[asks] = _room(cluster, asks)
                    if room > 0:  # else the cluster alone stops it
                        room = min(room, self._local_room(name, queue, team_name, asks))
                    rooms[(team_name, asks)] = room
                members = 0
                if limit is not None and workflow:
                    members = len(flows.get(workflow, ()))
                    room = min(room, limit - members)
                if room > 0:
                    any_room = True
                if strict:
                    order = queue_order(line[0])
                    if first is None or order < first[0]:
                        first = (order, room, line[0])
                if room <= 0:
                    out.append(
                        self._lowered(line[0], limit - members) if members and limit is not None else line[0]
                    )
                    continue
                chosen = line if room >= len(line) else line[: room + 1]
                if members and limit is not None:
                    out.extend([self._lowered(w, limit - members) for w in chosen])
                else:
                    out.extend(chosen)
            if first is None:
                fits = fits or any_room
            elif not fits:
                # A StrictFIFO queue stops at its first workload that does not fit, unless that
                # one could never run under the quotas (dispatch passes it over): then any may go.
                fits = first[1] > 0 or (any_room and self._never(first[2], queue))
        teams = setup.teams
        return out, {t for t in named if t in teams}, fits

    def _local_room(self, name: str, queue: Queue, team_name: str, asks: tuple[tuple[str, int], ...]) -> int:
        """How many workloads of ``team_name`` asking ``asks`` the queue's and the team's limits
        let in now; kept until the usage of either changes."""
        team = self.setup.teams.get(team_name) if team_name else None
        queue_scope = self.cluster.queues.get(name)
        team_scope = self.cluster.teams.get(team_name) if team is not None else None
        versions = (
            queue_scope.version if queue_scope is not None else -1,
            team_scope.version if team_scope is not None else -1,
        )
        cached = self._rooms.get((name, team_name, asks))
        if cached is not None and cached[0] == versions:
            return cached[1]
        room = _room(_headroom(queue_scope, queue.max_running, queue.quota), asks)
        if team is not None:
            room = min(room, _room(_headroom(team_scope, team.max_running, team.quota), asks))
        self._rooms[(name, team_name, asks)] = (versions, room)
        return room

    def _never(self, w: Workload, queue: Queue) -> bool:
        """Whether ``w`` asks for more than its queue's, team's or the cluster's quota alone."""
        team = self.setup.teams.get(w.team) if w.team else None
        quotas = (queue.quota, team.quota if team is not None else EMPTY, self.setup.policy.quota)
        return any(need > quota.get(name, need) for quota in quotas for name, need in w.requests.items())

    def _lowered(self, w: Workload, limit: int) -> Workload:
        """``w`` with its workflow limit lowered to ``limit``; kept while it is used cycle
        after cycle (``_candidates`` drops what the last cycle did not use)."""
        cached = self._lowered_before.get(w.key)
        if cached is None or cached[0] != limit:
            cached = (limit, replace(w, workflow_max_running=limit))
        self._lowered_limits[w.key] = cached
        return cached[1]

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
        queues, classes = self.setup.queues, self.cluster.classes
        for queue in visible:
            if not queues[queue].quota or queue not in classes:
                continue
            for team, cls in classes[queue].items():
                if cls.running:
                    out.append(self._sum(queue, team, cls.used, cls.version))
                    per_queue[queue] = per_queue.get(queue, 0) + 1
                    per_team[team] = per_team.get(team, 0) + 1
                    shown_count[team] = shown_count.get(team, 0) + cls.running
                    add_requests(shown_used.setdefault(team, {}), cls.used)
        for team in teams:
            scope = self.cluster.teams.get(team)
            if scope is None:
                continue
            count = scope.running - shown_count.get(team, 0)
            if count > 0:
                used = dict(scope.used)
                add_requests(used, shown_used.get(team, {}), -1)
                out.append(self._sum("", team, used, None))
                per_team[team] = per_team.get(team, 0) + 1
                shown_count[team] = scope.running
                shown_used[team] = scope.used
        count = self.cluster.total.running - sum(shown_count.values())
        if count > 0:
            used = dict(self.cluster.total.used)
            for part in shown_used.values():
                add_requests(used, part, -1)
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
        running = self.cluster.counts.queue_running
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
            hidden = self.cluster.teams[name].running - count
            if hidden:
                cached = self._lowered_teams.get(name)
                if cached is None or cached[0] != hidden:
                    lowered = replace(team, max_running=team.max_running - hidden)
                    cached = self._lowered_teams[name] = (hidden, lowered)
                out[name] = cached[1]
        return out

    def _policy(self, shown: int) -> Policy:
        policy = self.setup.policy
        hidden = self.cluster.total.running - shown
        if policy.max_running is None or not hidden:
            return policy
        if self._lowered_policy is None or self._lowered_policy[0] != hidden:
            self._lowered_policy = (hidden, replace(policy, max_running=policy.max_running - hidden))
        return self._lowered_policy[1]
