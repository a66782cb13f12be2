"""Kueue v0.17.0 as a system under test (``controlplane.kueue``), in its two configurations.

``KueueSystem()`` keeps the release's client limits (QPS 50, burst 100); ``KueueSystem(raised)``
sets them to 1000/1000, so the API server and the CPU set its pace. Each scenario queue is a
ClusterQueue with a ``pods`` quota of the queue's limit (Kueue counts a plain pod as one pod)
and a GPU quota of as many GPUs, and a LocalQueue of the same name in every namespace. Kueue's
own webhook gates the pods at creation; it runs as the user ``kueue`` (a client certificate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from audit.checking import Limits
from audit.naming import KUEUE, Naming
from benchmarks.counting import Obj, user
from benchmarks.systems import Account, Progress, Setup, queue_limits
from controlplane import building
from controlplane.kueue import (
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_VALUE,
    RAISED_LIMITS,
    USER,
    ClientLimits,
    Kueue,
    KueueQueue,
)
from controlplane.launching import LocalCluster

SHIPPED_QPS: Final = 50


class KueueSystem:
    naming: Naming = KUEUE
    namespace_labels: Mapping[str, str] = {NAMESPACE_LABEL: NAMESPACE_LABEL_VALUE}
    gates_by_driver = False
    subjects: Sequence[Obj] = (user(USER),)

    def __init__(self, limits: ClientLimits | None = None) -> None:
        self.client_limits = limits
        self.key = "kueue" if limits is None else f"kueue-qps{limits.qps:g}"
        qps = SHIPPED_QPS if limits is None else limits.qps
        self.title = f"Kueue (QPS {qps:g}{', as shipped' if limits is None else ''})"
        self._cluster: LocalCluster | None = None
        self._kueue: Kueue | None = None

    def version(self) -> str:
        return building.kueue_version()

    def prepare(self, cluster: LocalCluster) -> None:
        del cluster  # nothing to tell the cluster before it starts

    def start(self, cluster: LocalCluster, progress: Progress) -> None:
        self._cluster = cluster
        self._kueue = Kueue(cluster, limits=self.client_limits)
        self._kueue.start(progress)

    def configure(self, setup: Setup) -> None:
        assert self._kueue is not None, "start() first"
        limit = setup.scenario.max_running
        queues = [KueueQueue(q, gpus=limit * setup.load.gpus, max_running=limit) for q in setup.load.queues]
        self._kueue.configure(queues, setup.namespaces)

    def processes(self) -> Mapping[str, int]:
        pid = self._kueue.pid if self._kueue is not None else None
        return {"kueue": pid} if pid is not None else {}

    def limits(self, setup: Setup) -> Limits:
        return queue_limits(setup)

    def finish(self, setup: Setup) -> Account:
        """Kueue made one Workload per pod (the gates it removed were its own)."""
        assert self._cluster is not None
        made = 0
        for namespace in setup.namespaces:
            listed = self._cluster.kubectl("get", "workloads.kueue.x-k8s.io", "-n", namespace, "-o", "name")
            made += len(listed.stdout.split())
        if made != setup.scenario.pods:
            return Account(problems=(f"Kueue made {made} Workloads for {setup.scenario.pods} pods",))
        return Account()

    def stop(self) -> None:
        if self._kueue is not None:
            kueue, self._kueue = self._kueue, None
            kueue.stop()


def shipped() -> KueueSystem:
    return KueueSystem()


def raised() -> KueueSystem:
    return KueueSystem(RAISED_LIMITS)
