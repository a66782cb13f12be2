"""GPUs asked through DRA ResourceClaims count in quotas as the Policy's ``deviceClasses`` say,
at admission, in dispatch and in what every reader of a pod counts; MIG profiles are quota
resources like any other."""

from __future__ import annotations

from typing import Any

import pytest

from policy import keys
from policy.devices import CLAIM, TEMPLATE, Devices, claim_devices, pod_devices
from policy.dispatching import dispatch
from policy.keys import Reason
from policy.patching import apply
from policy.pods import Pod
from policy.reviews import Admit, Deny
from tests.admission_world import run, vision_catalog
from tests.builders import MakeNode, MakePod, MakePolicy, MakeQueue, create, snapshot

GPU = keys.GPU_RESOURCE
MIG = "nvidia.com/mig-1g.10gb"
CLASSES = {"gpu.nvidia.com": GPU, "mig-1g.nvidia.com": MIG}


def exactly(
    device_class: str, count: int | None = None, mode: str = "", name: str = "gpus"
) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": device_class}
    if count is not None:
        request["count"] = count
    if mode:
        request["allocationMode"] = mode
    return {"name": name, "exactly": request}


def claim_spec(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"devices": {"requests": list(requests)}}


@pytest.mark.parametrize(
    ("spec", "counted"),
    [
        pytest.param(claim_spec(exactly("gpu.nvidia.com", 2)), {GPU: 2000},
                     id="two devices of a mapped class"),
        pytest.param(claim_spec(exactly("gpu.nvidia.com")), {GPU: 1000}, id="a count left out is one"),
        pytest.param(claim_spec(exactly("nic.example.com", 4)), {}, id="a class the Policy does not map "
                     "counts for nothing"),
        pytest.param(claim_spec(exactly("gpu.nvidia.com", 1), exactly("mig-1g.nvidia.com", 3, name="mig")),
                     {GPU: 1000, MIG: 3000}, id="requests of a claim add up"),
        pytest.param(claim_spec({"name": "any", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 1},
            {"name": "small", "deviceClassName": "mig-1g.nvidia.com", "count": 2},
            {"name": "two", "deviceClassName": "gpu.nvidia.com", "count": 2}]}),
                     {GPU: 2000, MIG: 2000}, id="alternatives count the most any of them takes"),
    ],
)
def test_what_a_claim_counts_as(spec: dict[str, Any], counted: dict[str, int]) -> None:
    assert dict(claim_devices(spec, CLASSES)) == counted


def test_all_the_devices_of_a_mapped_class_cannot_be_counted_and_say_what_to_ask_instead() -> None:
    refusal = claim_devices(claim_spec(exactly("gpu.nvidia.com", mode="All")), CLASSES)
    assert refusal == (
        'request "gpus" asks for every device of class gpu.nvidia.com (allocationMode All), which '
        f"cannot be counted in {GPU} before Kubernetes allocates them; ask for an exact count "
        "(allocationMode ExactCount, count: N)")
    assert claim_devices(claim_spec(exactly("nic.example.com", mode="All")), CLASSES) == {}


def test_a_pods_own_claims_and_its_shared_ones_are_kept_apart() -> None:
    spec = MakePod.submitted().claim("a", template="two-gpus").claim("b", claim="shared").obj()["spec"]
    found = {(TEMPLATE, "two-gpus"): claim_spec(exactly("gpu.nvidia.com", 2)),
             (CLAIM, "shared"): claim_spec(exactly("gpu.nvidia.com", 1))}
    devices = pod_devices(spec, found, CLASSES)
    assert isinstance(devices, Devices)
    assert dict(devices.own) == {GPU: 2000} and {k: dict(v) for k, v in devices.shared.items()} == {
        "shared": {GPU: 1000}}
    assert Devices.from_annotation(devices.to_annotation()) == devices


# --- admission ------------------------------------------------------------------------------

DRA = vision_catalog(policy=MakePolicy().set(deviceClasses={"gpu.nvidia.com": GPU}).obj())
TWO_GPUS = {(TEMPLATE, "two-gpus"): claim_spec(exactly("gpu.nvidia.com", 2))}


def dra_pod() -> dict[str, Any]:
    return MakePod.submitted().queue("vision-train").claim("gpus", template="two-gpus").obj()


