"""The recorder's HTTP API: read-only run records, as the CLI reads them through the API
server's service proxy (``/api/v1/namespaces/<ns>/services/https:<name>:<port>/proxy/records``).

``GET /records[?since=<RFC 3339>]`` answers a ``RecordList``: the workloads still waiting or
running, or that ended at or after ``since`` (all when absent), each one line of the trace
schema (docs/records.md); ``now`` (the recorder's clock: the end of the period it knows) and
``lost`` (pods found deleted after a restart, since ``since``; their records are among the
items, phase Deleted). Errors are JSON ``{"error": ...}`` with a 4xx/5xx status, made in one
middleware.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypedDict

from aiohttp import web
from aiohttp.typedefs import Middleware

from process.probes import Readiness, probe_app
from recorder.lives import workloads
from recorder.metrics import RecorderMetrics
from recorder.store import Store, StoreError
from records.trace import RecordJSON, format_time, parse_time, record_json

log = logging.getLogger(__name__)

KIND: Final = "RecordList"


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


def build_app(
    store: Store, metrics: RecorderMetrics, clock: Callable[[], float] = time.time
) -> web.Application:
    async def records(request: web.Request) -> web.Response:
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
        return web.json_response(body)

    app = web.Application(middlewares=[_errors(metrics)])
    app.add_routes([web.get("/records", records)])
    return app


def operations_app(ready: Readiness, metrics: RecorderMetrics) -> web.Application:
    return probe_app(ready, metrics.registry)
