"""No pod of a team's namespace preempts, managed or not: admission refuses a PriorityClass that
would let it.

A pod reaches the webhook with ``priority`` and ``preemptionPolicy`` already set from its class
by the API server's Priority plugin (``as_resolved`` below builds it so); a Job's or CronJob's
pod template names only the class, which admission looks up among the cluster's classes.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from policy import keys
from policy.patching import apply
from policy.priorities import PriorityClass, PriorityClasses
from policy.reviews import CRONJOB, Admit, Deny, Kind
from tests.admission_world import NODE, NODES, run, vision_catalog
from tests.builders import MakeJob, MakeNamespace, MakePod, MakePreset, create, create_job, update

HIGH = PriorityClass("high", 1000)
LOW = PriorityClass("low", -10, preempts=False)
QUEUED_HIGH = PriorityClass("queued-high", 1000, preempts=False)
QUEUED_LOW = PriorityClass("queued-low", 10, preempts=False)
ZERO = PriorityClass("zero", 0)


def classes(*extra: PriorityClass) -> PriorityClasses:
    return MappingProxyType({c.name: c for c in (HIGH, LOW, QUEUED_HIGH, QUEUED_LOW, ZERO, *extra)})


CLASSES = classes()
FIX = (
    "set priorityClassName to a PriorityClass whose preemptionPolicy is Never and whose value is 0 "
    "or more, which orders work just the same but evicts nothing (queued-high, queued-low), or "
    "remove priorityClassName"
)
PREEMPTS = (
    'PriorityClass "high" (value 1000) has preemptionPolicy PreemptLowerPriority: to place this '
    "pod, kube-scheduler would evict running pods of lower priority, other teams' too, and no pod "
    "in a team's namespace may preempt, whether Sluicegate manages it or not (queues decide what "
    f"goes first); {FIX}"
)


def as_resolved(pod: MakePod, pc: PriorityClass | None) -> dict[str, Any]:
    """The pod as the API server sends it to the webhook: its class resolved (none: priority 0,
    PreemptLowerPriority)."""
    if pc is not None:
        pod = pod.spec(priorityClassName=pc.name)
    value, preempts = (pc.value, pc.preempts) if pc is not None else (0, True)
    return (pod.spec(priority=value)
            .spec(preemptionPolicy="PreemptLowerPriority" if preempts else "Never").obj())


def gpu_pod() -> MakePod:
    return MakePod.submitted().queue("vision-train").gpus(1)


def review_pod(pod: dict[str, Any], known: PriorityClasses = CLASSES, **kw: Any) -> Admit | Deny:
    return run(create(pod, "alice", "vision-devs"), classes=known, **kw)


# --- pods -----------------------------------------------------------------------------------


def test_a_pod_whose_class_preempts_is_refused_naming_the_classes_that_never_preempt() -> None:
    assert review_pod(as_resolved(gpu_pod(), HIGH)) == Deny(PREEMPTS)


def test_a_class_that_never_preempts_is_admitted_unchanged_where_one_that_preempts_is_not() -> None:
    pod = as_resolved(gpu_pod(), QUEUED_HIGH)
    decision = review_pod(pod)
    assert isinstance(decision, Admit), decision
    admitted = apply(pod, decision.patch)
    assert (admitted["spec"]["priorityClassName"], admitted["spec"]["priority"],
            admitted["spec"]["preemptionPolicy"]) == ("queued-high", 1000, "Never")
    assert admitted["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    # Admission is idempotent: the pod it produced is admitted again unchanged.
    assert review_pod(admitted) == Admit()
    assert isinstance(review_pod(as_resolved(gpu_pod(), HIGH)), Deny)


@pytest.mark.parametrize(
    ("pc", "refused"),
    [
        pytest.param(None, False, id="no class: priority 0 as the API server gives it, admitted"),
        pytest.param(ZERO, False, id="a class of value 0 that preempts: the same as no class"),
        pytest.param(QUEUED_LOW, False, id="above 0, never preempting"),
        pytest.param(HIGH, True, id="above 0, preempting"),
        pytest.param(PriorityClass("one", 1), True, id="value 1, preempting: pods without a class are below"),
        pytest.param(LOW, True, id="below 0, never preempting: every pod at 0 could preempt it"),
        pytest.param(PriorityClass("lower", -5), True, id="below 0, preempting"),
    ],
)
def test_which_priorities_a_managed_pod_may_have(pc: PriorityClass | None, refused: bool) -> None:
    decision = review_pod(as_resolved(gpu_pod(), pc))
    assert isinstance(decision, Deny) is refused, decision
    # What would be refused on main too (a class that preempts) is refused in every case here.
    assert isinstance(review_pod(as_resolved(gpu_pod(), HIGH)), Deny)


def test_a_class_below_priority_0_is_refused_saying_why() -> None:
    assert review_pod(as_resolved(gpu_pod(), LOW)) == Deny(
        'PriorityClass "low" (value -10) is below priority 0: pods at priority 0 (those that name no '
        "PriorityClass, where the cluster has no default class) may preempt pods below them, so once "
        "running this pod could be evicted for one of them, and Sluicegate admits no pod below "
        f"priority 0 in a team's namespace; {FIX}"
    )


def test_the_clusters_default_class_is_named_when_it_preempts() -> None:
    standard = PriorityClass("standard", 100, default=True)
    pod = as_resolved(gpu_pod(), standard)  # the Priority plugin filled in the default's name
    decision = review_pod(pod, classes(standard))
    assert isinstance(decision, Deny)
    assert decision.message.startswith(
        'PriorityClass "standard" (value 100; the cluster\'s default, for pods that name no class) '
        "has preemptionPolicy PreemptLowerPriority: to place this pod, kube-scheduler would evict")


def test_without_a_class_that_never_preempts_the_refusal_says_an_administrator_makes_one() -> None:
    decision = review_pod(as_resolved(gpu_pod(), HIGH), MappingProxyType({"high": HIGH}))
    assert isinstance(decision, Deny)
    assert decision.message.endswith(
        "which orders work just the same but evicts nothing (there is none yet: a platform "
        "administrator creates one), or remove priorityClassName")


PRESETS = vision_catalog(presets=[
    MakePreset("urgent").pod("priorityClassName", "high").obj(),
    MakePreset("queued").pod("priorityClassName", "queued-high").obj(),
])


def test_a_preset_that_sets_a_preempting_class_is_refused() -> None:
    # The pod arrives resolved without a class; the preset names one the webhook looks up.
    refused = review_pod(as_resolved(gpu_pod().presets("urgent"), None), catalog=PRESETS)
    assert refused == Deny(PREEMPTS)


def test_a_preset_that_sets_a_class_leaves_its_priority_for_the_api_server_to_resolve_again() -> None:
    """The Priority plugin set priority 0 and PreemptLowerPriority before the webhook ran, and
    runs again after it: it refuses a pod whose priority is not its (new) class's, and fills in
    both when they are absent."""
    pod = as_resolved(gpu_pod().presets("queued"), None)
    decision = review_pod(pod, catalog=PRESETS)
    assert isinstance(decision, Admit), decision
    admitted = apply(pod, decision.patch)
    assert admitted["spec"]["priorityClassName"] == "queued-high"
    assert "priority" not in admitted["spec"] and "preemptionPolicy" not in admitted["spec"]
    # As the API server then stores it, admission changes nothing more (its validating pass).
    stored = {**admitted, "spec": {**admitted["spec"], "priority": 1000, "preemptionPolicy": "Never"}}
    assert review_pod(stored, catalog=PRESETS) == Admit()


# --- pods Sluicegate does not manage, in a team's namespace --------------------------------
#
# Any member of the team may create one there (no queue, no GPU), and kube-scheduler preempts
# for it as for any other pod: so the same rule holds for it.


def bully() -> MakePod:
    """A CPU-only pod that names no queue and no presets, pinned to a node full of another
    team's released GPU pods."""
    return (MakePod.submitted(name="bully-n").requests(cpu="90")
            .spec(nodeSelector={"kubernetes.io/hostname": "gpu-node-0"}))


