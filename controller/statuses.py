"""The figures one dispatch cycle leaves: Queue, Team and Policy status, and what metrics show.

Pure: built from the snapshot and the decision, after the cycle's releases (a released
workload counts as running at once). The status is what ``kubectl get queues`` prints:
``pending``, ``running``, ``usage`` (summed requests of running work, as quantities),
``oldestPendingTime`` (absent when nothing waits) and ``display`` (``3/8`` running out of
maxRunning, ``12/16`` managed GPUs used out of quota; ``-`` where there is no limit:
``policy.usage.display``, which ``sluicegate queues`` shows too).
The oldest pending workload is given as a time, not an age, so the status changes only when
the work changes and the controller has nothing to write while a queue simply waits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kube.writing import rfc3339
from policy.model import Snapshot, State
from policy.quantities import Resources
from policy.usage import Tally, display

Status = dict[str, Any]


def quantity(milli: int) -> str:
    """A Kubernetes quantity for an amount in milli-units: ``2000`` -> ``"2"``, ``500`` -> ``"500m"``."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def units(milli: int) -> float:
    return milli / 1000


def status(
    pending: int, running: int, used: Resources, oldest: float | None, shown: dict[str, str]
) -> Status:
    out: Status = {"pending": pending, "running": running, "display": shown}
    usage = {name: quantity(amount) for name, amount in sorted(used.items()) if amount}
    if usage:  # an idle queue shows no usage at all, not an empty map
        out["usage"] = usage
    if oldest is not None:
        out["oldestPendingTime"] = rfc3339(oldest)
    return out


@dataclass(frozen=True, slots=True)
class Backlog:
    """Pending workloads of one scope after a cycle, and when the oldest was created."""

    pending: int = 0
    oldest: float | None = None


@dataclass(frozen=True, slots=True)
class Figures:
    tally: Tally
    teams: Mapping[str, Backlog]
    cluster: Backlog
    queue_status: Mapping[str, Status]
    team_status: Mapping[str, Status]
    cluster_status: Status


def backlogs(snapshot: Snapshot, released: Iterable[str]) -> tuple[dict[str, Backlog], Backlog]:
    """Pending workloads per team and in the cluster, leaving out the keys just ``released``."""
    gone = set(released)
    counts: dict[str, int] = {}
    oldest: dict[str, float] = {}
    pending = State.PENDING
    total, first = 0, None
    for w in snapshot.workloads:
        if w.state is not pending or w.key in gone:
            continue
        created = w.created
        total += 1
        if first is None or created < first:
            first = created
        team = w.team
        if team:
            counts[team] = counts.get(team, 0) + 1
            if team not in oldest or created < oldest[team]:
                oldest[team] = created
    return {t: Backlog(n, oldest[t]) for t, n in counts.items()}, Backlog(total, first)


def figures(snapshot: Snapshot, tally: Tally, released: Iterable[str]) -> Figures:
    policy = snapshot.policy
    managed = policy.managed_resources
    teams, cluster = backlogs(snapshot, released)
    queue_status = {}
    for name, queue in snapshot.queues.items():
        q = tally.queue(name)
        shown = display(q.running, queue.max_running, q.requests, queue.quota, managed)
        queue_status[name] = status(q.pending, q.running, q.requests, q.oldest_pending, shown)
    team_status = {}
    for name, team in snapshot.teams.items():
        used, backlog = tally.team(name), teams.get(name, Backlog())
        shown = display(used.running, team.max_running, used.requests, team.quota, managed)
        team_status[name] = status(backlog.pending, used.running, used.requests, backlog.oldest, shown)
    c = tally.cluster
    shown = display(c.running, policy.max_running, c.requests, policy.quota, managed)
    cluster_status = status(cluster.pending, c.running, c.requests, cluster.oldest, shown)
    return Figures(tally, teams, cluster, queue_status, team_status, cluster_status)
