"""Group pods into workloads: one pod, or all pods of a pod group, with their state."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from policy import fields, keys
from policy.model import State, Workload
from policy.pods import Pod
from policy.quantities import Resources, subtract, total


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
    """Why a group's pods cannot be released as one workload: they name different queues,
    teams, workflows or group sizes. Empty when they agree. (Teams differ when the namespace
    changed team between two pods' admissions: a group is counted toward one team, so a member
    admitted for another would be charged to a team that never checked it.)"""
    sizes = {p.annotations.get(keys.GROUP_SIZE_ANNOTATION, "").strip() for p in pods if p.group}
    for what, values in (
        ("queues", {p.queue for p in pods}),
        ("teams", {p.team for p in pods}),
        ("workflows", {p.workflow for p in pods}),
        ("group sizes", sizes),
    ):
        if len(values) > 1:
            names = ", ".join(sorted(v or "(none)" for v in values))
            return f"its pods name different {what}: {names}"
    return ""


def _requests(pods: tuple[Pod, ...]) -> Resources:
    """The requests of the live pods, each shared ResourceClaim counted once however many of
    them name it (``policy.devices``)."""
    live = [p for p in pods if not p.terminal]
    out = total(p.requests for p in live)
    seen: set[str] = set()
    for pod in live:
        for name, amounts in pod.shared_claims.items():
            if name in seen:
                out = subtract(out, amounts)
            seen.add(name)
    return out


def workload_of(key: str, pods: tuple[Pod, ...], surplus: str = "") -> Workload:
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
        requests=_requests(pods),
        priority=max(p.priority for p in pods),
        created=first.created,
        workflow=f"{first.namespace}/{workflow}" if workflow else "",
        workflow_max_running=_workflow_limit(pods) if workflow else None,
        group_size=group_size if first.group and group_size else len(pods),
        disagreement=_disagreement(pods) if len(pods) > 1 else "",
        surplus=surplus,
    )


def group_workloads(key: str, members: Iterable[Pod]) -> list[Workload]:
    """The workloads of one pod group's pods.

    A group none of whose pods was released is one pending workload. A group whose released
    pods have all ended is finished: its gated pods form a new pending workload that goes through
    every limit. A running group (a released pod still live) is a running workload of its
    released pods. Its gated pods that agree with its live pods (queue, team, workflow, size) join it,
    oldest first, while the live pods and they stay within its size, and only when its live pods
    agree among themselves. Those form a pending workload (key ``<group key>/joining``,
    ``joins``) that passes every limit like any other, its requests counted beside the group's
    live pods, but takes no slot of a count limit: the group holds its slot already. Agreeing
    Ray workers beyond its size (label ``ray.io/node-type: worker``) are workers an autoscaler
    added to a running RayCluster: each queues on its own, a workload of one pod with a slot of
    its own (key ``<group key>/added:<pod>``). Other agreeing pods beyond its size wait in a
    pending workload (key ``<group key>/surplus``) that is never released as such and says the
    group already has its size; gated pods that disagree wait in
    another (``<group key>/disagreeing``) that names the disagreement: a pod mislabelled with the
    group's name never holds back the pods that do belong to it.
    """
    pods = tuple(members)
    gated = sorted((p for p in pods if p.gated), key=lambda p: (p.created, p.name))
    released = tuple(p for p in pods if not p.gated)
    live = [p for p in released if not p.terminal]
    if not released or not gated:
        return [workload_of(key, pods)]
    if not live:
        return [workload_of(f"{key}/ended", released), workload_of(key, tuple(gated))]
    first = min(live, key=lambda p: (p.created, p.name))
    size = fields.positive_int(first.annotations.get(keys.GROUP_SIZE_ANNOTATION, "")) or len(live)
    split = _disagreement(tuple(live))
    agree = [] if split else [p for p in gated if not _disagreement((first, p))]
    others = tuple(p for p in gated if p not in agree)
    room = max(size - len(live), 0)
    joining, beyond = tuple(agree[:room]), tuple(agree[room:])
    added = tuple(p for p in beyond if p.labels.get(keys.RAY_NODE_TYPE_LABEL) == keys.RAY_WORKER)
    beyond = tuple(p for p in beyond if p not in added)
    out = [workload_of(key, released)]
    if joining:
        out.append(replace(workload_of(f"{key}/joining", joining), group_size=len(joining), joins=True))
    for pod in added:
        out.append(replace(workload_of(f"{key}/added:{pod.name}", (pod,)), group_size=1))
    if beyond:
        surplus = f"group {first.group} already has {len(live) + len(joining)}/{size} pods live or joining"
        out.append(workload_of(f"{key}/surplus", beyond, surplus))
    if others:
        disagreement = split or _disagreement((first, *others))
        out.append(replace(workload_of(f"{key}/disagreeing", others), disagreement=disagreement))
    return out


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
            groups.setdefault(group_key(pod), []).append(pod)
        else:
            out.append(workload_of(pod.key, (pod,)))
    for key, members in groups.items():
        out.extend(group_workloads(key, members))
    limits = workflow_limits(out)
    return [limited(w, limits) for w in out] if limits else out


def group_key(pod: Pod) -> str:
    """The key of the pod's group's workload: pods of one group go together by namespace and
    label."""
    return f"{pod.namespace}/group:{pod.group}"


def workflow_limits(workloads: Iterable[Workload]) -> dict[str, int]:
    """Per workflow, the smallest ``workflow-max-running`` that any of its pending or running
    workloads carries."""
    limits: dict[str, int] = {}
    for w in workloads:
        limit = w.workflow_max_running
        if limit is not None and w.state is not State.FINISHED and limit < limits.get(w.workflow, limit + 1):
            limits[w.workflow] = limit
    return limits


def limited(w: Workload, limits: dict[str, int]) -> Workload:
    """``w`` under its workflow's one limit (``workflow_limits``); itself when that is its own."""
    limit = limits.get(w.workflow) if w.workflow else None
    if limit is None or w.workflow_max_running == limit:
        return w
    return replace(w, workflow_max_running=limit)
