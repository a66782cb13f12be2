"""Admission of pods: which pods are managed, what they become, and who may use which queue.

They run in the vision world of ``tests.admission_world``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy import keys
from policy.catalog import Catalog
from policy.model import Namespace
from policy.patching import apply
from policy.pods import Submitter
from policy.reviews import Admit
from tests.admission_world import CATALOG, NS, admit, admitted, run, vision_catalog, vision_ml
from tests.builders import STAMP, MakeNamespace, MakePod, MakePolicy, MakeQueue, MakeTeam, create

ALICE = Submitter("alice").to_annotation()
GATE = [{"name": keys.GATE}]


# --- which pods are managed -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "namespace", "catalog", "managed"),
    [
        pytest.param(
            MakePod.submitted().requests(cpu="2"),
            NS,
            CATALOG,
            False,
            id="a CPU-only pod is none of Sluicegate's business",
        ),
        pytest.param(
            MakePod.submitted().gpus(1).queue("vision-train"),
            MakeNamespace("vision-ml").model(),
            CATALOG,
            False,
            id="a GPU pod in a namespace without a team label is left alone",
        ),
        pytest.param(
            MakePod.submitted().gpus(1),
            vision_ml().default_queue("vision-train").model(),
            CATALOG,
            True,
            id="a pod asking for a GPU is gated",
        ),
        pytest.param(
            MakePod.submitted().gpus(0), NS, CATALOG, False, id="asking for zero GPUs is not asking for a GPU"
        ),
        pytest.param(
            MakePod.submitted().spec(
                initContainers=[{"name": "warm", "resources": {"limits": {keys.GPU_RESOURCE: "1"}}}]
            ),
            vision_ml().default_queue("vision-train").model(),
            CATALOG,
            True,
            id="a GPU asked for by an init container counts",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train"),
            NS,
            CATALOG,
            True,
            id="a pod naming a queue is gated even without a GPU",
        ),
        pytest.param(MakePod.submitted().queue(""), NS, CATALOG, False,
                     id="an empty queue label names no queue"),
        pytest.param(MakePod.submitted().presets("single-gpu"), NS, CATALOG, True,
                     id="a pod naming presets is gated"),
        pytest.param(
            MakePod.submitted().gpus(1, "amd.com/gpu"),
            vision_ml().default_queue("vision-train").model(),
            CATALOG,
            False,
            id="an AMD GPU is not managed by default",
        ),
        pytest.param(
            MakePod.submitted().gpus(1, "amd.com/gpu"),
            vision_ml().default_queue("vision-train").model(),
            vision_catalog(policy=MakePolicy().set(managedResources=["nvidia.com/gpu", "amd.com/gpu"]).obj()),
            True,
            id="an AMD GPU is managed once the Policy lists it",
        ),
        pytest.param(
            MakePod.submitted().gpus(1),
            vision_ml().default_presets(["single-gpu"]).model(),
            CATALOG,
            True,
            id="a GPU pod takes the namespace's default presets and their queue",
        ),
        pytest.param(
            MakePod.submitted(),
            vision_ml().default_presets(["single-gpu"]).model(),
            CATALOG,
            False,
            id="default presets alone do not make a pod managed",
        ),
    ],
)
def test_which_pods_are_managed(
    pod: MakePod, namespace: Namespace, catalog: Catalog, managed: bool
) -> None:
    result, decision = admit(pod.obj(), namespace, catalog)
    if managed:
        assert result["spec"]["schedulingGates"] == GATE
        assert result["metadata"]["labels"][keys.TEAM_LABEL] == "vision"
    else:
        assert decision == Admit()


# --- what an admitted pod becomes -----------------------------------------------------------


def test_a_gpu_pod_gets_its_labels_annotations_and_gate_in_a_minimal_patch() -> None:
    pod = MakePod.submitted().queue("vision-train").gpus(1).obj()
    decision = run(create(pod))
    assert decision == Admit(
        (
            {"op": "add", "path": "/metadata/labels/sluicegate.dev~1team", "value": "vision"},
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {keys.SUBMITTER_ANNOTATION: ALICE, keys.ADMITTED_AT_ANNOTATION: STAMP,
                          keys.SEAL_ANNOTATION: (
                              "lsluicegate.dev/queue=12:vision-train"
                              "lsluicegate.dev/team=6:vision"
                              f"asluicegate.dev/admitted-at={len(STAMP)}:{STAMP}"
                              f"asluicegate.dev/submitter={len(ALICE)}:{ALICE}"
                              "gsluicegate.dev/dispatch;")},
            },
            {"op": "add", "path": "/spec/schedulingGates", "value": GATE},
        )
    )
    assert isinstance(decision, Admit)
    expected = (MakePod.submitted().queue("vision-train").label(keys.TEAM_LABEL, "vision").gpus(1)
                .submitter("alice"))
    assert apply(pod, decision.patch) == expected.stamped().gated().sealed().obj()


def test_a_pod_without_labels_gets_the_whole_map_and_its_other_gates_stay() -> None:
    pod = MakePod.submitted().gpus(1).spec(schedulingGates=[{"name": "other.io/hold"}]).obj()
    decision = run(create(pod), vision_ml().default_queue("vision-train").model())
    assert isinstance(decision, Admit)
    assert decision.patch[0] == {
        "op": "add",
        "path": "/metadata/labels",
        "value": {keys.TEAM_LABEL: "vision", keys.QUEUE_LABEL: "vision-train"},
    }
    assert decision.patch[-1] == {
        "op": "add",
        "path": "/spec/schedulingGates/-",
        "value": {"name": keys.GATE},
    }
    assert apply(pod, decision.patch)["spec"]["schedulingGates"] == [{"name": "other.io/hold"}, *GATE]


def test_the_submitter_keeps_the_users_groups() -> None:
    pod = admitted(MakePod.submitted().queue("vision-train").obj(), NS, CATALOG, "dave", "vision-devs", "all")
    stamped = Submitter.from_annotation(pod["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION])
    assert stamped == Submitter("dave", frozenset({"vision-devs", "all"}))


@pytest.mark.parametrize(
    ("pod", "namespace", "catalog", "queue"),
    [
        pytest.param(
            MakePod.submitted().queue("vision-interactive").presets("single-gpu"),
            vision_ml().default_queue("vision-train").model(),
            CATALOG,
            "vision-interactive",
            id="the pod's label beats every default",
        ),
        pytest.param(
            MakePod.submitted().presets("sweep", "single-gpu"),
            vision_ml().default_queue("vision-interactive").model(),
            CATALOG,
            "vision-train",
            id="the first applied preset that names a queue beats the namespace",
        ),
        pytest.param(
            MakePod.submitted().gpus(1),
            vision_ml().default_queue("vision-interactive").model(),
            vision_catalog(policy=MakePolicy().set(defaultQueue="vision-train").obj()),
            "vision-interactive",
            id="the namespace's default beats the Policy's",
        ),
        pytest.param(
            MakePod.submitted().gpus(1),
            NS,
            vision_catalog(policy=MakePolicy().set(defaultQueue="vision-train").obj()),
            "vision-train",
            id="the Policy's default applies last",
        ),
    ],
)
def test_where_the_queue_comes_from(
    pod: MakePod, namespace: Namespace, catalog: Catalog, queue: str
) -> None:
    assert admitted(pod.obj(), namespace, catalog)["metadata"]["labels"][keys.QUEUE_LABEL] == queue


@pytest.mark.parametrize(
    ("user", "groups", "queue", "namespace", "catalog"),
    [
        pytest.param("alice", (), "vision-train", NS, CATALOG, id="a team member by name"),
        pytest.param(
            "dave", ("vision-devs",), "vision-train", NS, CATALOG, id="a team member through a group"
        ),
        pytest.param(
            "pat", (), "prod-train", NS, CATALOG, id="a member of another team uses that team's queue"
        ),
        pytest.param("erin", ("sre",), "prod-train", NS, CATALOG, id="a group the queue names"),
        pytest.param("bob", (), "research", NS, CATALOG, id="a user the queue names"),
        pytest.param(
            "carol",
            (),
            "vision-train",
            NS,
            vision_catalog(teams=[MakeTeam("vision").members().obj()]),
            id="a team without members counts everyone in its namespaces",
        ),
        pytest.param(
            "carol",
            (),
            "robotics-train",
            MakeNamespace("robotics-ml").team("robotics").model(),
            vision_catalog(
                queues=[MakeQueue("robotics-train").priority(10).access(teams=["robotics"]).obj()]
            ),
            id="a namespace's team with no Team object counts everyone in the namespace",
        ),
        pytest.param(
            "carol",
            (),
            "shared",
            NS,
            vision_catalog(queues=[MakeQueue("shared").priority(10).access().obj()]),
            id="a queue with no access list is open to all",
        ),
    ],
)
def test_who_may_use_a_queue(
    user: str, groups: tuple[str, ...], queue: str, namespace: Namespace, catalog: Catalog
) -> None:
    pod = admitted(MakePod.submitted().queue(queue).obj(), namespace, catalog, user, *groups)
    assert pod["metadata"]["labels"][keys.QUEUE_LABEL] == queue


# --- keys Sluicegate writes, written by hand ------------------------------------------------


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(
            MakePod.submitted().queue("vision-train").label(keys.TEAM_LABEL, "vision"),
            id="a team label equal to the namespace's",
        ),
        pytest.param(MakePod.submitted().queue("vision-train").submitter("alice"),
                     id="the user's own submitter"),
        pytest.param(
            MakePod.submitted()
            .queue("vision-train")
            .presets("connections")
            .annotation(keys.APPLIED_PRESETS_ANNOTATION, "connections"),
            id="the presets that are applied",
        ),
        pytest.param(MakePod.submitted().queue("vision-train").gated(), id="the gate itself"),
    ],
)
def test_a_value_identical_to_sluicegates_own_is_accepted(pod: MakePod) -> None:
    assert isinstance(run(create(pod.obj())), Admit)


# --- reinvocation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "namespace"),
    [
        pytest.param(MakePod.submitted().queue("vision-train").gpus(1), NS, id="a plain GPU pod"),
        pytest.param(
            MakePod.submitted().gpus(2), vision_ml().default_queue("vision-train").model(),
                     id="a defaulted queue"
        ),
        pytest.param(MakePod.submitted().presets("single-gpu", "connections").env("MODE", "x"), NS,
                     id="two presets"),
        pytest.param(
            MakePod.submitted().presets("single-gpu"),
            vision_ml().default_presets(["connections", "sweep"]).model(),
            id="namespace default presets",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").workflow("w1").presets("sweep"),
            NS,
            id="a workflow limit from a preset",
        ),
        pytest.param(MakePod.submitted().queue("vision-train").group("ring", 4).gated(), NS,
                     id="a pod group"),
        pytest.param(
            MakePod.submitted()
            .container("sidecar", image="sidecar:1")
            .annotation(keys.DEFAULT_CONTAINER_ANNOTATION, "sidecar")
            .presets("single-gpu"),
            NS,
            id="presets on a named default container",
        ),
    ],
)
def test_admitting_an_admitted_pod_again_changes_nothing(pod: MakePod, namespace: Namespace) -> None:
    once = admitted(pod.obj(), namespace)
    _, again = admit(once, namespace)
    assert again.patch == ()


# --- the seal: what admission wrote, for the final check ---------------------------------------

CHANGED = "were changed after Sluicegate admitted it"


def test_a_later_webhook_that_removed_the_gate_has_it_put_back_when_admission_is_reinvoked() -> None:
    once = admitted(MakePod.submitted().queue("vision-train").gpus(1).obj())
    del once["spec"]["schedulingGates"]
    again, _ = admit(once)
    assert again["spec"]["schedulingGates"] == GATE
    assert again["metadata"]["annotations"][keys.SEAL_ANNOTATION] == (
        MakePod.submitted().queue("vision-train").gpus(1).label(keys.TEAM_LABEL, "vision")
        .submitter("alice").stamped().gated().sealed().obj()["metadata"]["annotations"][keys.SEAL_ANNOTATION])


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        pytest.param("labels", keys.QUEUE_LABEL, "vision-interactive",
                     id="the queue moved by a later webhook"),
        pytest.param("labels", keys.WORKFLOW_LABEL, "w2", id="a workflow added by a later webhook"),
        pytest.param("annotations", keys.PRESETS_ANNOTATION, "connections",
                     id="presets named by a later webhook"),
    ],
)
def test_a_key_changed_after_admission_sealed_it_is_refused_when_admission_is_reinvoked(
    where: str, key: str, value: str
) -> None:
    once = admitted(MakePod.submitted().queue("vision-train").gpus(1).obj())
    once["metadata"][where][key] = value
    decision = run(create(once))
    assert not decision.allowed
    assert CHANGED in decision.message


def test_a_seal_written_by_hand_is_refused() -> None:
    pod = MakePod.submitted().queue("vision-train").gpus(1).annotation(keys.SEAL_ANNOTATION, "lx=1:y").obj()
    decision = run(create(pod))
    assert not decision.allowed
    assert f"annotation {keys.SEAL_ANNOTATION} does not match" in decision.message


def test_a_seal_on_a_pod_sluicegate_does_not_manage_is_refused_as_its_own_key() -> None:
    pod = MakePod.submitted().requests(cpu="1").annotation(keys.SEAL_ANNOTATION, "").obj()
    decision = run(create(pod))
    assert not decision.allowed
    assert f"annotation {keys.SEAL_ANNOTATION} is written by Sluicegate" in decision.message


def test_subresource_requests_are_not_judged() -> None:
    request = create(MakePod.submitted().queue("prod-train").obj())
    assert run(replace(request, subresource="status")) == Admit()
