"""The recorder process: settings, logging, the watch, both servers, and a clean stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kube.connecting import Connection
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


async def serve(settings: Settings) -> None:
    certificate = ReloadingCertificate(Path(settings.tls_cert), Path(settings.tls_key))
    store = Store(Path(settings.database))
    metrics = RecorderMetrics()
    connection = await Connection.open(settings.connection, user_agent=USER_AGENT)
    recorder = Recorder(connection, store, metrics, flush_seconds=settings.flush_seconds,
                        retention_seconds=settings.retention_seconds)
    stopping = asyncio.Event()

    def ready() -> str | None:
        if stopping.is_set():
            return "stopping"
        return None if recorder.reconciled.is_set() else "the pods are not listed and reconciled yet"

    servers = Servers(settings.shutdown_seconds)
    servers.tls(build_app(store, metrics), settings.host, settings.port, certificate)
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
