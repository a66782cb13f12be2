"""The recorder's watch: managed pods, through its own connection, into the store.

A ``kube.reflecting.Reflector`` lists and watches pods that admission marked (queue and team
labels; terminal pods included, unlike the controller's watch). Its listener turns each change
into the pod's next ``Life`` (``recorder.lives.observe``) and hands it to the store, which
writes in batches. Nothing here is on the dispatch path: the controller never waits on it.

On start (and after every relist) the recorder reconciles: a pod the store holds as not ended
that the API server no longer has was deleted while the recorder was not watching. It is kept
as Deleted, flagged lost and counted (``Store.losses``), never dropped. Pods that finished
while it was down are in the list with their final state, and ``observe`` records them from
the times the pod itself carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from kube.connecting import Connection
from kube.reflecting import Change, Reflector
from kube.resources import PODS
from policy import fields, keys
from policy.fields import Obj
from recorder.lives import Life, deleted, observe
from recorder.metrics import RecorderMetrics
from recorder.store import Store, StoreError

log = logging.getLogger(__name__)

LABEL_SELECTOR: Final = f"{keys.QUEUE_LABEL},{keys.TEAM_LABEL}"
HOUR: Final = 3600.0


class Recorder:
    """Watches managed pods and keeps one ``Life`` per pod in the store."""

    def __init__(
        self,
        connection: Connection,
        store: Store,
        metrics: RecorderMetrics,
        *,
        flush_seconds: float = 0.5,
        retention_seconds: float = 90 * 24 * HOUR,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.flush_seconds = flush_seconds
        self.retention_seconds = retention_seconds
        self.clock = clock
        self.reflector: Reflector[Obj] = Reflector(connection, PODS, slim, label_selector=LABEL_SELECTOR)
        self.reflector.add_listener(self._changed)
        self.reconciled = asyncio.Event()
        self._lives: dict[str, Life] = {}
        self._lists_reconciled = 0

    # --- changes --------------------------------------------------------------------------

    def _changed(self, change: Change[Obj]) -> None:
        now = self.clock()
        old = self._life(change)
        if change.type == "DELETED":
            if old is not None:
                self._keep(deleted(old, now))
            return
        assert change.new is not None
        if old is None and change.old is not None and not _open(change.old):
            return  # a change to a pod that had ended (a label, a finalizer): its record stands
        try:
            life = observe(change.new, now, old)
        except ValueError as e:  # InvalidObject: one unreadable pod never stops the watch
            log.warning("pod=%s cannot be recorded: %s", change.key, e)
            return
        if life != old:
            self._keep(life)

    def _life(self, change: Change[Obj]) -> Life | None:
        """The pod's life as recorded: open lives are in memory; the database is asked only
        while listing after a start (pods it may know from before) and for a change to a pod
        that was open before (never for a new pod, nor for one that had already ended)."""
        life = self._lives.get(change.uid)
        if life is not None or (self.reconciled.is_set() and not _open(change.old)):
            return life
        return self.store.recorded(change.uid)

    def _keep(self, life: Life) -> None:
        if life.ended:
            self._lives.pop(life.uid, None)  # the store has it; memory holds open pods only
        else:
            self._lives[life.uid] = life
        self.store.put(life)
        self.metrics.changes.inc()

    # --- reconciling ----------------------------------------------------------------------

    def reconcile(self) -> int:
        """After a list: record the pods that vanished while nobody watched; how many."""
        now = self.clock()
        present = {uid for uid, _ in self.reflector.items()}
        lost = 0
        for life in self.store.open_lives():
            if life.uid in present:
                continue
            gone = deleted(life, now, lost=True)
            self._lives.pop(life.uid, None)
            self.store.lose(gone, now)
            lost += 1
            log.warning("pod=%s/%s queue=%s was deleted while the recorder was not watching; "
                        "recorded as lost", life.namespace, life.name, life.queue)
        self.metrics.lost.inc(lost)
        return lost

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch, flush and reconcile until cancelled."""
        tasks = [
            asyncio.create_task(self.reflector.run(), name="pod reflector"),
            asyncio.create_task(self._flushing(), name="flush"),
            asyncio.create_task(self._retaining(), name="retention"),
        ]
        try:
            await self.reflector.synced.wait()
            lost = self.reconcile()
            self._lists_reconciled = self.reflector.lists
            await asyncio.to_thread(self.store.flush)
            self.reconciled.set()
            log.info("watching %d managed pods; %d deleted while the recorder was away", len(self.reflector),
                     lost)
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await asyncio.to_thread(self.store.flush)

    async def _flushing(self) -> None:
        while True:
            await asyncio.sleep(self.flush_seconds)
            if self.reconciled.is_set() and self.reflector.lists > self._lists_reconciled:
                self.reconcile()  # a relist (410 Gone) may have missed deletions
                self._lists_reconciled = self.reflector.lists
            try:
                started = time.monotonic()
                written = await asyncio.to_thread(self.store.flush)
                if written:
                    self.metrics.flush_seconds.observe(time.monotonic() - started)
                    self.metrics.written.inc(written)
            except StoreError as e:
                self.metrics.failures.inc()
                log.error("cannot write the records (kept for the next try): %s", e)

    async def _retaining(self) -> None:
        while True:
            try:
                horizon = self.clock() - self.retention_seconds
                gone = await asyncio.to_thread(self.store.forget_before, horizon)
                if gone:
                    log.info("retention: forgot %d pods that ended more than %.0f h ago", gone,
                             self.retention_seconds / HOUR)
            except StoreError as e:
                log.error("retention failed: %s", e)
            await asyncio.sleep(min(HOUR, self.retention_seconds / 10))


def _open(pod: Obj | None) -> bool:
    """Whether a pod as the reflector held it had not ended yet."""
    if pod is None:
        return False
    status = pod.get("status")
    return not (isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed"))


SPEC_READ: Final = ("priority", "schedulingGates", "nodeName", "overhead", "resources")
CONTAINER_READ: Final = ("name", "resources", "restartPolicy")
STATUS_READ: Final = ("phase", "conditions", "containerStatuses", "initContainerStatuses")
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: Obj) -> Obj:
    """The parts of a pod that ``observe`` reads, which the reflector keeps of each pod: its
    metadata but the managed fields and kubectl's copy of the whole manifest, the spec's
    scheduling gates, node, priority and requests (containers by name, resources and restart
    policy), and the status. A pod's full JSON is tens of kilobytes, and the watch holds every
    managed pod, finished ones included, for as long as they exist."""
    meta = dict(fields.obj(obj.get("metadata")))
    meta.pop("managedFields", None)
    notes = fields.obj(meta.get("annotations"))
    if LAST_APPLIED in notes:
        meta["annotations"] = {k: v for k, v in notes.items() if k != LAST_APPLIED}
    spec = fields.obj(obj.get("spec"))
    kept: dict[str, Any] = {k: spec[k] for k in SPEC_READ if k in spec}
    for name in ("containers", "initContainers"):
        if isinstance(spec.get(name), list):
            kept[name] = [{k: c[k] for k in CONTAINER_READ if k in c} if isinstance(c, dict) else c
                          for c in spec[name]]
    status = fields.obj(obj.get("status"))
    return {"metadata": meta, "spec": kept, "status": {k: status[k] for k in STATUS_READ if k in status}}
