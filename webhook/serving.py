"""The webhook process: settings, logging, the cache, both servers, and a drained stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kube.authorizing import AccessReviews
from kube.cache import Cache
from kube.connecting import Connection
from process import catalogs
from process.certificates import ReloadingCertificate
from process.serving import Servers, run
from process.signals import stopped
from webhook.application import build_app, operations_app
from webhook.metrics import AdmissionMetrics
from webhook.owners import JobCreators
from webhook.priorityclasses import ClusterPriorityClasses
from webhook.settings import Settings, parse

log = logging.getLogger(__name__)

USER_AGENT: Final = "sluicegate-webhook"


async def _announce_sync(cache: Cache) -> None:
    await cache.wait_synced()
    log.info("cache synced: %d queues, %d teams, %d presets, %d namespaces; ready",
             len(cache.queues), len(cache.teams), len(cache.presets), len(cache.namespaces))


async def serve(settings: Settings) -> None:
    certificate = ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
    connection = await Connection.open(settings.connection, user_agent=USER_AGENT)
    cache = Cache(connection)
    owners = JobCreators.watching(cache)
    classes = ClusterPriorityClasses.watching(cache)
    metrics = AdmissionMetrics()
    catalogs.register(metrics.registry, cache.catalog, lambda: len(cache.policies) > 0)
    stopping = asyncio.Event()
    servers = Servers(settings.shutdown_seconds)
    app = build_app(settings, cache, metrics, AccessReviews(connection), owners, classes)
    servers.tls(app, settings.host, settings.port, certificate, connections=settings.max_connections)
    servers.plain(operations_app(cache, metrics.registry, stopping), settings.metrics_host,
                  settings.metrics_port)
    cache.start()
    announcing = asyncio.create_task(_announce_sync(cache), name="announce sync")
    try:
        # Admission is served once the cache has listed: an empty catalog would refuse every queue.
        await servers.start(settings.cert_reload_seconds, tls_after=cache.wait_synced())
        log.info("serving admission on https://%s:%d (/mutate, /validate); probes and metrics on "
                 "http://%s:%d; API server: %s", settings.host, settings.port, settings.metrics_host,
                 settings.metrics_port, settings.connection.describe())
        signal = await stopped()
        # Unready first, so endpoints stop sending new reviews; keep answering meanwhile.
        log.info("%s received: draining for %.1fs", signal, settings.drain_seconds)
        stopping.set()
        await asyncio.sleep(settings.drain_seconds)
    finally:
        announcing.cancel()
        await servers.stop()
        await cache.stop()
        await connection.close()
        log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse(argv)
    return run(lambda: serve(settings), settings.log_level, settings.log_format)
