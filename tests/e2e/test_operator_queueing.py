"""PyTorchJobs, RayClusters and RayJobs in a namespace opted in to Sluicegate, with the
training-operator and KubeRay creating the pods: applied with plain ``kubectl apply`` as alice,
their pods are hers, one group, released together only when the queue has room for all of
them, and charged to her; bob is refused at the CREATE for a queue his team may not use; a pod
made by hand with a copied stamp under her PyTorchJob is refused.

The operators run as their release's ServiceAccounts, which the Policy's default
``operatorAccounts`` name (decision 0051)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from controlplane.launching import LocalCluster
from controlplane.operators import LocalOperator
from policy import keys
from process import kubeyaml
from tests.builders import MakeQueue, MakeTeam
from tests.doc_commands import scripts
from tests.e2e.conftest import Kubectl, eventually
from tests.e2e.projects import GPU_DELAY, Project, condition, gpu_pod, submitter

# test_guides' fixtures: the session cluster with the samples cleaned up after, and a checkout's top.
from tests.e2e.test_guides import SAMPLES, USER_GUIDE, play, samples, workdir  # noqa: F401
from tests.e2e.test_operators import (
    PYTORCH_JOB_LABEL,
    RAY_CLUSTER_LABEL,
    RAY_NODE_TYPE_LABEL,
    controller_of,
)
from tests.e2e.test_owners import HELD, sluicegate

ALICE = ("alice", "vision-devs")
BOB = ("bob", "vision-devs")


def training_project(project: Project, *, gpus: int = 4) -> tuple[str, str]:
    """The project's queue ``train`` (a quota of ``gpus`` GPUs, open to its team: alice and bob)
    as its default, and a queue ``closed`` it may name but only another team may use."""
    train, closed = project.name("train"), project.name("closed")
    others = project.name("speech")
    project.create(
        MakeTeam(project.team).members(users=["alice", "bob"], groups=["vision-devs"]).obj(),
        MakeTeam(others).members(users=["erin"]).obj(),
        MakeQueue(train).priority(20).access(teams=[project.team]).quota(gpus=gpus).obj(),
        MakeQueue(closed).priority(20).access(teams=[others]).obj(),
    )
    project.opt_in(default_queue=train, allowed_queues=[train, closed])
    grant_operator_kinds(project)
    return train, closed


def grant_operator_kinds(project: Project) -> None:
    """Let alice and bob (group vision-devs) edit the operators' kinds here, as the operators'
    releases' aggregated ``edit`` roles would (the local control plane installs only their CRDs
    and the operators' own roles)."""
    rbac = "rbac.authorization.k8s.io"
    subjects = [{"kind": "User", "name": u, "apiGroup": rbac} for u in ("alice", "bob")]
    subjects.append({"kind": "Group", "name": "vision-devs", "apiGroup": rbac})
    verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
    project.admin.apply(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "e2e-operators", "namespace": project.namespace},
         "rules": [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": verbs},
                   {"apiGroups": ["ray.io"], "resources": ["rayclusters", "rayjobs"], "verbs": verbs}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "e2e-operators", "namespace": project.namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "e2e-operators"},
         "subjects": subjects},
    )


def gpu_template(container: str, image: str, runs_for: str, gpus: int = 1) -> dict[str, Any]:
    limits = {keys.GPU_RESOURCE: str(gpus)} if gpus else {}
    return {
        "metadata": {"annotations": {GPU_DELAY: runs_for}},
        "spec": {"terminationGracePeriodSeconds": 0,
                 "containers": [{"name": container, "image": image, "resources": {"limits": limits}}]},
    }


def pytorch_job(name: str, workers: int, runs_for: str = "5s", queue: str | None = None) -> dict[str, Any]:
    pod = gpu_template("pytorch", "registry.invalid/train:1", runs_for)
    if queue is not None:
        pod["metadata"]["labels"] = {keys.QUEUE_LABEL: queue}
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "Never", "template": pod},
            "Worker": {"replicas": workers, "restartPolicy": "Never", "template": pod},
        }},
    }