def test_a_pod_sluicegate_does_not_manage_may_not_preempt_either() -> None:
    assert review_pod(as_resolved(bully(), HIGH)) == Deny(PREEMPTS)


@pytest.mark.parametrize(
    ("pc", "refused"),
    [
        pytest.param(None, False, id="no class: priority 0, admitted"),
        pytest.param(ZERO, False, id="a class of value 0 that preempts: the same as no class"),
        pytest.param(QUEUED_HIGH, False, id="above 0, never preempting"),
        pytest.param(HIGH, True, id="above 0, preempting"),
        pytest.param(LOW, True, id="below 0: every pod at 0, another team's too, could preempt it"),
    ],
)
def test_which_priorities_a_pod_sluicegate_does_not_manage_may_have(
    pc: PriorityClass | None, refused: bool
) -> None:
    decision = review_pod(as_resolved(bully(), pc))
    assert decision == (Deny(decision.message) if refused else Admit()), decision
    assert isinstance(review_pod(as_resolved(bully(), HIGH)), Deny)


def test_a_mirror_pod_and_pods_outside_the_teams_namespaces_keep_any_class() -> None:
    """A node's mirror pod (a static pod it already runs) and the pods of namespaces that have
    not opted in (kube-system, ...) are the administrators'."""
    mirror = as_resolved(bully().mirror("gpu-node-1"), HIGH)
    assert run(create(mirror, NODE, NODES), classes=CLASSES) == Admit()
    system = MakeNamespace("kube-system").model()
    assert run(create(as_resolved(bully(), HIGH), "alice"), system, classes=CLASSES) == Admit()
    # Anyone else's pod that claims to be a mirror pod is judged like any other.
    assert review_pod(mirror) == Deny(PREEMPTS)


