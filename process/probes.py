"""The plain-HTTP operations server of a process: ``/healthz``, ``/readyz`` and ``/metrics``.

It listens on its own port (8080 in the cluster), apart from the TLS port the API server
calls, so kubelet probes and Prometheus need no certificates.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Readiness = Callable[[], str | None]
"""Returns None when ready, else why not (shown in the /readyz answer)."""


def _always() -> str | None:
    return None


def probe_routes(
    ready: Readiness, registry: CollectorRegistry, healthy: Readiness = _always
) -> list[web.RouteDef]:
    async def healthz(_: web.Request) -> web.Response:
        why = healthy()
        if why is None:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"unhealthy: {why}\n")

    async def readyz(_: web.Request) -> web.Response:
        why = ready()
        if why is None:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"not ready: {why}\n")

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return [
        web.get("/healthz", healthz),
        web.get("/readyz", readyz),
        web.get("/metrics", metrics),
    ]


def probe_app(ready: Readiness, registry: CollectorRegistry, healthy: Readiness = _always) -> web.Application:
    """``healthy``: None while the process is alive and well, else why not (a 503 on /healthz,
    so the kubelet restarts the container)."""
    app = web.Application()
    app.add_routes(probe_routes(ready, registry, healthy))
    return app
