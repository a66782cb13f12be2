"""What is in use: running workloads and their summed requests per queue, team, workflow and cluster.

``tally`` answers for a set of workloads and is what Queue status and the metrics report.
``Ledger`` is the same count kept mutable, for one dispatch decision to add its releases to
as it goes; it never leaves the decision that owns it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from policy.model import Policy, Queue, State, Team, Workload
from policy.quantities import EMPTY, Resources, format_amount


@dataclass(frozen=True, slots=True)
class Usage:
    """Running workloads of one scope (a team, the cluster) and the sum of their requests."""

    running: int = 0
    requests: Resources = field(default_factory=lambda: EMPTY)


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """A queue's running work, its waiting work, and when the oldest waiting work was created."""

    running: int = 0
    requests: Resources = field(default_factory=lambda: EMPTY)
    pending: int = 0
    oldest_pending: float | None = None  # creation time (epoch seconds); None when nothing waits


NO_QUEUE_USAGE = QueueUsage()
NO_USAGE = Usage()


@dataclass(frozen=True, slots=True)
class Tally:
    """Usage per queue, team and workflow (running count) and for the whole cluster.

    Only named scopes appear: a workload without a team or workflow counts toward the cluster
    and its queue alone. Look-ups of a scope with nothing in it give zero usage.
    """

    queues: Mapping[str, QueueUsage]
    teams: Mapping[str, Usage]
    workflows: Mapping[str, int]
    cluster: Usage

    def queue(self, name: str) -> QueueUsage:
        return self.queues.get(name, NO_QUEUE_USAGE)

    def team(self, name: str) -> Usage:
        return self.teams.get(name, NO_USAGE)

    def workflow(self, name: str) -> int:
        return self.workflows.get(name, 0)


def _plus(into: dict[str, int], requests: Resources) -> None:
    for name, amount in requests.items():
        into[name] = into.get(name, 0) + amount


class Ledger:
    """Running counts and requests, mutable: a dispatch decision adds each release at once.

    Finished workloads are never added; pending ones only count toward their queue's backlog.
    """

    __slots__ = (
        "cluster_running",
        "cluster_used",
        "oldest",
        "pending",
        "queue_running",
        "queue_used",
        "team_running",
        "team_used",
        "workflow_running",
    )

    def __init__(self) -> None:
        self.queue_running: dict[str, int] = {}
        self.queue_used: dict[str, dict[str, int]] = {}
        self.team_running: dict[str, int] = {}
        self.team_used: dict[str, dict[str, int]] = {}
        self.workflow_running: dict[str, int] = {}
        self.cluster_running = 0
        self.cluster_used: dict[str, int] = {}
        self.pending: dict[str, int] = {}
        self.oldest: dict[str, float] = {}

    def run(self, w: Workload) -> None:
        """Count ``w`` as running in every scope it belongs to (``run_all`` of one, without its
        per-queue roll-up: a decision calls this once per release). Pods joining their running
        group add their requests and no slot (``Workload.slots``)."""
        queue, requests, slots = w.queue, w.requests, w.slots
        self.queue_running[queue] = self.queue_running.get(queue, 0) + slots
        _plus(self.queue_used.setdefault(queue, {}), requests)
        _plus(self.cluster_used, requests)
        self.cluster_running += slots
        if w.team:
            self.team_running[w.team] = self.team_running.get(w.team, 0) + slots
            _plus(self.team_used.setdefault(w.team, {}), requests)
        if w.workflow:
            self.workflow_running[w.workflow] = self.workflow_running.get(w.workflow, 0) + slots

    def load(self, other: Ledger) -> None:
        """Take ``other``'s counts as this ledger's own (copies: neither changes the other)."""
        self.queue_running = dict(other.queue_running)
        self.queue_used = {name: dict(used) for name, used in other.queue_used.items()}
        self.team_running = dict(other.team_running)
        self.team_used = {name: dict(used) for name, used in other.team_used.items()}
        self.workflow_running = dict(other.workflow_running)
        self.cluster_running = other.cluster_running
        self.cluster_used = dict(other.cluster_used)
        self.pending = dict(other.pending)
        self.oldest = dict(other.oldest)

    def run_all(self, workloads: Iterable[Workload]) -> None:
        """Count every one of ``workloads`` as running.

        Requests are summed per queue first and rolled up to the cluster once per queue, which
        keeps the pass over a thousand running workloads cheap.
        """
        per_queue: dict[str, dict[str, int]] = {}
        count = 0
        for w in workloads:
            count += 1
            self.queue_running[w.queue] = self.queue_running.get(w.queue, 0) + 1
            _plus(per_queue.setdefault(w.queue, {}), w.requests)
            if w.team:
                self.team_running[w.team] = self.team_running.get(w.team, 0) + 1
                _plus(self.team_used.setdefault(w.team, {}), w.requests)
            if w.workflow:
                self.workflow_running[w.workflow] = self.workflow_running.get(w.workflow, 0) + 1
        for queue, added in per_queue.items():
            _plus(self.queue_used.setdefault(queue, {}), added)
            _plus(self.cluster_used, added)
        self.cluster_running += count

    def wait(self, w: Workload) -> None:
        """Count ``w`` in its queue's backlog."""
        queue = w.queue
        self.pending[queue] = self.pending.get(queue, 0) + 1
        oldest = self.oldest.get(queue)
        if oldest is None or w.created < oldest:
            self.oldest[queue] = w.created

    def tally(self, queue_names: Iterable[str] = ()) -> Tally:
        """A frozen copy; ``queue_names`` (existing Queues) appear even when idle."""
        names = set(queue_names) | self.queue_running.keys() | self.pending.keys()
        names.discard("")
        queues = {
            name: QueueUsage(
                running=self.queue_running.get(name, 0),
                requests=_frozen(self.queue_used.get(name)),
                pending=self.pending.get(name, 0),
                oldest_pending=self.oldest.get(name),
            )
            for name in sorted(names)
        }
        teams = {
            name: Usage(self.team_running[name], _frozen(self.team_used.get(name)))
            for name in sorted(self.team_running)
        }
        return Tally(
            queues=MappingProxyType(queues),
            teams=MappingProxyType(teams),
            workflows=MappingProxyType(dict(sorted(self.workflow_running.items()))),
            cluster=Usage(self.cluster_running, _frozen(self.cluster_used)),
        )


