"""List, then watch: one collection followed without gaps, as client-go's reflector does.

The list (paged) gives the objects and a resourceVersion; the watch continues from it with
bookmarks, so a quiet watch still advances. A watch that ends is resumed from the last
resourceVersion seen; ``410 Gone`` (the version fell out of the server's history) means the
handler is given a fresh list (a *relist*) and the watch restarts from there. Other failures
back off and resume.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

from audit.connection import ApiError, Connection

log = logging.getLogger(__name__)

Obj = dict[str, Any]
GONE = 410
# Why these numbers: the API server ends a watch after a random time under its
# --min-request-timeout (30 min); asking for less keeps resumption exercised. Bookmarks come
# about once a minute. A page of 500 is what client-go's reflector asks for.
WATCH_SECONDS = 290
PAGE = 500
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0


class Handler(Protocol):
    def listed(self, items: list[Obj]) -> None:
        """The whole collection, at the start and after every relist."""

    def changed(self, kind: str, obj: Obj) -> None:
        """One watch event: ADDED, MODIFIED or DELETED."""


class Watch:
    """Follow one collection (``/api/v1/pods``, ``/api/v1/namespaces``...) for a handler."""

    def __init__(
        self, connection: Connection, path: str, *, selector: str | None = None, page: int = PAGE,
    ) -> None:
        self.connection = connection
        self.path = path
        self.selector = selector
        self.page = page
        self.resource_version = ""
        self.lists = 0
        self.expired = 0
        """How many times the server answered 410 Gone."""
        self.synced = asyncio.Event()
        self.last_error = ""

    @property
    def relists(self) -> int:
        """Lists after the first: every one means the watch had to start over."""
        return max(0, self.lists - 1)

    async def run(self, handler: Handler, *, since: str | None = None) -> None:
        """Follow until cancelled. ``since``: resume from a resourceVersion the handler already
        has, without a first list (if it has expired, a relist follows)."""
        if since is not None:
            self.resource_version = since
            self.lists = 1
            self.synced.set()
        backoff = BACKOFF_FIRST
        while True:
            try:
                if not self.resource_version:
                    await self._list(handler)
                await self._watch(handler)
                backoff = BACKOFF_FIRST
            except ApiError as e:
                if e.status == GONE:
                    self._expire(e.message)
                    continue
                self.last_error = str(e)
                log.warning("watch %s: %s; retrying in %.1fs", self.path, e, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
            except (aiohttp.ClientError, TimeoutError, ValueError) as e:
                self.last_error = repr(e)
                log.warning("watch %s: %r; retrying in %.1fs", self.path, e, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _expire(self, message: str) -> None:
        self.expired += 1
        log.info("watch %s: resourceVersion %s expired (%s); relisting",
                 self.path, self.resource_version, message)
        self.resource_version = ""

    def _params(self, **extra: str) -> dict[str, str]:
        params = dict(extra)
        if self.selector:
            params["labelSelector"] = self.selector
        return params

    async def _list(self, handler: Handler) -> None:
        items: list[Obj] = []
        token = ""
        while True:
            params = self._params(limit=str(self.page))
            if token:
                params["continue"] = token
            answer = await self.connection.get(self.path, **params)
            items.extend(answer.get("items") or ())
            meta: Mapping[str, str] = answer.get("metadata") or {}
            token = meta.get("continue", "")
            if not token:
                break
        self.lists += 1
        handler.listed(items)
        self.resource_version = meta.get("resourceVersion", "")
        self.synced.set()

    async def _watch(self, handler: Handler) -> None:
        params = self._params(
            watch="1", resourceVersion=self.resource_version, allowWatchBookmarks="true",
            timeoutSeconds=str(WATCH_SECONDS),
        )
        # The server ends the watch after WATCH_SECONDS: a longer silence means it is gone.
        async for event in self.connection.stream(self.path, params, read_timeout=WATCH_SECONDS + 30):
            kind = event.get("type")
            obj: Obj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code") or 0)
                raise ApiError("WATCH", self.path, code, obj.get("reason", ""), obj.get("message", ""))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                handler.changed(kind, obj)
            if version:
                self.resource_version = version