def ray_cluster_spec(workers: int) -> dict[str, Any]:
    """A CPU head (no GPU, as usual) and ``workers`` 1-GPU workers, all kept running."""
    head = gpu_template("ray", "registry.invalid/ray:2", HELD, gpus=0)
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": head},
        "workerGroupSpecs": [{
            "groupName": "workers", "replicas": workers, "minReplicas": workers, "maxReplicas": workers,
            "rayStartParams": {}, "template": gpu_template("ray", "registry.invalid/ray:2", HELD),
        }],
    }


def apply_as(project: Project, who: tuple[str, ...], obj: dict[str, Any]) -> str:
    return project.user(*who).run("apply", "-f", "-", input=json.dumps(obj))


def wait_until_the_webhook_knows(project: Project, obj: dict[str, Any]) -> None:
    """Until alice's dry run of ``obj`` passes: the webhook knows the project's team and queues."""
    alice = project.user(*ALICE)
    seen: list[str] = []

    def passes() -> bool:
        done = alice.cluster.kubectl(*alice.identity, "-n", project.namespace, "apply", "--dry-run=server",
                                     "-f", "-", input=json.dumps(obj), check=False)
        seen[:] = [done.stderr]
        return done.returncode == 0

    try:
        eventually(passes, "the webhook to know the project's team and queues")
    except AssertionError as e:
        raise AssertionError(f"{e}: {seen}") from None


def live_pods(project: Project, selector: str) -> list[dict[str, Any]]:
    pods = project.admin.items("pods", "-l", selector)
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == keys.GATE for g in pod["spec"].get("schedulingGates", []))


def released(pod: dict[str, Any]) -> bool:
    return not gated(pod) and keys.DISPATCHED_AT_ANNOTATION in pod["metadata"].get("annotations", {})


def reason(pod: dict[str, Any]) -> str | None:
    found = condition(pod, keys.CONDITION)
    return found.get("reason") if found else None


def pods_released(project: Project, selector: str, count: int) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        pods = live_pods(project, selector)
        placed = all(released(p) and p["spec"].get("nodeName") for p in pods)
        return pods if len(pods) == count and placed else None

    return eventually(probe, f"{count} pods of {selector} released and placed")


def one_group(pods: list[dict[str, Any]], size: int) -> str:
    groups = {p["metadata"]["labels"].get(keys.GROUP_LABEL) for p in pods}
    sizes = {p["metadata"]["annotations"].get(keys.GROUP_SIZE_ANNOTATION) for p in pods}
    assert len(groups) == 1 and None not in groups, groups
    assert sizes == {str(size)}, sizes
    return str(groups.pop())


def released_together(pods: list[dict[str, Any]]) -> None:
    """The controller stamps every pod of one release with the same instant."""
    stamps = {p["metadata"]["annotations"][keys.DISPATCHED_AT_ANNOTATION] for p in pods}
    assert len(stamps) == 1, f"released at {sorted(stamps)}"