def test_an_unmanaged_pod_whose_class_the_webhook_cannot_resolve_is_left_to_the_api_server() -> None:
    """Without the fields the Priority plugin sets (which it always sets before the webhooks),
    the class is looked up; one not known yet is not refused on a guess."""
    assert review_pod(bully().spec(priorityClassName="brand-new").obj()) == Admit()
    assert review_pod(bully().spec(priorityClassName="high").obj()) == Deny(PREEMPTS)


# --- owners: a Job's or CronJob's pod template ------------------------------------------------


def template(pc: str | None) -> dict[str, Any]:
    builder = gpu_pod()
    if pc is not None:
        builder = builder.spec(priorityClassName=pc)
    return builder.template()


def test_a_job_whose_pods_would_preempt_is_refused_at_its_create() -> None:
    decision = run(create_job(MakeJob(template("high")).obj(), "alice", "vision-devs"), classes=CLASSES)
    assert decision == Deny(PREEMPTS.replace("this pod", "the pods of this Job"))


@pytest.mark.parametrize(
    ("pc", "known", "refused"),
    [
        pytest.param("queued-high", CLASSES, False, id="a class that never preempts"),
        pytest.param("high", CLASSES, True, id="a class that preempts"),
        pytest.param("low", CLASSES, True, id="a class below 0"),
        pytest.param("brand-new", CLASSES, False,
                     id="a class the webhook does not know yet: each pod's CREATE judges it"),
        pytest.param(None, CLASSES, False, id="no class and no default class"),
        pytest.param(None, classes(PriorityClass("standard", 100, default=True)), True,
                     id="no class, and the cluster's default preempts"),
    ],
)
def test_which_classes_a_jobs_pod_template_may_name(
    pc: str | None, known: PriorityClasses, refused: bool
) -> None:
    decision = run(create_job(MakeJob(template(pc)).obj(), "alice", "vision-devs"), classes=known)
    assert isinstance(decision, Deny) is refused, decision
    assert isinstance(run(create_job(MakeJob(template("high")).obj(), "alice", "vision-devs"), classes=known),
                      Deny)


def test_a_job_or_cronjob_whose_pods_sluicegate_would_not_manage_may_not_preempt_either() -> None:
    cpu_only = bully().spec(priorityClassName="high").template()
    decision = run(create_job(MakeJob(cpu_only).obj(), "alice", "vision-devs"), classes=CLASSES)
    assert decision == Deny(PREEMPTS.replace("this pod", "the pods of this Job"))
    cron = {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "vision-ml"},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": cpu_only}}}}
    decision = run(create(cron, "alice", "vision-devs", kind=CRONJOB), classes=CLASSES)
    assert decision == Deny(PREEMPTS.replace("this pod", "the pods of this CronJob"))
    # The same template with a class that never preempts goes in.
    fine = bully().spec(priorityClassName="queued-high").template()
    assert isinstance(run(create_job(MakeJob(fine).obj(), "alice", "vision-devs"), classes=CLASSES), Admit)


def test_a_cronjob_whose_pods_sluicegate_would_not_manage_cannot_be_switched_to_a_preempting_class() -> None:
    def cpu_cron(pc: str) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "nightly", "namespace": "vision-ml"},
                "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {
                    "template": bully().spec(priorityClassName=pc).template()}}}}

    decision = run(update(cpu_cron("queued-high"), cpu_cron("high"), "alice", "vision-devs", kind=CRONJOB),
                   classes=CLASSES)
    assert decision == Deny(PREEMPTS.replace("this pod", "the pods of this CronJob"))


def cronjob(pc: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "vision-ml"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template(pc)}}},
    }


def test_a_cronjob_cannot_be_switched_to_a_preempting_class_after_its_create() -> None:
    created = run(create(cronjob("queued-high"), "alice", "vision-devs", kind=CRONJOB), classes=CLASSES)
    assert isinstance(created, Admit), created
    stored = apply(cronjob("queued-high"), created.patch)
    spec = "/spec/jobTemplate/spec/template/spec"
    edited = apply(stored, [{"op": "replace", "path": f"{spec}/priorityClassName", "value": "high"}])
    decision = run(update(stored, edited, "alice", "vision-devs", kind=CRONJOB), classes=CLASSES)
    assert isinstance(decision, Deny), decision
    assert decision.message.startswith('PriorityClass "high" (value 1000) has preemptionPolicy '
                                       "PreemptLowerPriority: to place the pods of this CronJob,")
    # Another edit of the same template (its image) is no reason to refuse it.
    retagged = apply(stored, [{"op": "replace", "path": f"{spec}/containers/0/image", "value": "trainer:2"}])
    assert run(update(stored, retagged, "alice", "vision-devs", kind=CRONJOB), classes=CLASSES) == Admit()


def test_the_pods_of_a_job_are_judged_too_when_the_job_got_in_before_the_class_was_known() -> None:
    owned = gpu_pod().owned_by(Kind("batch", "v1", "Job")).submitter("alice", "vision-devs")
    job_pod = as_resolved(owned, HIGH)
    decision = run(create(job_pod, "system:serviceaccount:kube-system:job-controller"), classes=CLASSES)
    assert decision == Deny(PREEMPTS)
