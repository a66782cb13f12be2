"""The recorder process: settings, logging, the watch, both servers, and a clean stop."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from aiohttp import web

from kube.connecting import Connection, KubeError
from process import logs
from process.signals import stopped
from recorder.application import build_app, operations_app
from recorder.metrics import RecorderMetrics
from recorder.recording import Recorder
from recorder.settings import Settings, parse
from recorder.store import Store, StoreError
from webhook.certificates import ReloadingCertificate

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

    api = web.AppRunner(build_app(store, metrics), access_log=None,
                        shutdown_timeout=settings.shutdown_seconds)
    operations = web.AppRunner(operations_app(ready, metrics), access_log=None,
                               shutdown_timeout=settings.shutdown_seconds)
    tasks = [
        asyncio.create_task(recorder.run(), name="recorder"),
        asyncio.create_task(certificate.watch(settings.cert_reload_seconds), name="certificate reload"),
    ]
    try:
        await api.setup()
        await operations.setup()
        await web.TCPSite(api, settings.host, settings.port, ssl_context=certificate.context).start()
        await web.TCPSite(operations, settings.metrics_host, settings.metrics_port).start()
        log.info("recording into %s; serving records on https://%s:%d/records; probes and metrics on "
                 "http://%s:%d; API server: %s", settings.database, settings.host, settings.port,
                 settings.metrics_host, settings.metrics_port, settings.connection.describe())
        signal = asyncio.create_task(stopped(), name="stop signal")
        done, _ = await asyncio.wait([signal, tasks[0]], return_when=asyncio.FIRST_COMPLETED)
        stopping.set()
        if signal not in done:  # the recorder itself ended: a fault, the process must not linger
            signal.cancel()
            tasks[0].result()  # raises what ended it
            raise RecorderStopped("the recorder stopped on its own")
        log.info("%s received: stopping", signal.result())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.cleanup()
        await operations.cleanup()
        store.close()
        await connection.close()
        log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse(argv)
    logs.setup(settings.log_level, settings.log_format)
    try:
        asyncio.run(serve(settings))
    except (KubeError, StoreError, OSError, ssl.SSLError, RecorderStopped) as e:
        log.error("cannot serve: %s", e)
        return 1
    return 0
