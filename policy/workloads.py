"""Group pods into workloads: one pod, or all pods of a pod group, with their state."""

from __future__ import annotations

from collections.abc import Iterable

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


def workload_of(key: str, pods: tuple[Pod, ...]) -> Workload:
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
        requests=total(p.requests for p in pods),
        priority=max(p.priority for p in pods),
        created=first.created,
        workflow=f"{first.namespace}/{workflow}" if workflow else "",
        workflow_max_running=fields.positive_int(
            first.annotations.get(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, "")
        ),
        group_size=group_size if first.group and group_size else len(pods),
    )


def build_workloads(pods: Iterable[Pod]) -> list[Workload]:
    """Every managed pod's workload; pods of one group (by namespace and label) go together."""
    groups: dict[str, list[Pod]] = {}
    out: list[Workload] = []
    for pod in pods:
        if pod.group:
            groups.setdefault(f"{pod.namespace}/group:{pod.group}", []).append(pod)
        else:
            out.append(workload_of(pod.key, (pod,)))
    out.extend(workload_of(key, tuple(members)) for key, members in groups.items())
    return out
