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
* A shape whose first workload its *own* limits stop (its queue's count and quota, its team's
  count, its workflow's limit: what makes a head) can neither go nor hold anything this cycle:
  it is left out of a BestEffortFIFO queue, and of a StrictFIFO queue only its first is shown
  (it may be the one the queue stops at), except a shape whose workflow is at its limit, which
  a StrictFIFO queue passes over too and is left out. A queue whose work is all so stopped, or
  a StrictFIFO queue whose first workload (of a workflow with room) is, is *idle*: it releases
  nothing and holds nothing. Not so a StrictFIFO queue whose first workload belongs to a
  limited workflow with pending work in another queue too: that queue's releases may fill the
  workflow within the decision, and dispatch then goes on past the workload (record 0036).
  Its only part in the decision is its place among the queues of its priority that take
  turns, which matters only to a starving head's claim (a claim moves the turn when it was the
  claimant's turn anyway). So an idle queue is shown as one incomplete workload (dispatch
  passes over it, as over a pod group not yet whole) at a priority where some shape that fits
  starts with a starving workload, and not at all elsewhere. Idle queues are remembered until
  an event touches their pending work or their own limits (``VirtualCluster.touched``).
* Running work is summed, not listed: one running workload per (queue, team) holding the sum
  of their requests, for each open queue with a quota that is not idle; one per team for the
  teams (with a Team object) of the pending work shown; and one for the rest of the cluster,
  under no queue and no team. Quotas read exactly the sums they read over the whole cluster.
* The summed workloads count one each, and none belongs to a workflow; so each ``maxRunning``
  (queue, team, cluster) in the snapshot is lowered by the number of running workloads the sums
  stand for, less the number of summed workloads, and each pending workload's workflow limit by
  its workflow's running members: ``count >= limit`` answers as over the whole cluster. Quotas
  are never changed, so "asks for more than the quota by itself" keeps its meaning.
* ``snapshot.queues`` holds the queues with pending work in the snapshot and one queue of every
  priority (``turns`` keeps a turn only for priorities some queue has). An idle queue has no
  sum and keeps its own ``maxRunning``: it was open, and it shows nothing running.
* When the first workload of every shape is already over some limit, dispatch can release
  nothing (usage only grows within a decision), and no snapshot is made.

``VirtualCluster.whole`` gives the whole cluster instead: every pending and running workload,
the limits as they are; the reference the compact snapshot is tested against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from policy.dispatching import Turns
from policy.model import Ordering, Policy, Queue, Snapshot, State, Team, Workload
from policy.pods import Pod
from policy.quantities import EMPTY, Resources
from simulator.clusters import Scope, VirtualCluster, add_requests, queue_order

_SUM_POD = (Pod("", "sum"),)
_IDLE_POD = (Pod("", "idle", gated=True),)
UNBOUNDED = 1 << 62
Headroom = tuple[int, dict[str, int]]
Asks = tuple[tuple[str, int], ...]  # a shape's requests


def _headroom(scope: Scope | None, max_running: int | None, quota: Resources) -> tuple[int, dict[str, int]]:
    """How many more workloads the scope's count limit lets in, and what its quota has left."""
    running, used = (scope.running, scope.used) if scope is not None else (0, {})
    count = UNBOUNDED if max_running is None else max_running - running
    return count, {name: cap - used.get(name, 0) for name, cap in quota.items()}


def _room(headroom: Headroom, asks: Asks) -> int:
    """How many workloads asking ``asks`` fit in ``headroom``, at most."""
    room, free = headroom
    for resource, need in asks:
        if need:
            left = free.get(resource)
            if left is not None and left // need < room:
                room = left // need
    return room


@dataclass(slots=True)
class _Shown:
    """What the snapshot shows of one queue that is not idle."""

    workloads: list[Workload]
    teams: set[str]  # of the work shown
    fits: bool  # some of it fits under the limits as they stand
    claim: bool  # some of it that fits starts a shape with a starving workload


def _scope_room(scope: Scope | None, max_running: int | None, quota: Resources, asks: Asks) -> int:
    """``_room(_headroom(...), asks)`` without the headroom in between."""
    running, used = (scope.running, scope.used) if scope is not None else (0, _NO_USE)
    room = UNBOUNDED if max_running is None else max_running - running
    for resource, need in asks:
        if need and (cap := quota.get(resource)) is not None:
            fit = (cap - used.get(resource, 0)) // need
            if fit < room:
                room = fit
    return room


_NO_USE: dict[str, int] = {}


