"""The webhook process: settings, logging, the cache, both servers, and a drained stop; or, with
several workers (``webhook.workers``), the supervisor of processes that share the admission port."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from aiohttp import web

from kube.authorizing import AccessReviews
from kube.cache import Cache
from kube.claims import ClaimCache
from kube.connecting import Connection
from process import catalogs
from process.certificates import ReloadingCertificate
from process.cpus import cpu_limit
from process.serving import Servers, run
from process.signals import stopped
from webhook import workers
from webhook.application import build_app, operations_app
from webhook.claims import ClaimReader
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


async def _until_stopped(worker: int) -> str:
    """The signal that stops the process; a worker also stops once its supervisor is gone."""
    if not worker:
        return await stopped()
    signalled = asyncio.create_task(stopped())
    orphaned = asyncio.create_task(workers.orphaned())
    done, pending = await asyncio.wait([signalled, orphaned], return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return signalled.result() if signalled in done else "the supervisor's end"


def _named(app: web.Application, worker: int) -> None:
    async def name(_: web.Request, response: web.StreamResponse) -> None:
        response.headers[workers.HEADER] = str(worker)

    app.on_response_prepare.append(name)


async def serve(settings: Settings) -> None:
    """One process serving admission; with ``settings.worker``, one worker of a supervisor: no
    probes or metrics port of its own, the admission port shared."""
    worker = settings.worker
    certificate = ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
    connection = await Connection.open(settings.connection, user_agent=USER_AGENT)
    cache = Cache(connection)
    owners = JobCreators.watching(cache)
    classes = ClusterPriorityClasses.watching(cache)
    claims = ClaimCache(cache)  # the DRA claims and templates that admission counts
    metrics = AdmissionMetrics()
    stopping = asyncio.Event()
    servers = Servers(settings.shutdown_seconds)
    app = build_app(settings, cache, metrics, AccessReviews(connection), owners, classes,
                    ClaimReader(connection, claims))
    if worker:
        _named(app, worker)
    else:
        catalogs.register(metrics.registry, cache.catalog, lambda: len(cache.policies) > 0)
        servers.plain(operations_app(cache, metrics.registry, stopping), settings.metrics_host,
                      settings.metrics_port)
    servers.tls(app, settings.host, settings.port, certificate, connections=settings.max_connections,
                reuse_port=bool(worker))
    cache.start()
    announcing = asyncio.create_task(_announce_sync(cache), name="announce sync")
    beating: asyncio.Task[None] | None = None
    try:
        # Admission is served once the cache has listed: an empty catalog would refuse every queue.
        await servers.start(settings.cert_reload_seconds, tls_after=cache.wait_synced())
        ready = workers.ready_file(worker) if worker else None
        if ready is not None:  # it serves, and says so every second while its loop runs
            beating = asyncio.create_task(workers.beat(ready), name="heartbeat")
        log.info("serving admission on https://%s:%d (/mutate, /validate)%s; API server: %s",
                 settings.host, settings.port,
                 f" as worker {worker}" if worker else
                 f"; probes and metrics on http://{settings.metrics_host}:{settings.metrics_port}",
                 settings.connection.describe())
        signal = await _until_stopped(worker)
        # Unready first, so endpoints stop sending new reviews; keep answering meanwhile.
        log.info("%s received: draining for %.1fs", signal, settings.drain_seconds)
        stopping.set()
        await asyncio.sleep(settings.drain_seconds)
    finally:
        announcing.cancel()
        if beating is not None:
            beating.cancel()
        await servers.stop()
        await cache.stop()
        await connection.close()
        log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse(argv)
    count = settings.workers or min(cpu_limit(), workers.MOST_BY_DEFAULT)
    if not settings.worker and count > 1:
        flags = list(sys.argv[1:] if argv is None else argv)
        return run(lambda: workers.supervise(settings, flags, count, USER_AGENT), settings.log_level,
                   settings.log_format, failures=(workers.WorkerExited,))
    return run(lambda: serve(settings), settings.log_level, settings.log_format)
