"""No pod of a team's namespace preempts, on the real control plane with the real kube-scheduler.

nlp's eight 1-GPU pods of 10 CPUs each fill an 8-GPU node of the test's own; vision's pod pinned
to that node names a PriorityClass of value 1000. With a class that preempts, kube-scheduler
would evict one of nlp's pods to place it, so admission refuses it (and a Job whose pods would
do the same) and says which classes never preempt; so it refuses a CPU-only pod of 90 CPUs of
that class that names no queue (one Sluicegate does not manage), which would evict all eight.
With a class that never preempts the pod is admitted and released by its queue;
kube-scheduler then reports that it will not preempt for it, the pod waits for room
("dispatched, waiting for Kubernetes") and every nlp pod keeps running. Neither the pod's
priority nor its preemptionPolicy can be changed once it exists, and a preset may set the class
too (the API server then resolves the pod's priority from the preset's class).

The node is tainted for this test alone (its pods tolerate the taint), so no other pod lands
on it, and it is deleted afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from policy import keys
from process import kubeyaml
from tests.e2e.conftest import eventually
from tests.e2e.placement import RUN_LABEL, fake_node, schedulable
from tests.e2e.scenes import HELD_SECONDS, Scene

UNPLACEABLE = "dispatched, waiting for Kubernetes to place it: "
NO_PREEMPTION = "preemption: not eligible due to preemptionPolicy=Never."
GPUS = 8
# The fake node has 96 CPUs (controlplane.nodes): eight pods of 10 leave 16 free, so a pod of 90
# fits only if kube-scheduler evicts all eight.
VICTIM_CPU, BULLY_CPU = "10", "90"


class World:
    """The test's node, PriorityClasses, teams nlp (dmitri) and vision (alice) with a queue and
    a namespace each, and the users' right to work in their namespaces."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.node = scene.name("preempt-node")
        self.taint = {"key": RUN_LABEL, "value": scene.id, "effect": "NoSchedule"}
        node = fake_node(self.node, GPUS, scene.id, "preemption")
        node["spec"]["taints"] = [self.taint]
        scene.create(node)
        # Created first: once the webhook's watch knows "high", it knows this one too.
        self.queued_high = self.priority_class("queued-high", 1000, "Never")
        self.high = self.priority_class("high", 1000, "PreemptLowerPriority")
        self.queued_preset = scene.name("queued")
        scene.create({"apiVersion": keys.API_VERSION, "kind": "Preset",
                      "metadata": {"name": self.queued_preset, "labels": {RUN_LABEL: scene.id}},
                      "spec": {"pod": {"priorityClassName": self.queued_high}}})
        nlp = scene.team("nlp", members={"users": ["dmitri"]})
        vision = scene.team("vision", members={"users": ["alice"]})
        self.nlp_train = scene.queue("nlp-train", access={"teams": [nlp]})
        self.vision_train = scene.queue("vision-train", access={"teams": [vision]})
        self.nlp = scene.namespace(nlp, "nlp-research")
        self.vision = scene.namespace(vision, "vision-research")
        for user, namespace in (("dmitri", self.nlp), ("alice", self.vision)):
            scene.kubectl("create", "rolebinding", "edit", "--clusterrole=edit", f"--user={user}",
                          "-n", namespace)

        def ready() -> bool:
            found = scene.get("node", self.node)
            # Ready, and no taint left but the test's own (the node controller's go once Ready).
            untainted = {**found, "spec": {**found["spec"], "taints": [
                t for t in found["spec"].get("taints") or [] if t.get("key") != RUN_LABEL]}}
            return schedulable(untainted)

        eventually(ready, f"node {self.node} Ready, with only the test's taint")

    def priority_class(self, base: str, value: int, policy: str) -> str:
        name = self.scene.name(base)
        self.scene.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                           "metadata": {"name": name, "labels": {RUN_LABEL: self.scene.id}},
                           "value": value, "preemptionPolicy": policy})
        return name

    def pod(self, namespace: str, name: str, queue: str, priority_class: str = "") -> dict[str, Any]:
        """A 1-GPU pod of 10 CPUs pinned to the test's node, running until the test ends."""
        pod = self.scene.pod(namespace, name, queue, gpus=1, seconds=HELD_SECONDS)
        pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": VICTIM_CPU}
        spec = pod["spec"]
        spec["nodeSelector"] = {"kubernetes.io/hostname": self.node}
        spec["tolerations"] = [{**self.taint, "operator": "Equal"}]
        if priority_class:
            spec["priorityClassName"] = priority_class
        return pod

    def as_user(self, user: str, *args: str, input: str | None = None, check: bool = True) -> Any:
        return self.scene.cluster.kubectl(f"--as={user}", *args, input=input, check=check)

    def cleanup(self) -> None:
        for namespace in (self.nlp, self.vision):
            self.scene.kubectl("delete", "pods", "--all", "-n", namespace, "--wait=false", check=False)
        self.scene.kubectl("delete", "node", self.node, "--ignore-not-found", "--timeout=60s", check=False)
        self.scene.kubectl("delete", "priorityclasses,presets", "-l", f"{RUN_LABEL}={self.scene.id}",
                           "--ignore-not-found", check=False)


@pytest.fixture
def world(scene: Scene) -> Iterator[World]:
    made = World(scene)
    try:
        yield made
    finally:
        made.cleanup()


