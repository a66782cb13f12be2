"""Each refusal policy gives is counted under its own reason: the table in webhook.denials is
checked against real decisions, so a reworded message fails here rather than turning into
"Other" on a dashboard."""

from __future__ import annotations

import pytest

from policy import keys
from policy.catalog import Catalog
from policy.model import Namespace
from policy.reviews import JOB, Deny, Request
from tests.admission_world import run, vision_catalog, vision_ml
from tests.builders import MakeJob, MakePod, MakePreset, create, create_job, update
from webhook.denials import OTHER, reason

GPU = MakePod.submitted().gpus(1)
CROWDED = MakePod.submitted().queue("vision-train").gpus(1).annotation("notes", "x" * 250_000)
GATED = MakePod.submitted().queue("vision-train").gpus(1).gated()
FROM_CRONJOB = MakeJob(MakePod.submitted().queue("vision-train").gpus(1).submitter("carol").template()).obj()
FROM_CRONJOB["metadata"]["ownerReferences"] = [
    {"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "u", "controller": True}]
CAROLS = MakeJob(MakePod.submitted().queue("vision-train").gpus(1).submitter("carol").template()).obj()
BROKEN = vision_catalog(
    queues=[{"metadata": {"name": "broken"}, "spec": {"maxRunning": -1}}],
    presets=[MakePreset("broken").pod("nodeName", "x").obj()],
)


@pytest.mark.parametrize(
    ("request_", "namespace", "catalog", "expected"),
    [
        pytest.param(create(GPU.obj() | {"spec": {**GPU.obj()["spec"], "nodeName": "n1"}}), None, None,
                     "NodeName", id="a pod with spec.nodeName"),
        pytest.param(create_job(MakeJob(MakePod.submitted().gpus(1).node("n1").template()).obj()), None, None,
                     "NodeName", id="a Job template with spec.nodeName"),
        pytest.param(create(MakePod.submitted().gpus(1).label(keys.TEAM_LABEL, "prod").obj()), None, None,
                     "SystemKey", id="a hand-set team label"),
        pytest.param(update(GATED.obj(), MakePod.submitted().queue("vision-train").gpus(1).obj()), None, None,
                     "GateRemoved", id="the gate removed by a user"),
        pytest.param(update(GATED.obj(), MakePod.submitted().queue("research").gpus(1).gated().obj()),
                     None, None, "KeyChanged", id="the queue relabelled"),
        pytest.param(create(MakePod.submitted().presets("connections").obj()),
                     vision_ml().allowed_presets(["single-gpu"]).model(), None,
                     "PresetNotAllowed", id="a preset the namespace does not allow"),
        pytest.param(create(MakePod.submitted().presets("broken").obj()), None, BROKEN,
                     "PresetInvalid", id="a broken preset"),
        pytest.param(create(MakePod.submitted().presets("nope").obj()), None, None,
                     "PresetUnknown", id="a preset that does not exist"),
        pytest.param(create(MakePod.submitted().queue("vision-interactive").obj()),
                     vision_ml().allowed_queues(["vision-train"]).model(), None,
                     "QueueNotAllowed", id="a queue the namespace does not allow"),
        pytest.param(create(MakePod.submitted().queue("prod-train").obj()), None, None,
                     "QueueNotOpen", id="a queue not open to the user"),
        pytest.param(create(MakePod.submitted().queue("broken").obj()), None, BROKEN,
                     "QueueInvalid", id="a broken queue"),
        pytest.param(create(MakePod.submitted().queue("nope").obj()),
                     vision_ml().allowed_queues(["vision-train", "nope"]).model(), None,
                     "QueueUnknown", id="a queue the namespace lists that does not exist"),
        pytest.param(create(MakePod.submitted().queue("nope").obj()), None, None,
                     "QueueNotOpen", id="a queue that does not exist, where it must read as not open"),
        pytest.param(create(GPU.obj()), None, None, "NoQueue", id="no queue anywhere"),
        pytest.param(create_job(FROM_CRONJOB), None, None, "StampOfOwner",
                     id="a Job made by hand from someone else's stamped CronJob"),
        pytest.param(create(MakePod.submitted().queue("vision-train").gpus(1).spec(priorityClassName="high")
                            .spec(priority=1000).spec(preemptionPolicy="PreemptLowerPriority").obj()),
                     None, None, "PriorityClass", id="a PriorityClass that preempts"),
        pytest.param(create(MakePod.submitted().spec(priorityClassName="high").spec(priority=1000)
                            .spec(preemptionPolicy="PreemptLowerPriority").obj()),
                     None, None, "PriorityClass", id="an unmanaged pod of a class that preempts"),
        pytest.param(update(CAROLS, {**CAROLS, "spec": {**CAROLS["spec"], "parallelism": 4}}, "dmitri",
                            kind=JOB), None, None, "SubmittedByOther",
                     id="more of someone else's stamped Job"),
        pytest.param(create(MakePod.submitted().queue("vision-train").group("g").obj()), None, None,
                     "BadAnnotation", id="a group without a size"),
        pytest.param(create(CROWDED.obj()), None, None, "AnnotationsTooLarge",
                     id="annotations that leave the controller no room"),
        pytest.param(
            create(MakePod.submitted().main("resources", {"limits": {keys.GPU_RESOURCE: "lots"}}).obj()),
            None, None, "InvalidSpec", id="a quantity that does not parse",
        ),
    ],
)
def test_every_refusal_has_its_reason(
    request_: Request, namespace: Namespace | None, catalog: Catalog | None, expected: str
) -> None:
    decision = run(request_, namespace, catalog)
    assert isinstance(decision, Deny), decision
    assert reason(decision.message) == expected, decision.message


def test_an_unknown_message_is_other() -> None:
    assert reason("something new") == OTHER
