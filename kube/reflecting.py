"""A reflector mirrors one kind of object from the API server into memory.

It lists, then watches from the list's resourceVersion with bookmarks; a watch that ends is
resumed from the last resourceVersion seen, and 410 Gone (the version was compacted away)
means list again. The store is keyed by uid and holds each object as ``convert`` made it, so
the conversion runs once per change, never per read; readers never call the API.

One object that ``convert`` cannot handle is logged and left out (as if deleted); it never
stops the watch. Errors talking to the server back off exponentially, with jitter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from kube.connecting import JSON, ApiError, Connection, KubeError
from kube.resources import Resource

log = logging.getLogger(__name__)

T = TypeVar("T")

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]

PAGE_SIZE: Final = 500
# Servers end a watch after timeoutSeconds; like client-go, ask for 5 to 10 minutes, spread
# out so that many watches do not all reconnect at once.
WATCH_SECONDS: Final = (300, 600)
# A watch that is silent for this long (no event and no bookmark, which the API server sends
# about once a minute) is treated as a dead connection and resumed.
IDLE_SECONDS: Final = 150.0
BACKOFF_FIRST: Final = 0.5
BACKOFF_MAX: Final = 30.0


@dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    """One object added, modified or deleted; ``old``/``new`` are the converted values."""

    type: ChangeType
    uid: str
    key: str  # "namespace/name", or "name" for a cluster-scoped object
    old: T | None
    new: T | None


Listener = Callable[[Change[T]], None]


@dataclass(frozen=True, slots=True)
class _Entry(Generic[T]):
    key: str
    resource_version: str
    value: T


class Backoff:
    """Exponential backoff with full jitter, reset after a success."""

    def __init__(self, first: float = BACKOFF_FIRST, most: float = BACKOFF_MAX) -> None:
        self.first = first
        self.most = most
        self.failures = 0

    def reset(self) -> None:
        self.failures = 0

    def next_delay(self) -> float:
        self.failures += 1
        return random.uniform(0, min(self.most, self.first * 2 ** (self.failures - 1)))

    async def wait(self) -> None:
        await asyncio.sleep(self.next_delay())


def object_key(meta: Mapping[str, Any]) -> str:
    name = str(meta.get("name") or "")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


class Reflector(Generic[T]):
    """The live, converted contents of one resource (optionally narrowed by selectors)."""

    def __init__(
        self,
        connection: Connection,
        resource: Resource,
        convert: Callable[[JSON], T],
        *,
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = PAGE_SIZE,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self.connection = connection
        self.resource = resource
        self.convert = convert
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.idle_seconds = idle_seconds
        self.synced = asyncio.Event()
        """Set once the first list is in the store; stays set across relists."""
        self.resource_version = ""
        self.lists = 0
        """How many times the reflector listed (1 + relists)."""
        self._store: dict[str, _Entry[T]] = {}
        self._by_key: dict[str, str] = {}
        self._listeners: list[Listener[T]] = []

    def __repr__(self) -> str:
        selectors = ",".join(s for s in (self.label_selector, self.field_selector) if s)
        return f"Reflector({self.resource}{f' {selectors}' if selectors else ''})"

    # --- reading --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._store)

    def values(self) -> Iterator[T]:
        return (e.value for e in self._store.values())

    def items(self) -> Iterator[tuple[str, T]]:
        """(uid, value) pairs."""
        return ((uid, e.value) for uid, e in self._store.items())

    def get(self, uid: str) -> T | None:
        entry = self._store.get(uid)
        return entry.value if entry else None

    def version(self, uid: str) -> str:
        """The resourceVersion the stored object was converted from ("" when absent)."""
        entry = self._store.get(uid)
        return entry.resource_version if entry else ""

    def named(self, name: str, namespace: str = "") -> T | None:
        uid = self._by_key.get(f"{namespace}/{name}" if namespace else name)
        return self.get(uid) if uid else None

    def add_listener(self, listener: Listener[T]) -> Callable[[], None]:
        """Call ``listener`` after every change to the store (the first list's objects arrive
        as ADDED). Listeners run in the loop, so they must be quick: mark something dirty, wake
        a queue. Returns a function that removes the listener."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled."""
        backoff = Backoff()
        while True:
            try:
                if not self.resource_version:
                    await self._list()
                    backoff.reset()
                started = time.monotonic()
                events = await self._watch()
                if events or time.monotonic() - started > 1.0:
                    backoff.reset()
                else:  # ended at once with nothing: do not spin against a misbehaving server
                    await backoff.wait()
            except ApiError as e:
                if e.gone:
                    log.info("%s: resourceVersion %s is too old, listing again", self, self.resource_version)
                    self.resource_version = ""
                    continue
                log.warning("%s: %s; retrying", self, e)
                await backoff.wait()
            except KubeError as e:
                log.warning("%s: %s; retrying", self, e)
                await backoff.wait()
            except Exception:  # a fault of ours: say so loudly, then start over from a list
                log.exception("%s: unexpected failure; listing again", self)
                self.resource_version = ""
                await backoff.wait()

    def _query(self) -> dict[str, str]:
        query = {}
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        return query

    async def _list(self) -> None:
        path = self.resource.path()
        items: list[JSON] = []
        query = {**self._query(), "limit": str(self.page_size)}
        while True:
            try:
                page = await self.connection.get(path, query)
            except ApiError as e:
                if e.gone and "continue" in query:  # the snapshot expired between pages: start over
                    items.clear()
                    query.pop("continue")
                    continue
                raise
            page_items = page.get("items")
            if isinstance(page_items, list):
                items.extend(i for i in page_items if isinstance(i, dict))
            meta = page.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            token = meta.get("continue")
            if not token:
                break
            query["continue"] = str(token)
        self._replace(items)
        self.resource_version = str(meta.get("resourceVersion") or "")
        self.lists += 1
        self.synced.set()
        log.debug("%s: listed %d objects at resourceVersion %s", self, len(items), self.resource_version)

    async def _watch(self) -> int:
        """Watch from ``resource_version`` until the server ends the watch; the events seen."""
        query = {
            **self._query(),
            "watch": "true",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(random.randint(*WATCH_SECONDS)),
        }
        seen = 0
        stream = self.connection.stream(self.resource.path(), query, idle_seconds=self.idle_seconds)
        async with contextlib.aclosing(stream) as events:  # closes the response when cancelled too
            async for event in events:
                seen += 1
                kind, obj = event.get("type"), event.get("object")
                if kind == "ERROR":
                    status = obj if isinstance(obj, dict) else {}
                    raise ApiError.from_status(500, status, f"watch {self.resource}")
                if not isinstance(obj, dict):
                    log.warning("%s: a %s event without an object", self, kind)
                    continue
                meta = obj.get("metadata")
                meta = meta if isinstance(meta, dict) else {}
                version = str(meta.get("resourceVersion") or "")
                if kind == "BOOKMARK":
                    self.resource_version = version or self.resource_version
                    continue
                uid = str(meta.get("uid") or "")
                if kind in ("ADDED", "MODIFIED") and uid:
                    self._upsert(uid, obj, meta, version)
                elif kind == "DELETED" and uid:
                    self._remove(uid)
                else:
                    what = object_key(meta) or "an unnamed object"
                    log.warning("%s: ignoring a %s event for %s", self, kind, what)
                if version:
                    self.resource_version = version
        return seen

    # --- the store ------------------------------------------------------------------------

    def _converted(self, obj: JSON, meta: Mapping[str, Any], version: str) -> _Entry[T] | None:
        key = object_key(meta)
        try:
            return _Entry(key, version, self.convert(obj))
        except Exception as e:  # one object a converter chokes on must not stop the watch
            log.warning("%s: leaving out %s, which cannot be read: %s", self, key, e)
            return None

    def _upsert(self, uid: str, obj: JSON, meta: Mapping[str, Any], version: str) -> None:
        old = self._store.get(uid)
        if old is not None and old.resource_version == version:
            return
        entry = self._converted(obj, meta, version)
        if entry is None:
            self._remove(uid)
            return
        self._store[uid] = entry
        self._by_key[entry.key] = uid
        if old is None:
            self._notify(Change("ADDED", uid, entry.key, None, entry.value))
        else:
            self._notify(Change("MODIFIED", uid, entry.key, old.value, entry.value))

    def _remove(self, uid: str) -> None:
        old = self._store.pop(uid, None)
        if old is None:
            return
        if self._by_key.get(old.key) == uid:
            del self._by_key[old.key]
        self._notify(Change("DELETED", uid, old.key, old.value, None))

    def _replace(self, items: list[JSON]) -> None:
        """Make the store what a list returned; objects whose version did not change keep
        their converted value, the rest are converted, and listeners hear the difference."""
        fresh: dict[str, JSON] = {}
        for obj in items:
            meta = obj.get("metadata")
            if isinstance(meta, dict) and meta.get("uid"):
                fresh[str(meta["uid"])] = obj
        for uid in [u for u in self._store if u not in fresh]:
            self._remove(uid)
        for uid, obj in fresh.items():
            meta = obj["metadata"]
            self._upsert(uid, obj, meta, str(meta.get("resourceVersion") or ""))

    def _notify(self, change: Change[T]) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("%s: a change listener failed on %s", self, change.key)
