"""The recorder's HTTP API: read-only run records, served as the aggregated API
``records.sluicegate.dev/v1alpha1`` (the CLI reads them through the API server, which
authenticates the user and proxies as its front proxy) and to bearer tokens.

``GET /apis/records.sluicegate.dev/v1alpha1/namespaces/<its namespace>/records[?since=<RFC 3339>]``
(and the same at ``GET /records``, for a caller with a bearer token) answers a ``RecordList``:
the workloads still waiting or running, or that ended at or after ``since`` (all when absent),
each one line of the trace schema (docs/records.md); ``now`` (the recorder's clock: the end of
the period it knows) and ``lost`` (pods found deleted after a restart, since ``since``; their
records are among the items, phase Deleted).

Every request but discovery (``GET /apis/records.sluicegate.dev/v1alpha1``, the resource list
the API server's aggregation layer reads) must come from a caller Kubernetes authenticates and
allows ``list`` on ``records.records.sluicegate.dev`` in the recorder's namespace
(``process.callers``); the Role ``sluicegate-records-reader`` grants it. Errors are JSON
``{"error": ...}`` with a 4xx/5xx status, made in one middleware (refusals in the guard).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypedDict

from aiohttp import web
from aiohttp.typedefs import Middleware

from kube.authenticating import FrontProxy
from kube.authorizing import Access
from kube.resources import RECORDS
from process.callers import IDENTITY, Refused, Reviewer, guard
from process.probes import Readiness, probe_app
from process.serving import APIResourceListJSON
from recorder.lives import workloads
from recorder.metrics import RecorderMetrics
from recorder.store import Store, StoreError
from records.trace import RecordJSON, format_time, parse_time, record_json

log = logging.getLogger(__name__)

KIND: Final = "RecordList"
NAMESPACE: Final = "sluicegate-system"
GROUP_VERSION: Final = f"{RECORDS.group}/{RECORDS.version}"
DISCOVERY: Final = f"/apis/{GROUP_VERSION}"


class RecordListJSON(TypedDict):
    kind: str
    now: str
    lost: int
    items: list[RecordJSON]


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _errors(metrics: RecorderMetrics) -> Middleware:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as e:
            metrics.requests.labels("invalid" if e.status < 500 else "error").inc()
            return web.json_response({"error": e.text or e.reason}, status=e.status)
        except StoreError as e:
            metrics.requests.labels("error").inc()
            log.error("cannot read the records: %s", e)
            return web.json_response({"error": f"cannot read the records: {e}"}, status=503)
        except Exception:
            metrics.requests.labels("error").inc()
            log.exception("reading the records failed")
            return web.json_response({"error": "internal error"}, status=500)
        metrics.requests.labels("ok").inc()
        return response

    return middleware


# The answer is a RecordList of trace lines, not Kubernetes objects, and only in one namespace,
# so discovery offers no verbs: generic clients (kubectl get, tools that list every listable
# resource) leave it alone. RBAC still governs the `list` the API server sees on a read.
RESOURCES: Final = APIResourceListJSON(
    kind="APIResourceList", apiVersion="v1", groupVersion=GROUP_VERSION,
    resources=[{"name": RECORDS.plural, "singularName": "record", "namespaced": True,
                "kind": RECORDS.kind, "verbs": []}],
)


def build_app(
    store: Store,
    metrics: RecorderMetrics,
    reviewer: Reviewer,
    *,
    front_proxy: FrontProxy | None = None,
    namespace: str = NAMESPACE,
    clock: Callable[[], float] = time.time,
) -> web.Application:
    """The records API; ``reviewer`` answers who a bearer token is and what a caller may do
    (``process.callers.Reviews`` in the process); ``front_proxy``: the API server's, whose
    certificate the TLS server verifies (None: bearer tokens only)."""
    here = RECORDS.path(namespace=namespace)

    def needs(request: web.Request) -> Access | None:
        if request.match_info.route.name not in ("records", "records-here"):
            return None  # an unknown path: authenticated callers learn it is not found
        return Access("list", RECORDS.plural, RECORDS.group,
                      namespace=request.match_info.get("namespace", namespace))

    def refused(refusal: Refused) -> None:
        metrics.requests.labels("refused").inc()

    async def discovery(_: web.Request) -> web.Response:
        return web.json_response(RESOURCES)

    async def records(request: web.Request) -> web.Response:
        if request.match_info.get("namespace", namespace) != namespace:
            raise web.HTTPNotFound(text=f"the records are served in namespace {namespace} only: {here}")
        raw = request.query.get("since")
        try:
            since = parse_time(raw) if raw else None
        except ValueError as e:
            raise web.HTTPBadRequest(text=f"since: {e}") from e
        now = clock()
        lives = await asyncio.to_thread(store.lives, since)
        lost = await asyncio.to_thread(store.losses, since)
        body: RecordListJSON = {
            "kind": KIND,
            "now": format_time(now),
            "lost": lost,
            "items": [record_json(r) for r in workloads(lives)],
        }
        caller = request[IDENTITY]
        log.info("served %d records to %s (%s)", len(body["items"]), caller.user, caller.via)
        return web.json_response(body)

    hint = f"read the records through the API server: GET {here} (sluicegate records export)"
    checked = guard(reviewer, needs, front_proxy=front_proxy, open_paths={DISCOVERY}, hint=hint,
                    refused=refused)
    app = web.Application(middlewares=[checked, _errors(metrics)])
    app.add_routes([
        web.get(DISCOVERY, discovery),
        web.get(f"{DISCOVERY}/namespaces/{{namespace}}/{RECORDS.plural}", records, name="records-here"),
        web.get("/records", records, name="records"),
    ])
    return app


def operations_app(ready: Readiness, metrics: RecorderMetrics) -> web.Application:
    return probe_app(ready, metrics.registry)
