"""Broken objects and broken requests: admission fails closed, never open, and never crashes.

They run in the vision world of ``tests.admission_world``.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy import keys
from policy.dispatching import dispatch
from policy.fields import InvalidObject
from policy.model import Snapshot
from policy.patching import apply
from policy.pods import Pod, pod_requests
from policy.quantities import MAX_MILLI
from policy.reviews import POD, AdmissionRequest, Admit, Deny, MalformedReview, Operation, Request
from policy.workloads import build_workloads
from tests.admission_world import admit, admitted, run, vision_catalog, vision_ml
from tests.builders import (
    MakeJob,
    MakePod,
    MakePolicy,
    MakePreset,
    MakeTeam,
    create,
    create_job,
)

NS = vision_ml().default_queue("vision-train").model()
AMD = "amd.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"
GOOD = vision_catalog(policy=MakePolicy().set(managedResources=[keys.GPU_RESOURCE, AMD], maxRunning=4).obj())
BROKEN_POLICY = MakePolicy().set(managedResources=[keys.GPU_RESOURCE, AMD], maxRunning="four").obj()
BROKEN_FIELD = "Policy cluster: spec.maxRunning: expected a whole number, got 'four'"
CLOSED = (
    "Sluicegate admits no pods that use GPUs, queues or presets until its Policy is fixed "
    f"(a platform administrator's job): {BROKEN_FIELD}"
)


# --- 4. a broken Policy fails closed -----------------------------------------------------------


def test_a_broken_policy_keeps_the_last_valid_one_in_force() -> None:
    catalog = vision_catalog(policy=BROKEN_POLICY, previous=GOOD)
    assert catalog.policy == GOOD.policy
    assert catalog.problem("Policy", "cluster") == BROKEN_FIELD
    pod, decision = admit(MakePod.submitted().gpus(1, AMD).obj(), NS, catalog)
    assert pod["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert decision.warnings == (
        f"the Policy is invalid and the last valid one stays in force: {BROKEN_FIELD}",
    )


def test_the_last_valid_policy_outlives_any_number_of_broken_ones_until_one_parses() -> None:
    broken_twice = vision_catalog(
        policy=BROKEN_POLICY, previous=vision_catalog(policy=BROKEN_POLICY, previous=GOOD)
    )
    assert broken_twice.policy == GOOD.policy and broken_twice.closed is None
    fixed = vision_catalog(policy=MakePolicy().set(maxRunning=9).obj(), previous=broken_twice)
    assert fixed.policy.max_running == 9 and fixed.invalid == {}


@pytest.mark.parametrize(
    ("pod", "outcome"),
    [
        pytest.param(MakePod.submitted().gpus(1, AMD), Deny(CLOSED),
                     id="an AMD GPU pod is refused, naming the field"),
        pytest.param(
            MakePod.submitted().gpus(1, MIG), Deny(CLOSED),
                     id="a MIG slice is refused too: any extended resource"
        ),
        pytest.param(MakePod.submitted().gpus(1), Deny(CLOSED), id="so is an NVIDIA GPU pod"),
        pytest.param(MakePod.submitted().queue("vision-train"), Deny(CLOSED),
                     id="and a pod that names a queue"),
        pytest.param(MakePod.submitted().requests(cpu="2"), Admit(),
                     id="a CPU pod is none of Sluicegate's business"),
    ],
)
def test_with_no_valid_policy_known_managed_work_is_refused(pod: MakePod, outcome: Admit | Deny) -> None:
    catalog = vision_catalog(policy=BROKEN_POLICY)
    assert catalog.closed == BROKEN_FIELD
    assert run(create(pod.obj()), NS, catalog) == outcome


def test_with_no_valid_policy_known_a_gpu_job_is_refused_at_once() -> None:
    job = MakeJob(MakePod.submitted().gpus(1, AMD).template()).obj()
    assert run(create_job(job), NS, vision_catalog(policy=BROKEN_POLICY)) == Deny(CLOSED)


def test_with_no_valid_policy_known_dispatch_releases_nothing() -> None:
    pod = Pod.parse(admitted(MakePod.submitted().queue("vision-train").gpus(1).obj()))
    catalog = vision_catalog(policy=BROKEN_POLICY)
    snapshot = Snapshot(dict(catalog.queues), dict(catalog.teams), catalog.policy, build_workloads([pod]))
    assert dispatch(snapshot).release == ()


# --- 5. a broken Team lets no one in by membership --------------------------------------------


BROKEN_VISION = {"metadata": {"name": "vision"}, "spec": {"members": {"users": "alice"}}}


@pytest.mark.parametrize(
    ("user", "message"),
    [
        pytest.param(
            "carol",
            'queue "vision-train" is not open to user carol (no team) (Team vision is invalid and counts '
            "no members until it is fixed); no queue this namespace may use is open to user carol",
            id="a broken Team whose members cannot be read does not count everyone",
        ),
        pytest.param(
            "alice",
            'queue "vision-train" is not open to user alice (no team) (Team vision is invalid and counts '
            "no members until it is fixed); no queue this namespace may use is open to user alice",
            id="nor the members it tried to name",
        ),
    ],
)
def test_a_broken_team_admits_no_one_by_membership(user: str, message: str) -> None:
    catalog = vision_catalog(teams=[BROKEN_VISION])
    assert run(create(MakePod.submitted().queue("vision-train").obj(), user), vision_ml().model(),
               catalog) == Deny(
        message
    )


def test_a_team_without_members_still_counts_everyone_in_its_namespaces() -> None:
    catalog = vision_catalog(teams=[MakeTeam("vision").members().obj()])
    assert isinstance(
        run(create(MakePod.submitted().queue("vision-train").obj(), "carol"), vision_ml().model(), catalog),
                      Admit
    )


# --- 6. quantities too large to hold ---------------------------------------------------------

HUGE = "1e999999"


def huge_quota(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"quota": {keys.GPU_RESOURCE: HUGE}}}


def test_objects_with_quantities_too_large_to_hold_are_capped_not_fatal() -> None:
    # Quantities are bounded as Kubernetes bounds them (2**63 - 1 units, see quantities): an
    # absurd exponent is capped without being computed, so the object stays usable.
    catalog = vision_catalog(
        queues=[huge_quota("huge")],
        teams=[huge_quota("prod")],
        presets=[MakePreset("huge-gpu").requests(gpu=HUGE).obj()],
        policy=MakePolicy().set(quota={keys.GPU_RESOURCE: HUGE}).obj(),
    )
    assert dict(catalog.invalid) == {}
    assert catalog.queues["huge"].quota[keys.GPU_RESOURCE] == MAX_MILLI
    assert catalog.policy.quota[keys.GPU_RESOURCE] == MAX_MILLI
    assert "vision-train" in catalog.queues and "huge-gpu" in catalog.presets


def test_a_pod_naming_a_queue_with_a_huge_quota_is_admitted_gated() -> None:
    catalog = vision_catalog(queues=[huge_quota("huge")])
    decision = run(create(MakePod.submitted().queue("huge").obj()), vision_ml().model(), catalog)
    assert isinstance(decision, Admit)
    assert apply(MakePod.submitted().queue("huge").obj(), decision.patch)["spec"]["schedulingGates"] == [
        {"name": keys.GATE}
    ]


def test_a_pod_asking_for_more_gpus_than_can_be_held_waits_gated_at_the_cap() -> None:
    pod = MakePod.submitted().queue("vision-train")
    asking = pod.main("resources", {"limits": {keys.GPU_RESOURCE: HUGE}}).obj()
    decision = run(create(asking))
    assert isinstance(decision, Admit)
    admitted = apply(asking, decision.patch)
    assert admitted["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert pod_requests(admitted["spec"])[keys.GPU_RESOURCE] == MAX_MILLI


# --- 6. shapes no API server sends ------------------------------------------------------------

POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(
            {"operation": "CREATE", "kind": POD_KIND, "userInfo": "alice"},
            "AdmissionRequest.userInfo: expected an object, got 'alice'",
            id="a user that is a string",
        ),
        pytest.param(
            {"operation": "CREATE", "kind": POD_KIND, "userInfo": {"username": ["alice"]}},
            "AdmissionRequest.userInfo.username: expected a string, got ['alice']",
            id="a user name that is a list",
        ),
        pytest.param(
            {"operation": "CREATE", "kind": {"group": "", "version": 1, "kind": "Pod"}},
            "AdmissionRequest.kind: expected strings, got {'group': '', 'version': 1, 'kind': 'Pod'}",
            id="a kind with a number in it",
        ),
        pytest.param(
            {"operation": "UPDATE", "kind": POD_KIND, "subResource": 5},
            "AdmissionRequest.subResource: expected a string, got 5",
            id="a subresource that is a number",
        ),
        pytest.param(
            ["CREATE"], "AdmissionReview.request: expected an object", id="a request that is a list"
        ),
    ],
)
def test_a_malformed_envelope_is_the_policys_own_error(raw: Any, message: str) -> None:
    with pytest.raises(MalformedReview) as caught:
        Request.from_review(raw)
    assert str(caught.value) == message


def pod_with(**fields: Any) -> dict[str, Any]:
    pod = MakePod.submitted().queue("vision-train").obj()
    for path, value in fields.items():
        node = pod
        *steps, last = path.split("__")
        for step in steps:
            node = node.setdefault(step, {})
        node[last] = value
    return pod


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(
            pod_with(spec__containers=5),
            "object.spec.containers: expected a list, got 5",
            id="containers that are a number",
        ),
        pytest.param(
            pod_with(spec__containers=["main"]),
            "object.spec.containers[0]: expected an object, got 'main'",
            id="a container that is a string",
        ),
        pytest.param(
            pod_with(metadata__labels={"app": 1}),
            "object.metadata.labels.app: expected a string, got 1",
            id="a label that is a number",
        ),
        pytest.param(
            pod_with(metadata__annotations="x"),
            "object.metadata.annotations: expected an object, got 'x'",
            id="annotations that are a string",
        ),
        pytest.param(
            pod_with(spec__nodeName=True),
            "object.spec.nodeName: expected a string, got True",
            id="a node name that is true",
        ),
        pytest.param(
            pod_with(spec__priority=True),
            "object.spec.priority: expected a whole number, got True",
            id="a priority that is true",
        ),
        pytest.param(
            pod_with(metadata__ownerReferences={"kind": "Job"}),
            "object.metadata.ownerReferences: expected a list, got {'kind': 'Job'}",
            id="owner references that are an object",
        ),
        pytest.param(
            pod_with(spec__tolerations=[None]),
            "object.spec.tolerations[0]: expected an object, got null",
            id="a toleration that is null",
        ),
    ],
)
def test_a_pod_of_a_shape_no_api_server_sends_is_the_policys_own_error(
    obj: dict[str, Any], message: str
) -> None:
    with pytest.raises(MalformedReview) as caught:
        run(create(obj))
    assert str(caught.value) == message
    assert isinstance(caught.value, InvalidObject)


def test_a_job_whose_template_has_an_odd_shape_is_the_policys_own_error() -> None:
    job = MakeJob(MakePod.submitted().template()).obj()
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = "lots"
    with pytest.raises(MalformedReview) as caught:
        run(create_job(job))
    assert (
        str(caught.value)
        == "object.spec.template.spec.containers[0].resources: expected an object, got 'lots'"
    )


def test_an_update_whose_old_object_has_an_odd_shape_is_the_policys_own_error() -> None:
    request = Request(Operation.UPDATE, POD, "alice", frozenset(), MakePod.submitted().obj(), {"spec": []})
    with pytest.raises(MalformedReview) as caught:
        run(request)
    assert str(caught.value) == "oldObject.spec: expected an object, got []"


def test_a_subresource_is_not_read_at_all() -> None:
    raw: AdmissionRequest = {
        "operation": "CREATE",
        "kind": POD_KIND,
        "subResource": "binding",
        "object": {"target": {"name": "n1"}},
    }
    assert run(Request.from_review(raw)) == Admit()


# --- 12. denials do not reveal which queues exist -------------------------------------------


@pytest.mark.parametrize(
    "queue",
    [
        pytest.param("prod-train", id="a queue that exists"),
        pytest.param("no-such-queue", id="a queue that does not"),
        pytest.param("broken", id="a broken queue, whose spec stays hidden"),
    ],
)
def test_a_queue_the_namespace_may_not_use_is_refused_alike_whether_or_not_it_exists(queue: str) -> None:
    namespace = vision_ml().allowed_queues(["vision-train"]).model()
    catalog = vision_catalog(
        queues=[{"metadata": {"name": "broken"}, "spec": {"quota": {"cpu": "secret-x"}}}]
    )
    assert run(create(MakePod.submitted().queue(queue).obj()), namespace, catalog) == Deny(
        f'queue "{queue}" is not allowed in namespace vision-ml; this namespace may use: vision-train'
    )
