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
from kube.reflecting import Reflector
from policy.placing import Node


def extender_app(
    cache: Cache, registry: CollectorRegistry, nodes: Reflector[Node] | None = None
) -> web.Application:
    """The scheduler extender over ``cache``: its node view (Nodes and bound pods, watched by
    reflectors that never wake the dispatch loop; ``nodes``, the Nodes reflector when the
    process has one already) and the Catalog; its metrics go to ``registry``. Build it before
    the cache starts."""
    view = ClusterNodes(cache, nodes)
    return scheduling_app(view, cache.catalog, metrics=PlacementMetrics(registry))
