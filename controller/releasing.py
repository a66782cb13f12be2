"""Removing gates: one task per pod, a bounded number of requests at once, retries with backoff.

A cycle hands over each pod it releases (already assumed, see ``assumptions``) and goes on;
the patches run beside the next cycles. Throttling (429), the server's trouble (5xx), a
conflict or a lost connection is retried with exponential backoff while the assumption holds,
so the slot is counted exactly once however many attempts it takes. The outcome is reported
once, through ``on_settled``: the gate was removed (by us or someone else), the pod is gone,
or the release failed for good (refused, or still failing after ``give_up_seconds``), in which
case the controller forgets the assumption and decides again. A patch the API server refuses as
invalid though its test held (``kube.writing.Refused``) is not retried here: the pod as it is
cannot be released, and the controller holds it until it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from kube.connecting import ApiError, Connection, KubeError
from kube.reflecting import Backoff
from kube.writing import Refused, Ungate, remove_gate

log = logging.getLogger(__name__)

BACKOFF_FIRST: Final = 0.05
BACKOFF_MOST: Final = 2.0


@dataclass(frozen=True, slots=True)
class Release:
    """One pod to release: where it is, the gate list the patch tests, and what it belongs to."""

    uid: str
    namespace: str
    name: str
    queue: str
    workload: str
    gates: tuple[str, ...]
    has_annotations: bool
    created: float  # epoch seconds: the wait ends now
    stamp: Mapping[str, str]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


Settled = Callable[[Release, Ungate | Refused | None], None]
"""Called once per release: its outcome (``Refused``: the API server refused the pod as it is),
or None when it failed for good."""
Failed = Callable[[str, int], None]
"""Called for every failed request: the operation and the HTTP status (0: no answer)."""


class Releaser:
    def __init__(
        self,
        connection: Connection,
        *,
        concurrency: int,
        give_up_seconds: float,
        on_error: Failed,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connection = connection
        self.give_up_seconds = give_up_seconds
        self._slots = asyncio.Semaphore(concurrency)
        self._on_settled: Settled = lambda release, outcome: None
        self._on_error = on_error
        self._clock = clock
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.idle = asyncio.Event()
        """Set while no gate removal is in flight."""
        self.idle.set()

    def on_settled(self, listener: Settled) -> None:
        """Hand each release's outcome to ``listener`` (the gate controller), once."""
        self._on_settled = listener

    def __len__(self) -> int:
        """Releases in flight."""
        return len(self._tasks)

    def __contains__(self, uid: object) -> bool:
        return uid in self._tasks

    def submit(self, release: Release) -> None:
        if release.uid in self._tasks:
            return
        task = asyncio.create_task(self._run(release), name=f"release {release.key}")
        self._tasks[release.uid] = task
        self.idle.clear()
        task.add_done_callback(lambda _: self._done(release.uid))

    def _done(self, uid: str) -> None:
        self._tasks.pop(uid, None)
        if not self._tasks:
            self.idle.set()

    async def _run(self, release: Release) -> None:
        outcome = await self._attempts(release)
        try:
            self._on_settled(release, outcome)
        except Exception:
            log.exception("handling the release of %s failed", release.key)

    async def _attempts(self, release: Release) -> Ungate | Refused | None:
        backoff = Backoff(BACKOFF_FIRST, BACKOFF_MOST)
        deadline = self._clock() + self.give_up_seconds
        fields = {"pod": release.key, "queue": release.queue, "workload": release.workload}
        while True:
            try:
                async with self._slots:
                    return await remove_gate(
                        self.connection, release.namespace, release.name, release.gates,
                        stamp=release.stamp, has_annotations=release.has_annotations,
                    )
            except ApiError as e:
                self._on_error("ungate", e.status)
                if not (e.retriable or e.conflict):
                    log.error("cannot release %s: %s", release.key, e, extra={"fields": fields})
                    return None
                problem = str(e)  # the words, not the exception: its traceback would hold this frame
            except KubeError as e:
                self._on_error("ungate", 0)
                problem = str(e)
            if self._clock() >= deadline:
                log.error("gave up releasing %s after %.0fs: %s", release.key, self.give_up_seconds, problem,
                          extra={"fields": fields})
                return None
            delay = backoff.next_delay()
            log.info("releasing %s failed (%s); retrying in %.2fs", release.key, problem, delay,
                     extra={"fields": fields})
            await asyncio.sleep(delay)

    def cancel_all(self) -> None:
        """Stop every release in flight (leadership lost); none reports an outcome."""
        for task in list(self._tasks.values()):
            task.cancel()

    async def drain(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the releases in flight, then cancel the rest."""
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=seconds)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task
