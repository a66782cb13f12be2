"""Writing conditions and events: a keyed queue of writes, served a few at a time.

Each cycle says, pod by pod, what the Dispatched condition should read (``conditions``); the
``Explainer`` writes only where that differs from what the pod carries or from what it is
writing already (the ``written`` overlay, kept until the watch shows the pod with it, so a
condition in flight is never written twice). Writes are keyed by pod: a newer wish for a pod
replaces an older one still queued, so a pod whose reason changes twice in a burst gets one
write. Writes that follow a release (condition True and the Dispatched event) go first; the
explanations of pending pods wait behind them, since a release is what users wait for; and
all of them let the gate removals in flight go first, for up to 30 s.

Rate limits, so that a deep queue does not flood the API server:

* a pending pod is explained only once it has waited ``explain_after`` seconds (a pod released
  within that time never gets a ``False`` condition at all);
* "dispatched, waiting for Kubernetes" is written once a pod has been unplaceable for
  ``unplaceable_after`` seconds, and its Warning event at most once per ``event_interval`` per pod.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

from controller.conditions import as_written
from controller.managed import ManagedPod
from controller.pacing import Steps, batches, run_through
from kube.connecting import ApiError, Connection, KubeError
from kube.reflecting import Backoff
from kube.writing import MESSAGE_CHARACTERS, Condition, PodEvent, emit, write_condition
from policy import keys
from policy.limits import NEVER

log = logging.getLogger(__name__)

T = TypeVar("T")

CONTROLLER: Final = "sluicegate.dev/gate-controller"
ATTEMPTS: Final = 5
# A write waits behind gate removals in flight until it has been queued this long, then goes.
YIELD_SECONDS: Final = 30.0


@dataclass(frozen=True, slots=True)
class Write:
    namespace: str
    name: str
    condition: Condition
    transition: bool
    event: PodEvent | None = None
    queued: float = 0.0  # monotonic time the write was asked for


class Explainer:
    def __init__(
        self,
        connection: Connection,
        *,
        concurrency: int,
        identity: str,
        leading: Callable[[], bool],
        on_error: Callable[[str, int], None],
        releases_idle: asyncio.Event | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.connection = connection
        self.identity = identity
        self._leading = leading
        self._on_error = on_error
        self._wall = wall
        self._urgent: OrderedDict[str, Write] = OrderedDict()
        self._later: OrderedDict[str, Write] = OrderedDict()
        self._written: dict[str, Condition] = {}
        self._forgotten: set[str] = set()
        self._ready = asyncio.Event()
        self._releases_idle = releases_idle
        self._workers = [asyncio.create_task(self._work(), name=f"explainer {i}") for i in range(concurrency)]
        self.writes = 0
        """Condition writes sent, in all."""
        self.events = 0

    def __len__(self) -> int:
        """Writes queued (not yet sent)."""
        return len(self._urgent) + len(self._later)

    # --- what the pod says ----------------------------------------------------------------

    def current(self, managed: ManagedPod) -> Condition | None:
        """The condition as it is, or will be once the writes in flight land."""
        return self._written.get(managed.uid) or as_written(managed.condition)

    def want(self, managed: ManagedPod, condition: Condition, *, event: PodEvent | None = None,
             urgent: bool = False) -> bool:
        """Make the pod's condition ``condition`` (and emit ``event``); False if it already is."""
        condition = Condition(condition.status, condition.reason, condition.message[:MESSAGE_CHARACTERS])
        current = self.current(managed)
        if current == condition and event is None:
            return False
        uid = managed.uid
        pod = managed.pod
        transition = current is None or current.status != condition.status
        write = Write(pod.namespace, pod.name, condition, transition, event, time.monotonic())
        self._later.pop(uid, None)
        self._urgent.pop(uid, None)
        (self._urgent if urgent else self._later)[uid] = write
        self._written[uid] = condition
        self._ready.set()
        return True

    def shows(self, managed: ManagedPod, status: str, reason: str, *, never: bool = False) -> bool:
        """The condition, as it is or will be, has this status and reason (a cheap test, for
        the many pods a cycle finds as they should be), and says the pod can never run exactly
        when ``never`` does (the reason alone does not tell a full quota from one exceeded)."""
        written = self._written.get(managed.uid)
        found = written if written is not None else managed.condition
        return (found is not None and found.status == status and found.reason == reason
                and found.message.startswith(NEVER) == never)

    def says(self, managed: ManagedPod, message: str) -> bool:
        """The condition, as it is or will be, has this message (for reasons whose message has
        no numbers, so a change of message is a change of meaning)."""
        current = self.current(managed)
        return current is not None and current.message == message[:MESSAGE_CHARACTERS]

    def shows_dispatched(self, managed: ManagedPod) -> bool:
        """The condition, as it is or will be, is True and does not say "waiting for Kubernetes"."""
        written = self._written.get(managed.uid)
        found = written if written is not None else managed.condition
        return found is not None and found.status == "True" and not found.message.startswith(keys.UNPLACEABLE)

    def expects(self, managed: ManagedPod) -> bool:
        """The pod now shows the condition this replica wrote (or is writing) for it."""
        written = self._written.get(managed.uid)
        return written is not None and written == as_written(managed.condition)

    def confirm(self, pods: Mapping[str, ManagedPod]) -> None:
        """Forget what the watch now shows on the pods (or pods that are gone)."""
        run_through(self.confirming(pods))

    def confirming(self, pods: Mapping[str, ManagedPod]) -> Steps[None]:
        """``confirm`` in steps (``controller.pacing``): a batch at a time, each entry as it is then
        (one wanted anew since is queued, so it stays)."""
        written = self._written
        for batch in batches(list(written)):  # uids: no tuple per entry for the collector
            yield None
            for uid in batch:
                condition = written.get(uid)
                if condition is None:
                    continue
                managed = pods.get(uid)
                if managed is None or (uid not in self._urgent and uid not in self._later
                                       and as_written(managed.condition) == condition):
                    del written[uid]

    def next_write(self) -> tuple[str, Write] | None:
        """The next write to send, taken off the queue: urgent ones first, each in order."""
        return self._next()

    def failed(self, uid: str, condition: Condition | None) -> None:
        """A write for ``uid`` was not made: forget that it was written (unless a newer wish,
        other than ``condition``, took its place), so the next cycle wants it again."""
        if condition is None or self._written.get(uid) == condition:
            self._written.pop(uid, None)
            self._forgotten.add(uid)

    def take_forgotten(self) -> frozenset[str]:
        """The pods whose write was dropped (it failed) since the last call: what they should say
        must be worked out again, though nothing else about them changed."""
        out = frozenset(self._forgotten)
        self._forgotten.clear()
        return out

    def clear(self) -> None:
        """Leadership lost: drop every queued write and what was assumed written."""
        self._urgent.clear()
        self._later.clear()
        self._written.clear()
        self._forgotten.clear()

    # --- the workers ----------------------------------------------------------------------

    def _next(self) -> tuple[str, Write] | None:
        for queue in (self._urgent, self._later):
            if queue:
                return queue.popitem(last=False)
        return None

    async def _work(self) -> None:
        while True:
            item = self.next_write()
            if item is None:
                self._ready.clear()
                await self._ready.wait()
                continue
            uid, write = item
            await self._yield_to_releases(write.queued)
            if not self._leading():
                self.failed(uid, None)
                continue
            try:
                await self._send(write)
            except KubeError as e:
                log.warning("could not write the condition of %s/%s: %s", write.namespace, write.name, e)
                self.failed(uid, write.condition)  # a later cycle wants it again, and writes it again
            except Exception:
                log.exception("writing the condition of %s/%s failed", write.namespace, write.name)
                self.failed(uid, None)

    async def _yield_to_releases(self, queued: float) -> None:
        """Let gate removals in flight go first (a drain of a thousand pods is not slowed by
        their conditions and events), until the write has waited ``YIELD_SECONDS`` since it was
        asked for: then it goes. On a 2-core machine the API server is the bottleneck of a drain, and
        a release costs one request where its paperwork costs two, so explanations trail a mass
        release by up to half a minute instead of slowing it down threefold."""
        idle = self._releases_idle
        left = queued + YIELD_SECONDS - time.monotonic()
        if idle is None or idle.is_set() or left <= 0:
            return
        try:
            async with asyncio.timeout(left):
                await idle.wait()
        except TimeoutError:
            pass

    async def _send(self, write: Write) -> None:
        now = self._wall()
        at = now if write.transition else None

        async def condition() -> bool:
            return await write_condition(self.connection, write.namespace, write.name, write.condition, at)

        found = await self._retrying("condition", condition)
        self.writes += 1
        if not found or write.event is None:
            return
        event = write.event

        async def emitting() -> None:
            await emit(self.connection, event, controller=CONTROLLER, instance=self.identity, at=now)

        try:
            await self._retrying("event", emitting)
            self.events += 1
        except KubeError as e:  # the condition says it already; an event is a courtesy
            log.warning("could not emit the %s event of %s/%s: %s", event.reason, write.namespace,
                        write.name, e)

    async def _retrying(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, again after throttling, the server's trouble or no answer, a few times."""
        backoff = Backoff(0.1, 2.0)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await call()
            except ApiError as e:
                self._on_error(operation, e.status)
                if not (e.retriable or e.conflict) or attempt == ATTEMPTS:
                    raise
            except KubeError:
                self._on_error(operation, 0)
                if attempt == ATTEMPTS:
                    raise
            await backoff.wait()

    async def stop(self) -> None:
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
