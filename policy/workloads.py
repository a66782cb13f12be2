"""Group pods into workloads: one pod, or all pods of a pod group, with their state."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from policy import fields, keys
from policy.model import State, Workload
from policy.pods import Pod
from policy.quantities import total


def state_of(pods: Iterable[Pod]) -> State:
    """Pending while every pod is gated; finished when every pod is terminal; else running.

    A released pod holds its workload's slot until it ends, even if it was never placed.
    """
    pods = tuple(pods)
    if all(p.gated for p in pods):
        return State.PENDING
    if all(p.terminal for p in pods):
        return State.FINISHED
    return State.RUNNING


def _workflow_limit(pods: Iterable[Pod]) -> int | None:
    """The smallest ``workflow-max-running`` that any live pod carries (one workflow, one limit)."""
    limits = [
        limit
        for p in pods
        if not p.terminal
        and (limit := fields.positive_int(p.annotations.get(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, "")))
    ]
    return min(limits) if limits else None


def _disagreement(pods: tuple[Pod, ...]) -> str:
    """Why a group's pods cannot be released as one workload: they name different queues or
    workflows. Empty when they agree."""
    for what, values in (("queues", {p.queue for p in pods}), ("workflows", {p.workflow for p in pods})):
        if len(values) > 1:
            names = ", ".join(sorted(v or "(none)" for v in values))
            return f"its pods name different {what}: {names}"
    return ""


def workload_of(key: str, pods: tuple[Pod, ...]) -> Workload:
    """The workload of ``pods`` (one pod, or every pod of a group).

    It counts the requests of its live pods only: a terminal pod frees its requests, as
    ResourceQuota frees them, though the workload runs until all its pods are done.
    """
    first = min(pods, key=lambda p: (p.created, p.name))
    workflow = first.workflow
    group_size = fields.positive_int(first.annotations.get(keys.GROUP_SIZE_ANNOTATION, ""))
    return Workload(
        key=key,
        namespace=first.namespace,
        queue=first.queue,
        team=first.team,
        pods=pods,
        state=state_of(pods),
        requests=total(p.requests for p in pods if not p.terminal),
        priority=max(p.priority for p in pods),
        created=first.created,
        workflow=f"{first.namespace}/{workflow}" if workflow else "",
        workflow_max_running=_workflow_limit(pods) if workflow else None,
        group_size=group_size if first.group and group_size else len(pods),
        disagreement=_disagreement(pods) if len(pods) > 1 else "",
    )


def build_workloads(pods: Iterable[Pod]) -> list[Workload]:
    """Every managed pod's workload; pods of one group (by namespace and label) go together.

    One workflow, one limit: every workload of a workflow gets the smallest
    ``workflow-max-running`` that any of its pending or running pods carries, so a pod without
    the annotation, or with a larger one, cannot let extra trials through. Dispatch trusts
    this, so build the workloads of all managed pods together.
    """
    groups: dict[str, list[Pod]] = {}
    out: list[Workload] = []
    for pod in pods:
        if pod.group:
            groups.setdefault(f"{pod.namespace}/group:{pod.group}", []).append(pod)
        else:
            out.append(workload_of(pod.key, (pod,)))
    out.extend(workload_of(key, tuple(members)) for key, members in groups.items())
    return _one_limit_per_workflow(out)


def _one_limit_per_workflow(workloads: list[Workload]) -> list[Workload]:
    limits: dict[str, int] = {}
    for w in workloads:
        limit = w.workflow_max_running
        if limit is not None and w.state is not State.FINISHED and limit < limits.get(w.workflow, limit + 1):
            limits[w.workflow] = limit
    if not limits:
        return workloads
    return [
        replace(w, workflow_max_running=limits[w.workflow])
        if w.workflow in limits and w.workflow_max_running != limits[w.workflow]
        else w
        for w in workloads
    ]
