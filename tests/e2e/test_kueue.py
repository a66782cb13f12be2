"""Kueue, the benchmarks' peer, runs on the local control plane: it gates plain GPU pods in its
namespaces at creation, admits no more of them at once than its queues' ``pods`` quotas (a
ClusterQueue's own, or a cohort's shared one), and every pod runs to success. Stopping it leaves
no process and no webhook behind."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.kueue import QUEUE_LABEL, Kueue, KueueCohort, KueueQueue
from controlplane.launching import LocalCluster
from tests.e2e.conftest import WAIT_SECONDS, Kubectl, eventually

ADMISSION_GATE = "kueue.x-k8s.io/admission"
FINISHED = ("Succeeded", "Failed")


@pytest.fixture(scope="module")
def kueue(cluster: LocalCluster) -> Iterator[Kueue]:
    """Kueue with its shipped client limits; stopped, and checked gone, after the module."""
    peer = Kueue(cluster)
    peer.start()
    pid = peer.pid
    assert pid is not None
    try:
        yield peer
    finally:
        peer.stop()
    assert not alive(pid), "kueue's process is gone"
    webhooks = cluster.kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations",
                               "-o", "name").stdout
    assert "kueue" not in webhooks, "kueue's webhooks are gone"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def queued_gpu_pod(name: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {QUEUE_LABEL: queue},
            "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1500ms"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "train",
                "image": "registry.invalid/train:1",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }],
        },
    }


def gates(pod: dict[str, Any]) -> set[str]:
    return {g["name"] for g in pod["spec"].get("schedulingGates", [])}


def objects(printed: str) -> list[dict[str, Any]]:
    """The objects kubectl printed one after another (``create -o json`` of several objects)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while printed[at:].strip():
        obj, at = decoder.raw_decode(printed, len(printed) - len(printed[at:].lstrip()))
        found.append(obj)
    return found


def create(kubectl: Kubectl, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    batch = {"apiVersion": "v1", "kind": "List", "items": pods}
    return objects(kubectl.run("create", "-o", "json", "-f", "-", input=json.dumps(batch)))


def admitted_per_queue(pods: list[dict[str, Any]]) -> Counter[str]:
    """Pods Kueue let go (its admission gate is off) that still hold their slot, by queue."""
    return Counter(
        p["metadata"]["labels"][QUEUE_LABEL] for p in pods
        if ADMISSION_GATE not in gates(p) and p["status"].get("phase") not in FINISHED
    )


def observe_until_finished(kubectl: Kubectl) -> tuple[list[Counter[str]], list[dict[str, Any]]]:
    """Repeated observations of the namespace's pods until all have finished: what was admitted
    and unfinished at each, and the pods at the end."""
    seen: list[Counter[str]] = []
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        pods = kubectl.items("pods")
        seen.append(admitted_per_queue(pods))
        if all(p["status"].get("phase") in FINISHED for p in pods):
            return seen, pods
        assert time.monotonic() < deadline, f"pods still unfinished: {[p['status'] for p in pods]}"
        time.sleep(0.2)


def test_kueue_admits_plain_gpu_pods_no_more_at_once_than_its_pods_quota(
    kueue: Kueue, kubectl: Kubectl
) -> None:
    queue = KueueQueue(f"{kubectl.namespace}-gpus", gpus=8, max_running=2)
    kueue.configure([queue], [kubectl.namespace])

    created = create(kubectl, [queued_gpu_pod(f"gpu-{i}", queue.name) for i in range(6)])

    assert [ADMISSION_GATE in gates(p) for p in created] == [True] * 6, "gated at creation"
    seen, pods = observe_until_finished(kubectl)
    peaks = [sum(admitted.values()) for admitted in seen]
    assert max(peaks) <= 2, f"admitted and unfinished at each observation: {peaks}"
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"] * 6
    assert all(not gates(p) for p in pods), "Kueue removed its gates from every pod it admitted"
    eventually(lambda: all(not p["metadata"].get("finalizers") for p in kubectl.items("pods")),
               "Kueue to remove its finalizer from every finished pod")
    assert len(kubectl.items("workloads.kueue.x-k8s.io")) == 6, "one Kueue Workload per pod"


def test_queues_in_a_cohort_share_its_pods_quota_and_keep_their_own_limits(
    kueue: Kueue, kubectl: Kubectl
) -> None:
    shared = KueueCohort(f"{kubectl.namespace}-shared", gpus=16, max_running=3)
    a = KueueQueue(f"{kubectl.namespace}-a", gpus=8, max_running=2, cohort=shared.name)
    b = KueueQueue(f"{kubectl.namespace}-b", gpus=8, max_running=2, cohort=shared.name)
    kueue.configure([a, b], [kubectl.namespace], [shared])

    create(kubectl, [queued_gpu_pod(f"gpu-{i}", (a, b)[i % 2].name) for i in range(8)])

    seen, pods = observe_until_finished(kubectl)
    assert max(sum(admitted.values()) for admitted in seen) <= 3, f"the cohort's limit: {seen}"
    assert max(admitted[q.name] for admitted in seen for q in (a, b)) <= 2, f"each queue's limit: {seen}"
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"] * 8
