"""Capacity held for a waiting head, so that lower-priority work cannot take it first.

A queue's *head* is its first waiting workload (in queue order, whole groups only) that its
own queue has room for. When the head is short of a team's or the cluster's quota, it holds
each resource it is short of: later workloads of lower priority that ask for any of that
resource (of that team, or anywhere for the cluster) wait with ``HeldForPriority``. Count
limits need no hold: a full team or cluster blocks everyone alike.

A head that has waited longer than the Policy's ``starvationSeconds`` (and is not held back by
its own workflow) holds from its equal-priority peers too, and also the slot of its workflow.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.limits import shortfalls
from policy.model import Snapshot, Workload
from policy.usage import Ledger


@dataclass(frozen=True, slots=True)
class Hold:
    """One resource (or workflow slot) held for ``holder``, a head of priority ``level``."""

    holder: Workload
    queue: str
    level: int
    starving: bool
    scope: str  # "team vision", "cluster" or "workflow ns/sweep"
    resource: str = ""  # empty for a workflow slot

    def applies_to(self, w: Workload, level: int) -> bool:
        if self.holder is w:
            return False
        return self.level > level or (self.starving and self.level == level)

    def message(self, now: float, starvation_seconds: int) -> str:
        if self.starving:
            waited = int(now - self.holder.created)
            who = (
                f"held for {self.holder.key} in queue {self.queue}, "
                f"waiting {waited}s (over starvationSeconds {starvation_seconds})"
            )
        else:
            who = f"held for {self.holder.key} in higher-priority queue {self.queue} (priority {self.level})"
        if self.resource:
            return f"{who}: it waits for {self.scope} {self.resource}"
        return f"{who}: it needs a slot of {self.scope}"


class Holds:
    """Every hold of one dispatch decision; the first hold of a resource is the one kept.

    Levels are visited from the highest priority down, so the hold kept is the one that
    applies most widely.
    """

    __slots__ = ("cluster", "team", "workflow")

    def __init__(self) -> None:
        self.team: dict[str, dict[str, Hold]] = {}
        self.cluster: dict[str, Hold] = {}
        self.workflow: dict[str, Hold] = {}

    def __bool__(self) -> bool:
        return bool(self.team or self.cluster or self.workflow)

    def hold_for(
        self, head: Workload, queue: str, level: int, starving: bool, snapshot: Snapshot, ledger: Ledger
    ) -> None:
        """Hold whatever team or cluster quota ``head`` is short of, and if starving its workflow."""
        team = snapshot.teams.get(head.team) if head.team else None
        if team is not None and team.quota:
            used = ledger.team_used.get(team.name, {})
            held = self.team.setdefault(team.name, {})
            for name in sorted(shortfalls(head, used, team.quota)):
                held.setdefault(name, Hold(head, queue, level, starving, f"team {team.name}", name))
        policy = snapshot.policy
        if policy.quota:
            for name in sorted(shortfalls(head, ledger.cluster_used, policy.quota)):
                self.cluster.setdefault(name, Hold(head, queue, level, starving, "cluster", name))
        if starving and head.workflow and head.workflow_max_running is not None:
            self.workflow.setdefault(
                head.workflow, Hold(head, queue, level, starving, f"workflow {head.workflow}")
            )

    def holding(self, w: Workload, level: int) -> Hold | None:
        """The hold that keeps ``w`` (of priority ``level``) from capacity it asks for, if any."""
        if w.workflow and self.workflow:
            hold = self.workflow.get(w.workflow)
            if hold is not None and hold.applies_to(w, level):
                return hold
        team = self.team.get(w.team) if self.team else None
        cluster = self.cluster
        for name, amount in w.requests.items():
            if not amount:
                continue
            if team:
                hold = team.get(name)
                if hold is not None and hold.applies_to(w, level):
                    return hold
            if cluster:
                hold = cluster.get(name)
                if hold is not None and hold.applies_to(w, level):
                    return hold
        return None

