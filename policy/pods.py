"""Pods as Sluicegate sees them: what they ask for, where they stand, who submitted them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from policy import fields, keys
from policy.affinity import NO_PLACEMENT, Placement
from policy.devices import Devices, requests_with_devices
from policy.fields import InvalidObject, Obj
from policy.quantities import EMPTY, Resources, add, maximum, subtract

_NO_CLAIMS: Mapping[str, Resources] = MappingProxyType({})

DEFAULT_SCHEDULER: Final = "default-scheduler"  # what the API server puts in an empty spec.schedulerName
SCHEDULING_GATED: Final = "SchedulingGated"  # the PodScheduled reason the API server writes at create


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


def _container_requests(container: Obj, where: str) -> Resources:
    resources = fields.mapping(container.get("resources"), f"{where}.resources")
    requests = fields.resources(resources.get("requests"), f"{where}.resources.requests")
    limits = fields.resources(resources.get("limits"), f"{where}.resources.limits")
    if not limits:
        return requests
    # A limit without a request defaults the request to the limit (extended resources must).
    return MappingProxyType({**limits, **requests})


def pod_level_resource(resource: str) -> bool:
    """Whether a pod may declare ``resource`` in ``spec.resources`` (Kubernetes 1.34+):
    cpu, memory and huge pages; a pod-level amount of anything else counts for nothing."""
    return resource in _POD_LEVEL or resource.startswith("hugepages-")


_POD_LEVEL = frozenset({"cpu", "memory"})
_OVERCOMMITTABLE = _POD_LEVEL  # of the pod-level resources, those not huge pages


def _pod_level_requests(spec: Obj, containers: Resources) -> dict[str, int]:
    """``spec.resources`` requests, as the API server stores them after defaulting.

    When the pod sets pod-level limits, a pod-level resource it gives no request for takes the
    containers' request of it when they make one (cpu and memory), else the pod-level limit.
    """
    resources = fields.mapping(spec.get("resources"), "resources")
    requests = fields.resources(resources.get("requests"), "resources.requests")
    limits = fields.resources(resources.get("limits"), "resources.limits")
    out = {name: amount for name, amount in requests.items() if pod_level_resource(name)}
    for name, amount in limits.items():
        if name in out or not pod_level_resource(name):
            continue
        out[name] = containers[name] if name in _OVERCOMMITTABLE and name in containers else amount
    return out


def pod_requests(spec: Obj) -> Resources:
    """What a pod asks of a node, the way kube-scheduler counts it (v1.36 ``PodRequests``).

    Regular containers and restartable init containers (sidecars) run together and add up;
    each ordinary init container runs alone, beside the sidecars started before it, so the
    pod needs the larger of the two. Pod-level requests (``spec.resources``: cpu, memory,
    huge pages) replace the containers' total of the same resource; the API server refuses a
    pod whose pod-level request is below that total, so it is the larger of the two.
    ``overhead`` comes on top.
    """
    running: Resources = EMPTY
    for i, c in enumerate(spec.get("containers") or ()):
        running = add(running, _container_requests(fields.obj(c), f"containers[{i}]"))
    sidecars: Resources = EMPTY
    init_peak: Resources = EMPTY
    for i, raw in enumerate(spec.get("initContainers") or ()):
        c = fields.obj(raw)
        requests = _container_requests(c, f"initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, requests)
            init_peak = maximum(init_peak, sidecars)
        else:
            init_peak = maximum(init_peak, add(sidecars, requests))
    need = maximum(add(running, sidecars), init_peak)
    if spec.get("resources"):
        pod_level = _pod_level_requests(spec, need)
        if pod_level:
            need = {**need, **pod_level}
    overhead = fields.resources(spec.get("overhead"), "overhead")
    return MappingProxyType(dict(add(need, overhead)))


ADMISSION_WINDOW = 60.0
"""Seconds before ``creationTimestamp`` within which an admission stamp is believed: mutating
admission runs before the API server sets ``creationTimestamp``, by at most the webhooks'
timeouts (30 s at most each). A stamp outside the window (copied from a template, say) is
ignored."""


def format_admitted_at(seconds: float) -> str:
    """The value of ``sluicegate.dev/admitted-at``: RFC 3339, UTC, microseconds."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def submitted_at(annotations: Mapping[str, str], created: float) -> float:
    """When the pod was submitted, for FIFO order: its admission stamp, to the microsecond,
    when it has a believable one; else ``created`` (``creationTimestamp``, whole seconds)."""
    raw = annotations.get(keys.ADMITTED_AT_ANNOTATION)
    if not raw:
        return created
    stamp = fields.instant(raw)
    if stamp is None or (created and not created - ADMISSION_WINDOW <= stamp < created + 1):
        return created
    return stamp


def _deadline(raw: object) -> int | None:
    """``spec.activeDeadlineSeconds``: a positive whole number (the API server refuses any
    other), else None."""
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else None


