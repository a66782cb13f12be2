"""The admission server as an aiohttp application, built by a factory so tests build it in
process: ``build_app(settings, source)`` serves ``/mutate`` and ``/validate``;
``operations_app`` serves ``/healthz``, ``/readyz`` and ``/metrics`` on the plain port.

Handlers are thin (read the body, let the ``Reviewer`` answer); every error becomes an HTTP
answer in one middleware: 400 for a malformed review, 413 for a body over the bound, 503 when
the API server could not be asked, 500 only for a fault of this server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry

from kube.connecting import KubeError
from process.probes import Readiness, probe_app
from webhook.metrics import AdmissionMetrics
from webhook.reviewing import (
    Authorizer,
    BadReview,
    ClaimSource,
    Classes,
    Owners,
    Reviewer,
    Source,
    Webhook,
    parse_review,
)
from webhook.settings import Settings

log = logging.getLogger(__name__)

REVIEWED: Final = web.RequestKey("reviewed", bool)
"""Set on a request once its body parsed as a review: the reviewer counts what becomes of it."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"status": status, "error": message}, status=status)


def _errors(metrics: AdmissionMetrics, max_body: int) -> Middleware:
    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except BadReview as e:
            metrics.answered("", "", "invalid")
            log.info("refused a malformed review from %s: %s", request.remote, e)
            return _error(400, f"malformed AdmissionReview: {e}")
        except web.HTTPRequestEntityTooLarge:
            metrics.answered("", "", "invalid")
            log.warning("refused a request body over %d bytes from %s", max_body, request.remote)
            return _error(413, f"the request body is larger than {max_body} bytes")
        except web.HTTPException:
            raise  # routing's own answers: 404, 405
        except KubeError as e:
            if REVIEWED not in request:  # a review that parsed was counted by the reviewer
                metrics.answered("", "", "error")
            log.warning("could not answer a review: %s", e)
            return _error(503, f"the API server could not be read: {e}")
        except asyncio.CancelledError:
            raise
        except Exception:
            if REVIEWED not in request:
                metrics.answered("", "", "error")
            log.exception("fault while answering %s %s", request.method, request.path)
            return _error(500, "internal error; the webhook's log has the details")

    return errors


def build_app(
    settings: Settings,
    source: Source,
    metrics: AdmissionMetrics | None = None,
    authorizer: Authorizer | None = None,
    owners: Owners | None = None,
    classes: Classes | None = None,
    claims: ClaimSource | None = None,
) -> web.Application:
    """``authorizer`` answers whether a user may release a queue by hand; without one no one may.
    ``owners`` answers who created a pod's Job; without it a Job's stamp is taken as it is.
    ``classes`` gives the cluster's PriorityClasses; without it a pod template's class is not
    judged at its owner's CREATE (each pod's own CREATE still is). ``claims`` reads the DRA
    claims a pod names; without it a pod's claims are taken as missing when the Policy maps a
    DeviceClass."""
    metrics = metrics if metrics is not None else AdmissionMetrics()
    reviewer = Reviewer(source, settings.controller, metrics, authorizer, owners, classes, claims)

    def endpoint(webhook: Webhook) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            review = parse_review(await request.read())
            request[REVIEWED] = True
            return web.json_response(await reviewer.answer_review(review, webhook))

        return handle

    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[_errors(metrics, settings.max_body_bytes)],
    )
    app.add_routes([web.post("/mutate", endpoint("mutate")), web.post("/validate", endpoint("validate"))])
    return app


def readiness(source: Source, stopping: asyncio.Event | None = None) -> Readiness:
    def ready() -> str | None:
        if stopping is not None and stopping.is_set():
            return "shutting down"
        if not source.synced:
            return ("the cache has not listed Queues, Teams, Presets, the Policy, Namespaces, Jobs "
                    "and PriorityClasses yet")
        return None

    return ready


def operations_app(
    source: Source, registry: CollectorRegistry, stopping: asyncio.Event | None = None
) -> web.Application:
    return probe_app(readiness(source, stopping), registry)
