"""An independent, deliberately plain statement of the limits, to judge dispatch decisions by.

It shares no code with ``policy.limits``: it recounts usage from scratch and lists every
layer a workload fails, in DESIGN.md's order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from policy.keys import Reason
from policy.model import Snapshot, State, Workload


class Usage:
    def __init__(self, running: Iterable[Workload]) -> None:
        self.count: Counter[tuple[str, str]] = Counter()
        self.used: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for w in running:
            for scope in self.scopes(w):
                self.count[scope] += 1
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
    limit = w.workflow_max_running
    if w.workflow and limit is not None and usage.count[("workflow", w.workflow)] >= limit:
        out.append(Reason.WORKFLOW_LIMIT)
    queue = snap.queues.get(w.queue)
    if queue is None or queue.paused:
        out.append(Reason.QUEUE_PAUSED)
    else:
        if queue.max_running is not None and usage.count[("queue", w.queue)] >= queue.max_running:
            out.append(Reason.QUEUE_LIMIT)
        if _over(usage.used[("queue", w.queue)], w, queue.quota):
            out.append(Reason.QUEUE_QUOTA)
    team = snap.teams.get(w.team)
    if team is not None:
        if team.max_running is not None and usage.count[("team", w.team)] >= team.max_running:
            out.append(Reason.TEAM_LIMIT)
        if _over(usage.used[("team", w.team)], w, team.quota):
            out.append(Reason.TEAM_QUOTA)
    policy = snap.policy
    if policy.max_running is not None and usage.count[("cluster", "")] >= policy.max_running:
        out.append(Reason.GLOBAL_LIMIT)
    if _over(usage.used[("cluster", "")], w, policy.quota):
        out.append(Reason.GLOBAL_QUOTA)
    return out


def limit_breaches(snap: Snapshot, released: Iterable[Workload]) -> list[str]:
    """Scopes that a release pushed over a limit: count over maxRunning, or a quota'd resource
    that a released workload asks for over its cap. Work already over a lowered limit is no
    breach by itself; adding to it is."""
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
                out.append(f"{kind} {name}: {after.count[(kind, name)]} running > {limit}")
            for r, cap in (quota or {}).items():
                if w.requests.get(r, 0) and after.used[(kind, name)][r] > cap:
                    out.append(f"{kind} {name}: {r} {after.used[(kind, name)][r]} > {cap}")
    return out


def shortfalls(w: Workload, used: Counter[str], quota: object) -> set[str]:
    """The resources of ``quota`` that ``w`` asks for and that have too little room left."""
    assert hasattr(quota, "items")
    return {r for r, cap in quota.items() if w.requests.get(r, 0) > 0 and used[r] + w.requests[r] > cap}
