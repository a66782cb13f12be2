"""The pod group of an operator's object: sized from its replica counts, released all at once,
counted as one workload with its summed GPUs; workers an autoscaler adds to a running RayCluster
queue on their own.

The pods are the ones admission produced for the pods the training operator and KubeRay create
(``test_admitting_operators``), as the API server then stores them; dispatch decides on a
snapshot of them.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from policy import keys
from policy.dispatching import dispatch
from policy.keys import Reason
from policy.owners import GROUP_NAME_LENGTH, gang_name, pytorchjob_pods, raycluster_pods, template_paths
from policy.pods import Pod
from policy.reviews import OWNERS, POD, PYTORCHJOB, RAYCLUSTER, RAYJOB
from tests.builders import NOW, T0, MakePod, MakeQueue, MakeRayCluster, snapshot, timestamp
from tests.unit.test_admitting_operators import (
    KUBERAY_OPERATOR,
    SERVICE_ACCOUNTS,
    TRAINING_OPERATOR,
    admitted,
    alices_cluster,
    alices_job,
    raycluster,
)

# --- sizes and names, pure ------------------------------------------------------------------


def test_a_pytorchjobs_group_is_the_sum_of_its_replica_types_replicas() -> None:
    job = alices_job().obj()
    assert pytorchjob_pods(job) == 4
    del job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"]  # the operator's default: 1
    assert pytorchjob_pods(job) == 4


@pytest.mark.parametrize(("group", "pods"), [
    pytest.param({"replicas": 2, "minReplicas": 0, "maxReplicas": 8}, 3, id="replicas between min and max"),
    pytest.param({"replicas": 1, "minReplicas": 3, "maxReplicas": 8}, 4, id="fewer than min: min"),
    pytest.param({"replicas": 9, "minReplicas": 0, "maxReplicas": 4}, 5, id="more than max: max"),
    pytest.param({"replicas": 2, "minReplicas": 5, "maxReplicas": 4}, 5, id="min above max: max"),
    pytest.param({"minReplicas": 2}, 3, id="no replicas: min"),
    pytest.param({"replicas": 2, "numOfHosts": 4}, 9, id="multi-host: replicas times hosts"),
    pytest.param({"replicas": 2, "suspend": True}, 1, id="a suspended group: the head alone"),
])
def test_a_rayclusters_group_is_its_head_and_the_workers_kuberay_wants(
    group: dict[str, Any], pods: int
) -> None:
    workers = [{"groupName": "gpu", **group}]
    cluster = {"spec": {"headGroupSpec": {"template": {}}, "workerGroupSpecs": workers}}
    assert raycluster_pods(cluster) == pods


def test_every_template_of_each_kind_is_found() -> None:
    job, cluster = alices_job().obj(), alices_cluster().obj()
    assert template_paths(job, OWNERS[PYTORCHJOB].templates) == (
        ("spec", "pytorchReplicaSpecs", "Master", "template"),
        ("spec", "pytorchReplicaSpecs", "Worker", "template"),
    )
    assert template_paths(cluster, OWNERS[RAYCLUSTER].templates) == (
        ("spec", "headGroupSpec", "template"),
        ("spec", "workerGroupSpecs", 0, "template"),
    )
    rayjob = raycluster(kind="RayJob").obj()
    assert template_paths(rayjob, OWNERS[RAYJOB].templates) == (
        ("spec", "rayClusterSpec", "headGroupSpec", "template"),
        ("spec", "rayClusterSpec", "workerGroupSpecs", 0, "template"),
    )


def test_an_object_created_again_under_its_name_forms_a_new_group() -> None:
    meta = {"name": "mnist", "namespace": "vision-ml"}
    first = gang_name("PyTorchJob", meta, NOW)
    again = gang_name("PyTorchJob", meta, NOW + timedelta(seconds=5))
    assert first.startswith("pytorchjob-mnist-") and again.startswith("pytorchjob-mnist-")
    assert first != again
    assert gang_name("PyTorchJob", meta, NOW) == first  # admission again: the same group


def test_a_long_name_makes_a_group_name_that_is_still_a_label_value() -> None:
    name = gang_name("RayCluster", {"name": "x" * 63, "namespace": "vision-ml"}, NOW)
    assert len(name) == GROUP_NAME_LENGTH
    assert name[0].isalnum() and name[-1].isalnum()


# --- dispatch on a snapshot of the admitted pods -----------------------------------------------


def stored(pod: dict[str, Any], at: float = 0) -> Pod:
    """The pod as the API server stores it after admission."""
    pod["metadata"]["uid"] = f"uid-{pod['metadata']['name']}"
    pod["metadata"]["creationTimestamp"] = timestamp(T0 + at)
    pod["status"] = {"phase": "Pending"}
    return Pod.parse(pod)


def released(obj: dict[str, Any]) -> Pod:
    """The stored pod once dispatch removed its gate and it runs."""
    obj["spec"].pop("schedulingGates")
    obj["status"] = {"phase": "Running"}
    return Pod.parse(obj)


def mnist_objects(count: int = 4) -> list[dict[str, Any]]:
    """Alice's PyTorchJob's pods as the training operator creates them, admitted."""
    job = alices_job()
    made = [job.replica("Master", 0), *(job.replica("Worker", i) for i in range(3))][:count]
    return [admitted(pod, TRAINING_OPERATOR, SERVICE_ACCOUNTS, kind=POD) for pod in made]


def mnist_pods(count: int = 4) -> list[Pod]:
    """...as the API server stores them."""
    return [stored(obj, at=i) for i, obj in enumerate(mnist_objects(count))]


def other(name: str, gpus: int, *, released: bool = False) -> MakePod:
    pod = MakePod("vision-ml", name).queue("vision-train").team("vision").gpus(gpus).created(100)
    return pod.running("node-1") if released else pod.gated()


def test_the_four_pods_are_released_together_as_one_workload_charged_to_alice() -> None:
    pods = mnist_pods()
    snap = snapshot(pods, [MakeQueue("vision-train").quota(**{"nvidia.com/gpu": 4})], now=T0 + 60)
    decision = dispatch(snap)
    assert len(decision.release) == 1
    (workload,) = decision.release
    assert sorted(p.name for p in workload.pods) == [
        "mnist-master-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2",
    ]
    assert workload.requests["nvidia.com/gpu"] == 4000  # milli-GPUs: four
    assert {p.annotations[keys.SUBMITTER_ANNOTATION] for p in workload.pods} == {
        '{"user":"alice","groups":["vision-devs"]}'
    }


def test_three_of_four_pods_wait_for_the_fourth() -> None:
    pods = mnist_pods(3)
    decision = dispatch(snapshot(pods, [MakeQueue("vision-train")], now=T0 + 60))
    assert not decision.release
    (wait,) = decision.waiting.values()
    assert wait.reason == Reason.GROUP_INCOMPLETE
    assert wait.message.endswith(": 3/4 pods")


def test_the_group_waits_until_the_queue_has_four_gpus_free() -> None:
    pods = mnist_pods()
    queue = MakeQueue("vision-train").quota(**{"nvidia.com/gpu": 6})
    busy = dispatch(snapshot([*pods, other("held", 3, released=True)], [queue], now=T0 + 60))
    assert not busy.release
    assert {w.reason for w in busy.waiting.values()} == {Reason.QUEUE_QUOTA}
    free = dispatch(snapshot([*pods, other("held", 2, released=True)], [queue], now=T0 + 60))
    assert [len(w.pods) for w in free.release] == [4]


def test_the_group_takes_one_slot_of_max_running() -> None:
    pods = mnist_pods()
    queue = MakeQueue("vision-train").max_running(2)
    decision = dispatch(snapshot([other("first", 1, released=True), *pods, other("later", 1)], [queue],
                                 now=T0 + 60))
    assert [len(w.pods) for w in decision.release] == [4]
    assert [(w.reason, w.message) for w in decision.waiting.values()] == [
        (Reason.QUEUE_LIMIT, "queue vision-train: 2/2 running")
    ]


def ray_pods(workers: int) -> tuple[MakeRayCluster, list[dict[str, Any]]]:
    cluster = alices_cluster()
    made = [cluster.replica("head", ""), *(cluster.replica("worker", f"w{i}") for i in range(workers))]
    return cluster, [admitted(p, KUBERAY_OPERATOR, SERVICE_ACCOUNTS, kind=POD) for p in made]


def test_a_rayclusters_head_and_two_workers_are_released_together() -> None:
    _, objs = ray_pods(2)
    pods = [stored(o, at=i) for i, o in enumerate(objs)]
    queue = MakeQueue("vision-train").quota(**{"nvidia.com/gpu": 2})
    decision = dispatch(snapshot(pods, [queue], now=T0 + 60))
    assert [sorted(p.name for p in w.pods) for w in decision.release] == [
        ["raycluster-gpu-gpu-worker-w0", "raycluster-gpu-gpu-worker-w1", "raycluster-gpu-head"]
    ]


def test_a_worker_the_autoscaler_adds_to_a_running_cluster_queues_on_its_own() -> None:
    _, objs = ray_pods(3)
    pods = [stored(o, at=i) for i, o in enumerate(objs)]
    live = [released(o) for o in objs[:3]]  # the head and two workers run; the third came later
    queue = MakeQueue("vision-train").max_running(1)
    decision = dispatch(snapshot([*live, pods[3]], [queue], now=T0 + 60))
    assert not decision.release
    ((key, wait),) = decision.waiting.items()
    assert key.endswith("/added:raycluster-gpu-gpu-worker-w2")
    assert (wait.reason, wait.message) == (Reason.QUEUE_LIMIT, "queue vision-train: 1/1 running")
    roomy = dispatch(snapshot([*live, pods[3]], [MakeQueue("vision-train").max_running(2)], now=T0 + 60))
    assert [[p.name for p in w.pods] for w in roomy.release] == [["raycluster-gpu-gpu-worker-w2"]]


def test_pods_beyond_the_size_of_a_running_pytorchjob_group_stay_surplus() -> None:
    objs = mnist_objects()
    extra = copy.deepcopy(objs[3])
    extra["metadata"]["name"] = "mnist-worker-3"
    live = [stored(o, at=i) and released(o) for i, o in enumerate(objs)]
    decision = dispatch(snapshot([*live, stored(extra, at=9)], [MakeQueue("vision-train")], now=T0 + 60))
    assert not decision.release
    ((key, _),) = decision.waiting.items()
    assert key.endswith("/surplus")

