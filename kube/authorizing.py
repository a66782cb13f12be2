"""Asking the API server whether a user may do something: SubjectAccessReviews, cached briefly.

Two questions are asked:

- the webhook's: may the user who removes a pod's gate by hand ``release`` its Queue
  (``kubectl auth can-i release queues.sluicegate.dev/<name>``)?
- a data listener's (``process.callers``): may this caller do what the request asks
  (``Access``: a verb on a resource, or on a non-resource URL)?

Answers are remembered for a few seconds per whole identity (user, uid, groups, extra) and
question (``kube.remembering``), so a burst asks once, and a revoked permission stops working
within that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kube.connecting import Connection
from kube.remembering import Remembered
from policy import keys

SUBJECT_ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CACHE_SECONDS: Final = 10.0

_Extra = tuple[tuple[str, tuple[str, ...]], ...]
_Key = tuple[str, str, tuple[str, ...], _Extra, str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class Access:
    """What a request asks to do, as RBAC names it: a verb on a resource (``group``,
    ``resource``, optionally ``namespace`` and ``name``), or on a non-resource URL (``path``)."""

    verb: str
    resource: str = ""
    group: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    subresource: str = ""

    def attributes(self) -> tuple[str, dict[str, str]]:
        """The SubjectAccessReview field and its value."""
        if self.path:
            return "nonResourceAttributes", {"path": self.path, "verb": self.verb}
        fields = {"group": self.group, "resource": self.resource, "verb": self.verb,
                  "namespace": self.namespace, "name": self.name, "subresource": self.subresource}
        return "resourceAttributes", {k: v for k, v in fields.items() if v or k == "group"}

    def __str__(self) -> str:
        if self.path:
            return f"{self.verb} {self.path}"
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            what = f"{self.resource}/{self.subresource}" + (f".{self.group}" if self.group else "")
        if self.name:
            what += f"/{self.name}"
        return f"{self.verb} {what}" + (f" in namespace {self.namespace}" if self.namespace else "")


def access_review(user_info: Mapping[str, Any], field: str, attributes: Mapping[str, str]) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user_info`` may do ``attributes``."""
    spec: dict[str, Any] = {field: dict(attributes), "user": str(user_info.get("username") or "")}
    groups = user_info.get("groups")
    if isinstance(groups, list):
        spec["groups"] = [str(g) for g in groups]
    if user_info.get("uid"):
        spec["uid"] = str(user_info["uid"])
    extra = user_info.get("extra")
    if isinstance(extra, Mapping):
        spec["extra"] = {str(k): [str(v) for v in vs] for k, vs in extra.items() if isinstance(vs, list)}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def release_review(user_info: Mapping[str, Any], queue: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user_info`` may ``release`` ``queue``."""
    attributes = {"group": keys.GROUP, "resource": "queues", "verb": keys.RELEASE_VERB, "name": queue}
    return access_review(user_info, "resourceAttributes", attributes)


def _key(review: Mapping[str, Any]) -> _Key:
    spec = review["spec"]
    extra = tuple(sorted((k, tuple(v)) for k, v in spec.get("extra", {}).items()))
    field = "resourceAttributes" if "resourceAttributes" in spec else "nonResourceAttributes"
    return (spec["user"], spec.get("uid", ""), tuple(sorted(spec.get("groups", ()))), extra, field,
            tuple(sorted(spec[field].items())))


class AccessReviews:
    """Answers "may this user ...?" through the API server, cached briefly. A failed request
    raises ``KubeError`` (the webhook then answers 503: no release; a data listener 503)."""

    def __init__(
        self,
        connection: Connection,
        *,
        seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connection = connection
        self.answers: Remembered[_Key, bool] = Remembered(seconds=seconds, clock=clock)

    async def _ask(self, review: dict[str, Any]) -> bool:
        async def ask() -> bool:
            answer = await self.connection.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)
            status = answer.get("status")
            return isinstance(status, Mapping) and status.get("allowed") is True

        return await self.answers.get(_key(review), ask)

    async def may_release(self, user_info: Mapping[str, Any], queue: str) -> bool:
        return await self._ask(release_review(user_info, queue))

    async def allowed(self, user_info: Mapping[str, Any], access: Access) -> bool:
        field, attributes = access.attributes()
        return await self._ask(access_review(user_info, field, attributes))