def test_a_pod_asking_gpus_only_through_a_claim_is_managed_gated_and_carries_what_they_count_as() -> None:
    pod = dra_pod()
    decision = run(create(pod, "alice", "vision-devs"), catalog=DRA, claims=TWO_GPUS)
    assert isinstance(decision, Admit)
    admitted = apply(pod, decision.patch)
    assert admitted["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert admitted["metadata"]["annotations"][keys.DEVICES_ANNOTATION] == '{"pod":{"nvidia.com/gpu":"2"}}'
    assert dict(Pod.parse(admitted).requests) == {GPU: 2000}
    # Admission again (reinvocation, the final check) changes nothing.
    assert run(create(admitted, "alice", "vision-devs"), catalog=DRA, claims=TWO_GPUS) == Admit()


def test_without_a_mapping_a_claim_makes_no_pod_managed() -> None:
    pod = MakePod.submitted().claim("gpus", template="two-gpus").obj()
    assert run(create(pod, "alice"), claims=TWO_GPUS) == Admit()


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        pytest.param({}, "spec.resourceClaims[0] (gpus) names ResourceClaimTemplate two-gpus, which does not "
                     "exist in the pod's namespace", id="a template that does not exist yet"),
        pytest.param({(TEMPLATE, "two-gpus"): claim_spec(exactly("gpu.nvidia.com", mode="All"))},
                     "spec.resourceClaims[0] (gpus): ResourceClaimTemplate two-gpus: request \"gpus\" asks "
                     "for every device of class gpu.nvidia.com (allocationMode All)",
                     id="allocationMode All"),
    ],
)
def test_devices_that_cannot_be_counted_are_refused(claims: dict[Any, Any], message: str) -> None:
    decision = run(create(dra_pod(), "alice"), catalog=DRA, claims=claims)
    assert isinstance(decision, Deny)
    assert decision.message.startswith(message)


def test_a_hand_written_devices_annotation_is_refused() -> None:
    pod = MakePod.submitted().queue("vision-train").gpus(1).devices({GPU: 0}).obj()
    decision = run(create(pod, "alice"), catalog=DRA)
    assert isinstance(decision, Deny)
    assert decision.message.startswith(f"annotation {keys.DEVICES_ANNOTATION} is written by Sluicegate")


# --- dispatch -------------------------------------------------------------------------------


def test_a_claim_of_two_gpus_waits_on_a_quota_held_by_a_pod_asking_nvidia_com_gpu_two() -> None:
    queue = MakeQueue("a").quota(gpus=2)
    holder = MakePod("ml", "holder").queue("a").team("t").gpus(2).running("node-1")
    waiting = MakePod("ml", "dra").queue("a").team("t").devices({GPU: 2}).gated()
    decision = dispatch(snapshot([holder, waiting], [queue]))
    assert decision.release == ()
    wait = decision.waiting["ml/dra"]
    assert wait.reason is Reason.QUEUE_QUOTA
    assert wait.message == f"queue a: 2/2 {GPU} in use, needs 2"
    # ... and is released once the holder ends.
    released = dispatch(snapshot([holder.finished(), waiting], [queue])).release
    assert [w.key for w in released] == ["ml/dra"]


def test_a_shared_claim_counts_once_in_a_workload() -> None:
    pods = [MakePod("ml", f"p{i}").queue("a").team("t").group("g", 2).devices(shared={GPU: 1}).gated()
            for i in range(2)]
    decision = dispatch(snapshot(pods, [MakeQueue("a").quota(gpus=1)]))
    (released,) = decision.release
    assert dict(released.requests) == {GPU: 1000}


def test_a_mig_profile_is_a_quota_resource_like_any_other() -> None:
    queue = MakeQueue("a").quota({MIG: 2})
    first = MakePod("ml", "m1").queue("a").team("t").gpus(2, MIG).running("node-1")
    second = MakePod("ml", "m2").queue("a").team("t").gpus(1, MIG).gated()
    wait = dispatch(snapshot([first, second], [queue])).waiting["ml/m2"]
    assert wait.reason is Reason.QUEUE_QUOTA and MIG in wait.message


def test_a_mig_profile_the_policy_manages_makes_a_pod_managed() -> None:
    catalog = vision_catalog(policy=MakePolicy().set(managedResources=[GPU, MIG]).obj())
    pod = MakePod.submitted().queue("vision-train").gpus(1, MIG).obj()
    decision = run(create(pod, "alice"), catalog=catalog)
    assert isinstance(decision, Admit)
    assert apply(pod, decision.patch)["spec"]["schedulingGates"] == [{"name": keys.GATE}]


def test_devices_are_no_nodes_allocatable_so_a_node_without_gpu_resources_still_fits() -> None:
    """A cluster that hands out GPUs through DRA only has no nvidia.com/gpu in any node's
    allocatable: the pod is released (kube-scheduler places its devices), not NoNodeFits; what
    it asks beyond its devices is still compared with the nodes."""
    node = MakeNode("dra-1")
    dra = MakePod("ml", "dra").queue("a").team("t").devices({GPU: 2}).gated()
    too_big = MakePod("ml", "big").queue("a").team("t").requests(cpu="64").devices({GPU: 2}).gated()
    decision = dispatch(snapshot([dra, too_big], [MakeQueue("a")], nodes=[node]))
    assert [w.key for w in decision.release] == ["ml/dra"]
    assert decision.waiting["ml/big"].reason is Reason.NO_NODE_FITS
