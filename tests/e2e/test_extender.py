"""The scheduler extender on the real control plane, wired as ``make up`` wires it: the
extender is a row of the process table (here alone, ``python -m extender``, as the
controller's ServiceAccount with its RBAC), kube-scheduler starts already pointed at its port
and trusting its CA, and kwok plays the GPU nodes. Pods are created ungated in a namespace
without the team label (no webhook, no controller): what is tested is only where
kube-scheduler puts them with the extender's help.

Each test makes its own nodes (labelled with its run id, which its pods select), fills some
of them with pods bound directly (so they hold GPUs without being scheduled), and first asks
the extender itself, over TLS, until its view shows those nodes and pods: the placements
below then follow from that view, not from a race with the watch.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from controlplane.services import WEBHOOK
from policy import keys
from process import kubeyaml
from tests.e2e.conftest import Kubectl, eventually
from tests.e2e.placement import (
    EXTENDER,
    POOL_LABEL,
    RUN_LABEL,
    RUNS_FOR,
    call,
    condition,
    fake_node,
    gpu_pod,
    schedulable,
)

# The shipped configuration gives each call 1 s; two shared cores running a control plane and
# the tests can stall a call that long, and a call that times out is skipped (ignorable), which
# would turn a slow moment into a wrong placement. The placements are what is tested here.
HTTP_TIMEOUT = "5s"


@pytest.fixture(scope="module")
def placing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSluicegate]:
    """A control plane whose kube-scheduler calls the extender, and the extender running (with
    the webhook, which ``make up`` always runs; it never sees these tests' namespaces)."""
    cluster = LocalCluster(tmp_path_factory.mktemp("extender"), nodes=1, gpus_per_node=8)
    sluicegate = LocalSluicegate(cluster, services=(WEBHOOK, EXTENDER))
    extender = sluicegate.scheduler_extender()
    assert extender is not None
    cluster.extender = dataclasses.replace(extender, http_timeout=HTTP_TIMEOUT)
    try:
        cluster.up()
        sluicegate.up()
        yield sluicegate
    finally:
        sluicegate.down()
        cluster.down()


class Run:
    """One test's namespace, nodes and queues, removed afterwards."""

    def __init__(self, sluicegate: LocalSluicegate) -> None:
        self.id = uuid.uuid4().hex[:8]
        self.sluicegate = sluicegate
        self.cluster = sluicegate.cluster
        self.kubectl = Kubectl(self.cluster, f"e2e-{self.id}")
        self.nodes: list[str] = []
        self.queues: list[str] = []

    def node(self, suffix: str, gpus: int, pool: str, *, used: int = 0) -> str:
        """A node of ``gpus`` GPUs in ``pool``, ``used`` of them held by a pod bound to it."""
        name = f"{self.id}-{suffix}"
        self.cluster.kubectl("apply", "-f", "-", input=_yaml(fake_node(name, gpus, self.id, pool)))
        self.nodes.append(name)
        if used:
            # Half the node's CPUs too, so that kube-scheduler's own scoring (least allocated)
            # prefers the other nodes: any packing seen below is the extender's doing.
            self.kubectl.apply(gpu_pod(f"fill-{suffix}", used, self.id, node=name, cpu="48"))
        return name

    def queue(self, name: str, pool: str) -> str:
        name = f"{self.id}-{name}"
        self.cluster.kubectl("apply", "-f", "-", input=_yaml({
            "apiVersion": keys.API_VERSION, "kind": "Queue", "metadata": {"name": name},
            "spec": {"nodePool": {"matchLabels": {RUN_LABEL: self.id, POOL_LABEL: pool}}},
        }))
        self.queues.append(name)
        return name

    def wait_schedulable(self) -> None:
        def ready() -> bool:
            nodes = self.kubectl.items("nodes", "-l", f"{RUN_LABEL}={self.id}")
            return len(nodes) == len(self.nodes) and all(schedulable(n) for n in nodes)

        eventually(ready, f"nodes {', '.join(self.nodes)} Ready and untainted")

    def extender_sees(self, verb: str, pod: dict[str, Any], answer: Any) -> None:
        """Until the extender answers ``answer`` for ``pod`` over this run's nodes."""
        args = {"Pod": {**pod, "metadata": {**pod["metadata"], "namespace": self.kubectl.namespace}},
                "NodeNames": self.nodes}
        eventually(lambda: call(self.sluicegate, verb, args) == answer,
                   f"the extender to answer {verb} with {answer}")

    def bound_node(self, pod: str) -> str:
        found = self.kubectl.wait_for("pod", pod, lambda p: p["spec"].get("nodeName"), "bound to a node")
        node: str = found["spec"]["nodeName"]
        return node

    def cleanup(self) -> None:
        self.cluster.kubectl("delete", "namespace", self.kubectl.namespace, "--wait=false", check=False)
        for queue in self.queues:
            self.cluster.kubectl("delete", "queue", queue, "--wait=false", check=False)
        for node in self.nodes:
            self.cluster.kubectl("delete", "node", node, "--wait=false", check=False)


def _yaml(obj: dict[str, Any]) -> str:
    return kubeyaml.dump(obj)


@pytest.fixture
def run(placing: LocalSluicegate) -> Iterator[Run]:
    r = Run(placing)
    r.cluster.kubectl("create", "namespace", r.kubectl.namespace)
    eventually(lambda: r.cluster.kubectl("get", "serviceaccount", "default", "-n", r.kubectl.namespace,
                                         check=False).returncode == 0, "the default service account")
    try:
        yield r
    finally:
        r.cleanup()


def test_a_two_gpu_pod_lands_on_the_node_it_fills_not_on_the_empty_one(run: Run) -> None:
    two_free = run.node("two-free", 8, "a", used=6)
    eight_free = run.node("eight-free", 8, "a")
    run.wait_schedulable()
    run.extender_sees("prioritize", gpu_pod("probe", 2, run.id),
                      [{"Host": two_free, "Score": 10}, {"Host": eight_free, "Score": 4}])

    run.kubectl.apply(gpu_pod("trainer", 2, run.id))

    assert run.bound_node("trainer") == two_free
    # And the 8-GPU node stays whole for the job that needs all of it.
    run.kubectl.apply(gpu_pod("whole-node", 8, run.id))
    assert run.bound_node("whole-node") == eight_free


def test_a_pod_that_finishes_gives_its_gpus_back_to_packing(run: Run) -> None:
    """The view follows pods to their end: one that succeeds leaves the watch's selection and
    its GPUs count as free again, with nothing deleted."""
    node = run.node("busy", 8, "a")
    run.wait_schedulable()
    # It runs until the test ends it (kwok plans its end again when its delay changes), so the
    # view is seen with it running however slowly the extender's watch delivers it.
    run.kubectl.apply(gpu_pod("short", 6, run.id, node=node, runs_for="1h"))
    probe = gpu_pod("probe", 2, run.id)
    run.extender_sees("prioritize", probe, [{"Host": node, "Score": 10}])  # 2 of 8 free

    run.kubectl.run("annotate", "pod", "short", f"{RUNS_FOR}=0s", "--overwrite")
    run.kubectl.wait_for("pod", "short", lambda p: p["status"].get("phase") == "Succeeded", "Succeeded")

    run.extender_sees("prioritize", probe, [{"Host": node, "Score": 4}])  # all 8 free


def test_a_queues_pods_never_land_off_its_node_pool(run: Run) -> None:
    tempting = run.node("a", 8, "a", used=6)  # the node packing would pick for a 1-GPU pod
    pool = [run.node("b1", 8, "b"), run.node("b2", 8, "b")]
    queue = run.queue("pool-b", "b")
    nowhere = run.queue("pool-c", "c")
    run.wait_schedulable()
    run.extender_sees("filter", gpu_pod("probe", 1, run.id, queue=queue), {
        "NodeNames": pool, "FailedNodes": {},
        "FailedAndUnresolvableNodes": {tempting: f"not in the node pool of queue {queue} "
                                                 f"({POOL_LABEL}=b,{RUN_LABEL}={run.id})"},
    })
    run.extender_sees("prioritize", gpu_pod("probe", 1, run.id),
                      [{"Host": tempting, "Score": 9}, *({"Host": n, "Score": 3} for n in pool)])

    run.kubectl.apply(*(gpu_pod(f"pooled-{i}", 1, run.id, queue=queue) for i in range(3)),
                      gpu_pod("free", 1, run.id), gpu_pod("stranded", 1, run.id, queue=nowhere))

    assert {run.bound_node(f"pooled-{i}") for i in range(3)} <= set(pool)
    # A pod of no queue is packed onto the node the queue's pods were kept off.
    assert run.bound_node("free") == tempting
    # A pool that no node matches leaves the pod unplaced, and the scheduler says why.
    stranded = run.kubectl.wait_for("pod", "stranded", lambda p: condition(p, "PodScheduled"),
                                    "a PodScheduled condition")
    scheduled = condition(stranded, "PodScheduled")
    assert scheduled is not None and (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert f"not in the node pool of queue {nowhere}" in scheduled["message"]
    assert "nodeName" not in stranded["spec"]


def test_with_the_extender_stopped_scheduling_goes_on_without_it(run: Run) -> None:
    two_free = run.node("two-free", 8, "a", used=6)
    eight_free = run.node("eight-free", 8, "a")
    run.wait_schedulable()
    run.extender_sees("prioritize", gpu_pod("probe", 2, run.id),
                      [{"Host": two_free, "Score": 10}, {"Host": eight_free, "Score": 4}])
    run.sluicegate.stop(EXTENDER.name)
    try:
        run.kubectl.apply(gpu_pod("trainer", 2, run.id))

        # Placed all the same (ignorable), by kube-scheduler's own scoring, which spreads.
        assert run.bound_node("trainer") == eight_free
        running = run.kubectl.wait_for("pod", "trainer", lambda p: p["status"].get("phase") == "Running",
                                       "Running")
        scheduled = condition(running, "PodScheduled")
        assert scheduled is not None and scheduled["status"] == "True"
    finally:
        run.sluicegate.start(EXTENDER.name)
