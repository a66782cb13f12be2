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
  file in that directory, once its port is open), until SIGTERM.

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
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry
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


class WorkerExited(Exception):
    """A worker ended while the supervisor was serving."""


def ready_file(worker: int) -> Path | None:
    """Where worker ``worker`` says it serves, when it runs under a supervisor."""
    directory = os.environ.get(METRICS_DIRECTORY)
    return Path(directory) / f"ready-{worker}" if directory else None


async def orphaned() -> None:
    """Return once this process's parent is gone (it was killed outright)."""
    parent = os.getppid()
    while os.getppid() == parent:
        await asyncio.sleep(ORPHAN_POLL_SECONDS)


def worker_argv(argv: Sequence[str], worker: int, connections: int) -> list[str]:
    """The supervisor's own flags, then the worker's number and its share of connections (the
    last of a repeated flag wins)."""
    return [*argv, "--worker", str(worker), "--max-connections", str(connections)]


async def supervise(settings: Settings, argv: Sequence[str], count: int, user_agent: str) -> None:
    # A pair that does not load fails here, at once, as a single process fails, not in N workers.
    ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
    directory = Path(tempfile.mkdtemp(prefix="sluicegate-webhook-"))
    environment = {**os.environ, METRICS_DIRECTORY: str(directory)}
    share = max(1, settings.max_connections // count)
    connection = await Connection.open(settings.connection, user_agent=user_agent)
    cache = Cache(connection)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    catalogs.register(registry, cache.catalog, lambda: len(cache.policies) > 0)
    stopping = asyncio.Event()
    workers: list[asyncio.subprocess.Process] = []

    def ready() -> str | None:
        if stopping.is_set():
            return "shutting down"
        if not cache.synced:
            return "the cache has not listed Queues, Teams, Presets, the Policy and Namespaces yet"
        waiting = [str(i) for i in range(1, count + 1) if not (directory / f"ready-{i}").exists()]
        return f"admission workers {', '.join(waiting)} do not serve yet" if waiting else None

    servers = Servers(settings.shutdown_seconds)
    servers.plain(probe_app(ready, registry), settings.metrics_host, settings.metrics_port)
    cache.start()
    try:
        for i in range(1, count + 1):
            workers.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "webhook", *worker_argv(argv, i, share), env=environment))
        await servers.start(settings.cert_reload_seconds)
        log.info("supervising %d admission workers on port %d (%d connections each); probes and "
                 "metrics on http://%s:%d", count, settings.port, share, settings.metrics_host,
                 settings.metrics_port)
        signalled = asyncio.create_task(stopped(), name="signal")
        exits = [asyncio.create_task(w.wait(), name=f"worker {i}") for i, w in enumerate(workers, 1)]
        done, _ = await asyncio.wait([signalled, *exits], return_when=asyncio.FIRST_COMPLETED)
        if signalled not in done:
            signalled.cancel()
            ended = next(i for i, task in enumerate(exits, 1) if task in done)
            raise WorkerExited(f"admission worker {ended} exited with status {workers[ended - 1].returncode}")
        log.info("%s received: stopping %d admission workers", signalled.result(), count)
        stopping.set()
        await _stop(workers, settings.drain_seconds + settings.shutdown_seconds + 5.0)
    finally:
        stopping.set()
        await _stop(workers, 0.0)
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
