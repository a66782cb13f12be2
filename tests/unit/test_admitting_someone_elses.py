"""A Job or CronJob stamped for someone runs, and counts, as theirs: only they change what it runs.

The world: carol (group ml-oncall) created a CronJob and a Job in namespace nlp-research, whose
pod templates admission stamped with her name; dmitri (nlp-devs) may edit both (RBAC), and
tries to make them run more, or other, work as hers. Anyone may still suspend them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from policy.reviews import CRONJOB, JOB, Admit, Deny, Kind
from tests.admission_world import JOB_CONTROLLER, SLUICEGATE, run, vision_catalog
from tests.builders import MakeJob, MakeNamespace, MakePod, MakePolicy, MakeQueue, update

CRONJOB_CONTROLLER = "system:serviceaccount:kube-system:cronjob-controller"
NLP = MakeNamespace("nlp-research").team("nlp").model()
Change = Callable[[dict[str, Any]], None]
URGENT = vision_catalog(queues=[MakeQueue("urgent-retrain").priority(100).access(groups=["ml-oncall"]).obj()])
"""The world with carol's queue: a changed template is judged again, as at CREATE."""


def carols_job(image: str = "retrain:1") -> dict[str, Any]:
    template = (MakePod.submitted().queue("urgent-retrain").submitter("carol", "ml-oncall").gpus(8)
                .main("image", image).template())
    job = MakeJob(template, namespace="nlp-research", name="retrain").obj()
    job["spec"].update(parallelism=1, completions=1, suspend=False)
    return job


def carols_cronjob(image: str = "retrain:1") -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly-retrain", "namespace": "nlp-research"},
            "spec": {"schedule": "0 3 * * *", "suspend": False, "concurrencyPolicy": "Allow",
                     "successfulJobsHistoryLimit": 3,
                     "jobTemplate": {"spec": carols_job(image)["spec"]}}}


def changed(obj: dict[str, Any], change: Change) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    change(out)
    return out


def edit(kind: Kind, change: Change, user: str = "dmitri", *groups: str) -> Admit | Deny:
    old = carols_cronjob() if kind == CRONJOB else carols_job()
    return run(update(old, changed(old, change), user, *(groups or ("nlp-devs",)), kind=kind), NLP)


def spec(**values: Any) -> Change:
    return lambda obj: obj["spec"].update(values)


def job_spec(**values: Any) -> Change:
    return lambda obj: obj["spec"]["jobTemplate"]["spec"].update(values)


def label(obj: dict[str, Any]) -> None:
    obj["metadata"]["labels"] = {"team-note": "owned-by-oncall"}


# What the attack did: every minute, four pods of 8 GPUs in urgent-retrain, as carol's.
ATTACK = job_spec(parallelism=4, completions=4)


def test_more_of_someone_elses_cronjob_is_refused_naming_whose_it_is_and_what_to_do() -> None:
    def attack(obj: dict[str, Any]) -> None:
        spec(schedule="* * * * *")(obj)
        ATTACK(obj)

    assert edit(CRONJOB, attack) == Deny(
        "CronJob nightly-retrain was submitted by user carol (annotation sluicegate.dev/submitter on "
        "its pod template) and only they may change what it runs or how much "
        "(spec.jobTemplate.spec.completions, spec.jobTemplate.spec.parallelism, spec.schedule): its "
        "pods run and count as user carol's; create a CronJob of your own instead. Anyone allowed to "
        "edit it may still suspend it (spec.suspend: true)")


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        pytest.param(spec(schedule="* * * * *"), "spec.schedule", id="schedule"),
        pytest.param(spec(timeZone="Pacific/Kiritimati"), "spec.timeZone", id="time zone"),
        pytest.param(spec(startingDeadlineSeconds=86400), "spec.startingDeadlineSeconds",
                     id="a starting deadline that runs every missed schedule"),
        pytest.param(spec(concurrencyPolicy="Forbid"), "spec.concurrencyPolicy", id="concurrency policy"),
        pytest.param(spec(successfulJobsHistoryLimit=0), "spec.successfulJobsHistoryLimit",
                     id="history kept: everything but suspend is the submitter's"),
        pytest.param(ATTACK, "spec.jobTemplate.spec.completions, spec.jobTemplate.spec.parallelism",
                     id="parallelism and completions"),
        pytest.param(job_spec(backoffLimit=100), "spec.jobTemplate.spec.backoffLimit", id="retries"),
        pytest.param(job_spec(activeDeadlineSeconds=864000), "spec.jobTemplate.spec.activeDeadlineSeconds",
                     id="a longer deadline"),
        pytest.param(lambda o: o["spec"]["jobTemplate"].update(metadata={"labels": {"x": "y"}}),
                     "spec.jobTemplate.metadata", id="the Jobs' own labels"),
        pytest.param(lambda o: o["spec"].pop("jobTemplate"), "spec.jobTemplate",
                     id="the whole jobTemplate"),
        pytest.param(spec(suspend=True), None, id="suspended: the emergency brake"),
        pytest.param(label, None, id="a label of the CronJob itself: not what it runs"),
    ],
)
def test_what_someone_else_may_change_on_a_stamped_cronjob(change: Change, refused: str | None) -> None:
    decision = edit(CRONJOB, change)
    if refused is None:
        assert decision == Admit()
    else:
        assert isinstance(decision, Deny), decision
        assert f"only they may change what it runs or how much ({refused}):" in decision.message
    assert isinstance(edit(CRONJOB, ATTACK), Deny)


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        pytest.param(spec(parallelism=4), "spec.parallelism", id="parallelism"),
        pytest.param(spec(completions=4, parallelism=4), "spec.completions, spec.parallelism",
                     id="completions"),
        pytest.param(spec(backoffLimit=100), "spec.backoffLimit", id="retries"),
        pytest.param(spec(activeDeadlineSeconds=864000), "spec.activeDeadlineSeconds", id="deadline"),
        pytest.param(spec(ttlSecondsAfterFinished=0), "spec.ttlSecondsAfterFinished",
                     id="clean-up: everything but suspend is the submitter's"),
        pytest.param(spec(suspend=True), None, id="suspended: the emergency brake"),
        pytest.param(spec(suspend=True, parallelism=4), "spec.parallelism",
                     id="suspended, and more of it"),
        pytest.param(label, None, id="a label of the Job itself"),
    ],
)
def test_what_someone_else_may_change_on_a_stamped_job(change: Change, refused: str | None) -> None:
    decision = edit(JOB, change)
    if refused is None:
        assert decision == Admit()
    else:
        assert isinstance(decision, Deny), decision
        assert decision.message.startswith(
            f"Job retrain was submitted by user carol (annotation sluicegate.dev/submitter on its pod "
            f"template) and only they may change what it runs or how much ({refused}): ")
        assert decision.message.endswith("create a Job of your own instead. Anyone allowed to edit it "
                                         "may still suspend it (spec.suspend: true)")
    assert isinstance(edit(JOB, spec(parallelism=4)), Deny)


