"""Admission requests and decisions: the wire shapes and the frozen values admission works on.

The webhook parses the ``request`` of an AdmissionReview with ``Request.from_review``, passes
it to ``admitting.review`` and turns the ``Admit`` or ``Deny`` it gets back into the response
(``Admit.patch`` is the JSONPatch to base64-encode). A request of a shape no API server sends
raises ``MalformedReview``, which the webhook answers with HTTP 400. An ``Admit`` that carries a
``Release`` is a gate removed by hand (break glass): the webhook logs it and records an Event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, TypedDict

from policy import keys
from policy.fields import InvalidObject, Obj
from policy.owners import ANY, Pattern, pytorchjob_pods, raycluster_pods
from policy.patching import Patch
from policy.pods import Submitter


class MalformedReview(InvalidObject):
    """An AdmissionReview request of a shape no API server sends; the webhook answers 400."""

# --- wire shapes (admission.k8s.io/v1) ------------------------------------------------------


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class UserInfo(TypedDict, total=False):
    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class AdmissionRequest(TypedDict, total=False):
    """``AdmissionReview.request``, the fields Sluicegate reads."""

    uid: str
    kind: GroupVersionKind
    subResource: str
    name: str
    namespace: str
    operation: str
    userInfo: UserInfo
    object: dict[str, Any] | None
    oldObject: dict[str, Any] | None
    dryRun: bool


# --- values ---------------------------------------------------------------------------------


class Operation(StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


@dataclass(frozen=True, slots=True)
class Kind:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """As an ownerReference writes it: ``v1``, ``batch/v1``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


POD: Final = Kind("", "v1", "Pod")
JOB: Final = Kind("batch", "v1", "Job")
CRONJOB: Final = Kind("batch", "v1", "CronJob")
DEPLOYMENT: Final = Kind("apps", "v1", "Deployment")
REPLICASET: Final = Kind("apps", "v1", "ReplicaSet")
STATEFULSET: Final = Kind("apps", "v1", "StatefulSet")
DAEMONSET: Final = Kind("apps", "v1", "DaemonSet")
REPLICATIONCONTROLLER: Final = Kind("", "v1", "ReplicationController")


PYTORCHJOB: Final = Kind("kubeflow.org", "v1", "PyTorchJob")
RAYCLUSTER: Final = Kind("ray.io", "v1", "RayCluster")
RAYJOB: Final = Kind("ray.io", "v1", "RayJob")


@dataclass(frozen=True, slots=True)
class OwnerKind:
    """A kind whose CREATE admission judges too: where its pod templates are, what kind of object
    its controllers create from them, and which accounts really create those (so the only ones
    whose objects may carry a template's stamp).

    ``templates`` are path patterns (``policy.owners``: a ``*`` step is every value of a map or
    item of a list). ``controllers`` are Kubernetes' own accounts, the same in every cluster; an
    operator's account depends on where it was installed, so the Policy names it
    (``operatorAccounts``, by ``operator``: the resource name of the kind). ``gang`` counts the
    pods of one object, for the kinds whose pods start together (one pod group, formed at
    CREATE). ``scaling`` are the fields that anyone allowed to edit the object may change, like
    a Deployment's replicas through the scale subresource: the pods they add queue on their own.
    """

    templates: tuple[Pattern, ...]
    creates: Kind
    controllers: frozenset[str] = frozenset()
    operator: str = ""
    gang: Callable[[Obj], int] | None = None
    scaling: tuple[Pattern, ...] = ()


_TEMPLATE: Final[tuple[Pattern, ...]] = (("spec", "template"),)
_RAY_TEMPLATES: Final[tuple[Pattern, ...]] = (
    ("spec", "headGroupSpec", "template"),
    ("spec", "workerGroupSpecs", ANY, "template"),
)

