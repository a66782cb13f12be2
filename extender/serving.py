"""``python -m extender``: the scheduler extender alone, for tests and debugging.

The controller process (``python -m controller``) serves the same application beside the gate
controller; this runs it without dispatch, leader election or status writes: its own cache
(Queues, the Policy, Nodes, bound pods), the extender over TLS, and ``/healthz``, ``/readyz``
(ready once that cache has listed everything) and ``/metrics`` on a plain port.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from extender.nodes import ClusterNodes
from extender.placement_metrics import PlacementMetrics
from extender.scheduling import MAX_BODY_BYTES, scheduling_app
from kube.cache import Cache
from kube.connecting import Connection
from process.certificates import ReloadingCertificate
from process.logs import Format
from process.probes import probe_app
from process.serving import Servers, run
from process.settings import Flags, ServerSettings, server_settings
from process.signals import stopped

log = logging.getLogger(__name__)

USER_AGENT: Final = "sluicegate-extender"


@dataclass(frozen=True, slots=True)
class Settings(ServerSettings):
    host: str = "127.0.0.1"
    port: int = 8444
    metrics_host: str = "127.0.0.1"
    log_format: Format = "text"
    max_body_bytes: int = MAX_BODY_BYTES


def parse(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    d = Settings()
    flags = Flags("python -m extender", __doc__ or "", environ)
    flags.server("the scheduler extender", d, drained="serving", awaited="requests in flight")
    flags.add("max-body-bytes", d.max_body_bytes, "larger request bodies are refused", int)
    args = flags.parse(argv)
    return Settings(**server_settings(args), max_body_bytes=args.max_body_bytes)


async def serve(settings: Settings) -> None:
    certificate = ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
    connection = await Connection.open(settings.connection, user_agent=USER_AGENT)
    cache = Cache(connection)
    nodes = ClusterNodes(cache)

    stopping = asyncio.Event()

    def ready() -> str | None:
        if stopping.is_set():
            return "shutting down"
        return None if nodes.synced else "the cache has not listed nodes, pods, Queues and the Policy yet"

    metrics = PlacementMetrics()
    servers = Servers(settings.shutdown_seconds)
    servers.tls(scheduling_app(nodes, cache.catalog, metrics=metrics, max_body_bytes=settings.max_body_bytes),
                settings.host, settings.port, certificate)
    servers.plain(probe_app(ready, metrics.registry), settings.metrics_host, settings.metrics_port)
    cache.start()
    try:
        await servers.start(settings.cert_reload_seconds)
        log.info("serving the scheduler extender on https://%s:%d (/filter, /prioritize); probes on "
                 "http://%s:%d; API server: %s", settings.host, settings.port, settings.metrics_host,
                 settings.metrics_port, settings.connection.describe())
        log.info("%s received: draining for %.1fs", await stopped(), settings.drain_seconds)
        stopping.set()
        await asyncio.sleep(settings.drain_seconds)
    finally:
        await servers.stop()
        await cache.stop()
        await connection.close()


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse(argv)
    return run(lambda: serve(settings), settings.log_level, settings.log_format)
