"""The model Sluicegate decides over: its four kinds, namespaces, workloads and the snapshot.

Every kind is a frozen dataclass parsed from the plain dict Kubernetes returns. Parsing refuses
bad values with ``InvalidObject``, whose message names the object and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Protocol

from policy import fields, keys
from policy.fields import InvalidObject, Obj
from policy.pods import Pod
from policy.quantities import EMPTY, Resources


class Ordering(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class State(StrEnum):
    """A workload's place in its life: gated, released and holding its slot, or done."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"


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

    match_labels: Mapping[str, str] = field(default_factory=lambda: fields.NO_STRINGS)
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    @classmethod
    def parse(cls, raw: object, where: str) -> Selector:
        data = fields.mapping(raw, where)
        requirements = []
        for i, expr in enumerate(data.get("matchExpressions") or ()):
            at = f"{where}.matchExpressions[{i}]"
            expr = fields.mapping(expr, at)
            op = expr.get("operator")
            if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise InvalidObject(f"{at}.operator: {op!r} is not In, NotIn, Exists or DoesNotExist")
            key = expr.get("key")
            if not isinstance(key, str) or not key:
                raise InvalidObject(f"{at}.key is missing")
            requirements.append(Requirement(key, op, frozenset(fields.strings(expr.get("values"), at))))
        return cls(fields.labels(data.get("matchLabels"), f"{where}.matchLabels"), tuple(requirements))


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
        name = fields.name(obj, "Queue")
        where = f"Queue {name}: spec"
        spec = fields.mapping(obj.get("spec"), where)
        access = fields.mapping(spec.get("access"), f"{where}.access")
        ordering = spec.get("ordering") or Ordering.BEST_EFFORT_FIFO.value
        if ordering not in Ordering.__members__.values():
            raise InvalidObject(f"{where}.ordering: {ordering!r} is not BestEffortFIFO or StrictFIFO")
        paused = spec.get("paused", False)
        if not isinstance(paused, bool):
            raise InvalidObject(f"{where}.paused: expected true or false, got {paused!r}")
        pool = spec.get("nodePool")
        return cls(
            name=name,
            priority=fields.whole(spec.get("priority"), f"{where}.priority"),
            max_running=fields.limit(spec.get("maxRunning"), f"{where}.maxRunning"),
            quota=fields.resources(spec.get("quota"), f"{where}.quota"),
            access=Access(
                teams=frozenset(fields.strings(access.get("teams"), f"{where}.access.teams")),
                users=frozenset(fields.strings(access.get("users"), f"{where}.access.users")),
                groups=frozenset(fields.strings(access.get("groups"), f"{where}.access.groups")),
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
        name = fields.name(obj, "Team")
        where = f"Team {name}: spec"
        spec = fields.mapping(obj.get("spec"), where)
        members = fields.mapping(spec.get("members"), f"{where}.members")
        return cls(
            name=name,
            max_running=fields.limit(spec.get("maxRunning"), f"{where}.maxRunning"),
            quota=fields.resources(spec.get("quota"), f"{where}.quota"),
            members=Members(
                users=frozenset(fields.strings(members.get("users"), f"{where}.members.users")),
                groups=frozenset(fields.strings(members.get("groups"), f"{where}.members.groups")),
            ),
        )


DEFAULT_STARVATION_SECONDS = 600
DEFAULT_TRUSTED_CONTROLLERS = (
    "system:serviceaccount:kube-system:job-controller",
    "system:serviceaccount:kube-system:cronjob-controller",
    "system:serviceaccount:kube-system:deployment-controller",
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:serviceaccount:kube-system:statefulset-controller",
    "system:serviceaccount:kube-system:replication-controller",
    "system:serviceaccount:kube-system:daemon-set-controller",
)
DEFAULT_OPERATOR_ACCOUNTS: Final[Mapping[str, str]] = MappingProxyType({
    "pytorchjobs.kubeflow.org": keys.TRAINING_OPERATOR,
    "rayclusters.ray.io": keys.KUBERAY_OPERATOR,
    "rayjobs.ray.io": keys.KUBERAY_OPERATOR,
})
"""Each operator's account where its own manifests install it, by the resource of the kind it
creates pods (or RayClusters) for: ``reviews.OWNERS``' ``operator``."""


@dataclass(frozen=True, slots=True)
class Policy:
    """The cluster-wide singleton. ``Policy()`` is what applies when none exists."""

    max_running: int | None = None
    quota: Resources = field(default_factory=lambda: EMPTY)
    managed_resources: tuple[str, ...] = keys.DEFAULT_MANAGED_RESOURCES
    default_queue: str = ""
    starvation_seconds: int = DEFAULT_STARVATION_SECONDS
    trusted_controllers: tuple[str, ...] = DEFAULT_TRUSTED_CONTROLLERS
    operator_accounts: Mapping[str, str] = field(default_factory=lambda: DEFAULT_OPERATOR_ACCOUNTS)
    """The account of the operator that creates the pods (or objects) of an owner kind, by the
    kind's resource (``pytorchjobs.kubeflow.org``): its stamp is honoured on what that account
    creates for an object of the kind, and only there. Naming it is trusting it."""
    workflow_labels: tuple[str, ...] = ()
    device_classes: Mapping[str, str] = field(default_factory=lambda: fields.NO_STRINGS)
    """DRA: a DeviceClass name and the quota resource each device of it counts as
    (``policy.devices``)."""

    @classmethod
    def parse(cls, obj: Obj) -> Policy:
        name = fields.name(obj, "Policy")
        if name != keys.POLICY_NAME:
            raise InvalidObject(f"Policy {name}: the only Policy that counts is named {keys.POLICY_NAME!r}")
        where = f"Policy {name}: spec"
        spec = fields.mapping(obj.get("spec"), where)
        starvation = fields.limit(spec.get("starvationSeconds"), f"{where}.starvationSeconds")
        managed = fields.strings(spec.get("managedResources"), f"{where}.managedResources")
        trusted = spec.get("trustedControllers")
        operators = spec.get("operatorAccounts")
        default_queue = spec.get("defaultQueue") or ""
        if not isinstance(default_queue, str):
            raise InvalidObject(f"{where}.defaultQueue: expected a queue name, got {default_queue!r}")
        return cls(
            max_running=fields.limit(spec.get("maxRunning"), f"{where}.maxRunning"),
            quota=fields.resources(spec.get("quota"), f"{where}.quota"),
            managed_resources=managed or keys.DEFAULT_MANAGED_RESOURCES,
            default_queue=default_queue,
            starvation_seconds=DEFAULT_STARVATION_SECONDS if starvation is None else starvation,
            trusted_controllers=(
                DEFAULT_TRUSTED_CONTROLLERS
                if trusted is None
                else fields.strings(trusted, f"{where}.trustedControllers")
            ),
            operator_accounts=(
                DEFAULT_OPERATOR_ACCOUNTS
                if operators is None
                else fields.labels(operators, f"{where}.operatorAccounts")
            ),
            workflow_labels=fields.strings(spec.get("workflowLabels"), f"{where}.workflowLabels"),
            device_classes=fields.labels(spec.get("deviceClasses"), f"{where}.deviceClasses"),
        )


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
        name = fields.name(obj, "Namespace")
        meta = fields.mapping(obj.get("metadata"), "Namespace.metadata")
        labels = fields.mapping(meta.get("labels"), f"Namespace {name}: metadata.labels")
        notes = fields.mapping(meta.get("annotations"), f"Namespace {name}: metadata.annotations")
        allowed_queues = notes.get(keys.ALLOWED_QUEUES_ANNOTATION)
        allowed_presets = notes.get(keys.ALLOWED_PRESETS_ANNOTATION)
        return cls(
            name=name,
            team=labels.get(keys.TEAM_LABEL) or None,
            default_queue=(notes.get(keys.DEFAULT_QUEUE_ANNOTATION) or "").strip(),
            allowed_queues=None if allowed_queues is None else frozenset(fields.csv(allowed_queues)),
            default_presets=fields.csv(notes.get(keys.DEFAULT_PRESETS_ANNOTATION)),
            allowed_presets=None if allowed_presets is None else frozenset(fields.csv(allowed_presets)),
        )


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
    workflow_max_running: int | None = None  # the smallest its pods carry
    group_size: int = 1
    disagreement: str = ""  # why a group's pods cannot go as one, e.g. they name two queues
    surplus: str = ""  # gated pods beyond the size of their running group: never released as such
    joins: bool = False
    """Gated pods joining their running group (``workloads.group_workloads``): they pass every
    limit like any workload, but take no slot of a count limit, which the group holds already."""

    @property
    def slots(self) -> int:
        """How many slots of each count limit (workflow, queue, team, cluster) releasing it takes."""
        return 0 if self.joins else 1

    @property
    def complete(self) -> bool:
        """A pod group is released only when every one of its pods exists and they agree on
        their queue, workflow and size."""
        return len(self.pods) >= self.group_size and not self.disagreement and not self.surplus


class Nodes(Protocol):
    """The cluster's nodes as dispatch reads them (``policy.inventory.Inventory``)."""

    def __len__(self) -> int:
        """How many nodes are known; none means nothing is known of them."""
        ...

    def refusal(self, w: Workload, queue: Queue | None) -> str | None:
        """Why no node, if it were empty, could hold one of ``w``'s pods; None when each could."""
        ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one dispatch decision looks at, taken at one instant ``now``."""

    queues: Mapping[str, Queue]
    teams: Mapping[str, Team]
    policy: Policy
    workloads: Sequence[Workload]
    now: float = 0.0
    nodes: Nodes | None = None
    """The cluster's nodes (``policy.inventory``); None when not known: every pod is taken to
    fit some node."""
    refusals: Mapping[str, str] = field(default_factory=dict)
    """Pod uid -> why the API server refused the patch that releases it, while the pod is as it
    was then (the gate controller's; the CLI reads them from the pods' conditions)."""

    def refused(self, w: Workload) -> str | None:
        """Why the API server refused to release one of ``w``'s pods (``Reason.RELEASE_REFUSED``);
        None when it did not. Such work holds and blocks nothing, like work that can never run."""
        refusals = self.refusals
        if not refusals:
            return None
        pods = w.pods
        for pod in pods:
            why = refusals.get(pod.uid)
            if why is not None:
                return why if len(pods) == 1 else f"pod {pod.name}: {why}"
        return None

