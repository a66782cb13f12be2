"""Deployments and StatefulSets: notebooks and services run as the person who applied them.

A Deployment's pods are created by the ReplicaSet controller, for a ReplicaSet the deployment
controller created; a StatefulSet's by the StatefulSet controller. Admission judges the
Deployment or StatefulSet at its CREATE and whenever its pod template changes, stamps the
submitter on the template, and honours that stamp only from the controllers that really create
each kind's objects.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy import keys
from policy.patching import apply
from policy.pods import Submitter
from policy.reviews import (
    DAEMONSET,
    DEPLOYMENT,
    POD,
    REPLICASET,
    REPLICATIONCONTROLLER,
    STATEFULSET,
    Admit,
    Deny,
    Kind,
)
from tests.admission_world import SLUICEGATE, run, vision_catalog, written_by_sluicegate
from tests.builders import MakeDeployment, MakePod, MakePolicy, create, update

DEPLOYMENT_CONTROLLER = "system:serviceaccount:kube-system:deployment-controller"
REPLICASET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
STATEFULSET_CONTROLLER = "system:serviceaccount:kube-system:statefulset-controller"
ALICE = Submitter("alice", frozenset({"vision-devs"}))
NOT_OPEN = 'queue "prod-train" is not open to user alice (team vision)'


def notebook(queue: str = "vision-train", *, kind: str = "Deployment", name: str = "nb") -> MakeDeployment:
    return MakeDeployment(MakePod.submitted().queue(queue).gpus(1).template(), name=name, kind=kind)


def admitted(obj: dict[str, Any], user: str, *groups: str, kind: Kind) -> dict[str, Any]:
    decision = run(create(obj, user, *groups, kind=kind))
    assert isinstance(decision, Admit), decision
    return apply(obj, decision.patch)


def stamp(obj: dict[str, Any]) -> Submitter | None:
    notes = obj["spec"]["template"]["metadata"].get("annotations", {})
    raw = notes.get(keys.SUBMITTER_ANNOTATION)
    return Submitter.from_annotation(raw) if raw else None


# --- CREATE: refused at kubectl apply, stamped when admitted -------------------------------


@pytest.mark.parametrize("kind", [DEPLOYMENT, STATEFULSET, REPLICASET, DAEMONSET, REPLICATIONCONTROLLER],
                         ids=lambda k: k.kind)
def test_a_queue_the_user_may_not_use_is_refused_at_the_objects_create(kind: Kind) -> None:
    decision = run(create(notebook("prod-train", kind=kind.kind).obj(), "alice", kind=kind))
    assert isinstance(decision, Deny)
    assert decision.message.startswith(NOT_OPEN)


def test_a_deployments_replicaset_and_pods_run_as_the_person_who_applied_it() -> None:
    deployment = admitted(notebook().obj(), "alice", "vision-devs", kind=DEPLOYMENT)
    assert stamp(deployment) == ALICE

    # The deployment controller makes a ReplicaSet of the template, the stamp included.
    replicaset = MakeDeployment(deployment["spec"]["template"], name="nb-5d4f", kind="ReplicaSet")
    replicaset.owned_by(DEPLOYMENT, "nb")
    stored = admitted(replicaset.obj(), DEPLOYMENT_CONTROLLER, "system:serviceaccounts", kind=REPLICASET)
    assert stamp(stored) == ALICE

    # The ReplicaSet controller makes the pods: alice's, gated, in her queue.
    pod = MakeDeployment(stored["spec"]["template"], name="nb-5d4f", kind="ReplicaSet").replica("nb-5d4f-x")
    decided = admitted(pod, REPLICASET_CONTROLLER, "system:serviceaccounts", kind=POD)
    notes, labels = decided["metadata"]["annotations"], decided["metadata"]["labels"]
    assert Submitter.from_annotation(notes[keys.SUBMITTER_ANNOTATION]) == ALICE
    assert labels[keys.QUEUE_LABEL] == "vision-train"
    assert decided["spec"]["schedulingGates"] == [{"name": keys.GATE}]


def test_a_statefulsets_pods_run_as_the_person_who_applied_it() -> None:
    statefulset = notebook(kind="StatefulSet")
    stored = admitted(statefulset.obj(), "alice", "vision-devs", kind=STATEFULSET)
    pod = MakeDeployment(stored["spec"]["template"], name="nb", kind="StatefulSet").replica("nb-0")
    decided = admitted(pod, STATEFULSET_CONTROLLER, "system:serviceaccounts", kind=POD)
    assert Submitter.from_annotation(decided["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]) == ALICE


@pytest.mark.parametrize(
    ("kind", "controller"),
    [(DAEMONSET, keys.DAEMONSET_CONTROLLER), (REPLICATIONCONTROLLER, keys.REPLICATION_CONTROLLER)],
    ids=lambda k: getattr(k, "kind", ""),
)
def test_a_daemonsets_or_replicationcontrollers_pods_run_and_count_as_the_person_who_applied_it(
    kind: Kind, controller: str
) -> None:
    """Without their rows these pods were judged, and charged, as the controller's own account."""
    stored = admitted(notebook(kind=kind.kind).obj(), "alice", "vision-devs", kind=kind)
    assert stamp(stored) == ALICE
    pod = MakeDeployment(stored["spec"]["template"], name="nb", kind=kind.kind).replica("nb-x")
    decided = admitted(pod, controller, "system:serviceaccounts", kind=POD)
    assert Submitter.from_annotation(decided["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]) == ALICE
    assert decided["spec"]["schedulingGates"] == [{"name": keys.GATE}]


@pytest.mark.parametrize(
    ("owner", "creator"),
    [
        pytest.param("ReplicaSet", STATEFULSET_CONTROLLER, id="the statefulset controller never creates a "
                     "ReplicaSet's pods"),
        pytest.param("StatefulSet", REPLICASET_CONTROLLER, id="the replicaset controller never creates a "
                     "StatefulSet's pods"),
        pytest.param("ReplicaSet", "bob", id="a user who writes a stamp by hand on a pod a ReplicaSet "
                     "seems to own"),
    ],
)
def test_a_stamp_is_honoured_only_from_the_controller_that_really_creates_that_kinds_pods(
    owner: str, creator: str
) -> None:
    template = notebook().obj()["spec"]["template"]
    template["metadata"]["annotations"] = {keys.SUBMITTER_ANNOTATION: ALICE.to_annotation()}
    pod = MakeDeployment(template, kind=owner).replica("nb-x")
    decision = run(create(pod, creator, kind=POD))
    assert decision == Deny(written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION))


def test_a_replicaset_made_by_hand_from_someone_elses_deployment_is_refused() -> None:
    deployment = admitted(notebook().obj(), "alice", "vision-devs", kind=DEPLOYMENT)
    replicaset = MakeDeployment(deployment["spec"]["template"], name="nb-copy", kind="ReplicaSet")
    replicaset.owned_by(DEPLOYMENT, "nb")
    decision = run(create(replicaset.obj(), "bob", kind=REPLICASET))
    assert isinstance(decision, Deny)
    assert decision.message.startswith(
        "this ReplicaSet's pod template carries the submitter stamp of user alice"
    )


def test_an_untrusted_replicaset_controller_is_refused_naming_the_missing_trust() -> None:
    catalog = vision_catalog(policy=MakePolicy().set(trustedControllers=[DEPLOYMENT_CONTROLLER]).obj())
    template = notebook().obj()["spec"]["template"]
    template["metadata"]["annotations"] = {keys.SUBMITTER_ANNOTATION: ALICE.to_annotation()}
    pod = MakeDeployment(template, name="nb-5d4f", kind="ReplicaSet").replica("nb-5d4f-x")
    decision = run(create(pod, REPLICASET_CONTROLLER, kind=POD), catalog=catalog)
    assert isinstance(decision, Deny)
    assert decision.message.endswith(
        "a platform administrator adds it to the Policy's spec.trustedControllers")


# --- UPDATE: a new template is judged again -------------------------------------------------


def changed(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["spec"]["template"]["metadata"]["labels"].update(labels)
    return new


def test_a_template_update_to_a_queue_the_submitter_may_not_use_is_refused_at_apply() -> None:
    deployment = admitted(notebook().obj(), "alice", "vision-devs", kind=DEPLOYMENT)
    decision = run(update(deployment, changed(deployment, **{keys.QUEUE_LABEL: "prod-train"}),
                          "alice", "vision-devs", kind=DEPLOYMENT))
    assert isinstance(decision, Deny)
    assert decision.message.startswith(NOT_OPEN)


def test_a_template_update_the_submitter_may_make_is_admitted_with_the_stamp_unchanged() -> None:
    deployment = admitted(notebook().obj(), "alice", "vision-devs", kind=DEPLOYMENT)
    new = changed(deployment, version="2")
    decision = run(update(deployment, new, "alice", "vision-devs", kind=DEPLOYMENT))
    assert isinstance(decision, Admit)
    assert decision.patch == ()


def test_someone_else_may_not_change_a_stamped_deployments_template_or_replicas() -> None:
    deployment = admitted(notebook().obj(), "alice", "vision-devs", kind=DEPLOYMENT)
    more = copy.deepcopy(deployment)
    more["spec"]["replicas"] = 8
    for new in (changed(deployment, version="2"), more):
        decision = run(update(deployment, new, "bob", kind=DEPLOYMENT))
        assert isinstance(decision, Deny)
        assert decision.message.startswith("Deployment nb was submitted by user alice")
        # A Deployment has no spec.suspend: its brake is the scale subresource.
        assert decision.message.endswith("may still scale it to zero (kubectl scale --replicas=0)")
        assert "suspend" not in decision.message


def test_the_deployment_controller_scales_a_stamped_replicaset_during_a_rollout() -> None:
    template = notebook().obj()["spec"]["template"]
    template["metadata"]["annotations"] = {keys.SUBMITTER_ANNOTATION: ALICE.to_annotation()}
    old = MakeDeployment(template, name="nb-5d4f", kind="ReplicaSet").owned_by(DEPLOYMENT, "nb").obj()
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 0
    assert run(update(old, new, DEPLOYMENT_CONTROLLER, "system:serviceaccounts", kind=REPLICASET)) == Admit()


def test_an_unstamped_deployment_is_stamped_with_whoever_changes_its_template() -> None:
    """A Deployment older than Sluicegate's webhooks carries no stamp: anyone with RBAC may change
    it, and its new template is judged as them and stamped; the final check admits that stamp."""
    old = notebook().obj()
    new = changed(old, version="2")
    decision = run(update(old, new, "alice", "vision-devs", kind=DEPLOYMENT))
    assert isinstance(decision, Admit)
    stamped = apply(new, decision.patch)
    assert stamp(stamped) == ALICE
    assert run(update(old, stamped, "alice", "vision-devs", kind=DEPLOYMENT)) == Admit()
    refused = run(update(old, stamped, "bob", kind=DEPLOYMENT))
    assert isinstance(refused, Deny)
    assert "cannot be added to the pod template of a Deployment" in refused.message
    judged = run(update(old, changed(old, **{keys.QUEUE_LABEL: "prod-train"}), "alice", kind=DEPLOYMENT))
    assert isinstance(judged, Deny)
    assert judged.message.startswith('queue "prod-train" is not open to user alice')


def test_sluicegates_own_controller_is_not_judged_on_update() -> None:
    deployment = admitted(notebook().obj(), "alice", "vision-devs", kind=DEPLOYMENT)
    new = changed(deployment, **{keys.QUEUE_LABEL: "prod-train"})
    assert run(update(deployment, new, SLUICEGATE, kind=DEPLOYMENT)) == Admit()
