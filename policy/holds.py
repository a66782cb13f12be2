"""Capacity held for a waiting head, so that lower-priority work cannot take it first.

A queue's *head* is its first waiting workload (in queue order, whole groups only) that could
run now but for shared capacity: it is not impossible, its own queue has room for it, its
workflow can launch more and its team's ``maxRunning`` has room. Only a head holds, so a head
held back by its own workflow, its team's count or a paused or full queue holds nothing. A head
short of its team's quota holds within its team only: what gives it room (its team's own work
ending) frees as much of the cluster's at once, so other teams keep the cluster's capacity.

A head holds what it needs from each scope it belongs to, for as long as it waits: in its
workflow, its queue, its team and the cluster, the last free slot of a count limit, and of a
quota the amount it asks for. Another workload that a hold applies to waits with
``HeldForPriority`` when its release would leave the head short: the quota it asks for would
leave less than the head needs, or it would take the last free slot. A head already short of
a quota therefore keeps everyone the hold applies to off that resource, and a workflow slot is
held only when the head would take the last one.

A hold applies to lower priorities; a head that has waited longer than ``starvationSeconds``
holds from its equal-priority peers (its own queue included) too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policy.model import Snapshot, Workload
from policy.quantities import EMPTY, Resources, exceeded
from policy.usage import Ledger

SLOT = ""
"""The key of a count limit's hold, beside the resource names of a quota's holds."""


@dataclass(frozen=True, slots=True)
class Hold:
    """What ``holder``, a head of priority ``level``, needs of one scope: a slot or a resource."""

    holder: Workload
    queue: str
    level: int
    starving: bool
    scope: str  # "workflow ns/sweep", "queue a", "team vision" or "cluster"
    resource: str = SLOT
    need: int = 1  # milli-units of ``resource``; one slot for a count limit

    def applies_to(self, w: Workload, level: int) -> bool:
        if self.holder is w:
            return False
        return self.level > level or (self.starving and self.level == level)

    def covers(self, other: Hold) -> bool:
        """Whether this hold keeps back everything ``other`` would, and as much of it."""
        wider = self.level > other.level or (
            self.level == other.level and (self.starving or not other.starving)
        )
        return wider and self.need >= other.need

    def message(self, now: float, starvation_seconds: int, reader: str) -> str:
        """What a waiting pod of namespace ``reader`` is told: the head by name when it is of the
        same namespace, else only by its queue and priority (``named``)."""
        holder = named(self.holder, reader)
        if self.starving:
            waited = int(now - self.holder.created)
            who = (
                f"held for {holder} in queue {self.queue}, "
                f"waiting {waited}s (over starvationSeconds {starvation_seconds})"
            )
        else:
            who = f"held for {holder} in higher-priority queue {self.queue} (priority {self.level})"
        if self.resource:
            return f"{who}: it waits for {self.scope} {self.resource}"
        scope = "the cluster" if self.scope == "cluster" else self.scope
        return f"{who}: it needs the last free slot of {scope}"


OTHER_NAMESPACE = "work of another namespace"
"""How a message names a workload of a namespace other than its reader's: users of one
namespace may not read another's pods, so a message never names them."""


def named(w: Workload, reader: str) -> str:
    """``w`` as a message to a pod of namespace ``reader`` names it."""
    return w.key if w.namespace == reader else OTHER_NAMESPACE


Held = dict[str, list[Hold]]  # SLOT or a resource name -> the holds on it


def _keep(held: Held, key: str, hold: Hold) -> None:
    holds = held.get(key)
    if holds is None:
        held[key] = [hold]
    elif not any(h.covers(hold) for h in holds):
        holds.append(hold)