OWNERS: Final[Mapping[Kind, OwnerKind]] = MappingProxyType({
    # kube-controller-manager acts as its own user when it runs without
    # --use-service-account-credentials; it never creates a Job's pods for anyone else.
    JOB: OwnerKind(_TEMPLATE, POD, frozenset({keys.JOB_CONTROLLER, keys.CONTROLLER_MANAGER})),
    # The cronjob controller creates a Job from spec.jobTemplate, the stamp included; the Job
    # controller then creates the Job's pods from it (the row above).
    CRONJOB: OwnerKind(
        (("spec", "jobTemplate", "spec", "template"),),
        JOB,
        frozenset({keys.CRONJOB_CONTROLLER, keys.CONTROLLER_MANAGER}),
    ),
    # A notebook or a service: the deployment controller creates a ReplicaSet from
    # spec.template, the stamp included, one per version of the template; the ReplicaSet
    # controller then creates the pods (the next row). A ReplicaSet created by hand is judged
    # at its own CREATE like any owner.
    DEPLOYMENT: OwnerKind(
        _TEMPLATE, REPLICASET, frozenset({keys.DEPLOYMENT_CONTROLLER, keys.CONTROLLER_MANAGER})
    ),
    REPLICASET: OwnerKind(
        _TEMPLATE, POD, frozenset({keys.REPLICASET_CONTROLLER, keys.CONTROLLER_MANAGER})
    ),
    STATEFULSET: OwnerKind(
        _TEMPLATE, POD, frozenset({keys.STATEFULSET_CONTROLLER, keys.CONTROLLER_MANAGER})
    ),
    # The older kinds that create pods from spec.template too: without a row their pods would be
    # judged, and charged, as the controller's own account.
    DAEMONSET: OwnerKind(
        _TEMPLATE, POD, frozenset({keys.DAEMONSET_CONTROLLER, keys.CONTROLLER_MANAGER})
    ),
    REPLICATIONCONTROLLER: OwnerKind(
        _TEMPLATE, POD, frozenset({keys.REPLICATION_CONTROLLER, keys.CONTROLLER_MANAGER})
    ),
    # The training operator creates each replica's pod from its type's template (labels
    # training.kubeflow.org/job-name, replica-type, replica-index), owned by the PyTorchJob.
    PYTORCHJOB: OwnerKind(
        (("spec", "pytorchReplicaSpecs", ANY, "template"),),
        POD,
        operator="pytorchjobs.kubeflow.org",
        gang=pytorchjob_pods,
    ),
    # KubeRay creates the head's pod and each worker group's pods (labels ray.io/cluster,
    # ray.io/node-type, ray.io/group), owned by the RayCluster. Its autoscaler changes a worker
    # group's replicas and the workers it deletes.
    RAYCLUSTER: OwnerKind(
        _RAY_TEMPLATES,
        POD,
        operator="rayclusters.ray.io",
        gang=raycluster_pods,
        scaling=(
            ("spec", "workerGroupSpecs", ANY, "replicas"),
            ("spec", "workerGroupSpecs", ANY, "scaleStrategy"),
        ),
    ),
    # KubeRay creates a RayCluster from spec.rayClusterSpec, the stamps included, owned by the
    # RayJob (the row above then forms its gang); its submitter runs in a Job of its own.
    RAYJOB: OwnerKind(
        tuple(("spec", "rayClusterSpec", *p[1:]) for p in _RAY_TEMPLATES),
        RAYCLUSTER,
        operator="rayjobs.ray.io",
    ),
})
"""Owner kinds whose CREATE admission also judges, one row each.

An object whose controller owner is one of these takes the submitter stamped on the template,
but only when it is of the row's ``creates`` kind and was created by one of the row's
controllers that the Policy trusts, or by the operator account the Policy names for the kind.
Adding a kind (JobSet, an Argo Workflow) is one row here and one rule in the webhook
configuration (``manifests/admission``).
"""

