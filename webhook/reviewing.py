"""One AdmissionReview, from body to answer: parse it, ask policy, answer, count, log.

``Reviewer.decide`` is the one place that calls ``policy.admitting.review``. The mutating
webhook returns policy's patch. The validating webhook runs after every mutating webhook: on
UPDATE it applies the bypass rules, and on CREATE it reviews the pod as it will be stored —
admission is idempotent, so a pod that still carries what Sluicegate wrote yields an empty patch,
and anything else means a later webhook changed or removed Sluicegate's keys or gate.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol, cast

from policy import admitting, fields, keys
from policy.catalog import Catalog
from policy.fields import InvalidObject
from policy.guarding import release_queue
from policy.model import Namespace, Policy
from policy.owners import at, template_paths
from policy.patching import escape
from policy.pods import Submitter
from policy.priorities import PriorityClasses
from policy.reviews import (
    OWNER_TEMPLATES,
    AdmissionRequest,
    Admit,
    Decision,
    Deny,
    MalformedReview,
    Operation,
    Request,
)
from webhook.denials import STARTING, reason
from webhook.metrics import AdmissionMetrics

log = logging.getLogger(__name__)

API_VERSION: Final = "admission.k8s.io/v1"
Webhook = Literal["mutate", "validate"]
_QUEUE_PATH: Final = f"/metadata/labels/{escape(keys.QUEUE_LABEL)}"


class BadReview(Exception):
    """The body is not an AdmissionReview this server can read (answered 400)."""


class Source(Protocol):
    """What admission reads: the cache (``kube.cache.Cache``) in a running server."""

    @property
    def synced(self) -> bool: ...

    def catalog(self) -> Catalog: ...

    def namespace(self, name: str) -> Namespace | None: ...

    async def current_namespace(self, name: str) -> Namespace: ...


class Owners(Protocol):
    """Who created a pod's owner, when known: ``webhook.owners.JobCreators`` in a running server."""

    async def creator(self, request: Request, namespace: str) -> Submitter | None: ...


class Classes(Protocol):
    """The cluster's PriorityClasses: ``webhook.priorityclasses.ClusterPriorityClasses`` in a
    running server."""

    def classes(self) -> PriorityClasses: ...


class ClaimSource(Protocol):
    """The DRA claims a pod names: ``webhook.claims.ClaimReader`` in a running server."""

    async def claims(self, request: Request, namespace: str, policy: Policy) -> admitting.Claims: ...


class Authorizer(Protocol):
    """Who may release a queue by hand: ``kube.authorizing.AccessReviews`` in a running server."""

    async def may_release(self, user_info: Mapping[str, Any], queue: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class Review:
    uid: str
    namespace: str
    dry_run: bool
    request: Request
    user_info: Mapping[str, Any] = field(default_factory=dict)
    """``request.userInfo`` as sent (uid and extra included), for access reviews."""

    @property
    def object_name(self) -> str:
        meta = fields.obj(self.request.object.get("metadata"))
        name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "")
        return f"{self.namespace}/{name}" if self.namespace else str(name)


