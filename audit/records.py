"""The record of a run: every pod seen and every transition it made, with timestamps.

Pure data and pure functions: ``observe`` reads the facts that matter from a pod's JSON and
``transitions`` says which events lie between two observations. The recorder (I/O) feeds them;
the checks (``checking``) read the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from audit.naming import Naming
from policy.quantities import QuantityError, parse

Obj = dict[str, Any]


class Kind(StrEnum):
    """A transition of one pod, in lifecycle order."""

    CREATED = "created"
    UNGATED = "ungated"
    """The pod carries none of the watched gates any more (at creation, if it carried none)."""
    GATED = "gated"
    """Watched gates appeared on a pod already released: a release undone, never legitimate."""
    BOUND = "bound"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DELETED = "deleted"


TERMINAL = frozenset({Kind.SUCCEEDED, Kind.FAILED, Kind.DELETED})
"""Transitions after which a released pod no longer holds a slot."""


@dataclass(frozen=True, slots=True)
class Event:
    """One transition. ``at`` is ``time.monotonic()`` and ``wall`` is ``time.time()``, both
    taken when the recorder saw it; ``detail`` is the node for BOUND and the gates for
    CREATED, UNGATED (those removed) and GATED."""

    uid: str
    kind: Kind
    at: float
    wall: float
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What a pod is, as first seen: where it belongs and what it asks for."""

    uid: str
    namespace: str
    name: str
    queue: str = ""
    team: str = ""
    workflow: str = ""
    group: str = ""
    gpus: int = 0
    gates: tuple[str, ...] = ()
    """The watched gates it carried when first seen."""
    preexisting: bool = False
    """Already there when the record began: its creation was not observed."""
    creation_timestamp: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload(self) -> str:
        """One pod, or the pod group it belongs to (as Sluicegate counts workloads)."""
        return f"{self.namespace}/group:{self.group}" if self.group else self.key

    @property
    def workflow_key(self) -> str:
        """The workflow, namespace-qualified (two projects' sweeps named alike are distinct)."""
        return f"{self.namespace}/{self.workflow}" if self.workflow else ""


@dataclass(frozen=True, slots=True)
class Record:
    """A consistent snapshot of everything recorded so far.

    ``events`` are in the order the recorder saw them (``at`` never decreases). ``started``
    and ``taken`` are monotonic times: the start of the record and the moment of the snapshot.
    """

    pods: Mapping[str, PodInfo]
    events: tuple[Event, ...]
    started: float = 0.0
    started_wall: float = 0.0
    taken: float = 0.0
    relists: int = 0

    def histories(self) -> dict[str, list[Event]]:
        """Every pod's events, in order, by uid (pods without events get an empty list)."""
        out: dict[str, list[Event]] = {uid: [] for uid in self.pods}
        for event in self.events:
            out.setdefault(event.uid, []).append(event)
        return out

    def history(self, uid: str) -> list[Event]:
        return [e for e in self.events if e.uid == uid]

    def kinds(self, uid: str) -> list[Kind]:
        return [e.kind for e in self.events if e.uid == uid]

    def find(self, namespace: str, name: str) -> list[PodInfo]:
        """Every pod recorded under that name (a name reused after deletion gives several)."""
        return [p for p in self.pods.values() if p.namespace == namespace and p.name == name]

    def select(self, keep: Callable[[PodInfo], bool]) -> Record:
        """The record of only the pods ``keep`` accepts."""
        pods = {uid: p for uid, p in self.pods.items() if keep(p)}
        events = tuple(e for e in self.events if e.uid in pods)
        return replace(self, pods=MappingProxyType(pods), events=events)

    def to_json(self) -> Obj:
        return {
            "started": self.started, "startedWall": self.started_wall, "taken": self.taken,
            "relists": self.relists,
            "pods": [_pod_json(p) for p in self.pods.values()],
            "events": [[e.uid, e.kind.value, e.at, e.wall, e.detail] for e in self.events],
        }

    @classmethod
    def from_json(cls, data: Obj) -> Record:
        pods = {p["uid"]: PodInfo(**{**p, "gates": tuple(p["gates"])}) for p in data["pods"]}
        events = tuple(Event(u, Kind(k), at, wall, d) for u, k, at, wall, d in data["events"])
        return cls(MappingProxyType(pods), events, data["started"], data["startedWall"],
                   data["taken"], data["relists"])


