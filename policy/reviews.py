"""Admission requests and decisions: the wire shapes and the frozen values admission works on.

The webhook parses the ``request`` of an AdmissionReview with ``Request.from_review``, passes
it to ``admitting.review`` and turns the ``Admit`` or ``Deny`` it gets back into the response
(``Admit.patch`` is the JSONPatch to base64-encode).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, TypedDict

from policy.fields import InvalidObject, Obj
from policy.patching import Patch
from policy.pods import Submitter

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

OWNER_TEMPLATES: Final[Mapping[Kind, tuple[str, ...]]] = MappingProxyType({
    JOB: ("spec", "template"),
    CRONJOB: ("spec", "jobTemplate", "spec", "template"),
})
"""Owner kinds whose CREATE admission also judges, with the path of their pod template.

Pods (and Jobs) whose controller owner is one of these take the submitter stamped on the
template: a CronJob's stamp is copied into each Job it creates, and from there into the pods.
Adding a kind (JobSet, an Argo Workflow, a PyTorchJob) is one row here and one rule in the
webhook configuration.
"""


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
        """Parse ``AdmissionReview.request``; a malformed one raises ``InvalidObject``."""
        operation = raw.get("operation")
        if operation not in Operation.__members__.values():
            raise InvalidObject(f"AdmissionRequest.operation: {operation!r} is not a known operation")
        gvk = raw.get("kind")
        if not isinstance(gvk, Mapping) or not gvk.get("kind"):
            raise InvalidObject("AdmissionRequest.kind is missing")
        info = raw.get("userInfo") or UserInfo()
        groups = info.get("groups") or []
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise InvalidObject(
                f"AdmissionRequest.userInfo.groups: expected a list of strings, got {groups!r}"
            )
        obj = raw.get("object")
        old = raw.get("oldObject")
        if obj is not None and not isinstance(obj, Mapping):
            raise InvalidObject("AdmissionRequest.object: expected an object")
        if old is not None and not isinstance(old, Mapping):
            raise InvalidObject("AdmissionRequest.oldObject: expected an object")
        return cls(
            operation=Operation(str(operation)),
            kind=Kind(str(gvk.get("group") or ""), str(gvk.get("version") or ""), str(gvk["kind"])),
            user=str(info.get("username") or ""),
            groups=frozenset(groups),
            object=obj if obj is not None else _no_object(),
            old_object=old,
            subresource=str(raw.get("subResource") or ""),
        )


@dataclass(frozen=True, slots=True)
class Admit:
    """Let the object in, changed by ``patch`` (RFC 6902; empty: unchanged)."""

    patch: Patch = ()
    warnings: tuple[str, ...] = ()

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
