"""An independent, deliberately plain statement of the limits, to judge dispatch decisions by.

It shares no code with ``policy.limits``: it recounts usage from scratch and lists every
layer a workload fails, in docs/concepts.md's order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from policy.keys import Reason
from policy.model import Ordering, Snapshot, State, Workload


class Usage:
    def __init__(self, running: Iterable[Workload]) -> None:
        self.count: Counter[tuple[str, str]] = Counter()
        self.used: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for w in running:
            for scope in self.scopes(w):
                self.count[scope] += 0 if w.joins else 1  # joining pods: their group has the slot
                self.used[scope].update(w.requests)

    @staticmethod
    def scopes(w: Workload) -> list[tuple[str, str]]:
        out = [("queue", w.queue), ("cluster", "")]
        if w.team:
            out.append(("team", w.team))
        if w.workflow:
            out.append(("workflow", w.workflow))
        return out


def usage_after(snap: Snapshot, released: Iterable[Workload] = ()) -> Usage:
    released_keys = {w.key for w in released}
    return Usage(w for w in snap.workloads if w.state is State.RUNNING or w.key in released_keys)


def _over(used: Counter[str], w: Workload, quota: object) -> bool:
    assert hasattr(quota, "items")
    return any(w.requests.get(r, 0) > 0 and used[r] + w.requests[r] > cap for r, cap in quota.items())


def failing_layers(w: Workload, snap: Snapshot, usage: Usage) -> list[Reason]:
    """Every layer ``w`` fails under ``usage``, in order (empty: it fits every limit)."""
    out = []
    slot = 0 if w.joins else 1  # pods joining a running group take no new slot

    def full(scope: tuple[str, str], limit: int | None) -> bool:
        return limit is not None and usage.count[scope] + slot > limit

    if w.workflow and full(("workflow", w.workflow), w.workflow_max_running):
        out.append(Reason.WORKFLOW_LIMIT)
    queue = snap.queues.get(w.queue)
    if queue is None or queue.paused:
        out.append(Reason.QUEUE_PAUSED)
    else:
        if full(("queue", w.queue), queue.max_running):
            out.append(Reason.QUEUE_LIMIT)
        if _over(usage.used[("queue", w.queue)], w, queue.quota):
            out.append(Reason.QUEUE_QUOTA)
    team = snap.teams.get(w.team)
    if team is not None:
        if full(("team", w.team), team.max_running):
            out.append(Reason.TEAM_LIMIT)
        if _over(usage.used[("team", w.team)], w, team.quota):
            out.append(Reason.TEAM_QUOTA)
    policy = snap.policy
    if full(("cluster", ""), policy.max_running):
        out.append(Reason.GLOBAL_LIMIT)
    if _over(usage.used[("cluster", "")], w, policy.quota):
        out.append(Reason.GLOBAL_QUOTA)
    return out


def limit_breaches(snap: Snapshot, released: Iterable[Workload]) -> list[str]:
    """Scopes that a release pushed over a limit: count over maxRunning, or a quota'd resource
    that a released workload asks for over its cap. Work already over a lowered limit is no
    breach by itself; adding to it is, pods joining a running group there included."""
    released = list(released)
    after = usage_after(snap, released)
    out = []
    for w in released:
        for kind, name in Usage.scopes(w):
            limit, quota = None, None
            if kind == "workflow":
                limit = w.workflow_max_running
            elif kind == "queue" and (q := snap.queues.get(name)) is not None:
                limit, quota = q.max_running, q.quota
            elif kind == "team" and (t := snap.teams.get(name)) is not None:
                limit, quota = t.max_running, t.quota
            elif kind == "cluster":
                limit, quota = snap.policy.max_running, snap.policy.quota
            if limit is not None and after.count[(kind, name)] > limit:
                out.append(f"{kind} {name}: {after.count[(kind, name)]} running > {limit}"
                           + (" (joined)" if w.joins else ""))
            for r, cap in (quota or {}).items():
                if w.requests.get(r, 0) and after.used[(kind, name)][r] > cap:
                    out.append(f"{kind} {name}: {r} {after.used[(kind, name)][r]} > {cap}")
    return out


def shortfalls(w: Workload, used: Counter[str], quota: object) -> set[str]:
    """The resources of ``quota`` that ``w`` asks for and that have too little room left."""
    assert hasattr(quota, "items")
    return {r for r, cap in quota.items() if w.requests.get(r, 0) > 0 and used[r] + w.requests[r] > cap}


def never(w: Workload, snap: Snapshot) -> Reason | None:
    """The quota layer whose quota ``w`` exceeds by itself, in layer order; None if none."""
    queue = snap.queues.get(w.queue)
    team = snap.teams.get(w.team)
    scopes = [
        (Reason.QUEUE_QUOTA, queue.quota if queue is not None else {}),
        (Reason.TEAM_QUOTA, team.quota if team is not None else {}),
        (Reason.GLOBAL_QUOTA, snap.policy.quota),
    ]
    for reason, quota in scopes:
        if any(w.requests.get(r, 0) > cap for r, cap in quota.items()):
            return reason
    return None


def no_node(w: Workload, snap: Snapshot) -> bool:
    """Whether some pod of ``w`` fits no node of the snapshot's inventory even empty, restated:
    every resource it asks for within one node's allocatable (no pools, selectors or taints
    are drawn here). Unknown nodes (none, or no inventory) hold anything."""
    nodes = getattr(snap.nodes, "nodes", ())
    if not nodes:
        return False
    return any(
        not any(all(n.allocatable.get(r, 0) >= need for r, need in p.requests.items()) for n in nodes)
        for p in w.pods
    )


def can_never_run(w: Workload, snap: Snapshot) -> bool:
    """Over a quota by itself, or no node could hold it: passed over, holding nothing."""
    return never(w, snap) is not None or no_node(w, snap)


OWN_LAYERS = frozenset(
    {Reason.WORKFLOW_LIMIT, Reason.QUEUE_PAUSED, Reason.QUEUE_LIMIT, Reason.QUEUE_QUOTA, Reason.TEAM_LIMIT}
)


def could_run(w: Workload, snap: Snapshot, usage: Usage) -> bool:
    """Only shared capacity keeps ``w`` back: its workflow, its own queue (room and quota) and its
    team's count have room for it, and no quota is beyond it."""
    if can_never_run(w, snap):
        return False
    layers = set(failing_layers(w, snap, usage))
    return not layers & OWN_LAYERS