def _frozen(used: Mapping[str, int] | None) -> Resources:
    return MappingProxyType(dict(used)) if used else EMPTY


def tally(workloads: Iterable[Workload], queue_names: Iterable[str] = ()) -> Tally:
    """Usage of ``workloads``: running ones count everywhere, pending ones in their queue's backlog."""
    ledger = Ledger()
    for w in workloads:
        if w.state is State.RUNNING:
            ledger.run(w)
        elif w.state is State.PENDING:
            ledger.wait(w)
    return ledger.tally(queue_names)


def managed_units(requests: Resources, managed: Sequence[str]) -> int:
    """Whole devices of the managed resources (GPUs) in ``requests``."""
    return sum(requests.get(r, 0) for r in managed) // 1000


def display(running: int, max_running: int | None, used: Resources, quota: Resources,
            managed: Sequence[str]) -> dict[str, str]:
    """What the status's ``display`` shows of a scope, and ``sluicegate queues`` too: ``3/8``
    running out of ``maxRunning``, ``12/16`` managed GPUs used out of quota (``-``: no limit)."""
    capped = [r for r in managed if r in quota]
    # A quota as the messages write it: 1.5 GPUs is 1500m there and here, never rounded to 1.
    gpus_quota = format_amount(sum(quota[r] for r in capped)) if capped else "-"
    return {
        "running": f"{running}/{'-' if max_running is None else max_running}",
        "gpus": f"{managed_units(used, managed)}/{gpus_quota}",
    }


def reported_resources(queues: Iterable[Queue], teams: Iterable[Team], policy: Policy) -> frozenset[str]:
    """The resources whose usage is reported per queue and team: those Sluicegate manages and
    those some quota names. Pods may request any extended resource, even made-up ones at zero,
    and one series per name would let one user grow the metrics without bound; these names are
    the admins' own."""
    named: set[str] = set(policy.managed_resources) | set(policy.quota)
    for queue in queues:
        named.update(queue.quota)
    for team in teams:
        named.update(team.quota)
    return frozenset(named)
