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


def probe_routes(ready: Readiness, registry: CollectorRegistry) -> list[web.RouteDef]:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

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


def probe_app(ready: Readiness, registry: CollectorRegistry) -> web.Application:
    app = web.Application()
    app.add_routes(probe_routes(ready, registry))
    return app
