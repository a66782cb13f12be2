"""What the visibility API serves: every waiting pod, where it stands in its queue and why.

Pure: a ``Board`` is built from one Snapshot, the dispatch decision taken on it, the pods held
because their namespace left their team or their DRA claims changed, and the last start
estimates; the aiohttp application (``controller.visibility``) only reads it. Each item is one
gated pod:

- ``queue``, ``team``, ``workload`` (the workload's key: a pod, or ``ns/group``);
- ``position``: the workload's place, 1-based, among the workloads still waiting in its queue
  (the decision's ``Wait.position``); absent for a pod the decision releases now and for one
  held outside dispatch (``NamespaceLeftTeam``, ``ClaimsChanged``);
- ``workloadsAhead``: how many workloads of its queue go first: those released now, then those
  before it in line;
- ``reason`` and ``message``: the Dispatched condition the controller writes
  (``policy.keys.Reason``), or none with ``fits now`` for a pod released now;
- ``expectedStart``: when it is expected to start (``simulator.estimating.Estimate``, made by
  ``controller.estimates`` from an earlier snapshot): ``p10Seconds``, ``p50Seconds`` and
  ``p90Seconds`` from the list's ``now`` (0 when that moment has passed; ``p90Seconds`` absent
  when it lies beyond the estimate's horizon), ``p50Time`` and ``p90Time`` (RFC 3339) and
  ``estimatedAt`` (when the snapshot it was made from was taken); or ``unknown``, the reason
  no one can say, with ``estimatedAt`` when an estimate said so.
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
from simulator.estimating import Estimate

GROUP_VERSION: Final = f"{PENDING_PODS.group}/{PENDING_PODS.version}"
KIND: Final = PENDING_PODS.kind
LIST_KIND: Final = "PendingPodList"
RELEASING_MESSAGE: Final = "fits now: the controller releases it on its next cycle"


NOT_ESTIMATED: Final = "not estimated yet: it came after the last estimate"
LEFT_TEAM: Final = "its namespace left its team: it is judged again once it belongs to one"
CLAIMS_CHANGED: Final = "its DRA claims changed since admission: it is not released as it is"


class ExpectedStartJSON(TypedDict):
    p10Seconds: NotRequired[int]
    p50Seconds: NotRequired[int]
    p90Seconds: NotRequired[int]
    p50Time: NotRequired[str]
    p90Time: NotRequired[str]
    estimatedAt: NotRequired[str]
    unknown: NotRequired[str]


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
    expectedStart: ExpectedStartJSON


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


def expected_start(estimate: Estimate | None, now: float, made: float | None) -> ExpectedStartJSON:
    """``expectedStart`` of a workload whose estimate, made from the snapshot of ``made``, is
    ``estimate`` (None: no estimate includes it), as the board of ``now`` serves it."""
    if estimate is None:
        return {"unknown": NOT_ESTIMATED}
    out: ExpectedStartJSON = {}
    if made is not None:
        out["estimatedAt"] = format_time(made)
    if estimate.p10 is None or estimate.p50 is None:
        out["unknown"] = estimate.reason or NOT_ESTIMATED
        return out
    out["p10Seconds"] = _after(estimate.p10, now)
    out["p50Seconds"] = _after(estimate.p50, now)
    out["p50Time"] = format_time(estimate.p50)
    if estimate.p90 is not None:
        out["p90Seconds"] = _after(estimate.p90, now)
        out["p90Time"] = format_time(estimate.p90)
    return out


def _after(at: float, now: float) -> int:
    return max(0, round(at - now))


def _item(pod: Pod, queue: str, team: str, workload: str, position: int | None, ahead: int,
          reason: str, message: str, expected: ExpectedStartJSON) -> PendingPodJSON:
    item: PendingPodJSON = {
        "apiVersion": GROUP_VERSION, "kind": KIND,
        "metadata": {"name": pod.name, "namespace": pod.namespace,
                     "creationTimestamp": format_time(pod.created)},
        "queue": queue, "team": team, "workload": workload, "workloadsAhead": ahead,
        "reason": reason, "message": message, "expectedStart": expected,
    }
    if position is not None:
        item["position"] = position
    return item


def _gated(w: Workload) -> list[Pod]:
    return sorted((p for p in w.pods if p.gated), key=lambda p: p.name)


def board(
    snapshot: Snapshot,
    decision: Decision,
    left_team: Iterable[Pod] = (),
    estimates: Mapping[str, Estimate] | None = None,
    *,
    made: float | None = None,
    version: int = 0,
    claims_changed: Iterable[tuple[Pod, str]] = (),
) -> Board:
    """The board of one decision: ``estimates`` by workload key, made from the snapshot taken at
    ``made`` (a workload without one is not estimated yet). A workload the decision releases
    now starts now, whatever an older estimate said. ``left_team`` and ``claims_changed`` (with
    the controller's message) are held before dispatch, without a position or an estimate."""
    estimates = estimates or {}
    now = snapshot.now
    starting: ExpectedStartJSON = {"p10Seconds": 0, "p50Seconds": 0, "p90Seconds": 0,
                                   "p50Time": format_time(now), "p90Time": format_time(now),
                                   "estimatedAt": format_time(now)}
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
                         _item(pod, w.queue, w.team, w.key, None, 0, "", RELEASING_MESSAGE, starting)))
    for key, wait in decision.waiting.items():
        w = by_key[key]
        ahead = released.get(w.queue, 0) + wait.position - 1
        for pod in _gated(w):
            rows.append(((level(w.queue), w.queue, wait.position, pod.key),
                         _item(pod, w.queue, w.team, w.key, wait.position, ahead, wait.reason.value,
                               wait.message, expected_start(estimates.get(w.key), now, made))))
    for pod in sorted(left_team, key=lambda p: p.key):
        if pod.gated:
            rows.append(((level(pod.queue), pod.queue, 2**62, pod.key),
                         _item(pod, pod.queue, pod.team, pod.key, None, 0,
                               keys.Reason.NAMESPACE_LEFT_TEAM.value, left_team_message(pod),
                               {"unknown": LEFT_TEAM})))
    for pod, message in sorted(claims_changed, key=lambda pair: pair[0].key):
        rows.append(((level(pod.queue), pod.queue, 2**62, pod.key),
                     _item(pod, pod.queue, pod.team, pod.key, None, 0,
                           keys.Reason.CLAIMS_CHANGED.value, message, {"unknown": CLAIMS_CHANGED})))
    rows.sort(key=lambda row: row[0])
    by_namespace: dict[str, list[PendingPodJSON]] = {}
    by_queue: dict[str, list[PendingPodJSON]] = {}
    for _, item in rows:
        by_namespace.setdefault(item["metadata"]["namespace"], []).append(item)
        by_queue.setdefault(item["queue"], []).append(item)
    return Board(snapshot.now, {k: tuple(v) for k, v in by_namespace.items()},
                 {k: tuple(v) for k, v in by_queue.items()}, version)
