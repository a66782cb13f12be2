"""Kueue objects that express a Sluicegate-like policy: queues with GPU and running-pod limits.

A Sluicegate Queue becomes a ClusterQueue of the same name, plus a LocalQueue of that name in
every namespace that submits to it (a pod names it with the label ``kueue.x-k8s.io/queue-name``).
Kueue counts a covered ``pods`` resource as the number of pods a workload has, so a ``pods``
quota stands in for ``maxRunning`` (for plain pods, one pod is one workload). Capacity shared by
several queues (a team's or the cluster's limit) is a Cohort that holds the quota; its queues own
none themselves and borrow up to their own limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GROUP_VERSION = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
FLAVOR = "default-flavor"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Kueue has no "unlimited" quota: every covered resource needs a number. A million pods, GPUs or
# CPUs is beyond any scenario here, so it stands for "no limit".
UNLIMITED = 1_000_000
# cpu and memory are covered (without a limit) so that a pod which also requests them is
# admissible: Kueue refuses a workload that requests a resource its ClusterQueue does not cover.
_UNLIMITED_QUANTITIES = {"cpu": str(UNLIMITED), "memory": f"{UNLIMITED}Gi"}


@dataclass(frozen=True, slots=True)
class KueueQueue:
    """One queue: at most ``gpus`` GPUs and ``max_running`` pods admitted at once (None: no limit).

    With a ``cohort`` the queue owns no quota and borrows up to its limits from the cohort.
    """

    name: str
    gpus: int | None = None
    max_running: int | None = None
    cohort: str | None = None


@dataclass(frozen=True, slots=True)
class KueueCohort:
    """Capacity shared by the queues that name it: at most ``gpus`` GPUs and ``max_running`` pods."""

    name: str
    gpus: int | None = None
    max_running: int | None = None


def _quota(name: str, nominal: int | str, borrowing: int | None = None) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": name, "nominalQuota": str(nominal)}
    if borrowing is not None:
        quota["borrowingLimit"] = str(borrowing)
    return quota


def _resource_groups(quotas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{
        "coveredResources": [q["name"] for q in quotas],
        "flavors": [{"name": FLAVOR, "resources": quotas}],
    }]


def _own_quotas(gpus: int | None, max_running: int | None) -> list[dict[str, Any]]:
    return [
        _quota(GPU, UNLIMITED if gpus is None else gpus),
        _quota("pods", UNLIMITED if max_running is None else max_running),
        *(_quota(name, amount) for name, amount in _UNLIMITED_QUANTITIES.items()),
    ]


def _borrowed_quotas(gpus: int | None, max_running: int | None) -> list[dict[str, Any]]:
    # No borrowingLimit means "as much as the cohort has"; cpu and memory come from the cohort too.
    return [
        _quota(GPU, 0, gpus),
        _quota("pods", 0, max_running),
        *(_quota(name, 0) for name in _UNLIMITED_QUANTITIES),
    ]


def resource_flavor() -> dict[str, Any]:
    """The one flavor: every fake node is alike, so it selects no node labels."""
    return {"apiVersion": GROUP_VERSION, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}


def cluster_queue(queue: KueueQueue) -> dict[str, Any]:
    quotas = (_own_quotas(queue.gpus, queue.max_running) if queue.cohort is None
              else _borrowed_quotas(queue.gpus, queue.max_running))
    spec: dict[str, Any] = {
        # An empty selector admits pods from every namespace (a missing one admits none); which
        # namespaces Kueue manages at all is the Configuration's managedJobsNamespaceSelector.
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": _resource_groups(quotas),
    }
    if queue.cohort is not None:
        spec["cohortName"] = queue.cohort
    return {
        "apiVersion": GROUP_VERSION, "kind": "ClusterQueue", "metadata": {"name": queue.name}, "spec": spec,
    }


def cohort(shared: KueueCohort) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "Cohort",
        "metadata": {"name": shared.name},
        "spec": {"resourceGroups": _resource_groups(_own_quotas(shared.gpus, shared.max_running))},
    }


def local_queue(queue: KueueQueue, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": queue.name, "namespace": namespace},
        "spec": {"clusterQueue": queue.name},
    }


def policy_objects(
    queues: Sequence[KueueQueue], namespaces: Sequence[str], cohorts: Sequence[KueueCohort] = ()
) -> list[dict[str, Any]]:
    """The flavor, the cohorts, a ClusterQueue per queue and a LocalQueue per queue and namespace.

    Raises ValueError when a queue names a cohort that is not given, which Kueue would accept
    and then admit nothing from.
    """
    known = {c.name for c in cohorts}
    for queue in queues:
        if queue.cohort is not None and queue.cohort not in known:
            raise ValueError(f"queue {queue.name} names cohort {queue.cohort!r}, which is not given")
    return [
        resource_flavor(),
        *(cohort(c) for c in cohorts),
        *(cluster_queue(q) for q in queues),
        *(local_queue(q, ns) for ns in namespaces for q in queues),
    ]
