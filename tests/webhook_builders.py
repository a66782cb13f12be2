"""Helpers for webhook tests: a fixed source of admin objects, AdmissionReview bodies posted to
an app in process, and an app served for real (TLS, a loopback port) from a thread, for tests
that speak plain HTTP."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from policy.catalog import Catalog
from policy.model import Namespace
from policy.reviews import Kind

CONTROLLER = "system:serviceaccount:sluicegate-system:sluicegate-controller"


@dataclass
class FixedSource:
    """What admission reads, held still: the catalog and namespaces given."""

    fixed_catalog: Catalog
    namespaces: Mapping[str, Namespace] = field(default_factory=dict)
    synced: bool = True

    def catalog(self) -> Catalog:
        return self.fixed_catalog

    def namespace(self, name: str) -> Namespace | None:
        return self.namespaces.get(name)

    async def current_namespace(self, name: str) -> Namespace:
        return self.namespaces.get(name) or Namespace(name)


def review(
    obj: dict[str, Any] | None,
    *,
    kind: Kind,
    operation: str = "CREATE",
    user: str = "alice",
    groups: tuple[str, ...] = (),
    namespace: str = "vision-ml",
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it."""
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
        "resource": {"group": kind.group, "version": kind.version, "resource": kind.kind.lower() + "s"},
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": user, "groups": list(groups)},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


async def post(client: TestClient[Any, Any], path: str, doc: Any) -> dict[str, Any]:
    """The response of an AdmissionReview posted to an in-process app; fails on any status but 200."""
    response = await client.post(path, data=body(doc))
    assert response.status == 200, await response.text()
    answer: dict[str, Any] = (await response.json())["response"]
    return answer


class ServedApp:
    """An aiohttp app on 127.0.0.1 (a free port), served by its own loop in a thread."""

    def __init__(self, app: web.Application, ssl_context: ssl.SSLContext | None = None) -> None:
        self.app = app
        self.ssl_context = ssl_context
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._runner = web.AppRunner(app, access_log=None)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ServedApp:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)
        return self

    async def _start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl_context)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()
