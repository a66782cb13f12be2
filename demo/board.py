"""What the demo's view shows at one instant, computed from pods and Queues as the API server
gives them (pure: no I/O).

A pod is *pending* while it carries Sluicegate's gate, *running* from its release until it is
terminal (so a released pod that Kubernetes cannot place holds its slot, as dispatch counts
it), then *finished*. Each waiting pod's reason is the one its ``sluicegate.dev/Dispatched``
condition gives: ``False`` with policy's reason while held, ``True`` with "dispatched, waiting
for Kubernetes to place it" once released but unplaceable. The story has no pod groups, so
pods are workloads here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from audit.records import requested
from policy import keys

Obj = Mapping[str, Any]

UNPLACEABLE: Final = "dispatched, waiting for Kubernetes to place it: "
"""How the gate controller begins the condition of a released pod it sees unplaceable."""
PLACEMENT: Final = "WaitingForPlacement"
"""The board's reason for such a pod (the name of the controller's Warning event)."""
UNEXPLAINED: Final = "NotYetExplained"
"""A gated pod whose condition the controller has not written yet (it waits 1 s first)."""


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    priority: int
    running: int
    max_running: int | None
    pending: int
    finished: int
    gpus: int
    gpu_quota: str | None

    @property
    def limit(self) -> str:
        return f"{self.running}/{'-' if self.max_running is None else self.max_running}"

    @property
    def gpu_use(self) -> str:
        return f"{self.gpus}/{self.gpu_quota or '-'}"


@dataclass(frozen=True, slots=True)
class Waiting:
    pod: str
    """``namespace/name``."""
    queue: str
    reason: str
    message: str
    released: bool


@dataclass(frozen=True, slots=True)
class Board:
    queues: tuple[QueueRow, ...]
    """Highest priority first."""
    teams: Mapping[str, int]
    """GPUs requested by each team's running pods."""
    waiting: tuple[Waiting, ...]
    """Unplaceable pods first, then held pods by queue priority and name."""

    @property
    def pending(self) -> int:
        return sum(q.pending for q in self.queues)

    def reasons(self) -> dict[tuple[str, str], tuple[int, str]]:
        """Per (queue, reason): how many wait so, and the first one's message."""
        out: dict[tuple[str, str], tuple[int, str]] = {}
        for w in self.waiting:
            count, message = out.get((w.queue, w.reason), (0, w.message))
            out[(w.queue, w.reason)] = (count + 1, message)
        return out


def condition(pod: Obj) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == keys.CONDITION:
            found: Obj = c
            return found
    return None


def gated(pod: Obj) -> bool:
    return any(g.get("name") == keys.GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ())


def finished(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed") or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def unplaceable(pod: Obj) -> str | None:
    """The scheduler's words for a released pod the controller reports unplaceable."""
    found = condition(pod)
    if gated(pod) or finished(pod) or found is None or found.get("status") != "True":
        return None
    message = str(found.get("message") or "")
    return message[len(UNPLACEABLE):] if message.startswith(UNPLACEABLE) else None


def no_node_fits(pod: Obj) -> str | None:
    """Why no node could hold a pod the controller keeps gated for that (``NoNodeFits``)."""
    found = condition(pod)
    if not gated(pod) or finished(pod) or found is None or found.get("reason") != keys.Reason.NO_NODE_FITS:
        return None
    return str(found.get("message") or "")


def gpus(pod: Obj) -> int:
    return requested(dict(pod.get("spec") or {}), keys.GPU_RESOURCE)


def _queue_of(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(keys.QUEUE_LABEL, ""))


def _key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def board(pods: Iterable[Obj], queues: Iterable[Obj]) -> Board:
    specs = {str(q["metadata"]["name"]): q.get("spec") or {} for q in queues}
    running: dict[str, int] = dict.fromkeys(specs, 0)
    pending = dict(running)
    done = dict(running)
    used = dict(running)
    teams: dict[str, int] = {}
    waiting: list[Waiting] = []
    for pod in pods:
        queue = _queue_of(pod)
        for table in (running, pending, done, used):
            table.setdefault(queue, 0)
        if finished(pod):
            done[queue] += 1
            continue
        if gated(pod):
            pending[queue] += 1
            found = condition(pod)
            if found is not None and found.get("status") == "False":
                waiting.append(Waiting(_key(pod), queue, str(found.get("reason") or ""),
                                       str(found.get("message") or ""), released=False))
            else:
                waiting.append(Waiting(_key(pod), queue, UNEXPLAINED, "", released=False))
            continue
        running[queue] += 1
        used[queue] += gpus(pod)
        team = str(((pod.get("metadata") or {}).get("labels") or {}).get(keys.TEAM_LABEL, ""))
        teams[team] = teams.get(team, 0) + gpus(pod)
        words = unplaceable(pod)
        if words is not None:
            waiting.append(Waiting(_key(pod), queue, PLACEMENT, UNPLACEABLE + words, released=True))

    def row(name: str) -> QueueRow:
        spec = specs.get(name, {})
        limit = spec.get("maxRunning")
        quota = (spec.get("quota") or {}).get(keys.GPU_RESOURCE)
        return QueueRow(name, int(spec.get("priority") or 0), running[name],
                        None if limit is None else int(limit), pending[name], done[name], used[name],
                        None if quota is None else str(quota))

    rows = sorted((row(name) for name in running), key=lambda r: (-r.priority, r.name))
    priority = {r.name: r.priority for r in rows}
    waiting.sort(key=lambda w: (not w.released, -priority.get(w.queue, 0), w.queue, w.pod))
    return Board(tuple(rows), dict(sorted(teams.items())), tuple(waiting))
