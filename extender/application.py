"""The scheduler extender as an application another process mounts over its own cache.

``extender_app``: ``/filter`` and ``/prioritize`` (``extender.scheduling``), which the gate
controller's process serves over TLS beside its own work.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry

from extender.nodes import ClusterNodes
from extender.placement_metrics import PlacementMetrics
from extender.scheduling import scheduling_app
from kube.cache import Cache


def extender_app(cache: Cache, registry: CollectorRegistry) -> web.Application:
    """The scheduler extender over ``cache``: its node view (Nodes and bound pods, watched by
    reflectors that never wake the dispatch loop) and the Catalog; its metrics go to
    ``registry``. Build it before the cache starts."""
    return scheduling_app(ClusterNodes(cache), cache.catalog, metrics=PlacementMetrics(registry))