class Compactor:
    """Makes compact snapshots of one ``VirtualCluster``, keeping what it can between cycles."""

    def __init__(self, cluster: VirtualCluster) -> None:
        self.cluster = cluster
        self.setup = cluster.setup
        self._sums: dict[tuple[str, str], tuple[object, Workload]] = {}
        self._lowered_limits: dict[str, tuple[int, Workload]] = {}
        self._lowered_before: dict[str, tuple[int, Workload]] = {}
        self._rooms: dict[tuple[str, str, Asks], tuple[tuple[int, int], tuple[int, int]]] = {}
        self._idles: dict[str, Workload] = {}
        self._idle: set[str] = set()  # queues found idle that no event has touched since
        # Limits lowered by the running workloads that sums stand for, by (name, how many): a
        # queue's or team's count never exceeds its maxRunning, so these stay few.
        self._lowered_queues: dict[tuple[str, int], Queue] = {}
        self._lowered_teams: dict[tuple[str, int], Team] = {}
        self._lowered_policy: dict[int, Policy] = {}
        self._levels: dict[int, str] = {}
        for name, queue in self.setup.queues.items():
            self._levels.setdefault(queue.priority, name)  # one queue per priority

    def snapshot(self, now: float, turns: Turns | None = None) -> Snapshot | None:
        """What dispatch decides over now, given the ``turns`` it will be called with; None
        when it could release nothing: no open queue has pending work, or none of it fits
        under the limits as they stand."""
        cluster = self.cluster
        if cluster.touched:
            self._idle -= cluster.touched
            cluster.touched.clear()
        if not cluster.open:
            return None
        self._lowered_before, self._lowered_limits = self._lowered_limits, {}
        policy = self.setup.policy
        headroom = _headroom(cluster.total, policy.max_running, policy.quota)
        deadline = now - policy.starvation_seconds  # as dispatch reckons it
        workloads: list[Workload] = []
        active: list[str] = []
        named: set[str] = set()
        claims: set[int] = set()  # priorities at which a starving head may be claimed
        fits = False
        rooms: dict[Asks, int] = {}  # requests -> the cluster's room
        for name in sorted(cluster.open.keys() - self._idle):
            shown = self._shown(name, headroom, rooms, deadline)
            if shown is None:
                self._idle.add(name)
                continue
            workloads.extend(shown.workloads)
            active.append(name)
            named |= shown.teams
            fits = fits or shown.fits
            if shown.claim:
                claims.add(self.setup.queues[name].priority)
        if not fits:
            return None
        idle = self._turning(claims, turns) if claims else []
        workloads.extend(self._idle_workload(name) for name in idle)
        teams = self.setup.teams
        sums, per_queue, per_team = self._summed(active, {t for t in named if t in teams})
        workloads.extend(sums)
        return Snapshot(
            self._queues(active, idle, per_queue),
            self._teams(per_team),
            self._policy(len(sums)),
            workloads,
            now,
        )

    def _turning(self, claims: set[int], turns: Turns | None) -> list[str]:
        """The idle queues to show at the priorities in ``claims``: at each, the first idle
        queue after the one that had the last turn (every idle queue of it without ``turns``).

        A claim moves the turn only when it was the claimant's turn anyway, so the turn can
        move only from queue to the next one, and stops at the first idle queue after where it
        started: the idle queues beyond it never matter."""
        queues = self.setup.queues
        idle: dict[int, list[str]] = {}
        for name in self.cluster.open:
            if name in self._idle and (level := queues[name].priority) in claims:
                idle.setdefault(level, []).append(name)
        if turns is None:
            return [name for names in idle.values() for name in names]
        out = []
        for level, names in idle.items():
            last = turns.last.get(level)
            after = [name for name in names if last is None or name > last]
            out.append(min(after or names))
        return out

    def _shown(self, name: str, headroom: Headroom, rooms: dict[Asks, int], deadline: float) -> _Shown | None:
        """What of ``name``'s pending work the snapshot shows: the first k + 1 of every shape
        (workflow limits lowered by the running members, which the snapshot shows only in
        sums), less the shapes their own limits stop; None when the queue is idle."""
        setup, flows = self.setup, self.cluster.flows
        queue = setup.queues[name]
        strict = queue.ordering is Ordering.STRICT_FIFO
        # a strict queue's first workload: its order, room, own room
        first: tuple[tuple[int, float, str], int, int, Workload] | None = None
        any_room = any_own = claim = False
        shown: list[Workload] = []
        teams: set[str] = set()
        local: dict[tuple[str, Asks], tuple[int, int]] = {}
        for shape, line in self.cluster.waiting[name].items():
            team_name, workflow, limit, asks = shape
            both = local.get((team_name, asks))
            if both is None:
                room = rooms.get(asks)
                if room is None:
                    room = rooms[asks] = _room(headroom, asks)
                here, own = self._local_room(name, queue, team_name, asks)
                both = local[(team_name, asks)] = (min(room, here), own)
            room, own = both
            members = 0
            if limit is not None and workflow:
                members = len(flows.get(workflow, ()))
                room = min(room, limit - members)
                own = min(own, limit - members)
            # A workflow at its limit: its work is passed over, in a StrictFIFO queue too.
            full = limit is not None and bool(workflow) and limit - members <= 0
            if strict and not full:
                order = queue_order(line[0])
                if first is None or order < first[0]:
                    first = (order, room, own, line[0])
            if own <= 0 and (full or not strict):
                continue
            if team_name:
                teams.add(team_name)
            if own > 0:
                any_own = True
            if room <= 0:
                head = line[0]
                shown.append(self._lowered(head, limit - members) if members and limit is not None else head)
                continue
            any_room = True
            if line[0].created < deadline:
                claim = True
            chosen = line if room >= len(line) else line[: room + 1]
            if members and limit is not None:
                shown.extend([self._lowered(w, limit - members) for w in chosen])
            else:
                shown.extend(chosen)
        if first is None:
            fits = any_room
        elif first[2] <= 0 and not self._never(first[3], queue) and not self._may_fill(first[3]):
            return None  # the queue stops at its first workload, which holds nothing
        else:
            # A StrictFIFO queue stops at its first workload that does not fit, unless that
            # one could never run under the quotas (dispatch passes it over): then any may go.
            fits = first[1] > 0 or (any_room and self._never(first[3], queue))
        if not any_own:
            return None
        return _Shown(shown, teams, fits, claim)

    def _local_room(self, name: str, queue: Queue, team_name: str, asks: Asks) -> tuple[int, int]:
        """How many workloads of ``team_name`` asking ``asks`` the queue's and the team's limits
        let in now, and how many its *own* limits do (the queue's, and the team's count: what
        ``could_run`` reads); kept until the usage of either changes."""
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
        room = own = _scope_room(queue_scope, queue.max_running, queue.quota, asks)
        if team is not None:
            room = min(room, _scope_room(team_scope, team.max_running, team.quota, asks))
            if team.max_running is not None:
                own = min(own, team.max_running - (team_scope.running if team_scope is not None else 0))
        self._rooms[(name, team_name, asks)] = (versions, (room, own))
        return room, own

    def _idle_workload(self, name: str) -> Workload:
        """The one workload an idle queue is shown as: a pod group not yet whole, which dispatch
        passes over (it releases nothing and holds nothing, and does not stop a StrictFIFO
        queue) while the queue keeps its place among those that take turns."""
        w = self._idles.get(name)
        if w is None:
            w = self._idles[name] = Workload(
                key=f"(idle) {name}",  # not a valid workload key: no clash
                namespace="",
                queue=name,
                team="",
                pods=_IDLE_POD,
                state=State.PENDING,
                group_size=len(_IDLE_POD) + 1,
            )
        return w

    def _may_fill(self, w: Workload) -> bool:
        """Whether another queue's releases may fill ``w``'s workflow within one decision: then a
        StrictFIFO queue stopped at ``w`` goes on past it (``dispatch`` resumes it), so its own
        limits stopping ``w`` do not make the queue idle."""
        return w.workflow_max_running is not None and bool(w.workflow) and self.cluster.shared(w.workflow)

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
        shape: object = version if version is not None else dict(used)
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

    def _queues(self, active: list[str], idle: list[str], shown: Mapping[str, int]) -> Mapping[str, Queue]:
        queues = self.setup.queues
        running = self.cluster.counts.queue_running
        out: dict[str, Queue] = {}
        for name in active:
            queue = queues[name]
            if queue.max_running is not None:
                queue = self._lowered_queue(queue, running.get(name, 0) - shown.get(name, 0))
            out[name] = queue
        for name in idle:
            out[name] = queues[name]
        for name in self._levels.values():
            out.setdefault(name, queues[name])
        return out

    def _lowered_queue(self, queue: Queue, hidden: int) -> Queue:
        if not hidden or queue.max_running is None:
            return queue
        lowered = self._lowered_queues.get((queue.name, hidden))
        if lowered is None:
            lowered = self._lowered_queues[(queue.name, hidden)] = replace(
                queue, max_running=queue.max_running - hidden
            )
        return lowered

    def _teams(self, shown: Mapping[str, int]) -> Mapping[str, Team]:
        """Teams with their maxRunning lowered by the running workloads the sums stand for."""
        out = dict(self.setup.teams)
        for name, count in shown.items():
            team = out.get(name)
            if team is None or team.max_running is None:
                continue
            hidden = self.cluster.teams[name].running - count
            if hidden:
                lowered = self._lowered_teams.get((name, hidden))
                if lowered is None:
                    lowered = self._lowered_teams[(name, hidden)] = replace(
                        team, max_running=team.max_running - hidden
                    )
                out[name] = lowered
        return out

    def _policy(self, shown: int) -> Policy:
        policy = self.setup.policy
        hidden = self.cluster.total.running - shown
        if policy.max_running is None or not hidden:
            return policy
        lowered = self._lowered_policy.get(hidden)
        if lowered is None:
            lowered = self._lowered_policy[hidden] = replace(policy, max_running=policy.max_running - hidden)
        return lowered
