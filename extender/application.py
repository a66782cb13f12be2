"""The controller process's HTTP applications, built by factories so tests build them in process.

``operations_app``: ``/healthz``, ``/readyz`` (ready once the cache has listed everything it
watches, on the leader and on a standby alike: both serve the extender) and ``/metrics``, on
the plain port. ``extender_app``: the scheduler extender's ``/filter`` and ``/prioritize``
(``extender.scheduling``), served over TLS.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CollectorRegistry

from extender.nodes import ClusterNodes
from extender.placement_metrics import PlacementMetrics
from extender.scheduling import scheduling_app
from extender.settings import Settings
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


def extender_app(settings: Settings, cache: Cache, registry: CollectorRegistry) -> web.Application:
    """The scheduler extender (``extender.scheduling``) over this process's cache: its node view
    (Nodes and bound pods, watched by reflectors that never wake the dispatch loop) and the
    Catalog; its metrics go to the process's ``registry``. Build it before the cache starts."""
    del settings
    return scheduling_app(ClusterNodes(cache), cache.catalog, metrics=PlacementMetrics(registry))
