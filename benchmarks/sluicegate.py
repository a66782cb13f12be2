"""Sluicegate as a system under test: its webhook and gate controller, run as ``make up`` runs
them (``controlplane.deploying.LocalSluicegate``: the process table, each process as its own
ServiceAccount).

Each scenario queue is a Queue with ``maxRunning`` of the queue's limit and a GPU quota of as
many GPUs; each team's namespace carries ``sluicegate.dev/team`` (the load driver writes it), so
the webhook gates every pod at creation. The requests of the webhook and the controller are
counted together.

kube-scheduler calls Sluicegate's scheduler extender (``prepare``, before the cluster starts), so
Sluicegate's runs include what the extender costs kube-scheduler, as a real installation does.

``SluicegateSystem(running=local)`` uses processes that already run (the e2e session's) instead
of starting its own, and leaves them running.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from audit.checking import Limits
from audit.naming import SLUICEGATE, Naming
from audit.scraping import samples
from benchmarks.counting import Obj, service_account
from benchmarks.systems import (
    Account,
    Progress,
    Setup,
    SystemFailure,
    apply,
    queue_limits,
)
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from controlplane.services import CONTROLLER, NAMESPACE, SERVICES
from policy import keys

CONTROLLER_MODULE = CONTROLLER.module  # the gate controllers, whose metrics count the releases
RELEASES = "sluicegate_releases_total"
LOOP_BLOCK = "sluicegate_event_loop_longest_block_seconds"
READY_SECONDS = 60.0


class SluicegateSystem:
    key = "sluicegate"
    title = "Sluicegate"
    naming: Naming = SLUICEGATE
    namespace_labels: Mapping[str, str] = {}
    gates_by_driver = False

    def __init__(self, running: LocalSluicegate | None = None) -> None:
        self._attached = running
        self._local: LocalSluicegate | None = running
        self._cluster: LocalCluster | None = running.cluster if running is not None else None
        accounts = sorted({s.account for s in SERVICES})
        self.subjects: Sequence[Obj] = tuple(service_account(NAMESPACE, a) for a in accounts)
        self._queues: tuple[str, ...] = ()

    def version(self) -> str:
        return "this repository (python -m webhook, python -m controller)"

    def prepare(self, cluster: LocalCluster) -> None:
        """kube-scheduler calls Sluicegate's scheduler extender, as ``make up`` configures it."""
        if self._attached is None:
            self._local = LocalSluicegate(cluster)
            cluster.extender = self._local.scheduler_extender()

    def start(self, cluster: LocalCluster, progress: Progress) -> None:
        self._cluster = cluster
        if self._attached is None:
            if self._local is None or self._local.cluster is not cluster:
                self._local = LocalSluicegate(cluster)  # a cluster started without prepare()
            self._local.up(progress)

    def configure(self, setup: Setup) -> None:
        assert self._cluster is not None, "start() first"
        limit = setup.scenario.max_running
        self._queues = setup.load.queues
        apply(self._cluster, *(
            {"apiVersion": keys.API_VERSION, "kind": "Queue", "metadata": {"name": q},
             "spec": {"maxRunning": limit, "quota": {keys.GPU_RESOURCE: str(limit * setup.load.gpus)}}}
            for q in setup.load.queues
        ))
        self._until_admitted(setup)

    def _until_admitted(self, setup: Setup) -> None:
        """Until the webhook admits a pod naming the last queue in every namespace (a server-side
        dry run), its cache may not know the queues yet and would refuse the load."""
        assert self._cluster is not None
        deadline = time.monotonic() + READY_SECONDS
        for namespace in setup.namespaces:
            probe = json.dumps(probe_pod(namespace, setup.load.queues[-1]))
            while True:
                done = self._cluster.kubectl("create", "--dry-run=server", "-f", "-", input=probe,
                                             check=False)
                if done.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise SystemFailure(f"Sluicegate's webhook still refuses pods in {namespace}: "
                                        f"{done.stderr.strip()}")
                time.sleep(0.2)

    def _state(self) -> dict[str, Any]:
        assert self._local is not None
        try:
            state: dict[str, Any] = json.loads(self._local.state.read_text())
        except (FileNotFoundError, ValueError):
            return {}
        return state

    def processes(self) -> Mapping[str, int]:
        return dict(self._state().get("pids", {}))

    def limits(self, setup: Setup) -> Limits:
        return queue_limits(setup)

    def finish(self, setup: Setup) -> Account:
        """The controllers' own count of releases from this run's queues (``releases_account``),
        and the longest any of them held its event loop (a note beside the figures)."""
        assert self._local is not None
        released = 0.0
        blocked = 0.0
        for service in self._local.services:
            if service.module != CONTROLLER_MODULE:
                continue
            url = f"http://127.0.0.1:{self._local.port(service.name, 'metrics')}/metrics"
            with urllib.request.urlopen(url, timeout=10) as answer:
                text = answer.read().decode()
            released += sum(s.value for s in samples(text, RELEASES) if s.labels.get("queue") in self._queues)
            blocked = max([blocked, *(s.value for s in samples(text, LOOP_BLOCK))])
        account = releases_account(released, setup.scenario.pods)
        return Account(account.problems, (*account.notes, loop_note(blocked)))

    def stop(self) -> None:
        cluster = self._cluster
        if cluster is None or not cluster.layout.state.exists():
            return
        if self._attached is None and self._local is not None:
            self._local.down()
            self._local = None
        elif self._queues:
            cluster.kubectl("delete", "--ignore-not-found", "queues.sluicegate.dev", *self._queues,
                            check=False)


def releases_account(counted: float, pods: int) -> Account:
    """The controllers' count of releases must be the run's pods, exactly.

    ``sluicegate_releases_total`` counts the pods whose gate a controller process's own patch
    removed, once per pod: when its watch shows the pod released with the stamp that process's
    patch carried (so a patch whose answer was lost, or that a lost lead cut short, still
    counts, and a release decided again after a failed patch does not count twice). Nothing but
    the controllers releases a benchmark's pods, so fewer means pods they never released (or
    whose release their watch never showed them), and more means a pod counted twice: both are
    wrong.
    """
    if counted == pods:
        return Account()
    return Account(problems=(f"Sluicegate's controllers count {counted:.0f} releases ({RELEASES}) for "
                             f"{pods} pods",))


def probe_pod(namespace: str, queue: str) -> dict[str, Any]:
    gpu = {keys.GPU_RESOURCE: "1"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "bench-probe", "namespace": namespace, "labels": {keys.QUEUE_LABEL: queue}},
        "spec": {"containers": [{"name": "probe", "image": "registry.invalid/probe:1",
                                 "resources": {"requests": gpu, "limits": gpu}}]},
    }


def loop_note(seconds: float) -> str:
    """The controllers' longest event-loop block, as the run's notes give it."""
    return (f"the controllers' longest event-loop block: {seconds * 1000:.0f} ms ({LOOP_BLOCK}: how late "
            "a probe waking every 100 ms woke, the machine's own delays included)")
