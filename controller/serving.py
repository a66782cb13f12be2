"""The controller process: settings, logging, the cache, leader election, the dispatch loop,
the servers, and a drained stop.

This is the process's composition root: ``gate_controller`` builds the controller's
collaborators and wires them to each other, and ``serve`` wires the controller to the cache,
the Lease and the servers. Nothing else builds them.

Every replica keeps the cache warm and serves probes, metrics, the scheduler extender and the
visibility API (``controller.visibility``, with start estimates from ``controller.estimates``
and the holds of ``controller.holds``, all off the dispatch path); only
the holder of the Lease dispatches and writes. On SIGTERM a replica turns unready, stops
deciding, lets the gate removals in flight finish, and releases the Lease so that a standby
takes over at its next try instead of after the lease duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Final

from controller.application import operations_app
from controller.assumptions import Assumptions
from controller.coalescing import Coalescer
from controller.controlling import GateController, Leadership, Parts, PodSource
from controller.describing import Describer
from controller.estimates import Estimator
from controller.explaining import Explainer
from controller.holds import Learned, RecordReader
from controller.managed import FIELD_SELECTOR, LABEL_SELECTOR, managed_pod
from controller.metrics import ControllerMetrics
from controller.pacing import Freezer
from controller.pending import GROUP_VERSION
from controller.releasing import Releaser
from controller.reporting import Reporter, Shown
from controller.settings import Settings, parse
from controller.snapshots import SnapshotBuilder
from controller.visibility import Viewer
from controller.visibility import build_app as build_visibility
from extender.application import extender_app
from extender.nodes import NodeShapes, watch_nodes
from kube.authenticating import FrontProxy, front_proxy
from kube.cache import Cache
from kube.claims import ClaimCache
from kube.connecting import Connection
from kube.leasing import Elector
from kube.resources import PODS
from policy.catalog import Catalog
from policy.fields import Obj
from policy.model import Nodes
from process import catalogs
from process.callers import Reviews
from process.certificates import ReloadingCertificate
from process.loops import LoopProbe
from process.serving import Servers, run
from process.signals import stopped

log = logging.getLogger(__name__)

USER_AGENT: Final = "sluicegate-controller"
# As the recorder's bound (recorder/settings.py): the aggregation layer keeps a few keep-alive
# connections; a flood of others must not take the controller's memory.
VISIBILITY_CONNECTIONS: Final = 128


async def _front_proxy(connection: Connection) -> FrontProxy | None:
    """The API server's front proxy, whose client certificate the visibility API verifies; None
    when the API server has none (then only bearer tokens are accepted)."""
    proxy = await front_proxy(connection)
    if proxy is None:
        log.warning("the API server publishes no front-proxy CA (no requestheader-client-ca-file in "
                    "kube-system/extension-apiserver-authentication): the visibility API accepts only "
                    "bearer tokens, and reading it through the API server is refused")
    return proxy


async def _announce_sync(cache: Cache, pods: int) -> None:
    await cache.wait_synced()
    log.info("cache synced: %d managed pods, %d queues, %d teams; ready",
             len(cache.reflectors[pods]), len(cache.queues), len(cache.teams))


def gate_controller(
    settings: Settings,
    connection: Connection,
    pods: PodSource,
    catalog: Callable[[], Catalog],
    leadership: Leadership,
    metrics: ControllerMetrics,
    *,
    shown: Shown,
    policy_exists: Callable[[], bool] = lambda: False,
    team_of: Callable[[str], str | None] | None = None,
    nodes: Callable[[], Nodes | None] = lambda: None,
    claims: Callable[[str], Callable[[str], Obj | None]] | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> GateController:
    """The gate controller and its collaborators, each built here and wired to the others:
    the one place the process is composed (tests and benchmarks build it through here too)."""

    def leading() -> bool:
        return leadership.leading

    releaser = Releaser(connection, concurrency=settings.release_concurrency,
                        give_up_seconds=settings.give_up_seconds, on_error=metrics.failed, clock=clock)
    explainer = Explainer(connection, concurrency=settings.write_concurrency, identity=leadership.identity,
                          leading=leading, on_error=metrics.failed, releases_idle=releaser.idle, wall=wall)
    assumed = Assumptions()
    parts = Parts(
        queue=Coalescer(settings.debounce_seconds, settings.longest_seconds, clock=clock),
        assumed=assumed,
        snapshots=SnapshotBuilder(assumed),
        releaser=releaser,
        explainer=explainer,
        describer=Describer(settings, explainer, releaser),
        reporter=Reporter(connection, metrics, interval=settings.status_seconds,
                          budget=settings.status_writes, leading=leading,
                          policy_exists=policy_exists, shown=shown, wall=wall),
        freezer=Freezer(),
    )
    controller = GateController(settings, connection, pods, catalog, leadership, metrics, parts,
                                team_of=team_of, nodes=nodes, claims=claims, clock=clock, wall=wall)
    releaser.on_settled(controller.settled)
    return controller


async def serve(settings: Settings) -> None:
    connection = await Connection.open(settings.connection, user_agent=USER_AGENT)
    cache = Cache(connection)
    # Quiet: a pod change kicks a cycle through the controller's own filter, not every change.
    pods = cache.watch(PODS, managed_pod, label_selector=LABEL_SELECTOR, field_selector=FIELD_SELECTOR,
                       quiet=True)
    # The Nodes, shared with the extender: dispatch releases nothing that no node could hold.
    shapes = NodeShapes(watch_nodes(cache))
    # The DRA claims: a gated pod whose claims ask for more than admission counted is not released.
    claims = ClaimCache(cache, templates=False)
    metrics = ControllerMetrics()
    catalogs.register(metrics.registry, cache.catalog, lambda: len(cache.policies) > 0)
    probe = LoopProbe()
    metrics.loop_longest_block.set_function(lambda: probe.longest)
    elector = Elector(connection, settings.lease, on_error=metrics.failed)
    controller = gate_controller(settings, connection, pods, cache.catalog, elector, metrics,
                                 policy_exists=lambda: len(cache.policies) > 0, shown=cache.status,
                                 team_of=lambda ns: _team_of(cache, ns), nodes=shapes.inventory,
                                 claims=claims.claim)
    elector.on_change(controller.leadership_changed)
    pods.add_listener(controller.pod_changed)
    cache.on_change(controller.queue.kick)  # a Queue, Team, the Policy or a Namespace changed
    shapes.on_change(controller.queue.kick)  # a node came, went or changed its shape
    claims.on_change(controller.queue.kick)  # a claim came, went or was made anew
    stopping = asyncio.Event()
    servers = Servers(settings.shutdown_seconds)
    servers.plain(operations_app(cache, metrics.registry, stopping), settings.metrics_host,
                  settings.metrics_port)
    if settings.extender:
        certificate = ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
        servers.tls(extender_app(cache, metrics.registry, shapes.nodes), settings.host, settings.port,
                    certificate, listen_fd=settings.listen_fd)
    reading: asyncio.Task[None] | None = None
    if settings.visibility:
        try:
            proxy = await _front_proxy(connection)
        except BaseException:
            await connection.close()
            raise
        estimator = None
        if settings.estimate_cpu_share > 0:
            learned = Learned()
            pods.add_listener(learned.pod_changed)
            reader = RecordReader(connection, learned, settings.records_namespace,
                                  seconds=settings.records_seconds)
            reading = asyncio.create_task(_after_sync(cache, reader.run), name="run records")
            estimator = Estimator(learned.durations, share=settings.estimate_cpu_share)
        viewer = Viewer(pods, cache.catalog, lambda ns: _team_of(cache, ns), shapes.inventory,
                        estimator=estimator, seconds=settings.visibility_seconds)
        visible = ReloadingCertificate(Path(settings.visibility_tls_cert), Path(settings.visibility_tls_key),
                                       proxy.ca if proxy is not None else None)
        servers.tls(build_visibility(viewer, Reviews(connection), front_proxy=proxy),
                    settings.visibility_host, settings.visibility_port, visible,
                    connections=VISIBILITY_CONNECTIONS, listen_fd=settings.visibility_listen_fd)
    cache.start()
    dispatching = asyncio.create_task(_after_sync(cache, controller.run), name="dispatch")
    lasting = [  # tasks that run until the process stops
        dispatching,
        asyncio.create_task(_after_sync(cache, elector.run), name="leader election"),
        asyncio.create_task(controller.reporter.run(), name="status"),
        asyncio.create_task(probe.run(), name="loop probe"),
    ]
    tasks = [*lasting, asyncio.create_task(_announce_sync(cache, cache.reflectors.index(pods)), name="sync")]
    if reading is not None:
        tasks.append(reading)
    try:
        await servers.start(settings.cert_reload_seconds)
        if settings.visibility:
            log.info("serving the visibility API (%s) on https://%s:%d", GROUP_VERSION,
                     settings.visibility_host, settings.visibility_port)
        if settings.extender:
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
        await servers.stop()
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
    return run(lambda: serve(settings), settings.log_level, settings.log_format)


def _team_of(cache: Cache, namespace: str) -> str | None:
    """The team a namespace is opted in to, as the cache last saw it (None: not opted in)."""
    found = cache.namespace(namespace)
    return found.team if found is not None else None
