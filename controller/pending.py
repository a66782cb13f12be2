"""What the visibility API serves: every waiting pod, where it stands in its queue and why.

Pure: a ``Board`` is built from one Snapshot, the dispatch decision taken on it, the pods held
because their namespace left their team or their DRA claims changed, and the start estimates
(none until the estimator exists); the aiohttp application (``controller.visibility``) only
reads it. Each item is one gated pod:

- ``queue``, ``team``, ``workload`` (the workload's key: a pod, or ``ns/group``);
- ``position``: the workload's place, 1-based, among the workloads still waiting in its queue
  (the decision's ``Wait.position``); absent for a pod the decision releases now and for one
  held outside dispatch (``NamespaceLeftTeam``, ``ClaimsChanged``);
- ``workloadsAhead``: how many workloads of its queue go first: those released now, then those
  before it in line;
- ``reason`` and ``message``: the Dispatched condition the controller writes
  (``policy.keys.Reason``), or none with ``fits now`` for a pod released now;
- ``expectedStart``: ``p50Seconds``/``p90Seconds`` from ``now`` until it starts; **absent while
  it is unknown** (no estimate was made for its workload: the estimator is not there yet).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, NotRequired, TypedDict

from kube.resources import PENDING_PODS
from policy import keys
from policy.dispatching import Decision
from policy.membership import left_team_message
from policy.model import Snapshot, Workload
from policy.pods import Pod

GROUP_VERSION: Final = f"{PENDING_PODS.group}/{PENDING_PODS.version}"
KIND: Final = PENDING_PODS.kind
LIST_KIND: Final = "PendingPodList"
RELEASING_MESSAGE: Final = "fits now: the controller releases it on its next cycle"


@dataclass(frozen=True, slots=True)
class Estimate:
    """When a workload is expected to start, in seconds from the board's ``now``."""

    p50: float
    p90: float


class ExpectedStartJSON(TypedDict):
    p50Seconds: int
    p90Seconds: int


class PendingMetaJSON(TypedDict):
    name: str
    namespace: str
    creationTimestamp: str


class PendingPodJSON(TypedDict):
    apiVersion: str
    kind: str
    metadata: PendingMetaJSON
    queue: str
    team: str
    workload: str
    position: NotRequired[int]
    workloadsAhead: int
    reason: str
    message: str
    expectedStart: NotRequired[ExpectedStartJSON]


class ListMetaJSON(TypedDict):
    resourceVersion: str


class PendingPodListJSON(TypedDict):
    apiVersion: str
    kind: str
    metadata: ListMetaJSON
    now: str
    items: list[PendingPodJSON]


def format_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Board:
    """Every waiting pod, by namespace and by queue, each list in queue order."""

    now: float
    by_namespace: Mapping[str, tuple[PendingPodJSON, ...]] = field(default_factory=dict)
    by_queue: Mapping[str, tuple[PendingPodJSON, ...]] = field(default_factory=dict)
    version: int = 0
    """Counts the boards this process built: the lists' ``resourceVersion``."""

    def namespace(self, name: str) -> list[PendingPodJSON]:
        return list(self.by_namespace.get(name, ()))

    def queue(self, name: str) -> list[PendingPodJSON]:
        return list(self.by_queue.get(name, ()))

    def pod(self, namespace: str, name: str) -> PendingPodJSON | None:
        return next((item for item in self.by_namespace.get(namespace, ())
                     if item["metadata"]["name"] == name), None)

    def listing(self, items: Sequence[PendingPodJSON]) -> PendingPodListJSON:
        return {"apiVersion": GROUP_VERSION, "kind": LIST_KIND,
                "metadata": {"resourceVersion": str(self.version)}, "now": format_time(self.now),
                "items": list(items)}


def _item(pod: Pod, queue: str, team: str, workload: str, position: int | None, ahead: int,
          reason: str, message: str, estimate: Estimate | None) -> PendingPodJSON:
    item: PendingPodJSON = {
        "apiVersion": GROUP_VERSION, "kind": KIND,
        "metadata": {"name": pod.name, "namespace": pod.namespace,
                     "creationTimestamp": format_time(pod.created)},
        "queue": queue, "team": team, "workload": workload, "workloadsAhead": ahead,
        "reason": reason, "message": message,
    }
    if position is not None:
        item["position"] = position
    if estimate is not None:
        item["expectedStart"] = {"p50Seconds": round(estimate.p50), "p90Seconds": round(estimate.p90)}
    return item


def _gated(w: Workload) -> list[Pod]:
    return sorted((p for p in w.pods if p.gated), key=lambda p: p.name)


def board(
    snapshot: Snapshot,
    decision: Decision,
    left_team: Iterable[Pod] = (),
    estimates: Mapping[str, Estimate] | None = None,
    *,
    version: int = 0,
    claims_changed: Iterable[tuple[Pod, str]] = (),
) -> Board:
    """The board of one decision: ``estimates`` by workload key (a workload without one has
    no ``expectedStart``); ``left_team`` and ``claims_changed`` (with the controller's message)
    are held before dispatch, without a position."""
    estimates = estimates or {}
    by_key = {w.key: w for w in snapshot.workloads}
    released: dict[str, int] = {}
    rows: list[tuple[tuple[int, str, int, str], PendingPodJSON]] = []

    def level(queue: str) -> int:
        found = snapshot.queues.get(queue)
        return -(found.priority if found is not None else 0)

    for w in decision.release:
        released[w.queue] = released.get(w.queue, 0) + 1
        for pod in _gated(w):
            rows.append(((level(w.queue), w.queue, 0, pod.key),
                         _item(pod, w.queue, w.team, w.key, None, 0, "", RELEASING_MESSAGE,
                               estimates.get(w.key))))
    for key, wait in decision.waiting.items():
        w = by_key[key]
        ahead = released.get(w.queue, 0) + wait.position - 1
        for pod in _gated(w):
            rows.append(((level(w.queue), w.queue, wait.position, pod.key),
                         _item(pod, w.queue, w.team, w.key, wait.position, ahead, wait.reason.value,
                               wait.message, estimates.get(w.key))))
    for pod in sorted(left_team, key=lambda p: p.key):
        if pod.gated:
            rows.append(((level(pod.queue), pod.queue, 2**62, pod.key),
                         _item(pod, pod.queue, pod.team, pod.key, None, 0,
                               keys.Reason.NAMESPACE_LEFT_TEAM.value, left_team_message(pod), None)))
    for pod, message in sorted(claims_changed, key=lambda pair: pair[0].key):
        rows.append(((level(pod.queue), pod.queue, 2**62, pod.key),
                     _item(pod, pod.queue, pod.team, pod.key, None, 0,
                           keys.Reason.CLAIMS_CHANGED.value, message, None)))
    rows.sort(key=lambda row: row[0])
    by_namespace: dict[str, list[PendingPodJSON]] = {}
    by_queue: dict[str, list[PendingPodJSON]] = {}
    for _, item in rows:
        by_namespace.setdefault(item["metadata"]["namespace"], []).append(item)
        by_queue.setdefault(item["queue"], []).append(item)
    return Board(snapshot.now, {k: tuple(v) for k, v in by_namespace.items()},
                 {k: tuple(v) for k, v in by_queue.items()}, version)