OWNER_TEMPLATES: Final[Mapping[Kind, tuple[Pattern, ...]]] = MappingProxyType(
    {kind: row.templates for kind, row in OWNERS.items()}
)
"""The path patterns of each owner kind's pod templates (``policy.owners.template_paths``)."""


def _no_object() -> Obj:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Request:
    """One admission request, as admission decides on it."""

    operation: Operation
    kind: Kind
    user: str
    groups: frozenset[str] = frozenset()
    object: Obj = field(default_factory=_no_object)
    old_object: Obj | None = None
    subresource: str = ""

    @property
    def creator(self) -> Submitter:
        return Submitter(self.user, self.groups)

    @classmethod
    def from_review(cls, raw: AdmissionRequest) -> Request:
        """Parse ``AdmissionReview.request``; a malformed one raises ``MalformedReview``."""
        if not isinstance(raw, Mapping):
            raise MalformedReview("AdmissionReview.request: expected an object")
        operation = raw.get("operation")
        if operation not in Operation.__members__.values():
            raise MalformedReview(f"AdmissionRequest.operation: {operation!r} is not a known operation")
        gvk = raw.get("kind")
        if not isinstance(gvk, Mapping) or not gvk.get("kind"):
            raise MalformedReview("AdmissionRequest.kind is missing")
        parts = [gvk.get(k) or "" for k in ("group", "version", "kind")]
        group, version, kind = (p if isinstance(p, str) else None for p in parts)
        if group is None or version is None or kind is None:
            raise MalformedReview(f"AdmissionRequest.kind: expected strings, got {dict(gvk)!r}")
        info = raw.get("userInfo")
        if info is None:
            info = UserInfo()
        if not isinstance(info, Mapping):
            raise MalformedReview(f"AdmissionRequest.userInfo: expected an object, got {info!r}")
        user = info.get("username") or ""
        if not isinstance(user, str):
            raise MalformedReview(f"AdmissionRequest.userInfo.username: expected a string, got {user!r}")
        groups = info.get("groups") or []
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise MalformedReview(
                f"AdmissionRequest.userInfo.groups: expected a list of strings, got {groups!r}"
            )
        subresource = raw.get("subResource") or ""
        if not isinstance(subresource, str):
            raise MalformedReview(f"AdmissionRequest.subResource: expected a string, got {subresource!r}")
        obj = raw.get("object")
        old = raw.get("oldObject")
        if obj is not None and not isinstance(obj, Mapping):
            raise MalformedReview("AdmissionRequest.object: expected an object")
        if old is not None and not isinstance(old, Mapping):
            raise MalformedReview("AdmissionRequest.oldObject: expected an object")
        return cls(
            operation=Operation(str(operation)),
            kind=Kind(group, version, kind),
            user=user,
            groups=frozenset(groups),
            object=obj if obj is not None else _no_object(),
            old_object=old,
            subresource=subresource,
        )


@dataclass(frozen=True, slots=True)
class Release:
    """A gate removed by hand (break glass) by someone allowed to ``release`` the pod's queue.

    The webhook logs it at INFO with these fields and records an Event on the pod (reason
    ``ReleasedByHand``, the ``message``); dispatch then counts the pod as running like any other.
    """

    pod: str  # namespace/name
    queue: str
    user: str

    @property
    def message(self) -> str:
        return (
            f"{self.user} removed the scheduling gate {keys.GATE} by hand (allowed to "
            f"{keys.RELEASE_VERB} queue {self.queue}); the pod counts as running in its queue"
        )


@dataclass(frozen=True, slots=True)
class Admit:
    """Let the object in, changed by ``patch`` (RFC 6902; empty: unchanged).

    ``release`` is set when the request is a break-glass release that the webhook must log and
    record as an Event."""

    patch: Patch = ()
    warnings: tuple[str, ...] = ()
    release: Release | None = None

    @property
    def allowed(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the object; ``message`` goes back to the user as is."""

    message: str

    @property
    def allowed(self) -> bool:
        return False


Decision = Admit | Deny
