"""How long work has held its slot, as the controller learns it: what its start estimates draw on.

Two sources, merged by workload key (``records.durations``'s holds: release to end):

- **the recorder's records**, read through the API server (the aggregated API
  ``records.sluicegate.dev``, RBAC ``list records`` in the recorder's namespace) when the
  process starts and every ``--records-seconds`` after, in a task of its own, never on the
  dispatch path. The first read asks for the last ``window`` (a week); later reads ask only for
  what touched the time since the previous answer. A recorder that is down, missing or
  forbidden only leaves the holds older: the failure is logged when it starts and when it ends.
- **the pods this replica sees end**: a released pod (stamped ``sluicegate.dev/dispatched-at``)
  that leaves the managed pods' watch (Succeeded, Failed or deleted: the watch's field selector
  drops terminal pods, as the recorder counts deleted work's holds too) ends its workload once
  no other released pod of that workload is live; its hold is from the earliest release stamp
  of its pods to the moment the watch dropped the last.

``Learned.durations()`` builds a ``records.durations.Durations`` from them when they changed, a
new object each time, so a worker thread may read the one it was handed while more is learned.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from controller.managed import ManagedPod
from kube.connecting import Connection, KubeError
from kube.reflecting import Change
from kube.resources import RECORDS
from policy import keys
from policy.pods import Pod
from policy.quantities import EMPTY, Resources, add
from policy.workloads import group_key
from records.durations import Durations, DurationShape, gpus_of, shape_of_record
from records.sources import RecordList
from records.trace import Record, TraceError, format_time, parse_time

log = logging.getLogger(__name__)

WINDOW: Final = 7 * 86400.0
"""How far back holds are kept (a week): enough for a queue's rhythm, and recent enough to be
the cluster's work as it is now."""
RECORDS_SECONDS: Final = 300.0
"""How often the recorder's records are read again: holds change slowly, and what ends meanwhile
is learned from the watch at once."""
OVERLAP: Final = 60.0  # seconds each later read reaches back before the previous answer's now


def workload_key(pod: Pod) -> str:
    """The key of the workload ``pod`` belongs to (its group's, or its own): the records' key."""
    return group_key(pod) if pod.group else pod.key


def released_at(pod: Pod) -> float | None:
    raw = pod.annotations.get(keys.DISPATCHED_AT_ANNOTATION)
    if not raw:
        return None
    try:
        return parse_time(raw)
    except ValueError:
        return None


@dataclass(slots=True)
class _Live:
    """A released workload whose pods are still watched."""

    queue: str
    workflow: str
    released: float
    members: dict[str, Resources] = field(default_factory=dict)  # uid -> requests
    asked: Resources = field(default_factory=lambda: EMPTY)  # the summed requests of every member seen


class Learned:
    """Holds by workload key, from the records and from the pods seen to end."""

    def __init__(self, window: float = WINDOW, wall: Callable[[], float] = time.time) -> None:
        self.window = window
        self.wall = wall
        self._holds: dict[str, tuple[DurationShape, float, float]] = {}  # key -> shape, hold, end
        self._live: dict[str, _Live] = {}
        self._built: Durations | None = None

    def __len__(self) -> int:
        return len(self._holds)

    def learn(self, key: str, shape: DurationShape, hold: float, ended: float) -> None:
        self._holds[key] = (shape, max(0.0, hold), ended)
        self._built = None

    def recorded(self, records: Iterable[Record]) -> int:
        """Learn the hold of each record that was released and has ended; how many."""
        count = 0
        for r in records:
            if r.released is not None and r.finished is not None:
                self.learn(r.key, shape_of_record(r), r.finished - r.released, r.finished)
                count += 1
        return count

    def pod_changed(self, change: Change[ManagedPod]) -> None:
        """A reflector listener: follows released pods and learns a workload's hold when its
        last released pod leaves the watch."""
        if change.new is not None:
            pod = change.new.pod
            if not pod.gated and (at := released_at(pod)) is not None:
                key = workload_key(pod)
                live = self._live.get(key)
                if live is None:
                    workflow = f"{pod.namespace}/{pod.workflow}" if pod.workflow else ""
                    live = self._live[key] = _Live(pod.queue, workflow, at)
                live.released = min(live.released, at)
                if change.uid not in live.members:
                    live.asked = add(live.asked, pod.requests)
                live.members[change.uid] = pod.requests
            return
        if change.old is None:
            return
        key = workload_key(change.old.pod)
        live = self._live.get(key)
        if live is None or live.members.pop(change.uid, None) is None or live.members:
            return
        del self._live[key]
        now = self.wall()
        self.learn(key, (live.queue, live.workflow, gpus_of(live.asked)), now - live.released, now)

    def durations(self) -> Durations:
        """The holds of the last ``window``, as ``records.durations`` keeps them."""
        if self._built is None:
            since = self.wall() - self.window
            for key in [k for k, (_, _, ended) in self._holds.items() if ended < since]:
                del self._holds[key]
            self._built = Durations.of_holds((shape, hold) for shape, hold, _ in self._holds.values())
        return self._built


class RecordReader:
    """Reads the recorder's records through the API server into ``learned``, now and then."""

    def __init__(
        self,
        connection: Connection,
        learned: Learned,
        namespace: str,
        *,
        seconds: float = RECORDS_SECONDS,
    ) -> None:
        self.connection = connection
        self.learned = learned
        self.path = RECORDS.path(namespace=namespace)
        self.seconds = seconds
        self.since: float | None = None  # the next read asks from here (None: the whole window)
        self.failing = ""

    async def read(self) -> int:
        """One read; how many holds it brought. ``KubeError`` or ``TraceError`` when it failed."""
        since = self.since if self.since is not None else self.learned.wall() - self.learned.window
        query = {"since": format_time(since)}
        data = await self.connection.request("GET", self.path, query=query, timeout=120)
        answer = await asyncio.to_thread(RecordList.from_json, data, f"the recorder ({self.path})")
        self.since = answer.now - OVERLAP
        return self.learned.recorded(answer.records)

    async def run(self) -> None:
        while True:
            try:
                count = await self.read()
            except (KubeError, TraceError) as e:
                if not self.failing:
                    log.warning("cannot read the run records (%s): start estimates go on with the holds "
                                "learned so far (%d) and those of pods seen to end; trying again every "
                                "%.0fs", e, len(self.learned), self.seconds)
                self.failing = str(e)
            except Exception as e:  # a bug here must not end the reads, nor anything else
                if not self.failing:
                    log.exception("reading the run records failed; trying again every %.0fs", self.seconds)
                self.failing = repr(e)
            else:
                if self.failing:
                    log.info("reading the run records again")
                self.failing = ""
                log.debug("read %d ended workloads' holds from the recorder; %d known", count,
                          len(self.learned))
            await asyncio.sleep(self.seconds)
