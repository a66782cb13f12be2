"""Operators' kinds: a PyTorchJob, a RayCluster and a RayJob run as the person who applied them,
and their pods start together as one pod group without labels written by hand.

The objects are shaped as their users write them and the pods as the training operator and
KubeRay create them: named, labelled and owned as those operators do. Admission judges the
object at its CREATE (the queue, access, presets), stamps every pod template and writes the
group, its size and its queue on each; the stamp counts only on pods that the operator account
the Policy names creates.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy import keys
from policy.catalog import Catalog
from policy.model import Namespace
from policy.patching import apply
from policy.pods import Submitter
from policy.reviews import POD, PYTORCHJOB, RAYCLUSTER, RAYJOB, Admit, Deny, Kind, MalformedReview
from tests.admission_world import JOB_CONTROLLER, run, vision_catalog, vision_ml, written_by_sluicegate
from tests.builders import MakePod, MakePolicy, MakePyTorchJob, MakeRayCluster, create, update

TRAINING_OPERATOR = "system:serviceaccount:kubeflow:training-operator"
KUBERAY_OPERATOR = "system:serviceaccount:ray-system:kuberay-operator"
SERVICE_ACCOUNTS = "system:serviceaccounts"
ALICE = Submitter("alice", frozenset({"vision-devs"}))
NS = vision_ml().default_queue("vision-train").model()
"""Namespace vision-ml, team vision's, whose default queue is vision-train."""
BOB_REFUSED = (
    'queue "vision-train" (the default queue of namespace vision-ml) is not open to user bob (no team); '
    "this namespace may use: research"
)
"""The queue's refusal of bob, who is no member of team vision."""


def pytorchjob(gpus: int = 1, workers: int = 3) -> MakePyTorchJob:
    return MakePyTorchJob(MakePod.submitted().gpus(gpus).template(), workers=workers)


def raycluster(
    *, head_gpus: int = 0, workers: int = 2, kind: str = "RayCluster", name: str = "raycluster-gpu"
) -> MakeRayCluster:
    head = MakePod.submitted().requests(cpu="2").template()
    if head_gpus:
        head = MakePod.submitted().gpus(head_gpus).template()
    return MakeRayCluster(head, MakePod.submitted().gpus(1).template(), workers=workers, kind=kind, name=name)


def admitted(
    obj: dict[str, Any],
    user: str,
    *groups: str,
    kind: Kind,
    namespace: Namespace = NS,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    decision = run(create(obj, user, *groups, kind=kind), namespace, catalog)
    assert isinstance(decision, Admit), decision
    return apply(obj, decision.patch)


def templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"].get("rayClusterSpec", obj["spec"])
    if "pytorchReplicaSpecs" in spec:
        return [r["template"] for r in spec["pytorchReplicaSpecs"].values()]
    return [spec["headGroupSpec"]["template"], *(g["template"] for g in spec["workerGroupSpecs"])]


def stamp(template: dict[str, Any]) -> Submitter | None:
    raw = template.get("metadata", {}).get("annotations", {}).get(keys.SUBMITTER_ANNOTATION)
    return Submitter.from_annotation(raw) if raw else None


def alices_job() -> MakePyTorchJob:
    """Alice's PyTorchJob as stored: every template stamped, one group of four."""
    job = pytorchjob()
    job._obj = admitted(job.obj(), "alice", "vision-devs", kind=PYTORCHJOB)
    return job


def alices_cluster() -> MakeRayCluster:
    cluster = raycluster()
    cluster._obj = admitted(cluster.obj(), "alice", "vision-devs", kind=RAYCLUSTER)
    return cluster


# --- CREATE: judged at kubectl apply, every template stamped and grouped --------------------


def test_alices_pytorchjob_is_judged_at_its_create_and_every_template_stamped_and_grouped() -> None:
    job = alices_job().obj()
    group = {t["metadata"]["labels"][keys.GROUP_LABEL] for t in templates(job)}
    assert len(group) == 1 and next(iter(group)).startswith("pytorchjob-mnist-")
    for template in templates(job):
        assert stamp(template) == ALICE
        assert template["metadata"]["labels"][keys.QUEUE_LABEL] == "vision-train"  # the namespace's default
        assert template["metadata"]["annotations"][keys.GROUP_SIZE_ANNOTATION] == "4"  # 1 master + 3 workers


def test_bob_whose_team_may_not_use_the_queue_is_refused_at_the_pytorchjobs_create() -> None:
    decision = run(create(pytorchjob().obj(), "bob", kind=PYTORCHJOB), NS)
    assert decision == Deny(BOB_REFUSED)


def test_a_queue_named_on_the_object_is_judged_as_the_person_who_applied_it() -> None:
    job = MakePyTorchJob(MakePod.submitted().queue("prod-train").gpus(1).template())
    decision = run(create(job.obj(), "alice", "vision-devs", kind=PYTORCHJOB), NS)
    assert isinstance(decision, Deny)
    assert decision.message.startswith('queue "prod-train" is not open to user alice (team vision)')


def test_templates_that_name_different_queues_are_refused_as_one_group_runs_in_one_queue() -> None:
    job = pytorchjob().obj()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "labels": {keys.QUEUE_LABEL: "vision-interactive"}
    }
    decision = run(create(job, "alice", "vision-devs", kind=PYTORCHJOB), NS)
    assert isinstance(decision, Deny)
    assert "templates name different ones (spec.pytorchReplicaSpecs.Master.template in vision-train, " \
        "spec.pytorchReplicaSpecs.Worker.template in vision-interactive)" in decision.message


