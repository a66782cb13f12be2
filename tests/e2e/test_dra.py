"""GPUs asked through DRA on the real control plane: the local cluster's nodes publish their
GPUs as devices of a fake driver (ResourceSlices, one DeviceClass), the Policy counts that class
as nvidia.com/gpu, and a pod whose ResourceClaimTemplate asks for 2 devices waits on a 2-GPU
quota held by a pod asking ``nvidia.com/gpu: 2``, then kube-scheduler allocates its devices and
kwok runs it. The recorder and ``sluicegate explain`` show 2 nvidia.com/gpu for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from controlplane.launching import LocalCluster
from controlplane.nodes import DEVICE_CLASS
from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene

GPU = keys.GPU_RESOURCE


def sluicegate(cluster: LocalCluster, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    done = subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, f"sluicegate {' '.join(args)}: {done.stderr}"
    return done.stdout


def claim_template(namespace: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus", "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": DEVICE_CLASS, "count": count}}]}}},
    }


def dra_pod(scene: Scene, namespace: str, queue: str) -> dict[str, Any]:
    pod = scene.pod(namespace, "dra", queue, gpus=0, seconds=HELD_SECONDS)
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    return pod


def test_a_pod_asking_two_gpus_through_a_claim_template_waits_on_the_quota_and_runs_when_it_frees(
    scene: Scene, cluster: LocalCluster
) -> None:
    scene.policy(deviceClasses={DEVICE_CLASS: GPU})
    team = scene.team("vision")
    queue = scene.queue("train", quota={GPU: "2"})
    namespace = scene.namespace(team)
    slices = json.loads(scene.kubectl("get", "resourceslices", "-o", "json"))["items"]
    assert any(s["spec"]["driver"] == DEVICE_CLASS and len(s["spec"]["devices"]) == 8 for s in slices)
    scene.create(claim_template(namespace, 2))
    scene.create(scene.pod(namespace, "holder", queue, gpus=2, seconds=HELD_SECONDS))
    scene.wait_condition(namespace, "holder", lambda c: c.get("status") == "True", "released")

    pod = dra_pod(scene, namespace, queue)

    def counted() -> bool:
        """The webhook has the Policy that maps the class (a dry run carries what it counts)."""
        out = scene.cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                                    input=json.dumps(pod), check=False)
        notes = json.loads(out.stdout or "{}").get("metadata", {}).get("annotations", {})
        return out.returncode == 0 and keys.DEVICES_ANNOTATION in notes

    eventually(counted, "the webhook to count the pod's claim")
    scene.create(pod)
    stored = scene.get("pod", "dra", namespace)
    assert json.loads(stored["metadata"]["annotations"][keys.DEVICES_ANNOTATION]) == {"pod": {GPU: "2"}}
    held = scene.wait_condition(namespace, "dra", lambda c: c.get("reason") == keys.Reason.QUEUE_QUOTA.value,
                                "held by the queue's quota")
    assert held["message"] == f"queue {queue}: 2/2 {GPU} in use, needs 2", held
    story = sluicegate(cluster, "explain", "dra", "-n", namespace)
    assert f"2 {GPU} (2 {GPU} through DRA claims)" in story, story

    scene.finish(namespace, "holder")
    eventually(lambda: scene.get("pod", "dra", namespace)["status"].get("phase") == "Running",
               "the DRA pod to run")
    running = scene.get("pod", "dra", namespace)
    assert running["spec"]["nodeName"]
    claims = json.loads(scene.kubectl("get", "resourceclaims", "-n", namespace, "-o", "json"))["items"]
    (claim,) = claims
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2 and {r["driver"] for r in results} == {DEVICE_CLASS}
    assert {r["pool"] for r in results} == {running["spec"]["nodeName"]}

    scene.finish(namespace, "dra")

    def recorded() -> dict[str, Any] | None:
        lines = [json.loads(line) for line in sluicegate(cluster, "records", "export", "--since", "1h")
                 .splitlines() if line.strip()]
        mine = [r for r in lines if r.get("namespace") == namespace and r.get("name") == "dra"]
        return mine[0] if mine and mine[0].get("finished") else None

    record = eventually(recorded, "the DRA pod's record, ended")
    assert record["requests"] == {GPU: "2"}, record
