"""Pods as Sluicegate sees them: what they ask for, where they stand, who submitted them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from policy import fields, keys
from policy.fields import InvalidObject, Obj
from policy.quantities import EMPTY, Resources, add, maximum


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


def pod_requests(spec: Obj) -> Resources:
    """What a pod asks of a node, the way kube-scheduler counts it.

    Regular containers and restartable init containers (sidecars) run together and add up;
    each ordinary init container runs alone, beside the sidecars started before it, so the
    pod needs the larger of the two; ``overhead`` comes on top.
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
    overhead = fields.resources(spec.get("overhead"), "overhead")
    return MappingProxyType(dict(add(need, overhead)))


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
    created: float = 0.0
    phase: Phase = Phase.PENDING
    gated: bool = False
    node_name: str = ""
    unschedulable: str = ""  # the scheduler's message while it cannot place a released pod
    condition_reason: str = ""  # the reason of the Dispatched condition as last written

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

    @classmethod
    def parse(cls, obj: Obj) -> Pod:
        meta = fields.mapping(obj.get("metadata"), "Pod.metadata")
        spec = fields.mapping(obj.get("spec"), "Pod.spec")
        status = fields.mapping(obj.get("status"), "Pod.status")
        where = f"Pod {meta.get('namespace')}/{meta.get('name')}"
        gates = [fields.obj(g) for g in spec.get("schedulingGates") or ()]
        unschedulable = ""
        condition_reason = ""
        for cond in map(fields.obj, status.get("conditions") or ()):
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                unschedulable = cond.get("message") or "Unschedulable"
            elif cond.get("type") == keys.CONDITION:
                condition_reason = cond.get("reason") or ""
        phase = status.get("phase") or "Pending"
        try:
            requests = pod_requests(spec)
        except InvalidObject as e:
            raise InvalidObject(f"{where}: {e}") from e
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            labels=fields.labels(meta.get("labels"), f"{where}: metadata.labels"),
            annotations=fields.labels(meta.get("annotations"), f"{where}: metadata.annotations"),
            requests=requests,
            priority=fields.whole(spec.get("priority"), f"{where}: spec.priority"),
            created=fields.timestamp(meta.get("creationTimestamp"), f"{where}: metadata.creationTimestamp"),
            phase=Phase(phase) if phase in Phase.__members__.values() else Phase.UNKNOWN,
            gated=any(g.get("name") == keys.GATE for g in gates),
            node_name=str(spec.get("nodeName") or ""),
            unschedulable=unschedulable,
            condition_reason=condition_reason,
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