@dataclass(frozen=True, slots=True)
class Pod:
    """The facts about one pod that admission and dispatch need."""

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: fields.NO_STRINGS)
    annotations: Mapping[str, str] = field(default_factory=lambda: fields.NO_STRINGS)
    requests: Resources = field(default_factory=lambda: EMPTY)
    priority: int = 0
    created: float = 0.0  # submission time: the admission stamp, else creationTimestamp
    phase: Phase = Phase.PENDING
    gated: bool = False
    node_name: str = ""
    unschedulable: str = ""  # the scheduler's message while it cannot place a released pod
    unscheduled: str = ""
    """The scheduler a released, unbound pod names (``spec.schedulerName``) while its
    PodScheduled condition still says ``SchedulingGated``, as the API server wrote it at create:
    no scheduler has looked at the pod since its gate was removed."""
    condition_reason: str = ""  # the reason of the Dispatched condition as last written
    deleting: bool = False  # metadata.deletionTimestamp is set (a finalizer may keep it a while)
    placement: Placement = NO_PLACEMENT  # its node selector, required node affinity, tolerations
    shared_claims: Mapping[str, Resources] = field(default_factory=lambda: _NO_CLAIMS)
    """The shared ResourceClaims it names and what each counts as, already in ``requests``:
    a workload counts each once (``policy.devices``)."""
    devices: Resources = field(default_factory=lambda: EMPTY)
    """What its DRA claims count as (``policy.devices``), included in ``requests``."""
    active_deadline: int | None = None  # spec.activeDeadlineSeconds: the kubelet ends it after that long

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def queue(self) -> str:
        return self.labels.get(keys.QUEUE_LABEL, "")

    @property
    def team(self) -> str:
        return self.labels.get(keys.TEAM_LABEL, "")

    @property
    def workflow(self) -> str:
        return self.labels.get(keys.WORKFLOW_LABEL, "")

    @property
    def group(self) -> str:
        return self.labels.get(keys.GROUP_LABEL, "")

    @property
    def terminal(self) -> bool:
        return self.phase.terminal

    @property
    def node_requests(self) -> Resources:
        """What it asks of a node's allocatable: its requests without its DRA devices, which
        kube-scheduler places from ResourceSlices."""
        if not self.devices:
            return self.requests
        return {name: amount for name, amount in subtract(self.requests, self.devices).items() if amount > 0}

    @property
    def withdrawn(self) -> bool:
        """Deleted while it waits: it has left its queue, though a finalizer may keep it a while.
        Such a pod is never released and counts for nothing (``marks.counts_for_dispatch``)."""
        return self.gated and self.deleting

    @classmethod
    def parse(cls, obj: Obj) -> Pod:
        meta = fields.mapping(obj.get("metadata"), "Pod.metadata")
        spec = fields.mapping(obj.get("spec"), "Pod.spec")
        status = fields.mapping(obj.get("status"), "Pod.status")
        where = f"Pod {meta.get('namespace')}/{meta.get('name')}"
        gates = [fields.obj(g) for g in spec.get("schedulingGates") or ()]
        unschedulable = ""
        scheduled_reason = ""
        condition_reason = ""
        for cond in map(fields.obj, status.get("conditions") or ()):
            if cond.get("type") == "PodScheduled":
                scheduled_reason = str(cond.get("reason") or "")
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                unschedulable = cond.get("message") or "Unschedulable"
            elif cond.get("type") == keys.CONDITION:
                condition_reason = cond.get("reason") or ""
        phase = status.get("phase") or "Pending"
        notes = fields.string_map(meta.get("annotations"))
        try:
            devices = Devices.from_annotation(notes.get(keys.DEVICES_ANNOTATION), keys.DEVICES_ANNOTATION)
            requests = requests_with_devices(pod_requests(spec), devices)
        except InvalidObject as e:
            raise InvalidObject(f"{where}: {e}") from e
        try:
            placement = Placement.parse(spec, "spec")
        except InvalidObject:
            # Mutating admission sees a pod before the API server validates it; one whose node
            # constraints do not parse is refused there, so it never reaches dispatch.
            placement = NO_PLACEMENT
        annotations = fields.labels(meta.get("annotations"), f"{where}: metadata.annotations")
        created = fields.timestamp(meta.get("creationTimestamp"), f"{where}: metadata.creationTimestamp")
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            labels=fields.labels(meta.get("labels"), f"{where}: metadata.labels"),
            annotations=annotations,
            requests=requests,
            priority=fields.whole(spec.get("priority"), f"{where}: spec.priority"),
            created=submitted_at(annotations, created),
            phase=Phase(phase) if phase in Phase.__members__.values() else Phase.UNKNOWN,
            gated=any(g.get("name") == keys.GATE for g in gates),
            node_name=str(spec.get("nodeName") or ""),
            unschedulable=unschedulable,
            unscheduled=(str(spec.get("schedulerName") or DEFAULT_SCHEDULER)
                         if scheduled_reason == SCHEDULING_GATED and not gates and not spec.get("nodeName")
                         else ""),
            condition_reason=condition_reason,
            deleting=meta.get("deletionTimestamp") is not None,
            placement=placement,
            shared_claims=devices.shared,
            devices=devices.total,
            active_deadline=_deadline(spec.get("activeDeadlineSeconds")),
        )


@dataclass(frozen=True, slots=True)
class Submitter:
    """Who a pod is submitted on behalf of: the user and their groups."""

    user: str
    groups: frozenset[str] = frozenset()

    def to_annotation(self) -> str:
        return json.dumps({"user": self.user, "groups": sorted(self.groups)}, separators=(",", ":"))

    @classmethod
    def from_annotation(cls, raw: str) -> Submitter | None:
        try:
            data = json.loads(raw)
            user = data["user"]
            groups = data.get("groups") or []
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        # A string or an object is iterable too; only a list of strings is a list of groups.
        if not isinstance(user, str) or not user or not isinstance(groups, list):
            return None
        if not all(isinstance(g, str) for g in groups):
            return None
        return cls(user, frozenset(groups))

