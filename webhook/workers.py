"""Admission on every core: worker processes that share the admission port.

One Python process answers reviews on one core. With ``--workers`` N > 1 (by default one per CPU
of the container's CPU limit, ``process.cpus.cpu_limit``) the process started becomes a
supervisor: it starts N workers, ``python -m webhook`` again with the same flags and
``--worker i``, each of which serves admission on the same port with ``SO_REUSEPORT`` (the
kernel spreads new connections among them) and a share of ``--max-connections``. Each worker
keeps its own cache, as a replica does. Sized from the CPUs, at most ``MOST_BY_DEFAULT``.

The supervisor serves ``/healthz``, ``/readyz`` and ``/metrics`` on the plain port:

* ``/metrics`` adds up the workers' admission series through prometheus-client's multiprocess
  mode (each worker writes its counters and histograms to files in a directory the supervisor
  made, named by ``PROMETHEUS_MULTIPROC_DIR`` in the workers' environment), beside the catalog's
  health from the supervisor's own cache;
* ``/readyz`` is ready once its cache has listed and every worker serves (a worker says so with a
  file in that directory, once its port is open), until SIGTERM;
* ``/healthz`` fails when a worker has stayed silent for three times ``--worker-timeout-seconds``:
  its replacement did not help, and the kubelet restarts the container.

A worker proves it still answers with a heartbeat: its event loop touches its file every
``HEARTBEAT_SECONDS``. A worker whose file is older than ``--worker-timeout-seconds`` (stopped,
its loop blocked) takes new connections off the shared port and answers none of them: the
supervisor reports not ready, kills it (SIGKILL, which closes its sockets, so the kernel sends
new connections to the others) and starts another with the same number, counted by
``sluicegate_webhook_workers_replaced_total``.

SIGTERM is passed on to every worker (each drains as a single process does) and awaited; a
worker that exits on its own stops the others and the supervisor with status 1, so the
container is restarted whole. A worker whose supervisor is gone (killed outright) stops too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.multiprocess import MultiProcessCollector

from kube.cache import Cache
from kube.connecting import Connection
from process import catalogs
from process.certificates import ReloadingCertificate
from process.probes import probe_app
from process.serving import Servers
from process.signals import stopped
from webhook.settings import Settings

log = logging.getLogger(__name__)

METRICS_DIRECTORY: Final = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's own variable: set, its counters and histograms live in files there."""
ORPHAN_POLL_SECONDS: Final = 1.0
MOST_BY_DEFAULT: Final = 8
"""Workers sized from the CPUs stop here: a container with no CPU limit on a large node would
otherwise start dozens, each with a cache, inside one memory limit."""
HEADER: Final = "Sluicegate-Worker"
"""Each answer of a worker names it, so which worker answered can be seen from outside."""
HEARTBEAT_SECONDS: Final = 1.0
"""How often a worker touches its file, and the supervisor looks at them."""
UNHEALTHY_TIMEOUTS: Final = 3
"""A worker silent this many timeouts has outlived its replacement: /healthz fails."""


class WorkerExited(Exception):
    """A worker ended while the supervisor was serving."""


def ready_file(worker: int) -> Path | None:
    """Where worker ``worker`` says it serves, when it runs under a supervisor."""
    directory = os.environ.get(METRICS_DIRECTORY)
    return Path(directory) / f"ready-{worker}" if directory else None


async def beat(path: Path) -> None:
    """Touch ``path`` every ``HEARTBEAT_SECONDS``, for as long as this worker's loop runs."""
    while True:
        path.touch()
        await asyncio.sleep(HEARTBEAT_SECONDS)


def silence(path: Path, now: float) -> float | None:
    """How long since the worker of ``path`` last beat; None before it first said it serves."""
    try:
        return max(0.0, now - path.stat().st_mtime)
    except FileNotFoundError:
        return None


async def orphaned() -> None:
    """Return once this process's parent is gone (it was killed outright)."""
    parent = os.getppid()
    while os.getppid() == parent:
        await asyncio.sleep(ORPHAN_POLL_SECONDS)


def worker_argv(argv: Sequence[str], worker: int, connections: int) -> list[str]:
    """The supervisor's own flags, then the worker's number and its share of connections (the
    last of a repeated flag wins)."""
    return [*argv, "--worker", str(worker), "--max-connections", str(connections)]


