"""A bound on the admission server's open connections.

Every TLS connection costs the server a 256 KiB read buffer (asyncio's SSL layer) from the
moment it is accepted, handshake or not: a client that opens thousands of connections at once
would otherwise grow the webhook by hundreds of MB and get it OOM-killed, and with
``failurePolicy: Fail`` every managed pod would then be refused. So the server listens on plain
TCP and counts: a connection within the bound is upgraded to TLS (``loop.start_tls``) and
handed to aiohttp's handler; one over the bound is closed at once, before any TLS, costing
nothing but the accept. The API server retries a refused connection on its next call; the
bound is far above what it keeps open (a few keep-alive connections per apiserver).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Final

log = logging.getLogger(__name__)

HANDSHAKE_SECONDS: Final = 10.0
"""A client that has not finished its TLS handshake by then is dropped (it holds a slot)."""


class ConnectionLimit:
    """The protocol factory for ``loop.create_server`` (without ``ssl``: TLS is ours)."""

    def __init__(
        self, handler: Callable[[], asyncio.Protocol], context: ssl.SSLContext, most: int,
        handshake_seconds: float = HANDSHAKE_SECONDS,
    ) -> None:
        self.handler = handler
        self.context = context
        self.most = most
        self.handshake_seconds = handshake_seconds
        self.open = 0
        self.refused = 0
        """Connections closed because the bound was reached."""

    def __call__(self) -> asyncio.Protocol:
        if self.open >= self.most:
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                log.warning("%d connections open, the most allowed: closing new ones (%d so far)",
                            self.open, self.refused)
            return _Refused()
        self.open += 1
        return _Counted(self)


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class _Counted(asyncio.Protocol):
    """One connection within the bound: upgrades to TLS, then passes everything to aiohttp's
    handler; frees its slot when the connection ends, however it ends."""

    def __init__(self, limit: ConnectionLimit) -> None:
        self.limit = limit
        self.handler: asyncio.Protocol | None = None
        # What arrives between the end of the handshake and start_tls returning (the client
        # may send its request at once) waits here for the handler.
        self.early: list[bytes] = []
        self.ended = False
        self.counted = True
        self.upgrade: asyncio.Task[None] | None = None

    def _free(self) -> None:
        if self.counted:
            self.counted = False
            self.limit.open -= 1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.upgrade = asyncio.get_running_loop().create_task(self._tls(transport))

    async def _tls(self, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        try:
            secured = await loop.start_tls(
                transport, self, self.limit.context, server_side=True,  # type: ignore[arg-type]
                ssl_handshake_timeout=self.limit.handshake_seconds)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError, RuntimeError):
            transport.close()
            self._free()
            return
        if secured is None:  # the connection ended during the handshake
            self._free()
            return
        handler = self.handler = self.limit.handler()
        handler.connection_made(secured)
        for data in self.early:
            handler.data_received(data)
        self.early.clear()
        if self.ended and not handler.eof_received():
            secured.close()

    def data_received(self, data: bytes) -> None:
        if self.handler is None:
            self.early.append(data)
        else:
            self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        if self.handler is None:
            self.ended = True
            return True  # keep the transport open until the handler has seen everything
        return self.handler.eof_received()

    def pause_writing(self) -> None:
        if self.handler is not None:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.handler is not None:
            self.handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._free()
        if self.handler is not None:
            self.handler.connection_lost(exc)
