"""The bare ungater: removes scheduling gates as fast as the API server allows, with no policy.

It is the practical ceiling for benchmarks (what any gate controller's drain is compared
with) and a stand-in controller for testing the recorder and the checks. It releases pods in
the order it first saw them gated, at most ``cap`` released-and-unfinished at once (None: no
cap) and, with a ``queue_label``, at most ``queue_cap`` at once per value of that label (so it
is held to the same per-queue limits as the systems it is compared with; a pod of a full queue
waits while younger pods of other queues go). A release is counted the moment the patch is
sent (assumed, as a real controller must, so a slow watch never lets it exceed the cap) and
forgotten when the pod finishes. Each release is one JSON patch guarded by a ``test`` of the
gate list, so it never removes a gate someone else already changed.

    python -m audit.ungating --kubeconfig PATH [--cap 32] [--selector k=v] [--gate NAME ...]
        [--queue-label KEY --queue-cap 25]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from audit.connection import ApiError, Connection, Credentials
from audit.naming import SLUICEGATE
from audit.watching import Watch

log = logging.getLogger(__name__)

Obj = dict[str, Any]
USER_AGENT = "sluicegate-audit-ungater"
RETRY_SECONDS = 0.2
FINISHED_PHASES = ("Succeeded", "Failed")


class Backlog:
    """The gated pods, oldest first within each queue (pure: no I/O).

    ``take`` gives the pod first seen among those of queues below ``queue_cap`` (None: every
    queue has room); each queue keeps its own order, so choosing costs one look per queue."""

    def __init__(self, queue_cap: int | None = None) -> None:
        self.queue_cap = queue_cap
        self._queues: dict[str, dict[str, int]] = {}  # queue -> uid -> when first seen
        self._queue_of: dict[str, str] = {}
        self._seen = 0

    def add(self, uid: str, queue: str) -> None:
        """A gated pod, behind every other; one already there keeps its place."""
        if uid in self._queue_of:
            return
        self._seen += 1
        self._queue_of[uid] = queue
        self._queues.setdefault(queue, {})[uid] = self._seen

    def discard(self, uid: str) -> bool:
        queue = self._queue_of.pop(uid, None)
        if queue is None:
            return False
        del self._queues[queue][uid]
        return True

    def take(self, busy: Counter[str]) -> str | None:
        """The next pod to release given each queue's released-and-unfinished pods, removed from
        the backlog; None when no queue with room has a pod waiting."""
        best: tuple[int, str] | None = None
        for queue, pods in self._queues.items():
            if not pods or (self.queue_cap is not None and busy[queue] >= self.queue_cap):
                continue
            uid = next(iter(pods))
            if best is None or pods[uid] < best[0]:
                best = (pods[uid], uid)
        if best is None:
            return None
        self.discard(best[1])
        return best[1]

    def clear(self) -> None:
        self._queues.clear()
        self._queue_of.clear()

    def __contains__(self, uid: object) -> bool:
        return uid in self._queue_of

    def __len__(self) -> int:
        return len(self._queue_of)


class Ungater:
    def __init__(
        self,
        connection: Connection,
        *,
        gates: Sequence[str] = SLUICEGATE.gates,
        cap: int | None = None,
        selector: str | None = None,
        concurrency: int = 16,
        queue_label: str | None = None,
        queue_cap: int | None = None,
    ) -> None:
        self.connection = connection
        self.gates = frozenset(gates)
        self.cap = cap
        self.selector = selector
        self.queue_label = queue_label
        self.released = 0
        self.watch = Watch(connection, "/api/v1/pods", selector=selector)
        self._gated = Backlog(queue_cap if queue_label else None)
        self._where: dict[str, tuple[str, str, str]] = {}  # uid -> (namespace, name, queue)
        self._gates: dict[str, list[str]] = {}  # uid -> every gate it had when last seen
        self._managed: set[str] = set()  # seen gated by one of our gates
        self._inflight: set[str] = set()
        self._running: set[str] = set()
        self._done: set[str] = set()
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(concurrency)

    @property
    def running(self) -> int:
        """Released (or being released) and not finished."""
        return len(self._running) + len(self._inflight)

    async def run(self) -> None:
        """Release pods until cancelled."""
        watching = asyncio.create_task(self.watch.run(self), name="ungater-watch")
        patches: set[asyncio.Task[None]] = set()
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                held = (*self._running, *self._inflight)
                busy = Counter(self._where[u][2] for u in held if u in self._where)
                while self._gated and (self.cap is None or self.running < self.cap):
                    taken = self._gated.take(busy)
                    if taken is None:
                        break
                    uid = taken
                    namespace, name, queue = self._where[uid]
                    busy[queue] += 1
                    self._inflight.add(uid)
                    task = asyncio.create_task(self._release(uid, namespace, name, self._gates[uid]))
                    patches.add(task)
                    task.add_done_callback(patches.discard)
                if watching.done():
                    watching.result()
        finally:
            watching.cancel()
            for task in patches:
                task.cancel()

    async def _release(self, uid: str, namespace: str, name: str, gates: list[str]) -> None:
        remaining = [g for g in gates if g not in self.gates]
        path = "/spec/schedulingGates"
        patch: list[Obj] = [{"op": "test", "path": path, "value": [{"name": g} for g in gates]}]
        if remaining:
            patch.append({"op": "replace", "path": path, "value": [{"name": g} for g in remaining]})
        else:
            patch.append({"op": "remove", "path": path})
        async with self._slots:
            try:
                await self.connection.patch(f"/api/v1/namespaces/{namespace}/pods/{name}", patch)
            except ApiError as e:
                self._inflight.discard(uid)
                if e.status == 404:
                    self._done.add(uid)
                else:  # the gates changed under us (409/422) or the server is busy: try again
                    log.info("ungater: %s/%s: %s", namespace, name, e)
                    await asyncio.sleep(RETRY_SECONDS)
                    if uid in self._done or uid in self._running:
                        pass
                    elif self.gates.intersection(self._gates.get(uid, ())):
                        self._gated.add(uid, self._where[uid][2])
                    else:  # someone else released it meanwhile
                        self._running.add(uid)
                self._wake.set()
                return
        self._inflight.discard(uid)
        if uid in self._done:  # it finished before the answer came: its slot is free already
            self._wake.set()
        else:
            self._running.add(uid)
        self.released += 1

    # --- the watch handler ----------------------------------------------------------------

    def listed(self, items: list[Obj]) -> None:
        present = set()
        self._gated.clear()
        items = sorted(
            items, key=lambda o: (o["metadata"].get("creationTimestamp", ""), o["metadata"]["name"])
        )
        for obj in items:
            present.add(obj["metadata"]["uid"])
            self.changed("ADDED", obj)
        for uid in self._running - present:
            self._finish(uid)

    def changed(self, kind: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        uid = meta.get("uid", "")
        if uid in self._done:
            return
        if kind == "DELETED" or (obj.get("status") or {}).get("phase") in FINISHED_PHASES:
            self._finish(uid)
            return
        gates = [g.get("name", "") for g in (obj.get("spec") or {}).get("schedulingGates") or ()]
        if uid not in self._where:
            queue = (meta.get("labels") or {}).get(self.queue_label, "") if self.queue_label else ""
            self._where[uid] = (meta.get("namespace", ""), meta.get("name", ""), queue)
        if self.gates.intersection(gates):
            self._managed.add(uid)
            self._gates[uid] = gates
            if uid not in self._inflight and uid not in self._running:
                self._gated.add(uid, self._where[uid][2])
                self._wake.set()
        elif uid in self._managed and uid not in self._inflight:
            self._gated.discard(uid)
            self._gates.pop(uid, None)
            self._running.add(uid)

    def _finish(self, uid: str) -> None:
        self._done.add(uid)
        self._gated.discard(uid)
        self._gates.pop(uid, None)
        self._managed.discard(uid)
        if uid in self._running:
            self._running.discard(uid)
            self._wake.set()


async def ungate(
    credentials: Credentials, *, gates: Sequence[str] = SLUICEGATE.gates, cap: int | None = None,
    selector: str | None = None, concurrency: int = 16,
) -> None:
    """Run an Ungater on a connection of its own until cancelled."""
    async with Connection(credentials, user_agent=USER_AGENT, connections=concurrency + 2) as connection:
        await Ungater(connection, gates=gates, cap=cap, selector=selector, concurrency=concurrency).run()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit.ungating", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--context")
    parser.add_argument("--cap", type=int, help="at most this many released and unfinished at once")
    parser.add_argument("--selector", help="only pods with these labels")
    parser.add_argument("--gate", action="append", help=f"a gate to remove (default {SLUICEGATE.gates[0]})")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--queue-label", help="a label naming each pod's queue, for --queue-cap")
    parser.add_argument("--queue-cap", type=int,
                        help="at most this many released and unfinished at once per queue (--queue-label)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    credentials = Credentials.from_kubeconfig(args.kubeconfig, args.context)
    return asyncio.run(_serve(credentials, args))


async def _serve(credentials: Credentials, args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with Connection(credentials, user_agent=USER_AGENT, connections=args.concurrency + 2) as connection:
        ungater = Ungater(connection, gates=args.gate or SLUICEGATE.gates, cap=args.cap,
                          selector=args.selector, concurrency=args.concurrency,
                          queue_label=args.queue_label, queue_cap=args.queue_cap)
        task = asyncio.create_task(ungater.run())
        synced = asyncio.create_task(ungater.watch.synced.wait())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait((synced, stopping), return_when=asyncio.FIRST_COMPLETED)
        if synced.done():
            print("ready", flush=True)
        await stopping
        synced.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        print(json.dumps({"released": ungater.released, "requests": connection.requests}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
