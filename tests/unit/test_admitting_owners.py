"""Owners: a Job is judged at its CREATE as the user who made it, and its pods inherit that user.

The Job controller creates the pods, so without the stamp every Job pod would be judged as
``job-controller``; with it, a pod is judged as the person who created its Job, and only when a
trusted controller created it for an owner whose CREATE admission saw.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy import keys
from policy.catalog import Catalog
from policy.model import Namespace
from policy.patching import apply
from policy.pods import Submitter
from policy.reviews import JOB, Admit, Deny, Kind
from tests.admission_builders import (
    ARGO,
    JOB_CONTROLLER,
    PodBuilder,
    create,
    create_job,
    make_job,
    make_namespace,
    make_pod,
    make_policy,
    run,
    vision_catalog,
    written_by_sluicegate,
)

NS = make_namespace()
CATALOG = vision_catalog()
ALICE = Submitter("alice").to_annotation()
REPLICA_SET = Kind("apps", "v1", "ReplicaSet")
FORGED_SUBMITTER = written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION)


# --- whose pod is it ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "creator", "catalog", "outcome"),
    [
        pytest.param(
            make_pod().queue("vision-train").owned_by(JOB).submitter("alice"),
            JOB_CONTROLLER,
            CATALOG,
            "alice",
            id="the Job controller's pod is judged as the user who created the Job",
        ),
        pytest.param(
            make_pod().queue("vision-train").owned_by(JOB).submitter("alice"),
            ARGO,
            vision_catalog(policy=make_policy(trustedControllers=[JOB_CONTROLLER, ARGO])),
            FORGED_SUBMITTER,
            id="a trusted controller that claims a Job owns its pod carries no stamp: only the Job "
            "controller creates Jobs' pods",
        ),
        pytest.param(
            make_pod().queue("vision-train").owned_by(JOB).submitter("alice"),
            "system:kube-controller-manager",
            vision_catalog(policy=make_policy(trustedControllers=["system:kube-controller-manager"])),
            "alice",
            id="the controller manager running as itself creates Jobs' pods too, once trusted",
        ),
        pytest.param(
            make_pod().queue("vision-train").owned_by(JOB),
            JOB_CONTROLLER,
            CATALOG,
            'queue "vision-train" is not open to user system:serviceaccount:kube-system:job-controller '
            "(no team); no queue this namespace may use is open to user "
            "system:serviceaccount:kube-system:job-controller",
            id="without a stamp the pod is judged as the controller itself",
        ),
        pytest.param(
            make_pod().queue("vision-train").owned_by(JOB).submitter("alice"),
            "mallory",
            CATALOG,
            FORGED_SUBMITTER,
            id="a user who writes a stamp themselves is refused",
        ),
        pytest.param(
            make_pod().queue("vision-train").owned_by(JOB).submitter("alice"),
            JOB_CONTROLLER,
            vision_catalog(policy=make_policy(trustedControllers=[])),
            FORGED_SUBMITTER,
            id="a controller the Policy no longer trusts carries no stamp",
        ),
        pytest.param(
            make_pod().queue("vision-train").owned_by(REPLICA_SET).submitter("alice"),
            JOB_CONTROLLER,
            CATALOG,
            FORGED_SUBMITTER,
            id="a stamp on a pod whose owner admission never saw is refused",
        ),
        pytest.param(
            make_pod().queue("vision-train").owned_by(JOB, controller=False).submitter("alice"),
            JOB_CONTROLLER,
            CATALOG,
            FORGED_SUBMITTER,
            id="only the controller owner counts, not any owner",
        ),
        pytest.param(
            make_pod().queue("vision-train").owned_by(JOB).annotation(keys.SUBMITTER_ANNOTATION, "alice"),
            JOB_CONTROLLER,
            CATALOG,
            FORGED_SUBMITTER,
            id="a stamp that is not a submitter is refused",
        ),
        pytest.param(
            make_pod()
            .queue("vision-train")
            .owned_by(JOB)
            .annotation(keys.SUBMITTER_ANNOTATION, '{"user":"alice","groups":"vision-devs"}'),
            JOB_CONTROLLER,
            CATALOG,
            FORGED_SUBMITTER,
            id="a stamp whose groups are not a list is refused, not read letter by letter",
        ),
        pytest.param(
            make_pod().queue("prod-train").owned_by(JOB).submitter("alice"),
            JOB_CONTROLLER,
            CATALOG,
            'queue "prod-train" is not open to user alice (team vision); '
            "this namespace may use: vision-interactive, vision-train",
            id="the stamped user's access is checked again at the pod's CREATE",
        ),
    ],
)
def test_whose_pod_it_is(pod: PodBuilder, creator: str, catalog: Catalog, outcome: str) -> None:
    decision = run(create(pod.obj(), creator), NS, catalog)
    if isinstance(decision, Deny):
        assert decision.message == outcome
        return
    notes = apply(pod.obj(), decision.patch)["metadata"]["annotations"]
    stamped = Submitter.from_annotation(notes[keys.SUBMITTER_ANNOTATION])
    assert stamped is not None
    assert stamped.user == outcome


# --- Job CREATE -----------------------------------------------------------------------------


def job_of(pod: PodBuilder) -> dict[str, Any]:
    return make_job(pod.template())


def test_a_job_gets_its_template_stamped_and_nothing_else() -> None:
    job = job_of(make_pod().queue("vision-train").presets("connections").gpus(1))
    decision = run(create_job(job))
    assert decision == Admit(
        (
            {
                "op": "add",
                "path": "/spec/template/metadata/annotations/sluicegate.dev~1submitter",
                "value": ALICE,
            },
        )
    )


def test_a_template_without_metadata_gets_it_whole() -> None:
    job = job_of(make_pod().gpus(1))
    assert "metadata" not in job["spec"]["template"]
    decision = run(create_job(job), make_namespace(default_queue="vision-train"))
    assert decision == Admit(
        (
            {
                "op": "add",
                "path": "/spec/template/metadata",
                "value": {"annotations": {keys.SUBMITTER_ANNOTATION: ALICE}},
            },
        )
    )


@pytest.mark.parametrize(
    ("pod", "namespace", "message"),
    [
        pytest.param(
            make_pod().queue("prod-train").gpus(8),
            NS,
            'queue "prod-train" is not open to user alice (team vision); '
            "this namespace may use: vision-interactive, vision-train",
            id="kubectl apply of a Job fails at once when its queue is closed to the user",
        ),
        pytest.param(
            make_pod().gpus(1),
            NS,
            "no queue for this pod: it has no label sluicegate.dev/queue, and neither its presets, "
            "namespace vision-ml nor the Policy name a default; "
            "this namespace may use: vision-interactive, vision-train",
            id="a Job whose pods would have no queue",
        ),
        pytest.param(
            make_pod().queue("vision-train").presets("huge"),
            NS,
            'preset "huge" does not exist; '
            "this namespace may use presets: connections, prod-shape, single-gpu, sweep",
            id="a Job naming a preset that does not exist",
        ),
        pytest.param(
            make_pod().queue("vision-train").submitter("pat"),
            NS,
            FORGED_SUBMITTER,
            id="a Job whose template claims another submitter",
        ),
        pytest.param(
            make_pod().submitter("pat"),
            NS,
            FORGED_SUBMITTER,
            id="a claimed submitter is refused even on a template Sluicegate does not manage",
        ),
        pytest.param(
            make_pod().queue("vision-train").node_name("n1"),
            NS,
            "spec.template.spec.nodeName is set: pods that Sluicegate manages are placed by "
            "kube-scheduler once dispatched; remove spec.nodeName (a nodeSelector or a preset can "
            "choose nodes)",
            id="a Job whose pods would pick their node",
        ),
        pytest.param(
            make_pod().main("resources", {"requests": {keys.GPU_RESOURCE: "lots"}}),
            NS,
            "spec.template.spec.containers[0].resources.requests.nvidia.com/gpu: 'lots' is not a "
            "quantity (examples: 2, 500m, 16Gi, 1e3)",
            id="a Job whose template has an unreadable quantity",
        ),
    ],
)
def test_job_refusals(pod: PodBuilder, namespace: Namespace, message: str) -> None:
    assert run(create_job(job_of(pod)), namespace) == Deny(message)


@pytest.mark.parametrize(
    ("pod", "namespace", "patched"),
    [
        pytest.param(
            make_pod().requests(cpu="1"),
            NS,
            True,
            id="an unmanaged template is stamped too, in case the Policy manages it later",
        ),
        pytest.param(
            make_pod().queue("vision-train"),
            make_namespace(team=None),
            False,
            id="a Job in a namespace without a team is left alone",
        ),
        pytest.param(
            make_pod().queue("vision-train").submitter("alice"),
            NS,
            False,
            id="the user's own stamp is accepted and nothing changes",
        ),
    ],
)
def test_which_jobs_are_stamped(pod: PodBuilder, namespace: Namespace, patched: bool) -> None:
    decision = run(create_job(job_of(pod)), namespace)
    assert isinstance(decision, Admit)
    assert bool(decision.patch) is patched


def test_a_job_and_then_its_pods_are_judged_as_the_jobs_creator() -> None:
    job = job_of(make_pod().presets("single-gpu"))
    decision = run(create_job(job, "dave", "vision-devs"))
    assert isinstance(decision, Admit)
    stored = apply(job, decision.patch)
    assert run(create_job(stored, "dave", "vision-devs")) == Admit()  # reinvocation changes nothing
    template = stored["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", **template}
    pod["metadata"] = {
        **template["metadata"],
        "name": "train-x",
        "namespace": "vision-ml",
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u", "controller": True}
        ],
    }
    decided = run(create(pod, JOB_CONTROLLER, "system:serviceaccounts"))
    assert isinstance(decided, Admit)
    admitted = apply(pod, decided.patch)
    notes = admitted["metadata"]["annotations"]
    assert Submitter.from_annotation(notes[keys.SUBMITTER_ANNOTATION]) == Submitter(
        "dave", frozenset({"vision-devs"})
    )
    assert notes[keys.APPLIED_PRESETS_ANNOTATION] == "single-gpu"
    assert admitted["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert admitted["spec"]["containers"][0]["resources"]["limits"] == {keys.GPU_RESOURCE: "1"}
    assert run(create(admitted, JOB_CONTROLLER, "system:serviceaccounts")) == Admit()
