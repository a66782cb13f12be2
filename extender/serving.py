"""The controller process: settings, logging, the cache, leader election, the dispatch loop,
the servers, and a drained stop.

Every replica keeps the cache warm and serves probes, metrics and the scheduler extender; only
the holder of the Lease dispatches and writes. On SIGTERM a replica turns unready, stops
deciding, lets the gate removals in flight finish, and releases the Lease so that a standby
takes over at its next try instead of after the lease duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from extender.application import extender_app, operations_app
from extender.controlling import GateController
from extender.managed import FIELD_SELECTOR, LABEL_SELECTOR, managed_pod
from extender.metrics import ControllerMetrics
from extender.settings import Settings, parse
from kube.cache import Cache
from kube.connecting import Connection, KubeError
from kube.leasing import Elector
from kube.resources import PODS
from process import catalogs, logs
from process.signals import stopped
from webhook.certificates import ReloadingCertificate

log = logging.getLogger(__name__)

USER_AGENT: Final = "sluicegate-controller"


async def _announce_sync(cache: Cache, pods: int) -> None:
    await cache.wait_synced()
    log.info("cache synced: %d managed pods, %d queues, %d teams; ready",
             len(cache.reflectors[pods]), len(cache.queues), len(cache.teams))


async def serve(settings: Settings) -> None:
    connection = await Connection.open(settings.connection, user_agent=USER_AGENT)
    cache = Cache(connection)
    # Quiet: a pod change kicks a cycle through the controller's own filter, not every change.
    pods = cache.watch(PODS, managed_pod, label_selector=LABEL_SELECTOR, field_selector=FIELD_SELECTOR,
                       quiet=True)
    metrics = ControllerMetrics()
    catalogs.register(metrics.registry, cache.catalog, lambda: len(cache.policies) > 0)
    elector = Elector(connection, settings.lease)
    controller = GateController(settings, connection, pods, cache.catalog, elector, metrics,
                                policy_exists=lambda: len(cache.policies) > 0,
                                belongs=lambda ns, team: _team_of(cache, ns) == team)
    elector.on_change(controller.leadership_changed)
    pods.add_listener(controller.pod_changed)
    cache.on_change(controller.queue.kick)  # a Queue, Team, the Policy or a Namespace changed
    stopping = asyncio.Event()
    runners = [web.AppRunner(operations_app(cache, metrics.registry, stopping), access_log=None,
                             shutdown_timeout=settings.shutdown_seconds)]
    scheduling = extender_app(settings, cache, metrics.registry) if settings.extender else None
    certificate = None
    if scheduling is not None:
        certificate = ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
        runners.append(web.AppRunner(scheduling, access_log=None, shutdown_timeout=settings.shutdown_seconds))
    cache.start()
    dispatching = asyncio.create_task(_after_sync(cache, controller.run), name="dispatch")
    lasting = [  # tasks that run until the process stops
        dispatching,
        asyncio.create_task(_after_sync(cache, elector.run), name="leader election"),
        asyncio.create_task(controller.reporter.run(), name="status"),
    ]
    if certificate is not None:
        reload = certificate.watch(settings.cert_reload_seconds)
        lasting.append(asyncio.create_task(reload, name="certificate"))
    tasks = [*lasting, asyncio.create_task(_announce_sync(cache, cache.reflectors.index(pods)), name="sync")]
    try:
        for runner in runners:
            await runner.setup()
        await web.TCPSite(runners[0], settings.metrics_host, settings.metrics_port).start()
        if certificate is not None:
            site = web.TCPSite(runners[1], settings.host, settings.port, ssl_context=certificate.context)
            await site.start()
            log.info("serving the scheduler extender on https://%s:%d", settings.host, settings.port)
        else:
            log.info("the scheduler extender is off (--no-extender): running the gate controller alone")
        log.info("probes and metrics on http://%s:%d; lease %s/%s as %s; API server: %s",
                 settings.metrics_host, settings.metrics_port, settings.lease.namespace, settings.lease.name,
                 settings.lease.identity, settings.connection.describe())
        signal = await _until_stopped(lasting)
        log.info("%s received: stopping dispatch, draining for %.1fs", signal, settings.drain_seconds)
        stopping.set()
        dispatching.cancel()  # no new cycles
        await controller.stop()
        await elector.release()
        await asyncio.sleep(settings.drain_seconds)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for runner in runners:
            await runner.cleanup()
        await cache.stop()
        await connection.close()
        log.info("stopped")


async def _after_sync(cache: Cache, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``work()`` once the cache has listed everything: neither campaigning for
    the lead nor deciding makes sense from a cache that is still empty."""
    await cache.wait_synced()
    await work()


async def _until_stopped(tasks: list[asyncio.Task[None]]) -> str:
    """The stop signal's name; a task that ends by itself (it should not) stops the process."""
    signal = asyncio.create_task(stopped())
    done, _ = await asyncio.wait([signal, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if signal in done:
        return signal.result()
    signal.cancel()
    for task in done:
        error = task.exception()
        if error is not None:
            raise error
    raise RuntimeError(f"{', '.join(t.get_name() for t in done)} ended unexpectedly")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse(argv)
    logs.setup(settings.log_level, settings.log_format)
    try:
        asyncio.run(serve(settings))
    except (KubeError, OSError, ssl.SSLError) as e:
        log.error("cannot run: %s", e)
        return 1
    return 0


def _team_of(cache: Cache, namespace: str) -> str | None:
    """The team a namespace is opted in to, as the cache last saw it (None: not opted in)."""
    found = cache.namespace(namespace)
    return found.team if found is not None else None
