"""A pod's DRA claims checked again before its release (``policy.devices.claims_changed``): a
claim deleted and made again under its name while the pod waits must not let it run more
devices than admission counted; and the gate controller holds such a pod with ``ClaimsChanged``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from cli.standings import sort_pods
from controller.managed import managed_pod
from controller.pending import board
from policy import keys
from policy.catalog import Catalog
from policy.devices import PodClaims, claims_changed
from policy.dispatching import dispatch
from tests.builders import MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot
from tests.unit.test_gate_controller import NS, World, gated_pod

GPU = keys.GPU_RESOURCE
AMD = "amd.com/gpu"
CLASSES = {"gpu.nvidia.com": GPU, "gpu.amd.com": AMD}


def asks(count: int, device_class: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": device_class,
                                                                "count": count}}]}}


def named(pod: MakePod) -> PodClaims:
    claims = managed_pod(pod.obj()).claims
    assert claims is not None
    return claims


SHARED = MakePod(NS, "p").claim("g", claim="big-a").devices(**{"big-a": {GPU: 1}})
OWN = MakePod(NS, "p").claim("g", template="one-gpu").devices({GPU: 1}).claim_made("g", "p-g-x7k2q")


@pytest.mark.parametrize(
    ("pod", "live", "why"),
    [
        pytest.param(SHARED, {"big-a": asks(1)}, None, id="a named claim as admitted"),
        pytest.param(SHARED, {"big-a": asks(4, "nic.example.com")}, None,
                     id="a claim made again asking for devices no quota counts"),
        pytest.param(SHARED, {"big-a": asks(8)},
                     "spec.resourceClaims[0] (g): ResourceClaim big-a now asks for 8 nvidia.com/gpu, 1 "
                     "counted when the pod was admitted", id="a named claim made again asking for 8"),
        pytest.param(SHARED, {"big-a": asks(1, "gpu.amd.com")},
                     "spec.resourceClaims[0] (g): ResourceClaim big-a now asks for 1 amd.com/gpu, 0 "
                     "counted when the pod was admitted", id="a named claim made again asking for another"),
        pytest.param(SHARED, {},
                     "spec.resourceClaims[0] (g): ResourceClaim big-a does not exist now, so its devices "
                     "cannot be counted", id="a named claim deleted"),
        pytest.param(OWN, {"p-g-x7k2q": asks(1)}, None, id="a claim made from a template as admitted"),
        pytest.param(OWN, {"p-g-x7k2q": asks(8)},
                     "the ResourceClaims made from its templates now ask for 8 nvidia.com/gpu, 1 counted "
                     "when the pod was admitted", id="a claim made from a template, made again asking for 8"),
        pytest.param(OWN, {},
                     "spec.resourceClaims[0] (g): ResourceClaim p-g-x7k2q does not exist now, so its "
                     "devices cannot be counted", id="a claim made from a template, deleted"),
        pytest.param(MakePod(NS, "p").claim("g", template="one-gpu").devices({GPU: 1}), {},
                     "spec.resourceClaims[0] (g): no ResourceClaim has been made from "
                     "ResourceClaimTemplate one-gpu yet, so its devices cannot be counted",
                     id="a claim not made from its template yet"),
    ],
)
def test_claims_are_compared_with_what_admission_sealed(
    pod: MakePod, live: dict[str, Any], why: str | None
) -> None:
    assert claims_changed(named(pod), live.get, CLASSES) == why


def test_claims_are_not_looked_at_while_the_policy_maps_no_class() -> None:
    assert claims_changed(named(SHARED), {"big-a": asks(8)}.get, {}) is None


def test_a_pod_naming_no_claims_has_none_to_check() -> None:
    assert managed_pod(MakePod(NS, "p").obj()).claims is None


def dra_catalog() -> Catalog:
    return Catalog(queues={"train": MakeQueue("train").model()}, teams={"vision": MakeTeam("vision").model()},
                   policy=MakePolicy().set(deviceClasses={"gpu.nvidia.com": GPU}).model())


@pytest.fixture
async def dra_world() -> AsyncIterator[tuple[World, dict[str, Any]]]:
    world = World(dra_catalog())
    live: dict[str, Any] = {}
    world.controller.claims = lambda namespace: live.get if namespace == NS else {}.get
    yield world, live
    await world.controller.stop()


async def test_a_pod_whose_claim_was_made_again_asking_more_waits_and_says_why(
    dra_world: tuple[World, dict[str, Any]],
) -> None:
    world, live = dra_world
    live["big-a"] = asks(8)
    world.submit(gated_pod("p0").claim("g", claim="big-a").devices(**{"big-a": {GPU: 1}}))
    world.controller.cycle()
    await world.settle()

    assert world.released() == set()
    condition = world.api.condition(NS, "p0")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "ClaimsChanged")
    assert condition["message"] == (
        "its DRA claims are not what was counted when it was admitted: spec.resourceClaims[0] (g): "
        "ResourceClaim big-a now asks for 8 nvidia.com/gpu, 1 counted when the pod was admitted; it is "
        "not released while they are so: delete the pod and create it again to have its claims counted "
        "anew (or make the claims ask no more than was counted)")
    waiting = world.controller.metrics.registry.get_sample_value(
        "sluicegate_queue_waiting_workloads", {"queue": "train", "reason": "ClaimsChanged"})
    assert waiting == 1

    live["big-a"] = asks(1)  # made again as it was: the pod goes
    world.controller.cycle()
    await world.settle()
    assert world.released() == {"p0"}


async def test_a_group_with_a_pod_whose_claim_grew_is_not_released(
    dra_world: tuple[World, dict[str, Any]],
) -> None:
    world, live = dra_world
    live.update({"big-a": asks(8), "big-b": asks(8)})
    world.submit(
        gated_pod("a").group("g1", 2).claim("g", claim="big-a").devices(**{"big-a": {GPU: 1}}),
        gated_pod("b").group("g1", 2).claim("g", claim="big-b").devices(**{"big-b": {GPU: 8}}))
    world.controller.cycle()
    await world.settle()

    assert world.released() == set()
    reasons = {name: (world.api.condition(NS, name) or {}).get("reason") for name in ("a", "b")}
    assert reasons == {"a": "ClaimsChanged", "b": "GroupIncomplete"}


def test_the_cli_and_the_visibility_api_take_the_controllers_word_on_changed_claims() -> None:
    """Only the controller watches claims: a pod it holds with ``ClaimsChanged`` is held, with
    its message, in what the CLI and the visibility API work out again, never about to go."""
    words = "its DRA claims are not what was counted when it was admitted: ..."
    pod = gated_pod("p0").claim("g", claim="big-a").devices(**{"big-a": {GPU: 1}}).held(
        "ClaimsChanged", words)
    sorted_pods = sort_pods([pod.obj()], {NS: "vision"})
    assert sorted_pods.counting == ()
    assert [(p.name, m) for p, m in sorted_pods.claims_changed] == [("p0", words)]

    made = snapshot([])
    shown = board(made, dispatch(made), claims_changed=[(pod.model(), words)])
    assert [(i["metadata"]["name"], i["reason"], i["message"]) for i in shown.namespace(NS)] == [
        ("p0", "ClaimsChanged", words)]
