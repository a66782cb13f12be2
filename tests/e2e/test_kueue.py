"""Kueue, the benchmarks' peer, runs on the local control plane: it gates plain GPU pods in its
namespaces at creation, admits no more of them at once than its ClusterQueue's ``pods`` quota,
and every pod runs to success. Stopping it leaves no process and no webhook behind."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from controlplane.kueue import QUEUE_LABEL, Kueue, KueueQueue
from controlplane.launching import LocalCluster
from tests.e2e.conftest import WAIT_SECONDS, Kubectl

ADMISSION_GATE = "kueue.x-k8s.io/admission"
PODS = 6
MAX_RUNNING = 2


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


def admitted_and_unfinished(pods: list[dict[str, Any]]) -> int:
    """Pods Kueue let go (its admission gate is off) that still hold their slot."""
    return sum(
        1 for p in pods
        if ADMISSION_GATE not in gates(p) and p["status"].get("phase") not in ("Succeeded", "Failed")
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_kueue_admits_plain_gpu_pods_no_more_at_once_than_its_pods_quota(
    cluster: LocalCluster, kubectl: Kubectl
) -> None:
    kueue = Kueue(cluster)
    kueue.start()
    pid = kueue.pid
    assert pid is not None
    try:
        queue = KueueQueue(f"{kubectl.namespace}-gpus", gpus=8, max_running=MAX_RUNNING)
        kueue.configure([queue], [kubectl.namespace])

        batch = {"apiVersion": "v1", "kind": "List",
                 "items": [queued_gpu_pod(f"gpu-{i}", queue.name) for i in range(PODS)]}
        created = json.loads(kubectl.run("create", "-o", "json", "-f", "-", input=json.dumps(batch)))["items"]
        assert [ADMISSION_GATE in gates(p) for p in created] == [True] * PODS, "gated at creation"

        # Repeated observations until every pod has finished: never more than the quota admitted.
        peaks: list[int] = []
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            pods = kubectl.items("pods")
            peaks.append(admitted_and_unfinished(pods))
            if all(p["status"].get("phase") in ("Succeeded", "Failed") for p in pods):
                break
            assert time.monotonic() < deadline, f"pods still unfinished: {[p['status'] for p in pods]}"
            time.sleep(0.2)

        assert max(peaks) <= MAX_RUNNING, f"admitted and unfinished at each observation: {peaks}"
        assert [p["status"]["phase"] for p in pods] == ["Succeeded"] * PODS
        assert all(not gates(p) for p in pods), "Kueue removed all its gates from admitted pods"
        workloads = kubectl.items("workloads.kueue.x-k8s.io")
        assert len(workloads) == PODS, "one Kueue Workload per pod"
    finally:
        kueue.stop()

    assert not alive(pid), "kueue's process is gone"
    leftover = cluster.kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations",
                               "-o", "name").stdout
    assert "kueue" not in leftover
