"""The local control plane behaves like a real cluster in the ways Sluicegate relies on:
scheduling gates hold pods, kube-scheduler places GPU pods on the fake nodes, kwok runs and
completes them, and kube-controller-manager runs Jobs."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from tests.e2e.conftest import Kubectl, eventually

# A gate of the test's own: Sluicegate, running in the same session, refuses its own gate on pods
# it does not manage.
GATE = "controlplane.sluicegate-test/hold"


def gpu_pod(name: str, gpus: int, *, gated: bool = False, runs_for: str = "2s") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{
            "name": "train",
            "image": "registry.invalid/train:1",
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
        }],
    }
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": runs_for}},
        "spec": spec,
    }


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return None


def test_a_gated_pod_is_stored_unscheduled_and_a_gate_cannot_be_added_later(kubectl: Kubectl) -> None:
    kubectl.apply(gpu_pod("held", 1, gated=True), gpu_pod("free", 1, runs_for="1h"))  # still running below

    held = kubectl.wait_for("pod", "held", lambda p: condition(p, "PodScheduled"), "a PodScheduled condition")
    scheduled = condition(held, "PodScheduled")
    assert scheduled is not None
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulingGated")
    assert "nodeName" not in held["spec"]

    kubectl.wait_for("pod", "free", lambda p: p["spec"].get("nodeName"), "bound to a node")
    refusal = kubectl.fails(
        "patch", "pod", "free", "--type=json",
        "-p", json.dumps([{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]),
    )
    assert "schedulingGates" in refusal


def test_removing_the_gate_lets_the_scheduler_bind_and_kwok_run_the_pod_to_success(kubectl: Kubectl) -> None:
    kubectl.apply(gpu_pod("trainer", 4, gated=True, runs_for="3s"))
    kubectl.wait_for("pod", "trainer", lambda p: condition(p, "PodScheduled"), "a PodScheduled condition")

    ungate = '[{"op":"remove","path":"/spec/schedulingGates"}]'
    kubectl.run("patch", "pod", "trainer", "--type=json", "-p", ungate)

    bound = kubectl.wait_for("pod", "trainer", lambda p: p["spec"].get("nodeName"), "bound to a node")
    node = kubectl.get("node", bound["spec"]["nodeName"])
    assert int(node["status"]["allocatable"]["nvidia.com/gpu"]) >= 4
    # Its start and end read from the finished pod: a poll for the Running phase could miss a
    # 3 s run on a busy machine.
    done = kubectl.wait_for("pod", "trainer", lambda p: p["status"].get("phase") == "Succeeded", "Succeeded")
    terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == "Completed"
    started = datetime.fromisoformat(done["status"]["startTime"])
    finished = datetime.fromisoformat(terminated["finishedAt"])
    # kwok completes the pod after the delay its annotation asks for (3s), not at once.
    assert (finished - started).total_seconds() >= 3


def test_a_pod_asking_more_gpus_than_any_node_has_stays_pending_unschedulable(kubectl: Kubectl) -> None:
    kubectl.apply(gpu_pod("too-big", 9))

    pod = kubectl.wait_for(
        "pod", "too-big", lambda p: (condition(p, "PodScheduled") or {}).get("reason"), "a scheduler verdict"
    )
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None
    assert scheduled["status"] == "False"
    assert scheduled["reason"] == "Unschedulable"
    assert "nvidia.com/gpu" in scheduled["message"]
    pod = kubectl.get("pod", "too-big")
    assert pod["status"]["phase"] == "Pending"
    assert "nodeName" not in pod["spec"]


def test_a_job_with_parallelism_three_gets_its_pods_from_the_controller_manager_and_completes(
    kubectl: Kubectl,
) -> None:
    template = gpu_pod("unused", 1, runs_for="2s")
    del template["metadata"]["name"]
    kubectl.apply({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sweep"},
        "spec": {"parallelism": 3, "completions": 3, "backoffLimit": 0,
                 "template": {"metadata": template["metadata"], "spec": template["spec"]}},
    })

    def three_pods() -> list[dict[str, Any]] | None:
        pods = kubectl.items("pods", "-l", "job-name=sweep")
        return pods if len(pods) == 3 else None

    pods = eventually(three_pods, "three pods of the Job")
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"Job"}
    job = kubectl.wait_for("job", "sweep", lambda j: j["status"].get("succeeded") == 3, "3 pods succeeded")
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"])
