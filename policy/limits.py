"""The four layers of limits a workload must pass, in docs/concepts.md's order, and what each one
says.

1. its workflow can launch more; 2. its queue exists, is not paused, and has room under
``maxRunning`` and ``quota``; 3. its team has room (a team without a Team object has no
limit); 4. the cluster's Policy has room. ``maxRunning`` absent is unlimited and 0 admits
nothing; a quota caps only the resources it names, summed over running workloads.

``blocking`` is the fast question (which layer stops it, if any) asked once per candidate;
``describe`` turns an answer into the message a user reads, with the numbers.

``impossible`` finds work that can never run under the current limits: it asks for more of a
resource than a queue, team or cluster quota allows by itself, whatever else runs. Such work
holds nothing and blocks nothing (not even a StrictFIFO queue), and says so. Count limits never
make work impossible: a workload counts as one, however many pods it has, and ``maxRunning:
0`` is a stop an administrator chose, read as the limit it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from policy.keys import Reason
from policy.model import Policy, Queue, Snapshot, Team, Workload
from policy.quantities import EMPTY, Resources, exceeded, format_amount
from policy.usage import Ledger

# How the message of work that can never run begins. Its reason is the quota's own
# (``QueueQuota``, ...), the same as for work that waits for that quota to free, so this is what
# tells the two apart on a pod's condition (the list of reasons is public and fixed).
NEVER: Final = "can never run under the current limits: "

QUEUE_REASONS = frozenset({Reason.QUEUE_PAUSED, Reason.QUEUE_LIMIT, Reason.QUEUE_QUOTA})
SHARED_REASONS = frozenset(
    {Reason.TEAM_LIMIT, Reason.TEAM_QUOTA, Reason.GLOBAL_LIMIT, Reason.GLOBAL_QUOTA}
)


def over(running: int, slots: int, limit: int | None) -> bool:
    """Whether taking ``slots`` more (1, or 0 for pods joining their running group) would put a
    count limit's ``running`` over ``limit``. A scope already over its limit (it was lowered)
    admits nothing, not even work that takes no slot."""
    return limit is not None and running + slots > limit


def workflow_full(w: Workload, ledger: Ledger) -> bool:
    limit = w.workflow_max_running
    return bool(w.workflow) and over(ledger.workflow_running.get(w.workflow, 0), w.slots, limit)


def queue_full(queue: Queue | None, ledger: Ledger, slots: int = 1) -> Reason | None:
    """Layer 2's verdict for every workload of the queue alike (that takes ``slots``), when there
    is one.

    A missing queue reads as paused: the list of reasons is public and fixed.
    """
    if queue is None or queue.paused:
        return Reason.QUEUE_PAUSED
    if over(ledger.queue_running.get(queue.name, 0), slots, queue.max_running):
        return Reason.QUEUE_LIMIT
    return None


def queue_blocking(w: Workload, queue: Queue | None, ledger: Ledger) -> Reason | None:
    """Layer 2 alone, for ``w``: the queue's verdict for all, then its quota."""
    full = queue_full(queue, ledger, w.slots)
    if full is not None or queue is None:
        return full
    if queue.quota and exceeded(ledger.queue_used.get(queue.name, EMPTY), w.requests, queue.quota):
        return Reason.QUEUE_QUOTA
    return None


def shared_blocking(w: Workload, limits: Snapshot, ledger: Ledger) -> Reason | None:
    """Layers 3 and 4: the capacity that queues share."""
    team = limits.teams.get(w.team) if w.team else None
    if team is not None:
        if over(ledger.team_running.get(team.name, 0), w.slots, team.max_running):
            return Reason.TEAM_LIMIT
        if team.quota and exceeded(ledger.team_used.get(team.name, EMPTY), w.requests, team.quota):
            return Reason.TEAM_QUOTA
    policy = limits.policy
    if over(ledger.cluster_running, w.slots, policy.max_running):
        return Reason.GLOBAL_LIMIT
    if policy.quota and exceeded(ledger.cluster_used, w.requests, policy.quota):
        return Reason.GLOBAL_QUOTA
    return None


def blocking(w: Workload, queue: Queue | None, limits: Snapshot, ledger: Ledger) -> Reason | None:
    """The first layer that ``w`` does not pass, or None when every layer has room for it."""
    if workflow_full(w, ledger):
        return Reason.WORKFLOW_LIMIT
    return queue_blocking(w, queue, ledger) or shared_blocking(w, limits, ledger)


@dataclass(frozen=True, slots=True)
class Never:
    """Why a workload can never run under the current limits: one quota it exceeds by itself."""

    reason: Reason  # QueueQuota, TeamQuota or GlobalQuota: the layer whose quota it exceeds
    scope: str  # "queue a", "team vision", "cluster"
    resource: str
    need: int
    cap: int

    @property
    def message(self) -> str:
        name = self.resource
        return (
            f"{NEVER}needs {format_amount(self.need, name)} "
            f"{name}; {self.scope} quota is {format_amount(self.cap, name)}"
        )


