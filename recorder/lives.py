"""One pod's life as the recorder keeps it, how an observation of the pod moves it on, and how
the lives of a workload's pods make its run record (``records.trace.Record``).

Pure: no I/O, no clock (``now`` is passed in). A pod is seen many times (every watch event,
every list); each time ``observe`` takes the pod as it stands and the life as recorded, and
returns the life with what is new. A time, once recorded, is never moved.

Times come from the best source there is:

* ``submitted``: the admission stamp ``sluicegate.dev/admitted-at`` (microseconds), else
  ``creationTimestamp`` (policy.pods.submitted_at, as dispatch orders FIFO);
* ``released``: the controller's stamp ``sluicegate.dev/dispatched-at`` (microseconds, the
  instant it decided), else the moment the recorder first saw the pod without its gate (a
  break-glass release carries no stamp);
* ``bound`` and ``finished``: the pod's own times (the PodScheduled condition's
  lastTransitionTime; the latest container finishedAt) are whole seconds, the truth lies in
  the second after them. The recorder takes the earlier of ``now`` and the end of that
  second: seen live, that is the moment it saw the change (milliseconds late); seen after a
  restart, the end of the second the pod itself names (at most a second late).

A pod that got a deletionTimestamp while it waited (no release recorded, and nothing on the
pod showing a release before the deletion) ends then, ``Deleted`` and never released, whatever
happens to it afterwards: a finalizer may keep it, and something may still remove its gate or
bind it, but it was given up on while it waited and is no job that ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from policy import fields, keys
from policy.fields import Obj
from policy.pods import Pod, Submitter
from policy.quantities import EMPTY, Resources, add
from records.trace import Phase, PodRun, Record


@dataclass(frozen=True, slots=True)
class Life:
    """One managed pod from submission to its end, as recorded."""

    uid: str
    namespace: str
    name: str
    queue: str
    submitted: float
    team: str = ""
    workflow: str = ""
    workflow_max_running: int | None = None
    group: str = ""
    group_size: int = 1
    submitter: str = ""
    priority: int = 0
    requests: Resources = field(default_factory=lambda: EMPTY)
    released: float | None = None
    bound: float | None = None
    node: str = ""
    finished: float | None = None
    phase: Phase = Phase.PENDING
    lost: bool = False
    """Deleted while the recorder was not watching: ``finished`` is when it noticed."""

    @property
    def ended(self) -> bool:
        return self.phase.ended


def _seen(own: float, now: float) -> float:
    """When a change the pod dates to the second ``own`` happened, at the latest."""
    return min(now, own + 1.0) if own else now


def _scheduled_at(status: Obj) -> float:
    for cond in map(fields.obj, status.get("conditions") or ()):
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            return fields.timestamp(cond.get("lastTransitionTime"), "PodScheduled")
    return 0.0


def _finished_at(status: Obj) -> float:
    latest = 0.0
    for raw in (*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())):
        terminated = fields.at(fields.obj(raw), ("state", "terminated"))
        latest = max(latest, fields.timestamp(terminated.get("finishedAt"), "finishedAt"))
    return latest


def _deletion_began(obj: Obj) -> float:
    """When the pod's deletion was asked for, to the second (0.0 when it is not being deleted):
    its deletionTimestamp less the grace period the API server added to it (none for a pod no
    node runs, such as a gated one)."""
    meta = fields.obj(obj.get("metadata"))
    at = fields.timestamp(meta.get("deletionTimestamp"), "metadata.deletionTimestamp")
    grace = meta.get("deletionGracePeriodSeconds")
    if at and isinstance(grace, int) and not isinstance(grace, bool) and grace > 0:
        at -= grace
    return at


def _deleted_while_gated(began: float, annotations: Mapping[str, str], status: Obj) -> bool:
    """Whether a pod whose life has no release yet, being deleted since ``began``, was being
    deleted before anything released it. Seen live, the watch shows it gated with its
    deletionTimestamp first. Seen only later, a release counts only when the pod itself shows
    that it came first: the controller's stamp, or its binding, in an earlier second than the
    deletion's. The controller never releases a pod being deleted; a gate removed after that
    (by hand, or by a controller of old) may let it run, but does not make it a job."""
    if not began:
        return False
    stamp = fields.instant(annotations.get(keys.DISPATCHED_AT_ANNOTATION, ""))
    bound = _scheduled_at(status)
    return not ((stamp is not None and stamp < began) or 0 < bound < began)


def _submitter(annotations: Mapping[str, str]) -> str:
    raw = annotations.get(keys.SUBMITTER_ANNOTATION)
    stamp = Submitter.from_annotation(raw) if raw else None
    return stamp.user if stamp else ""


def observe(obj: Obj, now: float, old: Life | None = None) -> Life:
    """The life of the pod ``obj`` after seeing it as it stands at ``now``.

    Raises ``policy.fields.InvalidObject`` for a pod that cannot be read.
    """
    pod = Pod.parse(obj)
    status = fields.obj(obj.get("status"))
    annotations = pod.annotations
    life = old or Life(
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        queue=pod.queue,
        submitted=pod.created,
        team=pod.team,
        workflow=pod.workflow,
        workflow_max_running=fields.positive_int(annotations.get(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, "")),
        group=pod.group,
        group_size=fields.positive_int(annotations.get(keys.GROUP_SIZE_ANNOTATION, "")) or 1,
        submitter=_submitter(annotations),
        priority=pod.priority,
        requests=pod.requests,
    )
    if life.ended:
        return life
    began = _deletion_began(obj)
    if life.released is None and _deleted_while_gated(began, annotations, status):
        # Deleted while it waited: it ends here, whatever happens to the pod afterwards.
        return replace(life, finished=max(_seen(began, now), life.submitted), phase=Phase.DELETED)
    released, bound, node, finished, phase = life.released, life.bound, life.node, life.finished, life.phase
    if released is None and not pod.gated:
        stamp = fields.instant(annotations.get(keys.DISPATCHED_AT_ANNOTATION, ""))
        released = stamp if stamp is not None and stamp <= now else now
        released = max(released, life.submitted)
    if bound is None and pod.node_name and released is not None:
        bound = max(_seen(_scheduled_at(status), now), released)
        node = pod.node_name
    if pod.terminal:
        start = bound if bound is not None else released if released is not None else life.submitted
        finished = max(_seen(_finished_at(status), now), start)
        phase = Phase(pod.phase.value)
        if released is None:  # terminal without ever being released: it did not run here
            phase = Phase.DELETED
    elif released is not None:
        phase = Phase.RUNNING
    return replace(life, released=released, bound=bound, node=node, finished=finished, phase=phase)


def deleted(life: Life, now: float, *, lost: bool = False) -> Life:
    """The life of a pod that is gone: ended at ``now`` unless it had already ended."""
    if life.ended:
        return life
    start = max(t for t in (life.submitted, life.released, life.bound) if t is not None)
    return replace(life, finished=max(now, start), phase=Phase.DELETED, lost=lost)


# --- workloads ------------------------------------------------------------------------------


def _key(life: Life) -> str:
    """A pod group's lives go together by namespace and label; any other pod's life is its own
    workload (by uid: a name used again after the pod was deleted is another workload)."""
    return f"{life.namespace}/group:{life.group}" if life.group else life.uid


def _generations(lives: list[Life]) -> list[list[Life]]:
    """One group's lives split into the runs it had: a life submitted once every life before it
    had ended (a group name used again) starts a new workload, as dispatch sees it."""
    lives = sorted(lives, key=lambda life: (life.submitted, life.name))
    runs: list[list[Life]] = []
    ended_at: float | None = None  # when the current run's last life ended; None while one lives
    for life in lives:
        if not runs or (ended_at is not None and life.submitted >= ended_at):
            runs.append([])
            ended_at = life.finished
        elif ended_at is not None:
            ended_at = None if life.finished is None else max(ended_at, life.finished)
        runs[-1].append(life)
    return runs


def _earliest(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _latest_of_all(values: Iterable[float | None]) -> float | None:
    """The latest, when every value is present; None when any is missing."""
    listed = list(values)
    if not listed or any(v is None for v in listed):
        return None
    return max(v for v in listed if v is not None)


def _phase(lives: list[Life]) -> Phase:
    if all(life.ended for life in lives):
        phases = {life.phase for life in lives}
        for phase in (Phase.FAILED, Phase.DELETED):
            if phase in phases and (phase is Phase.FAILED or len(phases) == 1):
                return phase
        return Phase.SUCCEEDED if Phase.SUCCEEDED in phases else Phase.DELETED
    return Phase.RUNNING if any(life.released is not None for life in lives) else Phase.PENDING


def _waiting(lives: list[Life]) -> list[Life]:
    """The pods a workload that was never released was made of: those still there, or, once
    all have ended, those there when its last pod was submitted (the group at its fullest);
    never pods deleted before that."""
    live = [life for life in lives if not life.ended]
    if live:
        return live
    last = max(life.submitted for life in lives)
    return [life for life in lives if life.finished is None or life.finished >= last]


def _total(lives: Iterable[Life]) -> Resources:
    requests: Resources = EMPTY
    for life in lives:
        requests = add(requests, life.requests)
    return requests


def workload(lives: list[Life]) -> Record:
    """The run record of one workload from its pods' lives (one pod, or a pod group).

    Its requests are those of the pods it released (for a group, each listed in ``pods`` with
    its own times); a pod deleted while it waited asks for nothing. A workload never released
    asks for what its pods waiting at the end asked for (``_waiting``). A group's size is the one
    its first released pod carries, as dispatch reads it: a pod that named the group with another
    size and never ran does not change it."""
    lives = sorted(lives, key=lambda life: (life.submitted, life.name))
    first = lives[0]
    ran = [life for life in lives if life.released is not None]
    released = _earliest(life.released for life in ran)
    phase = _phase(lives)
    bound = _latest_of_all(life.bound for life in ran) if ran else None
    finished = _latest_of_all(life.finished for life in lives) if phase.ended else None
    if phase is not Phase.DELETED and phase.ended and released is None:
        phase = Phase.DELETED
    limits = [life.workflow_max_running for life in lives if life.workflow_max_running is not None]
    pods = tuple(
        PodRun(life.name, life.released, life.requests, life.bound, life.node, life.finished)
        for life in sorted(ran, key=lambda life: (life.released or 0.0, life.name))
        if life.released is not None
    ) if first.group else ()
    return Record(
        namespace=first.namespace,
        name=first.name,
        queue=first.queue,
        submitted=first.submitted,
        phase=phase,
        team=first.team,
        workflow=first.workflow,
        workflow_max_running=min(limits) if limits and first.workflow else None,
        group=first.group,
        group_size=(ran or lives)[0].group_size if first.group else 1,  # as dispatch read it
        submitter=first.submitter,
        priority=max(life.priority for life in lives),
        requests=_total(ran or _waiting(lives)),
        released=released,
        bound=bound,
        node=next((life.node for life in ran if life.node), ""),
        finished=finished,
        pods=pods,
    )


def workloads(lives: Iterable[Life]) -> list[Record]:
    """The run records of the workloads these pods make up, ordered by submission; a name or
    group used again counts the workloads that had it before (``Record.again``)."""
    by_key: dict[str, list[Life]] = {}
    for life in lives:
        by_key.setdefault(_key(life), []).append(life)
    records = [workload(run) for lives in by_key.values() for run in _generations(lives)]
    records.sort(key=lambda r: (r.submitted, r.key))
    before: dict[str, int] = {}
    for i, r in enumerate(records):
        again = before.get(r.key, 0)
        before[r.key] = again + 1
        if again:
            records[i] = replace(r, again=again)
    return records


def life_json(life: Life) -> str:
    """``life`` as the JSON the database keeps."""
    return json.dumps(
        {
            "uid": life.uid, "namespace": life.namespace, "name": life.name, "queue": life.queue,
            "submitted": life.submitted, "team": life.team, "workflow": life.workflow,
            "workflowMaxRunning": life.workflow_max_running, "group": life.group,
            "groupSize": life.group_size, "submitter": life.submitter, "priority": life.priority,
            "requests": dict(life.requests), "released": life.released, "bound": life.bound,
            "node": life.node, "finished": life.finished, "phase": life.phase.value, "lost": life.lost,
        },
        separators=(",", ":"),
    )


def parse_life(text: str) -> Life:
    """A life from the database's JSON (``life_json``)."""
    d = json.loads(text)
    return Life(
        uid=d["uid"], namespace=d["namespace"], name=d["name"], queue=d["queue"],
        submitted=d["submitted"], team=d["team"], workflow=d["workflow"],
        workflow_max_running=d["workflowMaxRunning"], group=d["group"], group_size=d["groupSize"],
        submitter=d["submitter"], priority=d["priority"], requests=dict(d["requests"]),
        released=d["released"], bound=d["bound"], node=d["node"], finished=d["finished"],
        phase=Phase(d["phase"]), lost=d["lost"],
    )
