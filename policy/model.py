"""The model Sluicegate decides over: its four kinds, namespaces, pods and workloads.

Every object is a frozen dataclass parsed from the plain dict Kubernetes returns. Parsing
refuses bad values with ``InvalidObject``, whose message names the object and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from policy import keys
from policy.quantities import EMPTY, QuantityError, Resources, add, maximum, parse_resources

Obj = Mapping[str, Any]
"""A Kubernetes object or fragment as plain JSON data."""

_NO_LABELS: Mapping[str, str] = MappingProxyType({})


class InvalidObject(ValueError):
    """An object's spec cannot be used; the message says which field and why."""


class Ordering(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED)


class State(StrEnum):
    """A workload's place in its life: gated, released and holding its slot, or done."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"


# --- field readers -------------------------------------------------------------------------


def _mapping(raw: object, where: str) -> Obj:
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected an object, got {type(raw).__name__}")
    return raw


def _strings(raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple) or not all(isinstance(s, str) for s in raw):
        raise InvalidObject(f"{where}: expected a list of strings, got {raw!r}")
    return tuple(raw)


def _limit(raw: object, where: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidObject(f"{where}: expected a whole number, got {raw!r}")
    if raw < 0:
        raise InvalidObject(f"{where}: must not be negative, got {raw}")
    return raw


def _int(raw: object, where: str, default: int = 0) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidObject(f"{where}: expected a whole number, got {raw!r}")
    return raw


def _resources(raw: object, where: str) -> Resources:
    try:
        return parse_resources(_mapping(raw, where), where=where)
    except QuantityError as e:
        raise InvalidObject(str(e)) from e


def _labels(raw: object, where: str) -> Mapping[str, str]:
    data = _mapping(raw, where)
    if not data:
        return _NO_LABELS
    if not all(isinstance(v, str) for v in data.values()):
        raise InvalidObject(f"{where}: values must be strings")
    return MappingProxyType(dict(data))


def _name(obj: Obj, kind: str) -> str:
    name = _mapping(obj.get("metadata"), f"{kind}.metadata").get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject(f"{kind}: metadata.name is missing")
    return name


def parse_time(raw: object) -> float:
    """An RFC 3339 timestamp as seconds since the epoch (0.0 when absent)."""
    if not raw:
        return 0.0
    if isinstance(raw, datetime):
        return raw.timestamp()
    return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()


# --- label selectors ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present


@dataclass(frozen=True, slots=True)
class Selector:
    """A Kubernetes label selector: ``matchLabels`` and ``matchExpressions``, all must hold."""

    match_labels: Mapping[str, str] = field(default_factory=lambda: _NO_LABELS)
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    @classmethod
    def parse(cls, raw: object, where: str) -> Selector:
        data = _mapping(raw, where)
        requirements = []
        for i, expr in enumerate(data.get("matchExpressions") or ()):
            at = f"{where}.matchExpressions[{i}]"
            expr = _mapping(expr, at)
            op = expr.get("operator")
            if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise InvalidObject(f"{at}.operator: {op!r} is not In, NotIn, Exists or DoesNotExist")
            key = expr.get("key")
            if not isinstance(key, str) or not key:
                raise InvalidObject(f"{at}.key is missing")
            requirements.append(Requirement(key, op, frozenset(_strings(expr.get("values"), at))))
        return cls(_labels(data.get("matchLabels"), f"{where}.matchLabels"), tuple(requirements))


# --- the four kinds -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Access:
    """Who may submit to a queue. Empty means open to everyone."""

    teams: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    @property
    def open(self) -> bool:
        return not (self.teams or self.users or self.groups)


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    priority: int = 0
    max_running: int | None = None
    quota: Resources = field(default_factory=lambda: EMPTY)
    access: Access = Access()
    ordering: Ordering = Ordering.BEST_EFFORT_FIFO
    paused: bool = False
    node_pool: Selector | None = None

    @classmethod
    def parse(cls, obj: Obj) -> Queue:
        name = _name(obj, "Queue")
        where = f"Queue {name}: spec"
        spec = _mapping(obj.get("spec"), where)
        access = _mapping(spec.get("access"), f"{where}.access")
        ordering = spec.get("ordering") or Ordering.BEST_EFFORT_FIFO.value
        if ordering not in Ordering.__members__.values():
            raise InvalidObject(f"{where}.ordering: {ordering!r} is not BestEffortFIFO or StrictFIFO")
        paused = spec.get("paused", False)
        if not isinstance(paused, bool):
            raise InvalidObject(f"{where}.paused: expected true or false, got {paused!r}")
        pool = spec.get("nodePool")
        return cls(
            name=name,
            priority=_int(spec.get("priority"), f"{where}.priority"),
            max_running=_limit(spec.get("maxRunning"), f"{where}.maxRunning"),
            quota=_resources(spec.get("quota"), f"{where}.quota"),
            access=Access(
                teams=frozenset(_strings(access.get("teams"), f"{where}.access.teams")),
                users=frozenset(_strings(access.get("users"), f"{where}.access.users")),
                groups=frozenset(_strings(access.get("groups"), f"{where}.access.groups")),
            ),
            ordering=Ordering(ordering),
            paused=paused,
            node_pool=Selector.parse(pool, f"{where}.nodePool") if pool else None,
        )


@dataclass(frozen=True, slots=True)
class Members:
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    @property
    def everyone(self) -> bool:
        """A team that names no members counts everyone who may create pods in its namespaces."""
        return not (self.users or self.groups)


@dataclass(frozen=True, slots=True)
class Team:
    name: str
    max_running: int | None = None
    quota: Resources = field(default_factory=lambda: EMPTY)
    members: Members = Members()

    @classmethod
    def parse(cls, obj: Obj) -> Team:
        name = _name(obj, "Team")
        where = f"Team {name}: spec"
        spec = _mapping(obj.get("spec"), where)
        members = _mapping(spec.get("members"), f"{where}.members")
        return cls(
            name=name,
            max_running=_limit(spec.get("maxRunning"), f"{where}.maxRunning"),
            quota=_resources(spec.get("quota"), f"{where}.quota"),
            members=Members(
                users=frozenset(_strings(members.get("users"), f"{where}.members.users")),
                groups=frozenset(_strings(members.get("groups"), f"{where}.members.groups")),
            ),
        )


DEFAULT_STARVATION_SECONDS = 600
DEFAULT_TRUSTED_CONTROLLERS = ("system:serviceaccount:kube-system:job-controller",)


@dataclass(frozen=True, slots=True)
class Policy:
    """The cluster-wide singleton. ``Policy()`` is what applies when none exists."""

    max_running: int | None = None
    quota: Resources = field(default_factory=lambda: EMPTY)
    managed_resources: tuple[str, ...] = keys.DEFAULT_MANAGED_RESOURCES
    default_queue: str = ""
    starvation_seconds: int = DEFAULT_STARVATION_SECONDS
    trusted_controllers: tuple[str, ...] = DEFAULT_TRUSTED_CONTROLLERS
    workflow_labels: tuple[str, ...] = ()

    @classmethod
    def parse(cls, obj: Obj) -> Policy:
        name = _name(obj, "Policy")
        if name != keys.POLICY_NAME:
            raise InvalidObject(f"Policy {name}: the only Policy that counts is named {keys.POLICY_NAME!r}")
        where = f"Policy {name}: spec"
        spec = _mapping(obj.get("spec"), where)
        starvation = _limit(spec.get("starvationSeconds"), f"{where}.starvationSeconds")
        managed = _strings(spec.get("managedResources"), f"{where}.managedResources")
        trusted = spec.get("trustedControllers")
        default_queue = spec.get("defaultQueue") or ""
        if not isinstance(default_queue, str):
            raise InvalidObject(f"{where}.defaultQueue: expected a queue name, got {default_queue!r}")
        return cls(
            max_running=_limit(spec.get("maxRunning"), f"{where}.maxRunning"),
            quota=_resources(spec.get("quota"), f"{where}.quota"),
            managed_resources=managed or keys.DEFAULT_MANAGED_RESOURCES,
            default_queue=default_queue,
            starvation_seconds=DEFAULT_STARVATION_SECONDS if starvation is None else starvation,
            trusted_controllers=(
                DEFAULT_TRUSTED_CONTROLLERS
                if trusted is None
                else _strings(trusted, f"{where}.trustedControllers")
            ),
            workflow_labels=_strings(spec.get("workflowLabels"), f"{where}.workflowLabels"),
        )


def _csv(raw: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (raw or "").split(",") if p.strip())


@dataclass(frozen=True, slots=True)
class Namespace:
    """A project: the team it belongs to and what the admins allow in it."""

    name: str
    team: str | None = None
    default_queue: str = ""
    allowed_queues: frozenset[str] | None = None  # None: every queue
    default_presets: tuple[str, ...] = ()
    allowed_presets: frozenset[str] | None = None  # None: every preset

    @property
    def opted_in(self) -> bool:
        return self.team is not None

    @classmethod
    def parse(cls, obj: Obj) -> Namespace:
        name = _name(obj, "Namespace")
        meta = _mapping(obj.get("metadata"), "Namespace.metadata")
        labels = _mapping(meta.get("labels"), f"Namespace {name}: metadata.labels")
        notes = _mapping(meta.get("annotations"), f"Namespace {name}: metadata.annotations")
        allowed_queues = notes.get(keys.ALLOWED_QUEUES_ANNOTATION)
        allowed_presets = notes.get(keys.ALLOWED_PRESETS_ANNOTATION)
        return cls(
            name=name,
            team=labels.get(keys.TEAM_LABEL) or None,
            default_queue=(notes.get(keys.DEFAULT_QUEUE_ANNOTATION) or "").strip(),
            allowed_queues=None if allowed_queues is None else frozenset(_csv(allowed_queues)),
            default_presets=_csv(notes.get(keys.DEFAULT_PRESETS_ANNOTATION)),
            allowed_presets=None if allowed_presets is None else frozenset(_csv(allowed_presets)),
        )


# --- pods -----------------------------------------------------------------------------------


def _container_requests(container: Obj, where: str) -> Resources:
    resources = _mapping(container.get("resources"), f"{where}.resources")
    requests = _resources(resources.get("requests"), f"{where}.resources.requests")
    limits = _resources(resources.get("limits"), f"{where}.resources.limits")
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
        running = add(running, _container_requests(c, f"containers[{i}]"))
    sidecars: Resources = EMPTY
    init_peak: Resources = EMPTY
    for i, c in enumerate(spec.get("initContainers") or ()):
        requests = _container_requests(c, f"initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, requests)
            init_peak = maximum(init_peak, sidecars)
        else:
            init_peak = maximum(init_peak, add(sidecars, requests))
    need = maximum(add(running, sidecars), init_peak)
    overhead = _resources(spec.get("overhead"), "overhead")
    return MappingProxyType(dict(add(need, overhead)))


@dataclass(frozen=True, slots=True)
class Pod:
    """The facts about one pod that admission and dispatch need."""

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: _NO_LABELS)
    annotations: Mapping[str, str] = field(default_factory=lambda: _NO_LABELS)
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
        meta = _mapping(obj.get("metadata"), "Pod.metadata")
        spec = _mapping(obj.get("spec"), "Pod.spec")
        status = _mapping(obj.get("status"), "Pod.status")
        where = f"Pod {meta.get('namespace')}/{meta.get('name')}"
        gates = spec.get("schedulingGates") or ()
        unschedulable = ""
        condition_reason = ""
        for cond in status.get("conditions") or ():
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
            labels=_labels(meta.get("labels"), f"{where}: metadata.labels"),
            annotations=_labels(meta.get("annotations"), f"{where}: metadata.annotations"),
            requests=requests,
            priority=_int(spec.get("priority"), f"{where}: spec.priority"),
            created=parse_time(meta.get("creationTimestamp")),
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


# --- workloads and the snapshot -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    """One pod, or every pod of a pod group: the unit that limits count and dispatch releases.

    ``key`` is ``namespace/pod`` for a single pod and ``namespace/group:<name>`` for a group.
    """

    key: str
    namespace: str
    queue: str
    team: str
    pods: tuple[Pod, ...]
    state: State
    requests: Resources = field(default_factory=lambda: EMPTY)
    priority: int = 0
    created: float = 0.0
    workflow: str = ""  # namespace-qualified: "ns/name"; empty when the pod belongs to none
    workflow_max_running: int | None = None
    group_size: int = 1

    @property
    def complete(self) -> bool:
        """A pod group is released only when every one of its pods exists."""
        return len(self.pods) >= self.group_size


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one dispatch decision looks at, taken at one instant ``now``."""

    queues: Mapping[str, Queue]
    teams: Mapping[str, Team]
    policy: Policy
    workloads: Sequence[Workload]
    now: float = 0.0
