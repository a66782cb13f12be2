"""Marks only admission writes, wherever the webhook sees a pod: in namespaces not opted in (yet),
through pods/status, and from an untrusted controller (someone else's stamped Job or CronJob:
test_admitting_someone_elses.py).

The world: namespace vision-ml belongs to team vision (alice, group vision-devs); scratch is not
opted in to any team; queue urgent-retrain is open to no one in vision.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from policy import keys
from policy.reviews import JOB, Admit, Deny, Request
from tests.admission_world import (
    JOB_CONTROLLER,
    SLUICEGATE,
    admitted,
    run,
    vision_catalog,
    written_by_sluicegate,
)
from tests.builders import STAMP, MakeJob, MakeNamespace, MakePod, MakePolicy, create, update

SCRATCH = MakeNamespace("scratch").model()
CRONJOB_CONTROLLER = "system:serviceaccount:kube-system:cronjob-controller"


def in_scratch(request: Request) -> Admit | Deny:
    return run(request, SCRATCH)


# --- namespaces not opted in ------------------------------------------------------------------


def test_a_pod_forged_with_admissions_marks_before_its_namespace_opts_in_is_refused() -> None:
    """The attack: gated, queue and team labels and an admission stamp written by hand while the
    namespace is not opted in, hoping the controller counts or releases it after the opt-in."""
    forged = (MakePod.submitted(namespace="scratch").queue("vision-train").label(keys.TEAM_LABEL, "vision")
              .stamped().gated().gpus(4))
    assert in_scratch(create(forged.obj())) == Deny(written_by_sluicegate("label", keys.TEAM_LABEL))

    stamp_only = MakePod.submitted(namespace="scratch").queue("vision-train").stamped().gpus(4)
    assert in_scratch(create(stamp_only.obj())) == Deny(
        written_by_sluicegate("annotation", keys.ADMITTED_AT_ANNOTATION))


def test_a_gate_written_by_hand_in_a_namespace_not_opted_in_is_refused() -> None:
    decision = in_scratch(create(MakePod.submitted(namespace="scratch").gated().gpus(1).obj()))
    assert isinstance(decision, Deny)
    assert decision.message.startswith(
        f"scheduling gate {keys.GATE} cannot be set by users: Sluicegate adds its gate itself")


def test_a_pod_with_only_the_keys_users_may_write_is_left_alone_where_sluicegate_does_not_manage() -> None:
    """Until the namespace opts in, a queue label is inert: no gate, no stamp, no refusal."""
    pod = MakePod.submitted(namespace="scratch").queue("vision-train").workflow("sweep", 3).gpus(1)
    assert in_scratch(create(pod.obj())) == Admit()


def test_a_jobs_pod_in_a_namespace_not_opted_in_keeps_the_stamp_of_a_trusted_job_controller() -> None:
    pod = MakePod.submitted(namespace="scratch").owned_by(JOB).submitter("alice", "vision-devs").gpus(1)
    assert in_scratch(create(pod.obj(), JOB_CONTROLLER)) == Admit()
    assert in_scratch(create(pod.obj(), "mallory")) == Deny(
        written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION))


def test_an_unmanaged_pod_carrying_sluicegates_gate_is_refused_rather_than_gated_forever() -> None:
    """A CPU pod names no queue and asks for no GPU: nothing would ever remove the gate."""
    decision = run(create(MakePod.submitted().requests(cpu="1").gated().obj()))
    assert isinstance(decision, Deny)
    assert "so nothing would ever remove it" in decision.message


def test_a_gate_of_sluicegates_name_other_than_its_own_is_refused_on_a_managed_pod() -> None:
    pod = (MakePod.submitted().queue("vision-train").gpus(1)
           .spec(schedulingGates=[{"name": "sluicegate.dev/later"}]))
    assert run(create(pod.obj())) == Deny(
        "scheduling gate sluicegate.dev/later cannot be set by users: the only one Sluicegate "
        f"uses is {keys.GATE}")


# --- pods/status ------------------------------------------------------------------------------


def _status(old: dict[str, Any], new: dict[str, Any], user: str) -> Request:
    return replace(update(old, new, user), subresource="status")


def test_moving_a_gated_pod_to_another_queue_through_pods_status_is_refused_as_through_pods() -> None:
    pod = admitted(MakePod.submitted().queue("vision-train").gpus(1).obj())
    moved = admitted(MakePod.submitted().queue("vision-train").gpus(1).obj())
    moved["metadata"]["labels"][keys.QUEUE_LABEL] = "vision-interactive"

    decision = run(_status(pod, moved, "system:serviceaccount:ops:operator"))
    assert decision == Deny(
        "label sluicegate.dev/queue cannot be changed on a pod once it exists: only Sluicegate's "
        "controller may change sluicegate.dev/ labels and annotations")


def test_a_status_update_that_leaves_sluicegates_keys_alone_is_admitted() -> None:
    pod = admitted(MakePod.submitted().queue("vision-train").gpus(1).obj())
    running = {**pod, "status": {"phase": "Running"}}
    assert run(_status(pod, running, "system:node:gpu-node-1")) == Admit()
    relabelled = admitted(MakePod.submitted().queue("vision-train").gpus(1).obj())
    relabelled["metadata"]["annotations"][keys.DISPATCHED_AT_ANNOTATION] = STAMP
    assert run(_status(pod, relabelled, SLUICEGATE)) == Admit()


# --- an untrusted controller ------------------------------------------------------------------


def _stamped_job(user: str) -> dict[str, Any]:
    pod = MakePod.submitted().queue("vision-train").submitter(user, "vision-devs").gpus(1)
    return MakeJob(pod.template()).obj()


def test_a_job_an_untrusted_cronjob_controller_creates_is_refused_naming_the_policy_field() -> None:
    job = _stamped_job("olga")
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "u", "controller": True}]
    only_jobs = vision_catalog(policy=MakePolicy().set(trustedControllers=[JOB_CONTROLLER]).obj())

    decision = run(create(job, CRONJOB_CONTROLLER, kind=JOB), catalog=only_jobs)
    assert isinstance(decision, Deny)
    assert decision.message == (
        f"{CRONJOB_CONTROLLER} created this Job for a CronJob whose template Sluicegate stamped "
        f"(sluicegate.dev/submitter), but the Policy does not trust {CRONJOB_CONTROLLER}: a "
        "platform administrator adds it to the Policy's spec.trustedControllers")


def test_with_the_cronjob_controller_trusted_its_jobs_carry_the_cronjobs_stamp() -> None:
    job = _stamped_job("olga")
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "u", "controller": True}]
    trusted = MakePolicy().set(trustedControllers=[JOB_CONTROLLER, CRONJOB_CONTROLLER])
    catalog = vision_catalog(policy=trusted.obj())
    assert isinstance(run(create(job, CRONJOB_CONTROLLER, kind=JOB), catalog=catalog), Admit)