def test_a_preset_the_namespace_does_not_allow_is_refused_at_the_create_whichever_template_names_it() -> None:
    job = pytorchjob().obj()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {keys.PRESETS_ANNOTATION: "connections"}
    }
    namespace = vision_ml().default_queue("vision-train").allowed_presets(["single-gpu"]).model()
    decision = run(create(job, "alice", "vision-devs", kind=PYTORCHJOB), namespace)
    assert isinstance(decision, Deny)
    assert decision.message.startswith('preset "connections" is not allowed in namespace vision-ml')


def test_a_stamp_written_by_hand_on_a_pytorchjob_template_is_refused() -> None:
    job = pytorchjob().obj()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {keys.SUBMITTER_ANNOTATION: ALICE.to_annotation()}
    }
    decision = run(create(job, "bob", kind=PYTORCHJOB), NS)
    assert decision == Deny(written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION))


def test_a_template_of_a_shape_no_api_server_sends_is_malformed() -> None:
    job = pytorchjob().obj()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] = 5
    with pytest.raises(MalformedReview, match=r"object\.spec\.pytorchReplicaSpecs\.Worker\.template\.spec\."
                                             r"containers: expected a list"):
        run(create(job, "alice", kind=PYTORCHJOB), NS)


def test_an_unmanaged_pytorchjob_is_stamped_and_forms_no_group() -> None:
    job = MakePyTorchJob(MakePod.submitted().requests(cpu="1").template()).obj()
    stored = admitted(job, "alice", "vision-devs", kind=PYTORCHJOB)
    for template in templates(stored):
        assert stamp(template) == ALICE
        assert keys.GROUP_LABEL not in template.get("metadata", {}).get("labels", {})


def test_a_group_the_user_names_is_kept_as_written() -> None:
    job = MakePyTorchJob(MakePod.submitted().gpus(1).group("mine", 4).template()).obj()
    stored = admitted(job, "alice", "vision-devs", kind=PYTORCHJOB)
    for template in templates(stored):
        assert template["metadata"]["labels"][keys.GROUP_LABEL] == "mine"
        assert keys.QUEUE_LABEL not in template["metadata"]["labels"]


# --- the pods: the operator's account only ----------------------------------------------------


def test_the_pods_the_training_operator_creates_run_as_alice_in_one_group_gated() -> None:
    job = alices_job()
    pods = [admitted(job.replica("Master", 0), TRAINING_OPERATOR, SERVICE_ACCOUNTS, kind=POD)]
    pods += [
        admitted(job.replica("Worker", i), TRAINING_OPERATOR, SERVICE_ACCOUNTS, kind=POD) for i in range(3)
    ]
    groups = {p["metadata"]["labels"][keys.GROUP_LABEL] for p in pods}
    assert len(groups) == 1
    for pod in pods:
        notes = pod["metadata"]["annotations"]
        assert Submitter.from_annotation(notes[keys.SUBMITTER_ANNOTATION]) == ALICE
        assert notes[keys.GROUP_SIZE_ANNOTATION] == "4"
        assert pod["metadata"]["labels"][keys.QUEUE_LABEL] == "vision-train"
        assert pod["metadata"]["labels"][keys.TEAM_LABEL] == "vision"
        assert pod["spec"]["schedulingGates"] == [{"name": keys.GATE}]


