"""Asking the API server whether a user may do something: SubjectAccessReviews, cached briefly.

The webhook asks one question: may the user who removes a pod's gate by hand ``release`` its
Queue (``kubectl auth can-i release queues.sluicegate.dev/<name>``)? The answer is cached for a
few seconds per (user, uid, groups, extra, queue), so a burst of releases asks once, and a
revoked permission stops working within that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kube.connecting import Connection
from policy import keys

SUBJECT_ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CACHE_SECONDS: Final = 10.0

_Key = tuple[str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], str]


def release_review(user_info: Mapping[str, Any], queue: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user_info`` may ``release`` ``queue``."""
    spec: dict[str, Any] = {
        "resourceAttributes": {
            "group": keys.GROUP,
            "resource": "queues",
            "verb": keys.RELEASE_VERB,
            "name": queue,
        },
        "user": str(user_info.get("username") or ""),
    }
    groups = user_info.get("groups")
    if isinstance(groups, list):
        spec["groups"] = [str(g) for g in groups]
    if user_info.get("uid"):
        spec["uid"] = str(user_info["uid"])
    extra = user_info.get("extra")
    if isinstance(extra, Mapping):
        spec["extra"] = {str(k): [str(v) for v in vs] for k, vs in extra.items() if isinstance(vs, list)}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def _key(review: Mapping[str, Any]) -> _Key:
    spec = review["spec"]
    extra = tuple(sorted((k, tuple(v)) for k, v in spec.get("extra", {}).items()))
    return (spec["user"], spec.get("uid", ""), tuple(sorted(spec.get("groups", ()))), extra,
            spec["resourceAttributes"]["name"])


class AccessReviews:
    """Answers "may this user release this queue?" through the API server, cached briefly.
    A failed request raises ``KubeError`` (the webhook then answers 503: no release)."""

    def __init__(
        self,
        connection: Connection,
        *,
        seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connection = connection
        self.seconds = seconds
        self.clock = clock
        self._answers: dict[_Key, tuple[float, bool]] = {}

    async def may_release(self, user_info: Mapping[str, Any], queue: str) -> bool:
        review = release_review(user_info, queue)
        key = _key(review)
        now = self.clock()
        cached = self._answers.get(key)
        if cached is not None and now - cached[0] < self.seconds:
            return cached[1]
        answer = await self.connection.request("POST", SUBJECT_ACCESS_REVIEWS, body=review)
        status = answer.get("status")
        allowed = isinstance(status, Mapping) and status.get("allowed") is True
        if len(self._answers) > 1024:
            self._answers = {k: v for k, v in self._answers.items() if now - v[0] < self.seconds}
        self._answers[key] = (now, allowed)
        return allowed
