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
from policy.reviews import CRONJOB, JOB, Admit, Deny, Kind
from tests.admission_world import (
    ARGO,
    CATALOG,
    JOB_CONTROLLER,
    NS,
    run,
    vision_catalog,
    vision_ml,
    written_by_sluicegate,
)
from tests.builders import MakeJob, MakeNamespace, MakePod, MakePolicy, create, create_job

ALICE = Submitter("alice").to_annotation()
REPLICA_SET = Kind("apps", "v1", "ReplicaSet")
FORGED_SUBMITTER = written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION)


# --- whose pod is it ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "creator", "catalog", "outcome"),
    [
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(JOB).submitter("alice"),
            JOB_CONTROLLER,
            CATALOG,
            "alice",
            id="the Job controller's pod is judged as the user who created the Job",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(JOB).submitter("alice"),
            ARGO,
            vision_catalog(policy=MakePolicy().set(trustedControllers=[JOB_CONTROLLER, ARGO]).obj()),
            FORGED_SUBMITTER,
            id="a trusted controller that claims a Job owns its pod carries no stamp: only the Job "
            "controller creates Jobs' pods",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(JOB).submitter("alice"),
            "system:kube-controller-manager",
            vision_catalog(
                policy=MakePolicy().set(trustedControllers=["system:kube-controller-manager"]).obj()
            ),
            "alice",
            id="the controller manager running as itself creates Jobs' pods too, once trusted",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(JOB),
            JOB_CONTROLLER,
            CATALOG,
            'queue "vision-train" is not open to user system:serviceaccount:kube-system:job-controller '
            "(no team); no queue this namespace may use is open to user "
            "system:serviceaccount:kube-system:job-controller",
            id="without a stamp the pod is judged as the controller itself",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(JOB).submitter("alice"),
            "mallory",
            CATALOG,
            FORGED_SUBMITTER,
            id="a user who writes a stamp themselves is refused",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(JOB).submitter("alice"),
            JOB_CONTROLLER,
            vision_catalog(policy=MakePolicy().set(trustedControllers=[]).obj()),
            "system:serviceaccount:kube-system:job-controller created this Pod for a Job whose "
            "template Sluicegate stamped (sluicegate.dev/submitter), but the Policy does not trust "
            "system:serviceaccount:kube-system:job-controller: a platform administrator adds it "
            "to the Policy's spec.trustedControllers",
            id="a controller the Policy does not trust carries no stamp, and the refusal names the "
            "missing trust, not the user",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(REPLICA_SET).submitter("alice"),
            JOB_CONTROLLER,
            CATALOG,
            FORGED_SUBMITTER,
            id="a stamp on a pod whose owner admission never saw is refused",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(JOB, controller=False).submitter("alice"),
            JOB_CONTROLLER,
            CATALOG,
            FORGED_SUBMITTER,
            id="only the controller owner counts, not any owner",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").owned_by(JOB)
            .annotation(keys.SUBMITTER_ANNOTATION, "alice"),
            JOB_CONTROLLER,
            CATALOG,
            FORGED_SUBMITTER,
            id="a stamp that is not a submitter is refused",
        ),
        pytest.param(
            MakePod.submitted()
            .queue("vision-train")
            .owned_by(JOB)
            .annotation(keys.SUBMITTER_ANNOTATION, '{"user":"alice","groups":"vision-devs"}'),
            JOB_CONTROLLER,
            CATALOG,
            FORGED_SUBMITTER,
            id="a stamp whose groups are not a list is refused, not read letter by letter",
        ),
        pytest.param(
            MakePod.submitted().queue("prod-train").owned_by(JOB).submitter("alice"),
            JOB_CONTROLLER,
            CATALOG,
            'queue "prod-train" is not open to user alice (team vision); '
            "this namespace may use: vision-interactive, vision-train",
            id="the stamped user's access is checked again at the pod's CREATE",
        ),
    ],
)
def test_whose_pod_it_is(pod: MakePod, creator: str, catalog: Catalog, outcome: str) -> None:
    decision = run(create(pod.obj(), creator), NS, catalog)
    if isinstance(decision, Deny):
        assert decision.message == outcome
        return
    notes = apply(pod.obj(), decision.patch)["metadata"]["annotations"]
    stamped = Submitter.from_annotation(notes[keys.SUBMITTER_ANNOTATION])
    assert stamped is not None
    assert stamped.user == outcome


# --- Job CREATE -----------------------------------------------------------------------------


def job_of(pod: MakePod) -> dict[str, Any]:
    return MakeJob(pod.template()).obj()


