"""``python -m extender.scheduling``: the scheduler extender alone, for tests and debugging.

The controller process (``python -m extender``) serves the same application beside the gate
controller; this runs it without dispatch, leader election or status writes: its own cache
(Queues, the Policy, Nodes, bound pods), the extender over TLS, and ``/healthz``, ``/readyz``
(ready once that cache has listed everything) and ``/metrics`` on a plain port.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from aiohttp import web

from extender.nodes import ClusterNodes
from extender.placement_metrics import PlacementMetrics
from extender.scheduling import MAX_BODY_BYTES, scheduling_app
from kube.cache import Cache
from kube.connecting import Connection, ConnectionSettings, KubeError
from process import logs
from process.probes import probe_app
from process.signals import stopped
from webhook.certificates import ReloadingCertificate

log = logging.getLogger(__name__)

USER_AGENT: Final = "sluicegate-extender"


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8444
    tls_cert: str = "/etc/sluicegate/tls/tls.crt"
    tls_key: str = "/etc/sluicegate/tls/tls.key"
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 8080
    max_body_bytes: int = MAX_BODY_BYTES
    connection: ConnectionSettings = field(default_factory=ConnectionSettings)
    log_level: str = "INFO"
    log_format: logs.Format = "text"


def parse(argv: Sequence[str] | None = None) -> Settings:
    d = Settings()
    parser = argparse.ArgumentParser(prog="python -m extender.scheduling", description=__doc__)
    parser.add_argument("--host", default=d.host, help="address of the extender (TLS)")
    parser.add_argument("--port", type=int, default=d.port, help="port of the extender")
    parser.add_argument("--tls-cert", default=d.tls_cert, help="serving certificate (PEM)")
    parser.add_argument("--tls-key", default=d.tls_key, help="serving key (PEM)")
    parser.add_argument("--metrics-host", default=d.metrics_host, help="address of the probes")
    parser.add_argument("--metrics-port", type=int, default=d.metrics_port, help="port of the probes")
    parser.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes)
    parser.add_argument("--kubeconfig", default="", help="kubeconfig; else --server with --token-file")
    parser.add_argument("--context", default="")
    parser.add_argument("--server", default="")
    parser.add_argument("--token-file", default="")
    parser.add_argument("--certificate-authority", default="")
    parser.add_argument("--log-level", default=d.log_level)
    parser.add_argument("--log-format", default=d.log_format, choices=logs.FORMATS)
    args = parser.parse_args(argv)
    return Settings(
        host=args.host, port=args.port, tls_cert=args.tls_cert, tls_key=args.tls_key,
        metrics_host=args.metrics_host, metrics_port=args.metrics_port,
        max_body_bytes=args.max_body_bytes,
        connection=ConnectionSettings(kubeconfig=args.kubeconfig, context=args.context, server=args.server,
                                      token_file=args.token_file, ca_file=args.certificate_authority),
        log_level=args.log_level, log_format=args.log_format,
    )


async def serve(settings: Settings) -> None:
    certificate = ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
    connection = await Connection.open(settings.connection, user_agent=USER_AGENT)
    cache = Cache(connection)
    nodes = ClusterNodes(cache)

    def ready() -> str | None:
        return None if nodes.synced else "the cache has not listed nodes, pods, Queues and the Policy yet"

    metrics = PlacementMetrics()
    app = scheduling_app(nodes, cache.catalog, metrics=metrics, max_body_bytes=settings.max_body_bytes)
    extender = web.AppRunner(app, access_log=None)
    probes = web.AppRunner(probe_app(ready, metrics.registry), access_log=None)
    cache.start()
    reload = asyncio.create_task(certificate.watch(10.0), name="certificate reload")
    try:
        await extender.setup()
        await probes.setup()
        await web.TCPSite(extender, settings.host, settings.port, ssl_context=certificate.context).start()
        await web.TCPSite(probes, settings.metrics_host, settings.metrics_port).start()
        log.info("serving the scheduler extender on https://%s:%d (/filter, /prioritize); probes on "
                 "http://%s:%d; API server: %s", settings.host, settings.port, settings.metrics_host,
                 settings.metrics_port, settings.connection.describe())
        log.info("%s received: stopping", await stopped())
    finally:
        reload.cancel()
        await extender.cleanup()
        await probes.cleanup()
        await cache.stop()
        await connection.close()


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse(argv)
    logs.setup(settings.log_level, settings.log_format)
    try:
        asyncio.run(serve(settings))
    except (KubeError, OSError, ssl.SSLError) as e:
        log.error("cannot serve: %s", e)
        return 1
    return 0
