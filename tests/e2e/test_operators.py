"""The training-operator and KubeRay run beside the local control plane, and their workloads run
on kwok's nodes: a PyTorchJob's master and workers run to success and the job reports it, a
RayCluster's head and workers run, and a RayJob makes its RayCluster from its own spec.

The test namespaces carry no team label: Sluicegate manages nothing in them. The operators are
built (as ``make operators`` builds them) when missing; a failed build fails these tests.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from controlplane.operators import LocalOperator
from tests.e2e.conftest import Kubectl, eventually

# kwok ends a pod after the delay in this annotation (controlplane/kwok.yaml): short for the
# training job's pods, an hour (longer than any test) for the Ray pods, which must keep running.
COMPLETE_AFTER = "pod-complete.stage.kwok.x-k8s.io/delay"
PYTORCH_JOB_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"


def template(container: str, image: str, runs_for: str) -> dict[str, Any]:
    """A pod template whose one container kwok runs for ``runs_for``."""
    return {
        "metadata": {"annotations": {COMPLETE_AFTER: runs_for}},
        "spec": {"containers": [{"name": container, "image": image}]},
    }


def pytorch_job(name: str, workers: int) -> dict[str, Any]:
    # The operator looks for the container named "pytorch" (its default container name).
    pod = template("pytorch", "registry.invalid/train:1", "2s")
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "Never", "template": pod},
            "Worker": {"replicas": workers, "restartPolicy": "Never", "template": pod},
        }},
    }


def ray_cluster_spec(workers: int) -> dict[str, Any]:
    pod = template("ray", "registry.invalid/ray:2", "1h")
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": pod},
        "workerGroupSpecs": [{
            "groupName": "workers", "replicas": workers, "minReplicas": workers, "maxReplicas": workers,
            "rayStartParams": {}, "template": pod,
        }],
    }


def condition(obj: dict[str, Any], kind: str) -> str | None:
    found = [c["status"] for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind]
    return found[-1] if found else None


def controller_of(obj: dict[str, Any]) -> tuple[str, str] | None:
    owners = [o for o in obj["metadata"].get("ownerReferences", []) if o.get("controller")]
    return (owners[0]["kind"], owners[0]["name"]) if owners else None


def phases(pods: list[dict[str, Any]]) -> Counter[str]:
    return Counter(p["status"].get("phase", "") for p in pods)


def test_a_pytorch_job_runs_its_master_and_three_workers_to_success(
    operators: dict[str, LocalOperator], kubectl: Kubectl
) -> None:
    kubectl.apply(pytorch_job("mnist", workers=3))

    pods = eventually(
        lambda: (found if len(found := kubectl.items("pods", "-l", f"{PYTORCH_JOB_LABEL}=mnist")) == 4
                 and phases(found)["Succeeded"] == 4 else None),
        "the PyTorchJob's 4 pods to run and succeed",
    )
    job = kubectl.wait_for("pytorchjob", "mnist", lambda j: condition(j, "Succeeded") == "True",
                           "the job to report Succeeded")

    assert Counter(p["metadata"]["labels"][REPLICA_TYPE_LABEL] for p in pods) == {"master": 1, "worker": 3}
    assert {controller_of(p) for p in pods} == {("PyTorchJob", "mnist")}, "the operator made every pod"
    assert all(p["spec"].get("nodeName") for p in pods), "every pod was placed on a node"
    assert job["status"]["replicaStatuses"]["Worker"].get("succeeded") == 3
    assert operators["training-operator"].pid is not None, "the operator still runs"


def test_a_ray_cluster_runs_its_head_and_two_workers(
    operators: dict[str, LocalOperator], kubectl: Kubectl
) -> None:
    kubectl.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "tune"},
                   "spec": ray_cluster_spec(workers=2)})

    pods = eventually(
        lambda: (found if len(found := kubectl.items("pods", "-l", f"{RAY_CLUSTER_LABEL}=tune")) == 3
                 and phases(found)["Running"] == 3 else None),
        "the RayCluster's 3 pods to run",
    )
    kubectl.wait_for("raycluster", "tune", lambda c: c.get("status", {}).get("state") == "ready",
                     "the RayCluster to report ready")

    assert Counter(p["metadata"]["labels"][RAY_NODE_TYPE_LABEL] for p in pods) == {"head": 1, "worker": 2}
    assert {controller_of(p) for p in pods} == {("RayCluster", "tune")}, "the operator made every pod"
    assert operators["kuberay-operator"].pid is not None, "the operator still runs"


def test_a_ray_job_makes_its_ray_cluster_from_its_own_spec(
    operators: dict[str, LocalOperator], kubectl: Kubectl
) -> None:
    # InteractiveMode: KubeRay makes the cluster, waits for it to be ready, and then waits for a
    # job id instead of submitting through the Ray dashboard, which no pod on kwok serves.
    spec = {"submissionMode": "InteractiveMode", "rayClusterSpec": ray_cluster_spec(workers=1)}
    kubectl.apply({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "sweep"}, "spec": spec})

    job = kubectl.wait_for("rayjob", "sweep", lambda j: j.get("status", {}).get("rayClusterName"),
                           "the RayJob to name its RayCluster")
    name = job["status"]["rayClusterName"]
    cluster = kubectl.get("raycluster", name)
    pods = eventually(
        lambda: (found if len(found := kubectl.items("pods", "-l", f"{RAY_CLUSTER_LABEL}={name}")) == 2
                 and phases(found)["Running"] == 2 else None),
        f"the RayJob's cluster {name} to run its 2 pods",
    )
    kubectl.wait_for("rayjob", "sweep", lambda j: j["status"].get("jobDeploymentStatus") == "Waiting",
                     "the RayJob to wait for a job to be submitted to its ready cluster")

    assert controller_of(cluster) == ("RayJob", "sweep")
    assert cluster["spec"]["workerGroupSpecs"][0]["replicas"] == 1, "made from the RayJob's rayClusterSpec"
    assert Counter(p["metadata"]["labels"][RAY_NODE_TYPE_LABEL] for p in pods) == {"head": 1, "worker": 1}
    assert {controller_of(p) for p in pods} == {("RayCluster", name)}