def level(snap: Snapshot, w: Workload) -> int:
    queue = snap.queues.get(w.queue)
    return queue.priority if queue is not None else -1


def starving(snap: Snapshot, w: Workload) -> bool:
    return snap.now - w.created > snap.policy.starvation_seconds


def in_order(workloads: Iterable[Workload]) -> list[Workload]:
    """Queue order, restated: pod priority (higher first), submission time, key."""
    return sorted(workloads, key=lambda w: (-w.priority, w.created, w.key))


def in_line(w: Workload) -> bool:
    """Whether ``w`` takes its place in its queue's line: a whole workload, and not pods joining
    a running group (those go with their group, ahead of the line, and never head it)."""
    return w.complete and not w.joins


def eligible(w: Workload, snap: Snapshot, usage: Usage) -> bool:
    """Whether ``w`` takes a place a StrictFIFO queue may stop at: a whole workload, not joining
    a running group, that could ever run (some node could hold it), and whose own workflow has
    room under ``usage``."""
    if not in_line(w) or can_never_run(w, snap):
        return False
    return not (w.workflow and w.workflow_max_running is not None
                and usage.count[("workflow", w.workflow)] + 1 > w.workflow_max_running)


def heads(snap: Snapshot, waiting: Iterable[Workload], usage: Usage) -> list[Workload]:
    """Each queue's head among ``waiting``: for a StrictFIFO queue its first eligible workload
    (``eligible``), when that one could run now; for a BestEffortFIFO queue, the first that
    could run now."""
    by_queue: defaultdict[str, list[Workload]] = defaultdict(list)
    for w in waiting:
        if in_line(w) and not can_never_run(w, snap):
            by_queue[w.queue].append(w)
    out = []
    for name, line in by_queue.items():
        queue = snap.queues.get(name)
        strict = queue is not None and queue.ordering is Ordering.STRICT_FIFO
        for w in in_order(line):
            if could_run(w, snap, usage):
                out.append(w)
                break
            if strict and eligible(w, snap, usage):
                break
    return out


def _leaves_short(
    h: Workload, w: Workload, running: int, limit: int | None, used: Counter[str], quota: object
) -> bool:
    assert hasattr(quota, "items")
    if limit is not None and running + 2 > limit:
        return True
    asks, needs = w.requests, h.requests
    return any(
        asks.get(r, 0) > 0 and needs.get(r, 0) > 0 and used[r] + asks[r] + needs[r] > cap
        for r, cap in quota.items()
    )


def leaves_short(h: Workload, w: Workload, snap: Snapshot, usage: Usage) -> bool:
    """Whether releasing ``w`` would leave head ``h`` without something it needs of a scope they
    share: the last free slot of a count limit, or quota it asks for."""
    limit = h.workflow_max_running
    same_workflow = bool(h.workflow) and h.workflow == w.workflow
    if same_workflow and limit is not None and usage.count[("workflow", h.workflow)] + 2 > limit:
        return True
    queue = snap.queues.get(h.queue)
    if h.queue == w.queue and queue is not None:
        scope = ("queue", h.queue)
        if _leaves_short(h, w, usage.count[scope], queue.max_running, usage.used[scope], queue.quota):
            return True
    team = snap.teams.get(h.team)
    if h.team and h.team == w.team and team is not None:
        scope = ("team", h.team)
        if _leaves_short(h, w, usage.count[scope], team.max_running, usage.used[scope], team.quota):
            return True
    scope = ("cluster", "")
    policy = snap.policy
    return _leaves_short(h, w, usage.count[scope], policy.max_running, usage.used[scope], policy.quota)


def excused(w: Workload, snap: Snapshot, waiting: list[Workload], usage: Usage) -> bool:
    """Whether ``w``, which fits every limit under ``usage``, may legitimately wait: a head of
    higher priority (or a starving one of equal priority) that could run now needs what ``w``
    would take, or ``w`` stands behind the head of its StrictFIFO queue (its first eligible
    workload: work whose own workflow is full is passed over)."""
    queue = snap.queues.get(w.queue)
    if queue is not None and queue.ordering is Ordering.STRICT_FIFO and in_line(w):
        ahead = [v for v in waiting if v.queue == w.queue and eligible(v, snap, usage)]
        if in_order(ahead)[0] is not w:
            return True
    mine = level(snap, w)
    for h in heads(snap, waiting, usage):
        if h is w:
            continue
        applies = level(snap, h) > mine or (level(snap, h) == mine and starving(snap, h))
        if applies and leaves_short(h, w, snap, usage):
            return True
    return False
