"""The admission server's bound on open connections: within it every connection is served over
TLS; over it a connection is closed at once, before any TLS; a closed one frees its slot."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from certs.issuing import WebhookFiles, issue
from process.certificates import server_context
from process.connections import ConnectionLimit

Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def hello(request: web.BaseRequest) -> web.Response:
    return web.Response(text="served")


@pytest.fixture
def files(tmp_path: Path) -> WebhookFiles:
    return issue(tmp_path, hosts=["127.0.0.1"])


@asynccontextmanager
async def serving(
    files: WebhookFiles, most: int, handshake: float = 10.0
) -> AsyncIterator[tuple[ConnectionLimit, int]]:
    limit = ConnectionLimit(web.Server(hello), server_context(files.cert, files.key), most=most,
                            handshake_seconds=handshake)
    server = await asyncio.get_running_loop().create_server(limit, "127.0.0.1", 0)
    try:
        yield limit, server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def connect(port: int, ca: Path) -> Stream:
    return await asyncio.open_connection("127.0.0.1", port, ssl=ssl.create_default_context(cafile=str(ca)))


async def ask(stream: Stream) -> str:
    """One request, sent the moment the connection is up; the status line of the answer."""
    reader, writer = stream
    writer.write(b"GET / HTTP/1.1\r\nHost: webhook\r\n\r\n")
    status = await reader.readline()
    return status.decode().strip()


async def test_connections_over_the_bound_are_closed_before_tls_and_a_freed_slot_serves_again(
    files: WebhookFiles,
) -> None:
    async with asyncio.timeout(30), serving(files, most=3) as (limit, port):
        await over_the_bound(limit, port, files)


async def over_the_bound(limit: ConnectionLimit, port: int, files: WebhookFiles) -> None:
    held = [await connect(port, files.ca_cert) for _ in range(3)]

    reader, writer = await asyncio.open_connection("127.0.0.1", port)  # plain TCP: no TLS offered
    assert await reader.read() == b""  # closed at once, nothing sent
    writer.close()
    with pytest.raises((ConnectionError, ssl.SSLError, asyncio.IncompleteReadError)):
        await connect(port, files.ca_cert)

    assert [await ask(s) for s in held] == ["HTTP/1.1 200 OK"] * 3
    assert limit.refused == 2

    held[0][1].close()
    while limit.open > 2:
        await asyncio.sleep(0.01)
    assert await ask(await connect(port, files.ca_cert)) == "HTTP/1.1 200 OK"


async def test_a_client_that_never_finishes_its_handshake_loses_its_slot(files: WebhookFiles) -> None:
    # The bound applies to the client that does shake hands too: 1 s, not less, so that a busy
    # machine's pause in the middle of that handshake cannot cost it its slot.
    async with asyncio.timeout(30), serving(files, most=1, handshake=1.0) as (limit, port):
        _, silent = await asyncio.open_connection("127.0.0.1", port)  # connects, never says hello
        while limit.open:
            await asyncio.sleep(0.01)
        silent.close()
        assert await ask(await connect(port, files.ca_cert)) == "HTTP/1.1 200 OK"
