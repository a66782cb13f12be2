"""The recorder process: settings, logging, the watch, both servers, and a clean stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kube.authenticating import FrontProxy, front_proxy
from kube.connecting import Connection
from process.callers import Reviews
from process.certificates import ReloadingCertificate
from process.serving import Servers, run
from process.signals import stopped
from recorder.application import build_app, operations_app
from recorder.metrics import RecorderMetrics
from recorder.recording import Recorder
from recorder.settings import Settings, parse
from recorder.store import Store, StoreError

log = logging.getLogger(__name__)


class RecorderStopped(Exception):
    """The watch or the writer ended by itself."""

USER_AGENT: Final = "sluicegate-recorder"


async def _certificate(
    settings: Settings, connection: Connection
) -> tuple[ReloadingCertificate, FrontProxy | None]:
    """The serving certificate, verifying the client certificate of the API server's front proxy
    (the CA it publishes), and that front proxy; None when the API server has none."""
    proxy = await front_proxy(connection)
    if proxy is None:
        log.warning("the API server publishes no front-proxy CA (no requestheader-client-ca-file in "
                    "kube-system/extension-apiserver-authentication): only bearer tokens are accepted, "
                    "and reading through the API server (records.sluicegate.dev) is refused")
    certificate = ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key),
                                       proxy.ca if proxy is not None else None)
    return certificate, proxy


async def serve(settings: Settings) -> None:
    store = Store(Path(settings.database))
    connection = await Connection.open(settings.connection, user_agent=USER_AGENT)
    try:
        certificate, proxy = await _certificate(settings, connection)
    except BaseException:
        store.close()
        await connection.close()
        raise
    metrics = RecorderMetrics()
    recorder = Recorder(connection, store, metrics, flush_seconds=settings.flush_seconds,
                        retention_seconds=settings.retention_seconds)
    stopping = asyncio.Event()

    def ready() -> str | None:
        if stopping.is_set():
            return "stopping"
        return None if recorder.reconciled.is_set() else "the pods are not listed and reconciled yet"

    servers = Servers(settings.shutdown_seconds)
    records = build_app(store, metrics, Reviews(connection), front_proxy=proxy, namespace=settings.namespace)
    # Bounded like the webhook's: a flood of connections must not take the recorder, and with
    # it the records API that every namespace's deletion waits on, out of memory.
    servers.tls(records, settings.host, settings.port, certificate, connections=settings.max_connections,
                listen_fd=settings.listen_fd)
    servers.plain(operations_app(ready, metrics), settings.metrics_host, settings.metrics_port)
    recording = asyncio.create_task(recorder.run(), name="recorder")
    try:
        await servers.start(settings.cert_reload_seconds)
        log.info("recording into %s; serving records on https://%s:%d/records; probes and metrics on "
                 "http://%s:%d; API server: %s", settings.database, settings.host, settings.port,
                 settings.metrics_host, settings.metrics_port, settings.connection.describe())
        signal = asyncio.create_task(stopped(), name="stop signal")
        done, _ = await asyncio.wait([signal, recording], return_when=asyncio.FIRST_COMPLETED)
        stopping.set()
        if signal not in done:  # the recorder itself ended: a fault, the process must not linger
            signal.cancel()
            recording.result()  # raises what ended it
            raise RecorderStopped("the recorder stopped on its own")
        log.info("%s received: stopping", signal.result())
    finally:
        recording.cancel()
        await asyncio.gather(recording, return_exceptions=True)
        await servers.stop()
        store.close()
        await connection.close()
        log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse(argv)
    return run(lambda: serve(settings), settings.log_level, settings.log_format,
               failures=(StoreError, RecorderStopped))