class Workers:
    """The supervisor's workers: each started, watched by its heartbeat, and replaced when silent."""

    def __init__(self, settings: Settings, argv: Sequence[str], count: int, directory: Path,
                 replaced: Counter, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.argv = list(argv)
        self.count = count
        self.share = max(1, settings.max_connections // count)
        self.directory = directory
        self.environment = {**os.environ, METRICS_DIRECTORY: str(directory)}
        self.replaced = replaced
        self.clock = clock
        self.running: dict[int, asyncio.subprocess.Process] = {}

    def file(self, worker: int) -> Path:
        return self.directory / f"ready-{worker}"

    def waiting(self) -> str | None:
        """Why the workers do not all serve now (None: they do)."""
        now, timeout = self.clock(), self.settings.worker_timeout_seconds
        starting, silent = [], []
        for i in range(1, self.count + 1):
            quiet = silence(self.file(i), now)
            if quiet is None:
                starting.append(str(i))
            elif quiet > timeout:
                silent.append(f"{i} ({quiet:.0f}s)")
        why = []
        if starting:
            why.append(f"admission workers {', '.join(starting)} do not serve yet")
        if silent:
            why.append(f"admission workers {', '.join(silent)} have stopped answering: replacing them")
        return "; ".join(why) or None

    def unhealthy(self) -> str | None:
        """Why the container must be restarted: a worker silent long after its replacement."""
        now, most = self.clock(), UNHEALTHY_TIMEOUTS * self.settings.worker_timeout_seconds
        for i in range(1, self.count + 1):
            quiet = silence(self.file(i), now)
            if quiet is not None and quiet > most:
                return f"admission worker {i} has not answered for {quiet:.0f}s"
        return None

    async def _start(self, worker: int) -> asyncio.subprocess.Process:
        self.file(worker).unlink(missing_ok=True)
        argv = worker_argv(self.argv, worker, self.share)
        process = await asyncio.create_subprocess_exec(sys.executable, "-m", "webhook", *argv,
                                                       env=self.environment)
        self.running[worker] = process
        return process

    async def keep(self, worker: int) -> None:
        """Run worker ``worker``, replacing it whenever it falls silent; raise ``WorkerExited``
        when it exits on its own."""
        process = await self._start(worker)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(HEARTBEAT_SECONDS):
                    await process.wait()
            if process.returncode is not None:
                raise WorkerExited(f"admission worker {worker} exited with status {process.returncode}")
            quiet = silence(self.file(worker), self.clock())
            if quiet is None or quiet <= self.settings.worker_timeout_seconds:
                continue
            log.error("admission worker %d (pid %d) has not answered for %.1fs: killing it and starting "
                      "another", worker, process.pid, quiet)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            self.replaced.inc()
            process = await self._start(worker)


async def supervise(settings: Settings, argv: Sequence[str], count: int, user_agent: str) -> None:
    # A pair that does not load fails here, at once, as a single process fails, not in N workers.
    ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
    directory = Path(tempfile.mkdtemp(prefix="sluicegate-webhook-"))
    connection = await Connection.open(settings.connection, user_agent=user_agent)
    cache = Cache(connection)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    catalogs.register(registry, cache.catalog, lambda: len(cache.policies) > 0)
    replaced = Counter("sluicegate_webhook_workers_replaced",
                       "Admission workers the supervisor killed and started again because their "
                       "heartbeat stopped (stopped, or their event loop blocked)", registry=registry)
    workers = Workers(settings, argv, count, directory, replaced)
    stopping = asyncio.Event()

    def ready() -> str | None:
        if stopping.is_set():
            return "shutting down"
        if not cache.synced:
            return "the cache has not listed Queues, Teams, Presets, the Policy and Namespaces yet"
        return workers.waiting()

    servers = Servers(settings.shutdown_seconds)
    servers.plain(probe_app(ready, registry, workers.unhealthy), settings.metrics_host, settings.metrics_port)
    cache.start()
    keepers: list[asyncio.Task[None]] = []
    try:
        keepers = [asyncio.create_task(workers.keep(i), name=f"worker {i}") for i in range(1, count + 1)]
        await servers.start(settings.cert_reload_seconds)
        log.info("supervising %d admission workers on port %d (%d connections each); probes and "
                 "metrics on http://%s:%d", count, settings.port, workers.share, settings.metrics_host,
                 settings.metrics_port)
        signalled = asyncio.create_task(stopped(), name="signal")
        done, _ = await asyncio.wait([signalled, *keepers], return_when=asyncio.FIRST_COMPLETED)
        if signalled not in done:
            signalled.cancel()
            next(task for task in keepers if task in done).result()  # raises WorkerExited
        log.info("%s received: stopping %d admission workers", signalled.result(), count)
        stopping.set()
        for task in keepers:
            task.cancel()
        await _stop(list(workers.running.values()), settings.drain_seconds + settings.shutdown_seconds + 5.0)
    finally:
        stopping.set()
        for task in keepers:
            task.cancel()
        await asyncio.gather(*keepers, return_exceptions=True)
        await _stop(list(workers.running.values()), 0.0)
        await servers.stop()
        await cache.stop()
        await connection.close()
        shutil.rmtree(directory, ignore_errors=True)
        log.info("stopped")


async def _stop(workers: Sequence[asyncio.subprocess.Process], seconds: float) -> None:
    """SIGTERM each worker still running, wait up to ``seconds`` for them, then SIGKILL."""
    running = [w for w in workers if w.returncode is None]
    for worker in running:
        with contextlib.suppress(ProcessLookupError):
            worker.send_signal(signal.SIGTERM)
    if running and seconds > 0:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await asyncio.gather(*(w.wait() for w in running))
    for worker in running:
        if worker.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.kill()
            await worker.wait()