def test_alices_pytorch_job_is_one_group_of_hers_released_when_the_queue_has_room_for_all_four(
    project: Project, operators: dict[str, LocalOperator], cluster: LocalCluster, tmp_path: Path
) -> None:
    train, _ = training_project(project, gpus=4)
    job = pytorch_job("mnist", workers=3)
    wait_until_the_webhook_knows(project, job)

    # bob's 1-GPU pod runs first: the 4-GPU quota has room for 3 more.
    blocker = gpu_pod("bob-warmup", project.namespace)
    blocker["metadata"]["annotations"][GPU_DELAY] = HELD
    project.user(*BOB).run("create", "-f", "-", input=json.dumps(blocker))
    eventually(lambda: project.pod("bob-warmup")["status"].get("phase") == "Running", "bob's pod to run")

    out = apply_as(project, ALICE, job)
    assert "pytorchjob.kubeflow.org/mnist created" in out, out
    stored = project.admin.get("pytorchjob", "mnist")
    for spec in stored["spec"]["pytorchReplicaSpecs"].values():
        assert submitter(spec["template"]["metadata"]) == "alice"

    selector = f"{PYTORCH_JOB_LABEL}=mnist"

    def held() -> list[dict[str, Any]] | None:
        pods = live_pods(project, selector)
        quota = all(reason(p) == keys.Reason.QUEUE_QUOTA.value for p in pods)
        return pods if len(pods) == 4 and quota else None

    waiting = eventually(held, "the job's 4 pods held by the queue's quota")
    assert all(gated(p) and not p["spec"].get("nodeName") for p in waiting)
    assert {controller_of(p) for p in waiting} == {("PyTorchJob", "mnist")}, "the operator made every pod"
    assert {submitter(p["metadata"]) for p in waiting} == {"alice"}
    assert {p["metadata"]["labels"][keys.QUEUE_LABEL] for p in waiting} == {train}
    group = one_group(waiting, 4)
    assert group.startswith("pytorchjob-mnist-"), group
    assert project.pod("bob-warmup")["status"]["phase"] == "Running"

    project.admin.run("delete", "pod", "bob-warmup", "--wait=true")
    pods = pods_released(project, selector, 4)
    released_together(pods)
    names = {p["metadata"]["name"] for p in pods}
    assert names == {p["metadata"]["name"] for p in waiting}
    assert {submitter(p["metadata"]) for p in pods} == {"alice"}

    # The job runs to its end: the recorder keeps it as one workload of alice's, four GPUs, and
    # the report charges its GPU-hours to her.
    def recorded() -> dict[str, Any] | None:
        lines = [json.loads(line) for line in sluicegate(cluster, "records", "export", "--since", "1h")
                 .splitlines() if line.strip()]
        mine = [r for r in lines if r.get("namespace") == project.namespace and r.get("group") == group]
        return mine[0] if len(mine) == 1 and mine[0].get("finished") else None

    record = eventually(recorded, "the job recorded as one ended workload")
    assert record["submitter"] == "alice" and record["groupSize"] == 4, record
    assert record["requests"][keys.GPU_RESOURCE] == "4", record
    assert {p["name"] for p in record["pods"]} == names
    assert {p["released"] for p in record["pods"]} == {record["released"]}, "released together"
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps(record) + "\n")
    mine = json.loads(sluicegate(cluster, "report", "--trace", str(trace), "--by", "user", "-o", "json"))
    assert [(line["scope"], line["jobs"]) for line in mine["lines"]] == [("alice", 1)], mine
    assert mine["lines"][0]["gpuHours"] > 0, mine
    report = json.loads(sluicegate(cluster, "report", "--since", "1h", "--by", "user", "-o", "json"))
    scopes = {line["scope"]: line for line in report["lines"]}
    assert "alice" in scopes and scopes["alice"]["gpuHours"] >= mine["lines"][0]["gpuHours"], scopes
    assert keys.TRAINING_OPERATOR not in scopes, "the operator is charged nothing"


def test_bobs_pytorch_job_naming_a_queue_his_team_may_not_use_is_refused_at_apply(
    project: Project, operators: dict[str, LocalOperator]
) -> None:
    _, closed = training_project(project)
    wait_until_the_webhook_knows(project, pytorch_job("probe", workers=1))
    refusal = project.user(*BOB).fails("apply", "-f", "-",
                                       input=json.dumps(pytorch_job("urgent", workers=1, queue=closed)))
    assert "operators.mutate.sluicegate.dev" in refusal and "denied the request" in refusal, refusal
    assert f'queue "{closed}" is not open to user bob' in refusal, refusal
    assert project.admin.run("get", "pytorchjobs", "-o", "name") == ""


def test_alices_ray_cluster_is_one_group_of_hers_with_its_cpu_head(
    project: Project, operators: dict[str, LocalOperator]
) -> None:
    training_project(project, gpus=4)
    cluster_obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "tune"},
                   "spec": ray_cluster_spec(workers=2)}
    wait_until_the_webhook_knows(project, cluster_obj)
    assert "raycluster.ray.io/tune created" in apply_as(project, ALICE, cluster_obj)

    pods = pods_released(project, f"{RAY_CLUSTER_LABEL}=tune", 3)
    released_together(pods)
    one_group(pods, 3)
    assert sorted(p["metadata"]["labels"][RAY_NODE_TYPE_LABEL] for p in pods) == ["head", "worker", "worker"]
    assert {controller_of(p) for p in pods} == {("RayCluster", "tune")}, "the operator made every pod"
    assert {submitter(p["metadata"]) for p in pods} == {"alice"}


