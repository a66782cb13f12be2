"""The demo's closing figures, from the auditor's record (pure: no I/O).

The record is the independent one of ``audit.recording`` (its own watch of the pods, with a
timestamp for every transition), not the view's counters. Each pod becomes a run record
(``records.trace.Record``: submitted at creation, released when its gate went, bound, finished)
and the per-queue figures are ``records.accounting.account``'s: pods, mean and p95 wait
(submission to release), GPU-hours from each pod's binding to its end, and apart from them
the quota-hours of pods released but not (yet) placed: a pod Kubernetes cannot place holds
its queue's quota from its release, as dispatch counts it, but uses no GPU. Limits are
checked with ``audit.checking.violations`` against the Queues, Teams, Policy and workflow
limits the cluster holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

from audit import records as audit
from audit.checking import Cap, Limits, violations
from demo.story import SWEEP, URGENT_QUEUE
from policy import keys
from policy.quantities import QuantityError, parse
from records.accounting import By, account
from records.figures import Waits
from records.trace import Phase, Record

Obj = Mapping[str, Any]


def runs(record: audit.Record) -> list[Record]:
    """One run record per pod of the auditor's record, with its wall-clock times."""
    out = []
    for uid, history in record.histories().items():
        pod = record.pods[uid]
        first: dict[audit.Kind, float] = {}
        for event in history:
            first.setdefault(event.kind, event.wall)
        ended = [k for k in (audit.Kind.SUCCEEDED, audit.Kind.FAILED, audit.Kind.DELETED) if k in first]
        if ended:
            phase = Phase(ended[0].value.capitalize())
        else:
            phase = Phase.RUNNING if audit.Kind.UNGATED in first else Phase.PENDING
        out.append(Record(
            namespace=pod.namespace, name=pod.name, queue=pod.queue,
            submitted=first.get(audit.Kind.CREATED, record.started_wall), phase=phase, team=pod.team,
            workflow=pod.workflow, requests=MappingProxyType({keys.GPU_RESOURCE: pod.gpus * 1000}),
            released=first.get(audit.Kind.UNGATED), bound=first.get(audit.Kind.BOUND),
            node=next((e.detail for e in history if e.kind is audit.Kind.BOUND), ""),
            finished=min((first[k] for k in ended), default=None),
        ))
    return out


def _gpus(spec: Obj) -> int | None:
    quota = (spec.get("quota") or {}).get(keys.GPU_RESOURCE)
    try:
        return None if quota is None else -(-parse(quota) // 1000)
    except QuantityError:
        return None


def _cap(obj: Obj) -> Cap:
    spec = obj.get("spec") or {}
    limit = spec.get("maxRunning")
    return Cap(running=None if limit is None else int(limit), gpus=_gpus(spec))


def limits(queues: Iterable[Obj], teams: Iterable[Obj], policy: Obj | None, pods: Iterable[Obj]) -> Limits:
    """The limits in force: Queues, Teams, the Policy, and each workflow's smallest limit as
    admission wrote it on the pods (``sluicegate.dev/workflow-max-running``)."""
    workflows: dict[str, int] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        workflow = (meta.get("labels") or {}).get(keys.WORKFLOW_LABEL)
        limit = (meta.get("annotations") or {}).get(keys.WORKFLOW_MAX_RUNNING_ANNOTATION)
        if workflow and limit and str(limit).isdigit():
            key = f"{meta.get('namespace', '')}/{workflow}"
            workflows[key] = min(int(limit), workflows.get(key, int(limit)))
    return Limits(
        cluster=_cap(policy) if policy else Cap(),
        queues={q["metadata"]["name"]: _cap(q) for q in queues},
        teams={t["metadata"]["name"]: _cap(t) for t in teams},
        workflows={k: Cap(running=v) for k, v in workflows.items()},
    )


@dataclass(frozen=True, slots=True)
class QueueLine:
    queue: str
    pods: int
    released: int
    waiting: int
    mean_wait: float | None
    p95_wait: float | None
    gpu_hours: float
    quota_hours: float
    """GPU-hours of quota held by released pods while not placed."""


@dataclass(frozen=True, slots=True)
class Summary:
    queues: tuple[QueueLine, ...]
    urgent_wait: float | None
    """Seconds the urgent Job's pod waited to be released."""
    trial_waits: Waits
    """The sweep's trials' waits."""
    overtaken: int
    """Trials submitted before the urgent pod and released after it."""
    violations: tuple[str, ...]
    """Every release that took a scope over its limit, by the auditor's record: none expected."""
    refused: str
    """Admission's message to the submission the story expects refused ("" if it was admitted)."""
    unplaceable: Mapping[str, str]
    """Released pods Kubernetes could not place: pod -> the scheduler's words."""

    @property
    def urgent_first(self) -> bool:
        mean = self.trial_waits.mean
        return self.urgent_wait is not None and mean is not None and self.urgent_wait < mean

    def to_json(self) -> dict[str, Any]:
        return {
            "queues": [asdict(q) for q in self.queues],
            "urgentWaitSeconds": self.urgent_wait,
            "trialWaits": asdict(self.trial_waits),
            "overtaken": self.overtaken,
            "violations": list(self.violations),
            "refused": self.refused,
            "unplaceable": dict(self.unplaceable),
        }


def summarize(
    record: audit.Record, limits: Limits, *, until: float, refused: str, unplaceable: Mapping[str, str],
    queues: Sequence[str] = (),
) -> Summary:
    """The closing figures; ``until`` is the wall-clock end of the period (the story's end)."""
    ran = runs(record)
    report = account(ran, since=record.started_wall, until=until, by=By.QUEUE)
    lines = {line.scope: line for line in report.lines}
    names = sorted({*queues, *(r.queue for r in ran)})

    def line(queue: str) -> QueueLine:
        mine = [r for r in ran if r.queue == queue]
        found = lines.get(queue)
        return QueueLine(
            queue, len(mine), sum(r.released is not None for r in mine),
            sum(r.released is None for r in mine),
            found.waits.mean if found else None, found.waits.p95 if found else None,
            found.gpu_hours if found else 0.0, found.quota_hours if found else 0.0,
        )

    urgent = next((r for r in ran if r.queue == URGENT_QUEUE), None)
    trials = [r for r in ran if r.workflow == SWEEP]
    overtaken = 0
    if urgent is not None and urgent.released is not None:
        after = urgent.released
        overtaken = sum(t.submitted < urgent.submitted and (t.released is None or t.released > after)
                        for t in trials)
    return Summary(
        queues=tuple(line(q) for q in names),
        urgent_wait=urgent.wait if urgent else None,
        trial_waits=Waits.of(w for t in trials if (w := t.wait) is not None),
        overtaken=overtaken,
        violations=tuple(str(v) for v in violations(record, limits)),
        refused=refused,
        unplaceable=dict(unplaceable),
    )