def _pod_json(p: PodInfo) -> Obj:
    return {name: getattr(p, name) for name in PodInfo.__slots__}


# --- reading pods ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodState:
    """The facts of a pod that make transitions."""

    gates: frozenset[str] = field(default_factory=frozenset)
    node: str = ""
    phase: str = "Pending"
    deleted: bool = False


def observe(obj: Obj, naming: Naming) -> PodState:
    spec = obj.get("spec") or {}
    watched = set(naming.gates)
    present = (g.get("name", "") for g in spec.get("schedulingGates") or ())
    gates = frozenset(g for g in present if g in watched)
    return PodState(gates=gates, node=spec.get("nodeName") or "",
                    phase=(obj.get("status") or {}).get("phase") or "Pending")


def transitions(before: PodState | None, after: PodState) -> list[tuple[Kind, str]]:
    """The events between two observations of one pod (``before`` None: first sight), in
    lifecycle order. Nothing is invented: a pod first seen Succeeded was never seen Running."""
    out: list[tuple[Kind, str]] = []
    if before is None:
        out.append((Kind.CREATED, ",".join(sorted(after.gates))))
        before = PodState(gates=after.gates)
        if not after.gates:
            out.append((Kind.UNGATED, ""))
    if before.gates and not after.gates:
        out.append((Kind.UNGATED, ",".join(sorted(before.gates))))
    elif not before.gates and after.gates:
        out.append((Kind.GATED, ",".join(sorted(after.gates))))
    if after.node and after.node != before.node:
        out.append((Kind.BOUND, after.node))
    if after.phase != before.phase:
        if after.phase == "Running":
            out.append((Kind.RUNNING, ""))
        elif after.phase == "Succeeded":
            out.append((Kind.SUCCEEDED, ""))
        elif after.phase == "Failed":
            out.append((Kind.FAILED, ""))
    if after.deleted and not before.deleted:
        out.append((Kind.DELETED, ""))
    return out


def pod_info(obj: Obj, naming: Naming, *, preexisting: bool = False) -> PodInfo:
    meta = obj.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}

    def label(key: str) -> str:
        return labels.get(key, "") if key else ""

    return PodInfo(
        uid=meta.get("uid", ""), namespace=meta.get("namespace", ""), name=meta.get("name", ""),
        queue=label(naming.queue_label), team=label(naming.team_label),
        workflow=label(naming.workflow_label), group=label(naming.group_label),
        gpus=requested(obj.get("spec") or {}, naming.gpu_resource),
        gates=tuple(sorted(observe(obj, naming).gates)),
        preexisting=preexisting, creation_timestamp=meta.get("creationTimestamp", ""),
    )


def requested(spec: Obj, resource: str) -> int:
    """Whole units of ``resource`` a pod asks for, counted as kube-scheduler counts them:
    containers add up, each init container needs its own amount, and overhead comes on top.
    Written apart from ``policy.pods`` on purpose: the auditor must not share its bugs."""

    def amount(container: Obj) -> int:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource))
        if value is None:
            return 0
        try:
            return -(-parse(value) // 1000)
        except QuantityError:
            return 0

    regular = sum(amount(c) for c in spec.get("containers") or ())
    init = max((amount(c) for c in spec.get("initContainers") or ()), default=0)
    overhead = amount({"resources": {"requests": spec.get("overhead") or {}}})
    pod_level = amount(spec) if spec.get("resources") else 0
    return max(pod_level, regular, init) + overhead


def merge_teams(pods: Iterable[PodInfo], namespace_teams: Mapping[str, str]) -> dict[str, PodInfo]:
    """Pods whose own labels name no team take their namespace's."""
    return {
        p.uid: p if p.team or p.namespace not in namespace_teams
        else replace(p, team=namespace_teams[p.namespace])
        for p in pods
    }