def test_alices_ray_job_makes_a_ray_cluster_whose_pods_are_hers(
    project: Project, operators: dict[str, LocalOperator]
) -> None:
    training_project(project, gpus=4)
    spec = {"submissionMode": "InteractiveMode", "rayClusterSpec": ray_cluster_spec(workers=1)}
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "sweep"}, "spec": spec}
    wait_until_the_webhook_knows(project, job)
    assert "rayjob.ray.io/sweep created" in apply_as(project, ALICE, job)

    found = project.admin.wait_for("rayjob", "sweep", lambda j: j.get("status", {}).get("rayClusterName"),
                                   "the RayJob to name its RayCluster")
    name = found["status"]["rayClusterName"]
    made = project.admin.get("raycluster", name)
    assert controller_of(made) == ("RayJob", "sweep")
    assert submitter(made["spec"]["headGroupSpec"]["template"]["metadata"]) == "alice"
    assert submitter(made["spec"]["workerGroupSpecs"][0]["template"]["metadata"]) == "alice"

    pods = pods_released(project, f"{RAY_CLUSTER_LABEL}={name}", 2)
    released_together(pods)
    one_group(pods, 2)
    assert {submitter(p["metadata"]) for p in pods} == {"alice"}
    assert {controller_of(p) for p in pods} == {("RayCluster", name)}


def test_a_pod_made_by_hand_under_alices_pytorch_job_with_her_copied_stamp_is_hers_alone(
    project: Project, operators: dict[str, LocalOperator]
) -> None:
    """bob copies the stamp of alice's job onto a pod that names her job as its owner: refused.
    alice doing the same makes a pod of her own, judged as her (the stamp says what admission
    would write for her): it joins no group and is counted as one more pod of hers."""
    train, _ = training_project(project, gpus=4)
    job = pytorch_job("mnist", workers=1, runs_for=HELD)
    wait_until_the_webhook_knows(project, job)
    apply_as(project, ALICE, job)
    stored = project.admin.get("pytorchjob", "mnist")
    stamp = stored["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"]["annotations"]
    forged = gpu_pod("mnist-extra", project.namespace)
    forged["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION] = stamp[keys.SUBMITTER_ANNOTATION]
    forged["metadata"]["ownerReferences"] = [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist",
        "uid": stored["metadata"]["uid"], "controller": True,
    }]

    refusal = project.user(*BOB).fails("create", "-f", "-", input=json.dumps(forged))
    assert "pods.mutate.sluicegate.dev" in refusal and "denied the request" in refusal, refusal
    assert (f"annotation {keys.SUBMITTER_ANNOTATION} is written by Sluicegate and cannot be set by users"
            in refusal), refusal
    assert project.admin.run("get", "pod", "mnist-extra", "--ignore-not-found", "-o", "name") == ""

    project.user(*ALICE).run("create", "-f", "-", input=json.dumps(forged))
    pod = project.pod("mnist-extra")
    assert submitter(pod["metadata"]) == "alice"
    assert pod["metadata"]["labels"][keys.QUEUE_LABEL] == train
    assert keys.GROUP_LABEL not in pod["metadata"]["labels"], "it joins no group"


def test_the_user_guides_operator_commands_pass_as_a_team_member(
    samples: LocalCluster, workdir: Path, operators: dict[str, LocalOperator]  # noqa: F811
) -> None:
    """The user guide's ``sh operators`` blocks, as alice of team vision, where the samples are
    set up and the operators run (test_guides.py runs the guide's other blocks)."""
    samples.kubectl("apply", "-k", str(SAMPLES))  # what the platform team set up
    grant_operator_kinds(Project(Kubectl(samples, "vision-research")))
    config = yaml.safe_load(samples.kubeconfig.read_text())
    for user in config["users"]:
        user["user"]["as"] = "alice"
        user["user"]["as-groups"] = ["vision-devs"]
    alice = workdir / "alice.kubeconfig"
    alice.write_text(kubeyaml.dump(config))
    blocks = scripts(USER_GUIDE, "operators")
    assert len(blocks) == 4, [str(b) for b in blocks]
    for block in blocks:
        play(block, samples, workdir, alice)