def test_presets_are_applied_to_the_pods_of_every_replica_template() -> None:
    namespace = vision_ml().default_queue("vision-train").default_presets(["connections"]).model()
    job = pytorchjob()
    job._obj = admitted(job.obj(), "alice", "vision-devs", kind=PYTORCHJOB, namespace=namespace)
    for replica_type in ("Master", "Worker"):
        pod = admitted(job.replica(replica_type, 0), TRAINING_OPERATOR, SERVICE_ACCOUNTS, kind=POD,
                       namespace=namespace)
        container = pod["spec"]["containers"][0]
        assert container["name"] == "pytorch"
        assert {"name": "DATA_URL", "value": "s3://vision"} in container["env"]
        assert pod["metadata"]["annotations"][keys.APPLIED_PRESETS_ANNOTATION] == "connections"


@pytest.mark.parametrize("creator", [
    pytest.param("bob", id="a user"),
    pytest.param("alice", id="the stamped user herself, in other groups"),
    pytest.param(JOB_CONTROLLER, id="a trusted controller of another kind"),
])
def test_a_stamped_pod_of_a_pytorchjob_created_by_anyone_but_its_operator_is_refused(creator: str) -> None:
    pod = alices_job().replica("Worker", 1)
    decision = run(create(pod, creator, kind=POD), NS)
    assert decision == Deny(written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION))


def test_another_operators_account_may_not_create_a_pytorchjobs_pods_with_its_stamp() -> None:
    pod = alices_job().replica("Worker", 1)
    decision = run(create(pod, KUBERAY_OPERATOR, SERVICE_ACCOUNTS, kind=POD), NS)
    assert isinstance(decision, Deny)
    assert decision.message.startswith(
        f"{KUBERAY_OPERATOR} created this Pod for a PyTorchJob whose template Sluicegate stamped "
        f"({keys.SUBMITTER_ANNOTATION}), but the Policy names {TRAINING_OPERATOR} as the operator of "
        "pytorchjobs.kubeflow.org"
    )


def test_a_forged_stamp_on_a_pod_that_names_a_pytorchjob_as_owner_is_refused() -> None:
    pod = MakePod.submitted(name="mnist-worker-9").gpus(1).submitter("alice", "vision-devs").obj()
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist", "uid": "uid-mnist",
         "controller": True}
    ]
    decision = run(create(pod, "bob", kind=POD), NS)
    assert decision == Deny(written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION))


