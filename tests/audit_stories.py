"""Hand-built records for the audit checks: ``Story().pod("p1").release("p1", 1).succeed("p1", 3)``.

Each call adds what the recorder would have seen, at a time in seconds from the start; the
record sorts events by time (stably, so calls at the same instant keep their order).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Self

from audit.records import Event, Kind, PodInfo, Record

WALL0 = 1_700_000_000.0


class Story:
    def __init__(self) -> None:
        self.pods: dict[str, PodInfo] = {}
        self.events: list[Event] = []
        self.relists = 0

    def pod(
        self, name: str, at: float = 0.0, *, queue: str = "a", team: str = "t", workflow: str = "",
        group: str = "", gpus: int = 1, gated: bool = True, namespace: str = "ns", preexisting: bool = False,
    ) -> Self:
        uid = f"uid-{namespace}-{name}"
        gates = ("sluicegate.dev/dispatch",) if gated else ()
        self.pods[uid] = PodInfo(uid, namespace, name, queue, team, workflow, group, gpus, gates, preexisting)
        self._add(name, Kind.CREATED, at, ",".join(gates), namespace)
        if not gated:
            self._add(name, Kind.UNGATED, at, "", namespace)
        return self

    def _add(self, name: str, kind: Kind, at: float, detail: str = "", namespace: str = "ns") -> Self:
        self.events.append(Event(f"uid-{namespace}-{name}", kind, at, WALL0 + at, detail))
        return self

    def release(self, name: str, at: float, namespace: str = "ns") -> Self:
        return self._add(name, Kind.UNGATED, at, "sluicegate.dev/dispatch", namespace)

    def regate(self, name: str, at: float, namespace: str = "ns") -> Self:
        return self._add(name, Kind.GATED, at, "sluicegate.dev/dispatch", namespace)

    def bind(self, name: str, at: float, node: str = "gpu-node-0", namespace: str = "ns") -> Self:
        return self._add(name, Kind.BOUND, at, node, namespace)

    def run(self, name: str, at: float, namespace: str = "ns") -> Self:
        return self._add(name, Kind.RUNNING, at, "", namespace)

    def succeed(self, name: str, at: float, namespace: str = "ns") -> Self:
        return self._add(name, Kind.SUCCEEDED, at, "", namespace)

    def fail(self, name: str, at: float, namespace: str = "ns") -> Self:
        return self._add(name, Kind.FAILED, at, "", namespace)

    def delete(self, name: str, at: float, namespace: str = "ns") -> Self:
        return self._add(name, Kind.DELETED, at, "", namespace)

    def lifecycle(self, name: str, released: float, finished: float, namespace: str = "ns") -> Self:
        """Released, bound and Running at ``released``; Succeeded at ``finished``."""
        return (self.release(name, released, namespace).bind(name, released, namespace=namespace)
                .run(name, released, namespace).succeed(name, finished, namespace))

    def record(self) -> Record:
        events = tuple(sorted(self.events, key=lambda e: e.at))
        end = max((e.at for e in events), default=0.0)
        return Record(MappingProxyType(dict(self.pods)), events, 0.0, WALL0, end, self.relists)