def test_a_job_gets_its_template_stamped_and_nothing_else() -> None:
    job = job_of(MakePod.submitted().queue("vision-train").presets("connections").gpus(1))
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
    job = job_of(MakePod.submitted().gpus(1))
    assert "metadata" not in job["spec"]["template"]
    decision = run(create_job(job), vision_ml().default_queue("vision-train").model())
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
            MakePod.submitted().queue("prod-train").gpus(8),
            NS,
            'queue "prod-train" is not open to user alice (team vision); '
            "this namespace may use: vision-interactive, vision-train",
            id="kubectl apply of a Job fails at once when its queue is closed to the user",
        ),
        pytest.param(
            MakePod.submitted().gpus(1),
            NS,
            "no queue for this pod: it has no label sluicegate.dev/queue, and neither its presets, "
            "namespace vision-ml nor the Policy name a default; "
            "this namespace may use: vision-interactive, vision-train",
            id="a Job whose pods would have no queue",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").presets("huge"),
            NS,
            'preset "huge" does not exist; '
            "this namespace may use presets: connections, prod-shape, single-gpu, sweep",
            id="a Job naming a preset that does not exist",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").submitter("pat"),
            NS,
            FORGED_SUBMITTER,
            id="a Job whose template claims another submitter",
        ),
        pytest.param(
            MakePod.submitted().submitter("pat"),
            NS,
            FORGED_SUBMITTER,
            id="a claimed submitter is refused even on a template Sluicegate does not manage",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").node("n1"),
            NS,
            "spec.template.spec.nodeName is set: pods that Sluicegate manages are placed by "
            "kube-scheduler once dispatched; remove spec.nodeName (a nodeSelector or a preset can "
            "choose nodes)",
            id="a Job whose pods would pick their node",
        ),
        pytest.param(
            MakePod.submitted().main("resources", {"requests": {keys.GPU_RESOURCE: "lots"}}),
            NS,
            "spec.template.spec.containers[0].resources.requests.nvidia.com/gpu: 'lots' is not a "
            "quantity (examples: 2, 500m, 16Gi, 1e3)",
            id="a Job whose template has an unreadable quantity",
        ),
    ],
)
def test_job_refusals(pod: MakePod, namespace: Namespace, message: str) -> None:
    assert run(create_job(job_of(pod)), namespace) == Deny(message)


@pytest.mark.parametrize(
    ("pod", "namespace", "patched"),
    [
        pytest.param(
            MakePod.submitted().requests(cpu="1"),
            NS,
            True,
            id="an unmanaged template is stamped too, in case the Policy manages it later",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train"),
            MakeNamespace("vision-ml").model(),
            False,
            id="a Job in a namespace without a team is left alone",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").submitter("alice"),
            NS,
            False,
            id="the user's own stamp is accepted and nothing changes",
        ),
    ],
)
def test_which_jobs_are_stamped(pod: MakePod, namespace: Namespace, patched: bool) -> None:
    decision = run(create_job(job_of(pod)), namespace)
    assert isinstance(decision, Admit)
    assert bool(decision.patch) is patched


def test_a_job_and_then_its_pods_are_judged_as_the_jobs_creator() -> None:
    job = job_of(MakePod.submitted().presets("single-gpu"))
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


# --- CronJobs: the stamp goes CronJob -> Job -> pod -----------------------------------------

CRONJOB_CONTROLLER = "system:serviceaccount:kube-system:cronjob-controller"


def make_cronjob(template: dict[str, Any], name: str = "nightly") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "vision-ml"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}},
    }


def test_a_cronjob_whose_queue_the_user_may_not_use_is_refused_at_once() -> None:
    cronjob = make_cronjob(MakePod.submitted().queue("prod-train").gpus(1).template())
    decision = run(create(cronjob, "alice", kind=CRONJOB))
    assert isinstance(decision, Deny)
    assert decision.message.startswith('queue "prod-train" is not open to user alice (team vision)')


def test_a_cronjobs_user_reaches_its_jobs_and_their_pods() -> None:
    cronjob = make_cronjob(MakePod.submitted().queue("vision-train").gpus(1).template())
    decision = run(create(cronjob, "alice", "vision-devs", kind=CRONJOB))
    assert isinstance(decision, Admit)
    stamped = apply(cronjob, decision.patch)["spec"]["jobTemplate"]["spec"]["template"]
    stamp = stamped["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]
    assert Submitter.from_annotation(stamp) == Submitter("alice", frozenset({"vision-devs"}))

    # The cronjob controller creates a Job from the template, stamp included.
    job = MakeJob(stamped, name="nightly-1").obj()
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "u", "controller": True}
    ]
    decision = run(create(job, CRONJOB_CONTROLLER, kind=JOB))
    assert isinstance(decision, Admit)
    job_template = apply(job, decision.patch)["spec"]["template"]
    assert Submitter.from_annotation(job_template["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]) == (
        Submitter("alice", frozenset({"vision-devs"}))
    )

    # The Job controller creates the pods, stamp included: they are alice's, gated.
    pod = dict(job_template)
    pod["metadata"] = {
        **job_template["metadata"],
        "name": "nightly-1-abcde",
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "nightly-1", "uid": "j", "controller": True}
        ],
    }
    decision = run(create(pod, JOB_CONTROLLER, "system:serviceaccounts"))
    assert isinstance(decision, Admit)
    admitted = apply(pod, decision.patch)
    assert admitted["metadata"]["labels"][keys.QUEUE_LABEL] == "vision-train"
    assert admitted["spec"]["schedulingGates"] == [{"name": keys.GATE}]