class Holds:
    """Every hold of one dispatch decision, judged against the decision's ``ledger`` as it grows."""

    __slots__ = ("_any", "cluster", "ledger", "queue", "snapshot", "team", "workflow")

    def __init__(self, snapshot: Snapshot, ledger: Ledger) -> None:
        self.snapshot = snapshot
        self.ledger = ledger
        self.workflow: dict[str, Hold] = {}
        self.queue: dict[str, Held] = {}
        self.team: dict[str, Held] = {}
        self.cluster: Held = {}
        self._any = False

    def __bool__(self) -> bool:
        return self._any

    def hold_for(self, head: Workload, queue: str, level: int, starving: bool) -> None:
        """Hold what ``head`` (the head of ``queue``, of priority ``level``) needs of every scope."""
        snapshot = self.snapshot

        def place(held: Held, scope: str, max_running: int | None, quota: Resources) -> None:
            if max_running is not None:
                _keep(held, SLOT, Hold(head, queue, level, starving, scope))
            for name, need in head.requests.items():
                if need and name in quota:
                    _keep(held, name, Hold(head, queue, level, starving, scope, name, need))

        workflow = head.workflow
        if workflow and head.workflow_max_running is not None:
            self.workflow.setdefault(workflow, Hold(head, queue, level, starving, f"workflow {workflow}"))
        q = snapshot.queues.get(queue)
        if q is not None:
            place(self.queue.setdefault(queue, {}), f"queue {queue}", q.max_running, q.quota)
        team = snapshot.teams.get(head.team) if head.team else None
        if team is not None:
            place(self.team.setdefault(team.name, {}), f"team {team.name}", team.max_running, team.quota)
            used = self.ledger.team_used.get(team.name, EMPTY)
            if team.quota and exceeded(used, head.requests, team.quota):
                # Only its own team's work ending gives it room, and that frees as much of the
                # cluster's at the same moment: holding the cluster's would stop other teams for
                # nothing.
                self._any = True
                return
        policy = snapshot.policy
        place(self.cluster, "cluster", policy.max_running, policy.quota)
        self._any = True

    def holding(self, w: Workload, level: int) -> Hold | None:
        """The hold that keeps ``w`` (of priority ``level``) from what a head needs, if any."""
        ledger = self.ledger
        if w.workflow and self.workflow:
            hold = self.workflow.get(w.workflow)
            limit = w.workflow_max_running
            if (
                hold is not None
                and limit is not None
                and hold.applies_to(w, level)
                and ledger.workflow_running.get(w.workflow, 0) + 1 + w.slots > limit
            ):
                return hold
        snapshot = self.snapshot
        if self.queue and (held := self.queue.get(w.queue)):
            q = snapshot.queues[w.queue]
            used = ledger.queue_used.get(w.queue)
            running = ledger.queue_running.get(w.queue, 0)
            hold = _holding(held, w, level, running, q.max_running, used, q.quota)
            if hold is not None:
                return hold
        if self.team and w.team and (held := self.team.get(w.team)):
            team = snapshot.teams[w.team]
            used = ledger.team_used.get(w.team)
            running = ledger.team_running.get(w.team, 0)
            hold = _holding(held, w, level, running, team.max_running, used, team.quota)
            if hold is not None:
                return hold
        if self.cluster:
            policy = snapshot.policy
            running, used = ledger.cluster_running, ledger.cluster_used
            return _holding(self.cluster, w, level, running, policy.max_running, used, policy.quota)
        return None


def _holding(
    held: Held,
    w: Workload,
    level: int,
    running: int,
    max_running: int | None,
    used: Mapping[str, int] | None,
    quota: Resources,
) -> Hold | None:
    """The hold of one scope that ``w``'s release would leave short, if any."""
    slots = held.get(SLOT)
    if slots and max_running is not None and running + 1 + w.slots > max_running:
        for hold in slots:
            if hold.applies_to(w, level):
                return hold
    for name, amount in w.requests.items():
        if not amount:
            continue
        holds = held.get(name)
        if not holds:
            continue
        room = quota[name] - (used.get(name, 0) if used else 0) - amount
        for hold in holds:
            if hold.need > room and hold.applies_to(w, level):
                return hold
    return None
