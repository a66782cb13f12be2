"""The controller process's operations application: ``/healthz``, ``/readyz`` (ready once the
cache has listed everything it watches, on the leader and on a standby alike: both serve the
scheduler extender) and ``/metrics``, on the plain port."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CollectorRegistry

from kube.cache import Cache
from process.probes import Readiness, probe_app


def readiness(cache: Cache, stopping: asyncio.Event) -> Readiness:
    def ready() -> str | None:
        if stopping.is_set():
            return "shutting down"
        if not cache.synced:
            waiting = [str(r.resource) for r in cache.reflectors if not r.synced.is_set()]
            return f"the cache has not listed {', '.join(waiting)} yet"
        return None

    return ready


def operations_app(cache: Cache, registry: CollectorRegistry, stopping: asyncio.Event) -> web.Application:
    return probe_app(readiness(cache, stopping), registry)