def parse_review(body: bytes) -> Review:
    """Read an ``admission.k8s.io/v1`` AdmissionReview; anything else raises ``BadReview``."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise BadReview(f"the body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise BadReview("the body is not a JSON object")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "AdmissionReview":
        raise BadReview(
            f"expected apiVersion {API_VERSION} and kind AdmissionReview, got "
            f"{str(doc.get('apiVersion'))[:60]!r} and {str(doc.get('kind'))[:60]!r}"
        )
    raw = doc.get("request")
    if not isinstance(raw, dict):
        raise BadReview("AdmissionReview.request is missing or not an object")
    uid, namespace = raw.get("uid"), raw.get("namespace") or ""
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview.request.uid is missing")
    if not isinstance(namespace, str):
        raise BadReview("AdmissionReview.request.namespace is not a string")
    try:
        request = Request.from_review(cast(AdmissionRequest, raw))
    except InvalidObject as e:
        raise BadReview(str(e)) from None
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        # Parsing is all from_review does: whatever it trips on is a malformed request.
        raise BadReview(f"AdmissionReview.request: {type(e).__name__}: {e}") from None
    user_info = raw.get("userInfo")
    return Review(uid, namespace, raw.get("dryRun") is True, request,
                  user_info if isinstance(user_info, dict) else {})


def answer(uid: str, decision: Decision, *, patch: bool) -> dict[str, Any]:
    """The AdmissionReview response; a validating webhook (``patch=False``) never patches."""
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if isinstance(decision, Admit):
        if patch and decision.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(decision.patch).encode()).decode()
        if patch and decision.warnings:
            response["warnings"] = list(decision.warnings)
    else:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": decision.message}
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


class Reviewer:
    """Answers reviews from what ``source`` holds; counts and logs every answer."""

    def __init__(
        self,
        source: Source,
        controller: str,
        metrics: AdmissionMetrics,
        authorizer: Authorizer | None = None,
        owners: Owners | None = None,
        classes: Classes | None = None,
        claims: ClaimSource | None = None,
    ) -> None:
        self.source = source
        self.controller = controller
        self.metrics = metrics
        self.authorizer = authorizer
        self.owners = owners
        self.classes = classes
        self.claims = claims

    async def _may_release(self, review: Review) -> bool:
        """Asked only when the request removes a gate; without an authorizer no one may."""
        queue = release_queue(review.request, self.controller)
        if queue is None or self.authorizer is None:
            return False
        return await self.authorizer.may_release(review.user_info, queue)

    async def decide(self, review: Review, webhook: Webhook) -> Decision:
        if not self.source.synced:  # an empty catalog would refuse every queue as unknown
            return Deny(STARTING)
        request = review.request
        if request.operation is Operation.CREATE and review.namespace:
            namespace = await self.source.current_namespace(review.namespace)
        else:  # the UPDATE rules do not depend on the namespace
            namespace = self.source.namespace(review.namespace) or Namespace(review.namespace)
        may_release = await self._may_release(review)
        owner_creator = None
        if self.owners is not None and namespace.opted_in:
            owner_creator = await self.owners.creator(request, review.namespace)
        catalog = self.source.catalog()
        claims = admitting.NO_CLAIMS
        if self.claims is not None and namespace.opted_in:
            claims = await self.claims.claims(request, review.namespace, catalog.policy)
        try:
            decision = admitting.review(
                request, namespace, catalog, controller=self.controller,
                now=datetime.now(UTC), may_release=may_release, owner_creator=owner_creator,
                classes=self.classes.classes() if self.classes is not None else fields.EMPTY_OBJ,
                claims=claims,
            )
        except MalformedReview as e:  # a shape no API server sends
            raise BadReview(f"AdmissionReview.request: {e}") from None
        except InvalidObject as e:  # policy's word for an object it cannot read
            raise BadReview(f"AdmissionReview.request.object: {e}") from None
        except RecursionError:  # JSON that parses, nested deeper than any pod an API server sends
            raise BadReview("AdmissionReview.request.object: nested too deeply") from None
        if webhook == "validate" and request.operation is Operation.CREATE:
            return _still_as_admitted(review, decision)
        return decision

    async def answer(self, body: bytes, webhook: Webhook) -> dict[str, Any]:
        return await self.answer_review(parse_review(body), webhook)

    async def answer_review(self, review: Review, webhook: Webhook) -> dict[str, Any]:
        """The answer to a review that parsed. Every such review is counted, by webhook, in the
        latency histogram, and one that fails also in ``sluicegate_admission_errors_total``
        (then the error is raised on, for the app to answer it): numerator and denominator of
        the error ratio count the same reviews, so no body that is not a review can raise it."""
        started = time.perf_counter()
        request = review.request
        try:
            decision = await self.decide(review, webhook)
        except BadReview:
            raise
        except BaseException:
            self.metrics.answered(request.operation.value, request.kind.kind, "error")
            self.metrics.errors.labels(webhook).inc()
            self.metrics.latency.labels(webhook).observe(time.perf_counter() - started)
            raise
        seconds = time.perf_counter() - started
        if isinstance(decision, Deny):
            result, why = "denied", reason(decision.message)
            self.metrics.denials.labels(why).inc()
        else:
            result, why = ("patched" if decision.patch and webhook == "mutate" else "allowed"), ""
        self.metrics.answered(request.operation.value, request.kind.kind, result)
        self.metrics.latency.labels(webhook).observe(seconds)
        self._log(review, webhook, decision, result, why, seconds)
        # A pod UPDATE reaches only the validating webhook: that is where a release is seen.
        if isinstance(decision, Admit) and decision.release is not None:
            release = decision.release
            log.info("break glass: %s released pod %s from queue %s by hand", release.user, release.pod,
                     release.queue,
                     extra={"fields": {"release": release.pod, "queue": release.queue, "user": release.user,
                                       "groups": sorted(request.groups), "dryRun": review.dry_run,
                                       "message": release.message}})
        return answer(review.uid, decision, patch=webhook == "mutate")

    def _log(
        self, review: Review, webhook: Webhook, decision: Decision, result: str, why: str, seconds: float
    ) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        request = review.request
        name = review.object_name
        line: dict[str, Any] = {
            "webhook": webhook,
            "operation": request.operation.value,
            "kind": request.kind.kind,
            "object": name,
            "user": request.user,
            "queue": _queue(request, decision),
            "outcome": result,
            "uid": review.uid,
            "ms": round(seconds * 1000, 3),
        }
        on_behalf = _submitter(request)
        if on_behalf and on_behalf != request.user:
            line["submitter"] = on_behalf
        if review.dry_run:
            line["dryRun"] = True
        if isinstance(decision, Deny):
            line["reason"] = why
            line["message"] = decision.message
        elif decision.warnings:
            line["warnings"] = list(decision.warnings)
        log.info("%s %s %s: %s", request.operation.value, request.kind.kind, name, result,
                 extra={"fields": line})


def _still_as_admitted(review: Review, decision: Decision) -> Decision:
    """On CREATE, after every mutating webhook: the pod must be what admission makes of it."""
    if isinstance(decision, Deny) or not decision.patch:
        return Admit() if isinstance(decision, Admit) else decision
    paths = sorted({op["path"] for op in decision.patch})
    return Deny(
        f"{review.object_name} was changed after Sluicegate admitted it (by a mutating webhook that "
        f"ran later?): {', '.join(paths)}; Sluicegate's labels, annotations and the scheduling gate "
        f"{keys.GATE} must stay as admission set them"
    )


def _template(request: Request) -> Mapping[str, Any]:
    """The object itself, or an owner's first pod template (they share queue and submitter)."""
    patterns = OWNER_TEMPLATES.get(request.kind)
    if not patterns:
        return request.object
    paths = template_paths(request.object, patterns)
    return at(request.object, paths[0]) if paths else fields.EMPTY_OBJ


def _queue(request: Request, decision: Decision) -> str:
    """The queue the object ends up in: its own label, or the one the patch writes."""
    labels = fields.string_map(fields.obj(_template(request).get("metadata")).get("labels"))
    queue = labels.get(keys.QUEUE_LABEL, "")
    if isinstance(decision, Admit):
        for op in decision.patch:
            value = op.get("value")
            if op["path"] == _QUEUE_PATH and isinstance(value, str):
                queue = value
            elif op["path"] == "/metadata/labels" and isinstance(value, Mapping):
                queue = str(value.get(keys.QUEUE_LABEL) or queue)
    return queue


def _submitter(request: Request) -> str:
    notes = fields.string_map(fields.obj(_template(request).get("metadata")).get("annotations"))
    raw = notes.get(keys.SUBMITTER_ANNOTATION)
    stamped = Submitter.from_annotation(raw) if raw else None
    return stamped.user if stamped else ""
