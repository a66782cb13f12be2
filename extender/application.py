"""The controller process's HTTP applications, built by factories so tests build them in process.

``operations_app``: ``/healthz``, ``/readyz`` (ready once the cache has listed everything it
watches, on the leader and on a standby alike: both serve the extender) and ``/metrics``, on
the plain port. ``scheduling_app``: the scheduler extender's ``/filter`` and ``/prioritize``
over TLS, the sub-application of ``extender.scheduling``.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CollectorRegistry

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


def scheduling_app(settings: Settings, cache: Cache) -> web.Application | None:
    """MOUNT POINT of the scheduler extender (``extender.scheduling``, built on its own branch).

    Returns the extender's aiohttp application, which the process serves over TLS on
    ``settings.port``; None while the extender is not part of this build, in which case the
    process runs the gate controller alone and says so in its log.
    """
    del settings, cache
    return None