def test_the_policy_names_the_operator_account_and_only_that_one_is_honoured() -> None:
    elsewhere = "system:serviceaccount:training:kubeflow-training"
    policy = MakePolicy().set(operatorAccounts={"pytorchjobs.kubeflow.org": elsewhere}).obj()
    catalog = vision_catalog(policy=policy)
    job = pytorchjob()
    job._obj = admitted(job.obj(), "alice", "vision-devs", kind=PYTORCHJOB, catalog=catalog)
    pod = admitted(job.replica("Worker", 0), elsewhere, SERVICE_ACCOUNTS, kind=POD, catalog=catalog)
    assert Submitter.from_annotation(pod["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]) == ALICE
    pod = job.replica("Worker", 1)
    refused = run(create(pod, TRAINING_OPERATOR, SERVICE_ACCOUNTS, kind=POD), NS, catalog)
    assert isinstance(refused, Deny)
    assert f"the Policy names {elsewhere} as the operator of pytorchjobs.kubeflow.org" in refused.message


# --- RayCluster and RayJob --------------------------------------------------------------------


def test_a_rayclusters_head_and_workers_form_one_group_the_cpu_head_included() -> None:
    cluster = alices_cluster()
    for template in templates(cluster.obj()):
        assert stamp(template) == ALICE
        assert template["metadata"]["annotations"][keys.GROUP_SIZE_ANNOTATION] == "3"  # head + 2 workers
        assert template["metadata"]["labels"][keys.QUEUE_LABEL] == "vision-train"
    head = admitted(cluster.replica("head", ""), KUBERAY_OPERATOR, SERVICE_ACCOUNTS, kind=POD)
    worker = admitted(cluster.replica("worker", "x7k2p"), KUBERAY_OPERATOR, SERVICE_ACCOUNTS, kind=POD)
    for pod in (head, worker):
        assert Submitter.from_annotation(pod["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]) == ALICE
        assert pod["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert head["metadata"]["labels"][keys.GROUP_LABEL] == worker["metadata"]["labels"][keys.GROUP_LABEL]


def test_bob_is_refused_at_the_rayclusters_create() -> None:
    decision = run(create(raycluster().obj(), "bob", kind=RAYCLUSTER), NS)
    assert decision == Deny(BOB_REFUSED)


def test_a_rayjobs_cluster_keeps_the_rayjob_submitters_identity() -> None:
    job = raycluster(kind="RayJob", name="rayjob-sample")
    job._obj = admitted(job.obj(), "alice", "vision-devs", kind=RAYJOB)
    for template in templates(job.obj()):
        assert stamp(template) == ALICE
        assert keys.GROUP_LABEL not in template["metadata"].get("labels", {})  # formed on its cluster

    # KubeRay creates the RayCluster from spec.rayClusterSpec, owned by the RayJob.
    cluster = job.cluster("rayjob-sample-x2k9d")
    cluster._obj = admitted(cluster.obj(), KUBERAY_OPERATOR, SERVICE_ACCOUNTS, kind=RAYCLUSTER)
    for template in templates(cluster.obj()):
        assert stamp(template) == ALICE
        assert template["metadata"]["labels"][keys.GROUP_LABEL].startswith("raycluster-rayjob-sample-x2k9d-")
        assert template["metadata"]["annotations"][keys.GROUP_SIZE_ANNOTATION] == "3"

    # ...and its pods run as alice.
    pod = admitted(cluster.replica("worker", "q8z4m"), KUBERAY_OPERATOR, SERVICE_ACCOUNTS, kind=POD)
    assert Submitter.from_annotation(pod["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]) == ALICE


def test_bob_is_refused_at_the_rayjobs_create() -> None:
    decision = run(create(raycluster(kind="RayJob").obj(), "bob", kind=RAYJOB), NS)
    assert decision == Deny(BOB_REFUSED)


def test_a_raycluster_made_by_hand_from_someone_elses_rayjob_is_refused() -> None:
    job = raycluster(kind="RayJob", name="rayjob-sample")
    job._obj = admitted(job.obj(), "alice", "vision-devs", kind=RAYJOB)
    decision = run(create(job.cluster("rayjob-sample-copy").obj(), "bob", kind=RAYCLUSTER), NS)
    assert isinstance(decision, Deny)
    assert decision.message.startswith(
        "this RayCluster's pod template carries the submitter stamp of user alice"
    )


# --- changes: the stamped person's, scaling anyone's -------------------------------------------


def test_a_colleague_may_not_change_alices_pytorchjobs_replicas() -> None:
    old = alices_job().obj()
    new = copy.deepcopy(old)
    new["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 7
    decision = run(update(old, new, "carol", "vision-devs", kind=PYTORCHJOB), NS)
    assert isinstance(decision, Deny)
    assert decision.message.startswith(
        "PyTorchJob mnist was submitted by user alice (annotation sluicegate.dev/submitter on its pod "
        "template) and only they may change what it runs or how much "
        "(spec.pytorchReplicaSpecs.Worker.replicas)"
    )


def test_anyone_allowed_to_edit_a_raycluster_may_scale_its_workers_but_not_change_them() -> None:
    old = alices_cluster().obj()
    scaled = copy.deepcopy(old)
    scaled["spec"]["workerGroupSpecs"][0]["replicas"] = 4
    scaled["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": []}
    autoscaler = "system:serviceaccount:vision-ml:raycluster-gpu"
    assert run(update(old, scaled, autoscaler, kind=RAYCLUSTER), NS) == Admit()
    bigger = copy.deepcopy(old)
    bigger["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "mine:1"
    decision = run(update(old, bigger, autoscaler, kind=RAYCLUSTER), NS)
    assert isinstance(decision, Deny)
    assert "(spec.workerGroupSpecs[0].template)" in decision.message


def test_kuberay_may_suspend_the_worker_groups_of_a_rayjobs_cluster() -> None:
    old = alices_cluster().obj()
    new = copy.deepcopy(old)
    new["spec"]["workerGroupSpecs"][0]["suspend"] = True
    assert run(update(old, new, KUBERAY_OPERATOR, SERVICE_ACCOUNTS, kind=RAYCLUSTER), NS) == Admit()


def test_a_changed_worker_template_is_judged_again_as_the_stamped_person() -> None:
    old = alices_cluster().obj()
    new = copy.deepcopy(old)
    new["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["labels"][keys.QUEUE_LABEL] = "prod-train"
    decision = run(update(old, new, "alice", "vision-devs", kind=RAYCLUSTER), NS)
    assert isinstance(decision, Deny)
    assert decision.message.startswith('queue "prod-train" is not open to user alice (team vision)')
