"""Serving a process's aiohttp applications, and running the process.

``Servers`` holds a process's applications: the one the API server or kube-scheduler calls,
over TLS with a ``ReloadingCertificate`` (looked at again every ``reload_seconds`` while it
serves), optionally with a bound on its open connections (``process.connections``), and the
plain probes and metrics. They start together and stop together.
``run`` is each process's ``main``: logging set up once, the server run until it stops, and a
failure to start (the API server unreachable, a port taken, a certificate that does not load)
said in one line with exit status 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypedDict

from aiohttp import web

from kube.connecting import KubeError
from process import logs
from process.certificates import ReloadingCertificate
from process.connections import ConnectionLimit


class APIResourceListJSON(TypedDict):
    """The discovery document an aggregated API serves at its group version (the recorder's
    records, the controller's visibility API)."""

    kind: str
    apiVersion: str
    groupVersion: str
    resources: list[dict[str, object]]


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Site:
    runner: web.AppRunner
    host: str
    port: int
    certificate: ReloadingCertificate | None
    connections: int | None
    reuse_port: bool = False
    listen_fd: int | None = None


class Servers:
    def __init__(self, shutdown_seconds: float = 60.0) -> None:
        self.shutdown_seconds = shutdown_seconds
        self._sites: list[_Site] = []
        self._reloading: list[asyncio.Task[None]] = []
        self._listeners: list[asyncio.Server] = []

    def plain(self, app: web.Application, host: str, port: int) -> None:
        self._sites.append(_Site(self._runner(app), host, port, None, None))

    def tls(self, app: web.Application, host: str, port: int, certificate: ReloadingCertificate, *,
            connections: int | None = None, reuse_port: bool = False, listen_fd: int | None = None) -> None:
        """``connections``: at most that many open at once; the ones over it are closed before
        any TLS work. ``reuse_port``: several processes listen on the port (``SO_REUSEPORT``),
        and the kernel spreads new connections among them. ``listen_fd``: serve on this
        inherited listening socket instead of binding ``host:port``."""
        self._sites.append(_Site(self._runner(app), host, port, certificate, connections, reuse_port,
                                 listen_fd))

    def _runner(self, app: web.Application) -> web.AppRunner:
        return web.AppRunner(app, access_log=None, shutdown_timeout=self.shutdown_seconds)

    async def start(self, reload_seconds: float, *, tls_after: Awaitable[None] | None = None) -> None:
        """Serve every application. With ``tls_after``, the plain ones (probes and metrics) start
        at once and the TLS ones once it completes: a webhook whose cache has not listed yet
        answers its probes as not ready and leaves the API server's calls unconnected."""
        for site in self._sites:
            await site.runner.setup()
        for site in self._sites:
            if site.certificate is None:
                await web.TCPSite(site.runner, site.host, site.port).start()
        if tls_after is not None:
            await tls_after
        for site in self._sites:
            if site.certificate is not None:
                await self._serve_tls(site, site.certificate, reload_seconds)

    async def _serve_tls(self, site: _Site, certificate: ReloadingCertificate, reload_seconds: float) -> None:
        inherited = None
        if site.listen_fd is not None:
            inherited = socket.socket(fileno=site.listen_fd)
            inherited.setblocking(False)
        if site.connections is not None:
            handler = site.runner.server
            assert handler is not None, "AppRunner.setup() makes the server"
            limit = ConnectionLimit(handler, certificate.context, site.connections)
            loop = asyncio.get_running_loop()
            if inherited is not None:
                self._listeners.append(await loop.create_server(limit, sock=inherited))
            else:
                self._listeners.append(await loop.create_server(limit, site.host, site.port,
                                                                reuse_port=site.reuse_port or None))
        elif inherited is not None:
            await web.SockSite(site.runner, inherited, ssl_context=certificate.context).start()
        else:
            await web.TCPSite(site.runner, site.host, site.port, ssl_context=certificate.context,
                              reuse_port=site.reuse_port or None).start()
        self._reloading.append(asyncio.create_task(certificate.watch(reload_seconds),
                                                   name=f"certificate {certificate.cert}"))

    async def stop(self) -> None:
        """Stop looking for new certificates, and let each server finish its requests in flight
        (up to ``shutdown_seconds``)."""
        for task in self._reloading:
            task.cancel()
        for task in self._reloading:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for listener in self._listeners:
            listener.close()
        for site in self._sites:
            await site.runner.cleanup()


def run(serve: Callable[[], Coroutine[Any, Any, None]], log_level: str, log_format: logs.Format,
        failures: tuple[type[Exception], ...] = ()) -> int:
    """Set up logging, run ``serve()`` until it returns; the process's exit status. ``failures``:
    the process's own errors that end it like a failure to start (said in one line, status 1)."""
    logs.setup(log_level, log_format)
    caught: tuple[type[Exception], ...] = (KubeError, OSError, ssl.SSLError, *failures)
    try:
        asyncio.run(serve())
    except caught as e:
        log.error("cannot serve: %s", e)
        return 1
    return 0
