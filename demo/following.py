"""The view's copy of the managed pods: one list-then-watch through the auditor's connection,
in a background loop, read from the story's thread at any time."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from audit.background import Background
from audit.connection import Connection, Credentials
from audit.watching import Watch
from policy import keys

Obj = dict[str, Any]
USER_AGENT = "sluicegate-demo"
SYNC_SECONDS = 60.0


class FollowError(Exception):
    """The view's watch of pods could not start."""


class Pods:
    """Managed pods by uid, as last seen (a deleted pod is dropped)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, Obj] = {}
        self.synced = threading.Event()

    def listed(self, items: list[Obj]) -> None:
        with self._lock:
            self._pods = {i["metadata"]["uid"]: i for i in items}
        self.synced.set()

    def changed(self, kind: str, obj: Obj) -> None:
        uid = (obj.get("metadata") or {}).get("uid", "")
        with self._lock:
            if kind == "DELETED":
                self._pods.pop(uid, None)
            else:
                self._pods[uid] = obj

    def all(self) -> list[Obj]:
        with self._lock:
            return list(self._pods.values())


async def _follow(credentials: Credentials, pods: Pods) -> None:
    async with Connection(credentials, user_agent=USER_AGENT, connections=2) as conn:
        await Watch(conn, "/api/v1/pods", selector=keys.QUEUE_LABEL).run(pods)


@contextmanager
def following(credentials: Credentials) -> Iterator[Pods]:
    """Pods carrying a queue label, kept up to date while the block runs."""
    pods = Pods()
    with Background("demo-view") as loop:
        task = loop.start(_follow(credentials, pods))
        if not pods.synced.wait(SYNC_SECONDS):
            failure = task.exception(0) if task.done() else None
            raise FollowError(f"the view could not list pods in {SYNC_SECONDS:.0f}s: {failure!r}")
        yield pods