def test_a_suspended_job_is_resumed_only_by_its_submitter() -> None:
    suspended = changed(carols_job(), spec(suspend=True))
    resumed = changed(carols_job(), spec(suspend=False))
    decision = run(update(suspended, resumed, "dmitri", "nlp-devs", kind=JOB), NLP)
    assert isinstance(decision, Deny), decision
    assert "only they may change what it runs or how much (spec.suspend):" in decision.message
    assert run(update(suspended, resumed, "carol", "ml-oncall", kind=JOB), NLP) == Admit()
    # A suspended Job whose suspend is merely left out of a patch stays suspended: no change.
    assert run(update(suspended, suspended, "dmitri", "nlp-devs", kind=JOB), NLP) == Admit()


def test_the_submitter_and_the_controllers_the_policy_trusts_change_anything() -> None:
    for kind in (CRONJOB, JOB):
        assert edit(kind, spec(parallelism=4, schedule="* * * * *"), "carol", "ml-oncall") == Admit()
        for account in (JOB_CONTROLLER, CRONJOB_CONTROLLER, SLUICEGATE):
            assert edit(kind, spec(parallelism=4), account) == Admit()
    # A controller the Policy does not trust is anyone else.
    only_jobs = vision_catalog(policy=MakePolicy().set(trustedControllers=[JOB_CONTROLLER]).obj())
    old = carols_cronjob()
    decision = run(update(old, changed(old, ATTACK), CRONJOB_CONTROLLER, kind=CRONJOB), NLP, only_jobs)
    assert isinstance(decision, Deny), decision


def test_a_job_the_cronjob_controller_made_for_someone_is_theirs_too() -> None:
    job = carols_job()
    job["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob",
                                           "name": "nightly-retrain", "uid": "u", "controller": True}]
    decision = run(update(job, changed(job, spec(parallelism=4)), "dmitri", "nlp-devs", kind=JOB), NLP)
    assert isinstance(decision, Deny), decision
    assert decision.message.startswith("Job retrain was submitted by user carol")


def test_a_job_without_a_stamp_is_anyones_with_rbac_to_change_it() -> None:
    """Sluicegate never judged who made it (its pods are judged as whoever creates them)."""
    template = MakePod.submitted().main("image", "etl:1").template()
    plain = MakeJob(template, namespace="nlp-research", name="etl").obj()
    assert run(update(plain, changed(plain, spec(parallelism=4)), "dmitri", kind=JOB), NLP) == Admit()
    assert isinstance(edit(JOB, spec(parallelism=4)), Deny)


# --- the pod template (the first rule of this kind, now one of the fields) -------------------


def test_editing_another_users_stamped_cronjob_template_is_refused_with_whose_it_is() -> None:
    """carol's CronJob, its image changed by dmitri, would run his image as carol."""
    olgas = carols_cronjob()
    edited = carols_cronjob(image="alice-mining:latest")
    decision = run(update(olgas, edited, "dmitri", "nlp-devs", kind=CRONJOB), NLP)
    assert decision == Deny(
        "CronJob nightly-retrain was submitted by user carol (annotation sluicegate.dev/submitter on "
        "its pod template) and only they may change what it runs or how much "
        "(spec.jobTemplate.spec.template): its pods run and count as user carol's; create a CronJob "
        "of your own instead. Anyone allowed to edit it may still suspend it (spec.suspend: true)")
    assert run(update(olgas, edited, "carol", "ml-oncall", kind=CRONJOB), NLP, URGENT) == Admit()
