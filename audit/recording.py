"""The Recorder: watches pods through its own connection and records every transition.

It lists then watches all pods (or those a label selector picks), and namespaces (for the
team label of pods that do not carry it), and appends an ``Event`` for every transition with
a monotonic and a wall-clock timestamp. It runs as an asyncio task (``await recorder.run()``)
or, for synchronous tests, in a thread of its own::

    with recording(Credentials.from_kubeconfig(path), selector="app=x") as recorder:
        ...                              # drive the cluster with kubectl
        record = recorder.snapshot()     # safe at any time, from any thread

The record is only ever appended to, under a lock; ``snapshot()`` copies it.

It watches through ``audit.watching`` on the auditor's own connection, not through
``kube.reflecting``'s Reflector, although both list then watch: the record judges the
controller, so it must not share the controller's watch code, or its bugs (``audit.connection``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from audit.background import Background
from audit.connection import Connection, Credentials
from audit.naming import SLUICEGATE, Naming
from audit.records import (
    TERMINAL,
    Event,
    Kind,
    PodInfo,
    PodState,
    Record,
    merge_teams,
    observe,
    pod_info,
    transitions,
)
from audit.watching import Watch

log = logging.getLogger(__name__)

Obj = dict[str, Any]
USER_AGENT = "sluicegate-audit-recorder"
SYNC_SECONDS = 60.0
POLL_SECONDS = 0.05


class RecordingError(Exception):
    """The recorder could not start, or stopped with an error."""


@dataclass(frozen=True, slots=True)
class Tally:
    """Running totals, cheap to read while a run goes on (for progress and waits)."""

    pods: int
    released: int
    finished: int


class Recorder:
    def __init__(
        self,
        credentials: Credentials,
        *,
        naming: Naming = SLUICEGATE,
        selector: str | None = None,
        user_agent: str = USER_AGENT,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.credentials = credentials
        self.naming = naming
        self.selector = selector
        self.user_agent = user_agent
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._pods: dict[str, PodInfo] = {}
        self._states: dict[str, PodState] = {}
        self._events: list[Event] = []
        self._namespace_teams: dict[str, str] = {}
        self._released: set[str] = set()
        self._finished: set[str] = set()
        self._synced = threading.Event()
        self._listed = False
        self._pod_watch: Watch | None = None
        self._failure: BaseException | None = None
        self.started = clock()
        self.started_wall = wall()

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        """Record until cancelled."""
        try:
            async with Connection(self.credentials, user_agent=self.user_agent, connections=4) as conn:
                pods = Watch(conn, "/api/v1/pods", selector=self.selector)
                self._pod_watch = pods
                tasks = [asyncio.create_task(pods.run(self), name="record-pods")]
                if self.naming.team_label:
                    namespaces = Watch(conn, "/api/v1/namespaces")
                    follow = namespaces.run(NamespaceTeams(self))
                    tasks.append(asyncio.create_task(follow, name="record-namespaces"))
                    await namespaces.synced.wait()
                await pods.synced.wait()
                self._synced.set()
                try:
                    await asyncio.gather(*tasks)
                finally:
                    for task in tasks:
                        task.cancel()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self._failure = e
            raise

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float = SYNC_SECONDS) -> bool:
        """Block until the first lists are in (from another thread than the recorder's)."""
        return self._synced.wait(timeout)

    async def until_synced(self) -> None:
        while not self._synced.is_set():
            self._raise_failure()
            await asyncio.sleep(POLL_SECONDS)

    async def until(self, done: Callable[[Tally], bool], timeout: float | None = None) -> Tally:
        """Wait in the event loop until ``done(tally)``; TimeoutError after ``timeout``."""
        async with asyncio.timeout(timeout):
            while not done(tally := self.tally()):
                self._raise_failure()
                await asyncio.sleep(POLL_SECONDS)
            return tally

    def wait(self, done: Callable[[Tally], bool], timeout: float) -> Tally:
        """Block until ``done(tally)``; TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not done(tally := self.tally()):
            self._raise_failure()
            if time.monotonic() > deadline:
                raise TimeoutError(f"recorder: still {tally} after {timeout:.0f}s")
            time.sleep(POLL_SECONDS)
        return tally

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise RecordingError(f"the recorder stopped: {self._failure!r}") from self._failure

    # --- reading --------------------------------------------------------------------------

    @property
    def relists(self) -> int:
        return self._pod_watch.relists if self._pod_watch else 0

    @property
    def last_error(self) -> str:
        """The last error the pod watch met (it retries), for messages."""
        return self._pod_watch.last_error if self._pod_watch else "no watch yet"

    def tally(self) -> Tally:
        with self._lock:
            return Tally(len(self._pods), len(self._released), len(self._finished))

    def snapshot(self) -> Record:
        """A consistent copy of the record so far."""
        self._raise_failure()
        with self._lock:
            pods = merge_teams(self._pods.values(), self._namespace_teams)
            events = tuple(self._events)
        return Record(
            pods=MappingProxyType(pods), events=events, started=self.started,
            started_wall=self.started_wall, taken=self._clock(), relists=self.relists,
        )

    # --- the pod handler (called in the event loop) ---------------------------------------

    def listed(self, items: list[Obj]) -> None:
        first = not self._listed
        self._listed = True
        with self._lock:
            seen = set()
            for obj in items:
                uid = (obj.get("metadata") or {}).get("uid", "")
                seen.add(uid)
                self._observe(obj, deleted=False, preexisting=first)
            for uid, state in list(self._states.items()):
                if uid not in seen and not state.deleted:  # deleted while the watch was away
                    self._append(uid, PodState(state.gates, state.node, state.phase, deleted=True))

    def changed(self, kind: str, obj: Obj) -> None:
        with self._lock:
            self._observe(obj, deleted=kind == "DELETED", preexisting=False)

    def _observe(self, obj: Obj, *, deleted: bool, preexisting: bool) -> None:
        uid = (obj.get("metadata") or {}).get("uid", "")
        if not uid:
            return
        try:
            if uid not in self._pods:
                self._pods[uid] = pod_info(obj, self.naming, preexisting=preexisting)
            state = observe(obj, self.naming)
        except (AttributeError, TypeError, ValueError) as e:  # one odd pod never stops the record
            log.warning("recorder: cannot read pod %s: %r", uid, e)
            return
        if deleted:
            state = PodState(state.gates, state.node, state.phase, deleted=True)
        self._append(uid, state)

    def _append(self, uid: str, state: PodState) -> None:
        before = self._states.get(uid)
        found = transitions(before, state)
        if found:
            at, wall = self._clock(), self._wall()
            for kind, detail in found:
                self._events.append(Event(uid, kind, at, wall, detail))
                if kind is Kind.UNGATED:
                    self._released.add(uid)
                elif kind in TERMINAL:
                    self._finished.add(uid)
        self._states[uid] = state


class NamespaceTeams:
    """Keeps each namespace's team label (never forgotten: pods outlive namespace events)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def listed(self, items: list[Obj]) -> None:
        for obj in items:
            self.changed("ADDED", obj)

    def changed(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        team = (meta.get("labels") or {}).get(self.recorder.naming.team_label)
        if team:
            with self.recorder._lock:
                self.recorder._namespace_teams[meta.get("name", "")] = team


@contextmanager
def recording(
    credentials: Credentials,
    *,
    naming: Naming = SLUICEGATE,
    selector: str | None = None,
    sync_timeout: float = SYNC_SECONDS,
) -> Iterator[Recorder]:
    """A Recorder running in a background thread, synced before the block starts."""
    recorder = Recorder(credentials, naming=naming, selector=selector)
    with Background("recorder") as loop:
        task = loop.start(recorder.run())
        deadline = time.monotonic() + sync_timeout
        while not recorder.wait_synced(POLL_SECONDS):
            if task.done():
                raise RecordingError(f"the recorder could not start: {task.exception()!r}")
            if time.monotonic() > deadline:
                raise RecordingError(
                    f"the recorder had not listed pods after {sync_timeout:.0f}s ({recorder.last_error})"
                )
        yield recorder
