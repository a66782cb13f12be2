"""Admission requests and decisions: the wire shapes and the frozen values admission works on.

The webhook parses the ``request`` of an AdmissionReview with ``Request.from_review``, passes
it to ``admitting.review`` and turns the ``Admit`` or ``Deny`` it gets back into the response
(``Admit.patch`` is the JSONPatch to base64-encode). A request of a shape no API server sends
raises ``MalformedReview``, which the webhook answers with HTTP 400. An ``Admit`` that carries a
``Release`` is a gate removed by hand (break glass): the webhook logs it and records an Event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, TypedDict

from policy import keys
from policy.fields import InvalidObject, Obj
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


@dataclass(frozen=True, slots=True)
class OwnerKind:
    """A kind whose CREATE admission judges too: where its pod template is, what kind of object
    its controllers create from that template, and which accounts really create them (so the
    only ones whose objects may carry the template's stamp)."""

    template: tuple[str, ...]
    creates: Kind
    controllers: frozenset[str]


OWNERS: Final[Mapping[Kind, OwnerKind]] = MappingProxyType({
    # kube-controller-manager acts as its own user when it runs without
    # --use-service-account-credentials; it never creates a Job's pods for anyone else.
    JOB: OwnerKind(
        ("spec", "template"), POD, frozenset({keys.JOB_CONTROLLER, keys.CONTROLLER_MANAGER})
    ),
    # The cronjob controller creates a Job from spec.jobTemplate, the stamp included; the Job
    # controller then creates the Job's pods from it (the row above).
    CRONJOB: OwnerKind(
        ("spec", "jobTemplate", "spec", "template"),
        JOB,
        frozenset({keys.CRONJOB_CONTROLLER, keys.CONTROLLER_MANAGER}),
    ),
    # A notebook or a service: the deployment controller creates a ReplicaSet from
    # spec.template, the stamp included, one per version of the template; the ReplicaSet
    # controller then creates the pods (the next row). A ReplicaSet created by hand is judged
    # at its own CREATE like any owner.
    DEPLOYMENT: OwnerKind(
        ("spec", "template"),
        REPLICASET,
        frozenset({keys.DEPLOYMENT_CONTROLLER, keys.CONTROLLER_MANAGER}),
    ),
    REPLICASET: OwnerKind(
        ("spec", "template"), POD, frozenset({keys.REPLICASET_CONTROLLER, keys.CONTROLLER_MANAGER})
    ),
    STATEFULSET: OwnerKind(
        ("spec", "template"), POD, frozenset({keys.STATEFULSET_CONTROLLER, keys.CONTROLLER_MANAGER})
    ),
})
"""Owner kinds whose CREATE admission also judges, one row each.

An object whose controller owner is one of these takes the submitter stamped on the template,
but only when it is of the row's ``creates`` kind, one of the row's controllers created it, and
the Policy trusts that account. Adding a kind (JobSet, an Argo Workflow, a PyTorchJob) is one
row here and one rule in the webhook configuration (``manifests/admission``).
"""

OWNER_TEMPLATES: Final[Mapping[Kind, tuple[str, ...]]] = MappingProxyType(
    {kind: row.template for kind, row in OWNERS.items()}
)
"""The path of each owner kind's pod template."""


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