def _over(requests: Resources, quota: Resources) -> str | None:
    for name, cap in quota.items():
        if requests.get(name, 0) > cap:
            return name
    return None


def impossible(w: Workload, queue: Queue | None, limits: Snapshot) -> Never | None:
    """The first quota, in layer order (queue, team, cluster), that ``w`` exceeds by itself."""
    requests = w.requests
    if not requests:
        return None
    if queue is not None and queue.quota and (name := _over(requests, queue.quota)):
        return Never(Reason.QUEUE_QUOTA, f"queue {queue.name}", name, requests[name], queue.quota[name])
    team = limits.teams.get(w.team) if w.team else None
    if team is not None and team.quota and (name := _over(requests, team.quota)):
        return Never(Reason.TEAM_QUOTA, f"team {team.name}", name, requests[name], team.quota[name])
    quota = limits.policy.quota
    if quota and (name := _over(requests, quota)):
        return Never(Reason.GLOBAL_QUOTA, "cluster", name, requests[name], quota[name])
    return None


Ceilings = tuple[tuple[str, int], ...]


def ceilings(queue: Queue | None, team: Team | None, policy: Policy) -> Ceilings:
    """The smallest cap per resource over the quotas a workload of ``queue`` and ``team`` is
    under: a workload that asks for no more than these is possible (``impossible`` is None)."""
    caps: dict[str, int] = {}
    for quota in (queue.quota if queue else EMPTY, team.quota if team else EMPTY, policy.quota):
        for name, cap in quota.items():
            if name not in caps or cap < caps[name]:
                caps[name] = cap
    return tuple(caps.items())


def floor(queue: Queue | None, limits: Snapshot) -> Ceilings:
    """The smallest cap per resource that any workload of ``queue`` could be under, whatever its
    team: a workload within these is possible, one above them needs ``ceilings`` of its team."""
    caps: dict[str, int] = {}
    quotas = [queue.quota if queue else EMPTY, limits.policy.quota]
    quotas.extend(team.quota for team in limits.teams.values())
    for quota in quotas:
        for name, cap in quota.items():
            if name not in caps or cap < caps[name]:
                caps[name] = cap
    return tuple(caps.items())


def within(requests: Resources, caps: Ceilings) -> bool:
    """Whether ``requests`` stay within ``caps`` (the fast, negative answer to ``impossible``)."""
    for name, cap in caps:  # noqa: SIM110 - a loop beats all() over a generator on this hot path
        if requests.get(name, 0) > cap:
            return False
    return True


def _quota_message(scope: str, w: Workload, used: Mapping[str, int], quota: Resources) -> str:
    name = exceeded(used, w.requests, quota) or next(iter(quota))
    return (
        f"{scope}: {format_amount(used.get(name, 0), name)}/{format_amount(quota[name], name)} {name} "
        f"in use, needs {format_amount(w.requests.get(name, 0), name)}"
    )


def _count_message(scope: str, running: int, limit: int | None) -> str:
    return f"{scope}: {running}/{limit} running"


def describe(reason: Reason, w: Workload, queue_name: str, limits: Snapshot, ledger: Ledger) -> str:
    """The message for a layer's ``reason``, with the numbers as they stand in ``ledger``."""
    queue = limits.queues.get(queue_name)
    team = limits.teams.get(w.team)
    policy = limits.policy
    if reason is Reason.WORKFLOW_LIMIT:
        count = ledger.workflow_running.get(w.workflow, 0)
        return _count_message(f"workflow {w.workflow}", count, w.workflow_max_running)
    if reason is Reason.QUEUE_PAUSED:
        if queue is None:
            return f'queue "{queue_name}" does not exist' if queue_name else "the pod names no queue"
        return f"queue {queue_name} is paused"
    if reason is Reason.QUEUE_LIMIT and queue is not None:
        count = ledger.queue_running.get(queue_name, 0)
        return _count_message(f"queue {queue_name}", count, queue.max_running)
    if reason is Reason.QUEUE_QUOTA and queue is not None:
        return _quota_message(f"queue {queue_name}", w, ledger.queue_used.get(queue_name, EMPTY), queue.quota)
    if reason is Reason.TEAM_LIMIT and team is not None:
        return _count_message(f"team {w.team}", ledger.team_running.get(w.team, 0), team.max_running)
    if reason is Reason.TEAM_QUOTA and team is not None:
        return _quota_message(f"team {w.team}", w, ledger.team_used.get(w.team, EMPTY), team.quota)
    if reason is Reason.GLOBAL_LIMIT:
        return _count_message("cluster", ledger.cluster_running, policy.max_running)
    if reason is Reason.GLOBAL_QUOTA:
        return _quota_message("cluster", w, ledger.cluster_used, policy.quota)
    return str(reason)  # pragma: no cover - every layer reason is handled above