def running(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def test_a_pod_of_higher_priority_pinned_to_a_full_node_never_evicts_another_teams_running_pod(
    world: World,
) -> None:
    scene = world.scene
    victims = [f"victim-{i}" for i in range(GPUS)]
    world.as_user("dmitri", "create", "-f", "-", input=kubeyaml.dump_all(
        world.pod(world.nlp, name, world.nlp_train) for name in victims))
    for name in victims:
        eventually(lambda name=name: running(scene.get("pod", name, world.nlp)),
                   f"{world.nlp}/{name} running on {world.node}")

    # A class that preempts: the pod is refused, and told which classes never preempt.
    bully = kubeyaml.dump(world.pod(world.vision, "bully", world.vision_train, world.high))
    refused = world.as_user("alice", "create", "-f", "-", input=bully, check=False)
    assert refused.returncode != 0, "alice's pod of a preempting class was admitted"
    assert "pods.mutate.sluicegate.dev" in refused.stderr and "denied the request" in refused.stderr
    assert (f'PriorityClass "{world.high}" (value 1000) has preemptionPolicy PreemptLowerPriority: to '
            "place this pod, kube-scheduler would evict running pods of lower priority, other teams' "
            "too, and no pod in a team's namespace may preempt") in refused.stderr

    # A CPU-only pod that names no queue, so not Sluicegate's to dispatch, of the same class:
    # refused too, as any member of a team could otherwise evict another team's running work.
    unmanaged = world.pod(world.vision, "bully-n", world.vision_train, world.high)
    del unmanaged["metadata"]["labels"][keys.QUEUE_LABEL]
    unmanaged["spec"]["containers"][0]["resources"] = {"requests": {"cpu": BULLY_CPU}}
    refused = world.as_user("alice", "create", "-f", "-", input=kubeyaml.dump(unmanaged), check=False)
    assert refused.returncode != 0, "alice's CPU pod of a preempting class was admitted"
    assert "pods.mutate.sluicegate.dev" in refused.stderr and "denied the request" in refused.stderr
    assert (f'PriorityClass "{world.high}" (value 1000) has preemptionPolicy PreemptLowerPriority: to '
            "place this pod, kube-scheduler would evict running pods of lower priority, other teams' "
            "too, and no pod in a team's namespace may preempt, whether Sluicegate manages it or "
            "not") in refused.stderr
    assert "set priorityClassName to a PriorityClass whose preemptionPolicy is Never" in refused.stderr
    assert scene.cluster.kubectl("get", "pod", "bully-n", "-n", world.vision, check=False).returncode != 0

    # A Job whose pods would preempt is refused at its own CREATE, once the webhook's watch has
    # the class (a dry run asks the webhook without creating anything).
    pod = world.pod(world.vision, "x", world.vision_train, world.high)
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "bully-job", "namespace": world.vision},
           "spec": {"backoffLimit": 0, "template": template}}

    def job_refused() -> str | None:
        answer = world.as_user("alice", "create", "--dry-run=server", "-f", "-", input=kubeyaml.dump(job),
                               check=False)
        return answer.stderr if answer.returncode != 0 else None

    refusal = eventually(job_refused, "the Job of a preempting class to be refused")
    assert "jobs.mutate.sluicegate.dev" in refusal
    assert f'PriorityClass "{world.high}" (value 1000) has preemptionPolicy PreemptLowerPriority: to ' \
        "place the pods of this Job" in refusal
    assert world.queued_high in refusal  # named among the classes that never preempt

    # The same priority from a class that never preempts: admitted, released, and left waiting.
    queued = world.pod(world.vision, "bully", world.vision_train, world.queued_high)
    world.as_user("alice", "create", "-f", "-", input=kubeyaml.dump(queued))
    waiting = scene.wait_condition(world.vision, "bully",
                                   lambda c: c["status"] == "True" and c["message"].startswith(UNPLACEABLE),
                                   "dispatched, waiting for Kubernetes")
    assert NO_PREEMPTION in waiting["message"], waiting["message"]
    bully_pod = scene.get("pod", "bully", world.vision)
    assert (bully_pod["spec"]["priority"], bully_pod["spec"]["preemptionPolicy"]) == (1000, "Never")
    assert not bully_pod["status"].get("nominatedNodeName")
    assert not bully_pod["spec"].get("nodeName")

    # kube-scheduler said it will not preempt for it: every nlp pod is still running, none marked
    # for disruption.
    for name in victims:
        victim = scene.get("pod", name, world.nlp)
        assert running(victim), f"{name}: {victim.get('status')}"
        assert victim["spec"]["nodeName"] == world.node
        kinds = [c["type"] for c in victim["status"].get("conditions", [])]
        assert "DisruptionTarget" not in kinds, f"{name}: {kinds}"

    # A preset that sets the class: the API server resolves the pod's priority from it.
    by_preset = world.pod(world.vision, "by-preset", world.vision_train)
    by_preset["metadata"]["annotations"][keys.PRESETS_ANNOTATION] = world.queued_preset
    eventually(lambda: world.as_user("alice", "create", "--dry-run=server", "-f", "-",
                                     input=kubeyaml.dump(by_preset), check=False).returncode == 0,
               f"the webhook to know preset {world.queued_preset}")
    world.as_user("alice", "create", "-f", "-", input=kubeyaml.dump(by_preset))
    spec = scene.get("pod", "by-preset", world.vision)["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == (
        world.queued_high, 1000, "Never")

    # Neither can be changed afterwards: priority and preemptionPolicy are immutable on a pod.
    for change in ({"preemptionPolicy": "PreemptLowerPriority"}, {"priorityClassName": world.high}):
        answer = world.as_user("alice", "patch", "pod", "bully", "-n", world.vision, "--type=merge",
                               "-p", json.dumps({"spec": change}), check=False)
        assert answer.returncode != 0, f"alice changed {change} on a running pod"
        assert "pod updates may not change fields" in answer.stderr, answer.stderr
    assert scene.get("pod", "bully", world.vision)["spec"]["preemptionPolicy"] == "Never"
    assert keys.GATE not in json.dumps(scene.get("pod", "bully", world.vision)["spec"])