def stamped_job(owner_kind: str, submitter: Submitter) -> dict[str, Any]:
    template = MakePod.submitted().queue("vision-train").gpus(1).template()
    template["metadata"].setdefault("annotations", {})[keys.SUBMITTER_ANNOTATION] = submitter.to_annotation()
    job = MakeJob(template, name="nightly-1").obj()
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": owner_kind, "name": "nightly", "uid": "u", "controller": True}
    ]
    return job


def test_a_job_claiming_a_cronjob_owner_passes_on_no_stamp_unless_the_cronjob_controller_made_it() -> None:
    # A trusted account that creates Jobs from users' manifests (Argo's, say) is not the cronjob
    # controller: its Job's stamp naming someone else is a forgery.
    trusted = [CRONJOB_CONTROLLER, JOB_CONTROLLER, ARGO]
    catalog = vision_catalog(policy=MakePolicy().set(trustedControllers=trusted).obj())
    decision = run(create(stamped_job("CronJob", Submitter("alice")), ARGO, kind=JOB), catalog=catalog)
    assert isinstance(decision, Deny)
    assert keys.SUBMITTER_ANNOTATION in decision.message


def test_the_cronjob_controller_passes_on_no_stamp_for_a_job_owned_by_a_job() -> None:
    # The cronjob controller creates Jobs for CronJobs, never for Jobs.
    decision = run(create(stamped_job("Job", Submitter("alice")), CRONJOB_CONTROLLER, kind=JOB))
    assert isinstance(decision, Deny)
    assert keys.SUBMITTER_ANNOTATION in decision.message


def test_an_untrusted_cronjob_controller_passes_on_no_stamp() -> None:
    catalog = vision_catalog(policy=MakePolicy().set(trustedControllers=[JOB_CONTROLLER]).obj())
    job = stamped_job("CronJob", Submitter("alice"))
    decision = run(create(job, CRONJOB_CONTROLLER, kind=JOB), catalog=catalog)
    assert isinstance(decision, Deny)


def job_from_cronjob(stamped_for: Submitter, name: str = "manual-1") -> dict[str, Any]:
    """A Job as ``kubectl create job --from=cronjob/nightly-retrain`` makes it from a CronJob
    whose template admission stamped for ``stamped_for``: owned by the CronJob, stamp copied."""
    job = stamped_job("CronJob", stamped_for)
    job["metadata"]["name"] = name
    job["metadata"]["annotations"] = {"cronjob.kubernetes.io/instantiate": "manual"}
    job["metadata"]["ownerReferences"][0]["name"] = "nightly-retrain"
    return job


def test_a_job_made_by_hand_from_someone_elses_cronjob_is_refused_naming_whose_stamp_it_carries() -> None:
    carol = Submitter("carol", frozenset({"vision-devs"}))
    decision = run(create(job_from_cronjob(carol), "alice", "vision-devs", kind=JOB))
    assert decision == Deny(
        "this Job's pod template carries the submitter stamp of user carol (annotation "
        f"{keys.SUBMITTER_ANNOTATION}), and the Job names CronJob nightly-retrain as its owner, as "
        "kubectl create job --from=cronjob/nightly-retrain makes it: its pods would be judged and "
        "counted as carol's, so only carol or the CronJob controller may create Jobs from that "
        "CronJob; create a Job of your own instead"
    )
    # Without the ownerReference nothing says where the stamp came from: written by hand.
    job = job_from_cronjob(carol)
    del job["metadata"]["ownerReferences"]
    assert run(create(job, "alice", "vision-devs", kind=JOB)) == Deny(FORGED_SUBMITTER)


def test_a_job_made_by_hand_from_ones_own_cronjob_is_admitted_unless_the_groups_differ() -> None:
    alice = Submitter("alice", frozenset({"vision-devs"}))
    assert isinstance(run(create(job_from_cronjob(alice), "alice", "vision-devs", kind=JOB)), Admit)
    decision = run(create(job_from_cronjob(alice), "alice", kind=JOB))
    assert isinstance(decision, Deny)
    assert decision.message.startswith(
        "this Job's pod template carries the submitter stamp of user alice in groups vision-devs ")
    assert "only alice in groups vision-devs or the CronJob controller may create Jobs from that " \
        "CronJob (you are alice in groups (none)); create a Job of your own instead" in decision.message

