"""Admission with presets: their order, their queue and workflow limit, workflows and warnings.

They run in the vision world of ``tests.admission_world``.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy import keys
from policy.catalog import Catalog
from policy.reviews import Admit, Deny
from tests.admission_world import CATALOG, NS, admit, admitted, run, vision_catalog, vision_ml
from tests.builders import MakePod, MakePolicy, MakePreset, create

# --- presets through admission --------------------------------------------------------------


def test_namespace_defaults_apply_first_then_the_pods_presets_each_once() -> None:
    namespace = vision_ml().default_presets(["connections"]).model()
    pod = admitted(MakePod.submitted().presets("single-gpu", "connections").obj(), namespace)
    notes = pod["metadata"]["annotations"]
    assert notes[keys.APPLIED_PRESETS_ANNOTATION] == "connections,single-gpu"
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"] == {keys.GPU_RESOURCE: "1"}
    assert container["env"] == [{"name": "DATA_URL", "value": "s3://vision"}]
    assert pod["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert pod["metadata"]["labels"][keys.QUEUE_LABEL] == "vision-train"


def test_a_namespace_default_preset_counts_as_allowed() -> None:
    namespace = vision_ml().default_presets(["connections"]).allowed_presets(["single-gpu"]).model()
    pod = admitted(MakePod.submitted().presets("single-gpu").obj(), namespace)
    assert pod["metadata"]["annotations"][keys.APPLIED_PRESETS_ANNOTATION] == "connections,single-gpu"


@pytest.mark.parametrize(
    ("pod", "limit"),
    [
        pytest.param(
            MakePod.submitted().queue("vision-train").workflow("w1").presets("sweep"),
            "4",
            id="a preset's workflow limit applies to a pod in a workflow",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").workflow("w1", 2).presets("sweep"),
            "2",
            id="the pod may ask for fewer than the preset's workflow limit",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").workflow("w1", 1000).presets("sweep"),
            "4",
            id="the pod may not ask for more: an admin's workflow limit is a ceiling",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").workflow("w1").presets("sweep", "tight-sweep"),
            "2",
            id="of two presets' workflow limits the tighter holds",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").label("workflows.argoproj.io/workflow", "w1")
                     .presets("sweep"),
            "4",
            id="a workflow known from Argo's label counts",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").presets("sweep"), None,
                     id="no workflow, no workflow limit"
        ),
    ],
)
def test_a_presets_workflow_limit(pod: MakePod, limit: str | None) -> None:
    catalog = vision_catalog(
        presets=[MakePreset("tight-sweep").workflow_max_running(2).obj()],
        policy=MakePolicy().set(workflowLabels=["workflows.argoproj.io/workflow"]).obj(),
    )
    notes = admitted(pod.obj(), NS, catalog)["metadata"]["annotations"]
    assert notes.get(keys.WORKFLOW_MAX_RUNNING_ANNOTATION) == limit


@pytest.mark.parametrize(
    ("pod", "workflow"),
    [
        pytest.param(
            MakePod.submitted().queue("vision-train").label("workflows.argoproj.io/workflow", "w1"),
            "w1",
            id="an Argo workflow's pod joins its workflow",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").label("katib.kubeflow.org/experiment", "e7"),
            "e7",
            id="a Katib experiment's trial joins its workflow",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").workflow("mine")
                     .label("workflows.argoproj.io/workflow", "w1"),
            "mine",
            id="the pod's own workflow label wins",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").label("other.io/workflow", "w1"),
            None,
            id="labels the Policy does not map mean nothing",
        ),
    ],
)
def test_workflows_come_from_the_policys_label_mapping(pod: MakePod, workflow: str | None) -> None:
    catalog = vision_catalog(
        policy=MakePolicy()
        .set(workflowLabels=["workflows.argoproj.io/workflow", "katib.kubeflow.org/experiment"]).obj()
    )
    assert admitted(pod.obj(), NS, catalog)["metadata"]["labels"].get(keys.WORKFLOW_LABEL) == workflow


@pytest.mark.parametrize(
    ("pod", "catalog", "warning"),
    [
        pytest.param(
            MakePod.submitted().queue("vision-train").annotation(keys.GROUP_SIZE_ANNOTATION, "2"),
            CATALOG,
            "annotation sluicegate.dev/group-size has no effect without label sluicegate.dev/group",
            id="a group size without a group",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").annotation(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, "2"),
            CATALOG,
            "annotation sluicegate.dev/workflow-max-running has no effect without label "
            "sluicegate.dev/workflow",
            id="a workflow limit without a workflow",
        ),
        pytest.param(
            MakePod.submitted()
            .queue("vision-train")
            .presets("single-gpu")
            .annotation(keys.DEFAULT_CONTAINER_ANNOTATION, "trainer"),
            CATALOG,
            'annotation kubectl.kubernetes.io/default-container names no container "trainer"; '
            'presets were applied to the first container, "main"',
            id="a default container that does not exist",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train"),
            vision_catalog(policy=MakePolicy().set(maxRunning=-1).obj(), previous=CATALOG),
            "the Policy is invalid and the last valid one stays in force: "
            "Policy cluster: spec.maxRunning: must not be negative, got -1",
            id="a broken Policy, while the last valid one stays in force",
        ),
    ],
)
def test_warnings_point_out_what_has_no_effect(pod: MakePod, catalog: Catalog, warning: str) -> None:
    _, decision = admit(pod.obj(), NS, catalog)
    assert decision.warnings == (warning,)


# --- 11. a user's workflow limit never beats the admin's ---------------------------------------


def test_a_namespace_default_presets_workflow_limit_caps_the_pods_own() -> None:
    namespace = vision_ml().default_presets(["sweep"]).model()
    pod, decision = admit(MakePod.submitted().queue("vision-train").workflow("w1", 1000).obj(), namespace)
    assert pod["metadata"]["annotations"][keys.WORKFLOW_MAX_RUNNING_ANNOTATION] == "4"
    assert decision.warnings == (
        'annotation sluicegate.dev/workflow-max-running lowered from 1000 to 4: preset "sweep" lets a '
        "workflow run at most 4 pods at once",
    )
    _, again = admit(pod, namespace)
    assert again.patch == () and again.warnings == ()


# --- 10. the main container is the one the pod names once the presets are merged ---------------


def test_a_preset_that_names_the_main_container_gives_it_the_gpus_once_and_for_all() -> None:
    catalog = vision_catalog(
        presets=[
            MakePreset("trainer-gpu").pod_annotation(keys.DEFAULT_CONTAINER_ANNOTATION, "trainer")
            .gpus(2).obj()
        ]
    )
    pod = (MakePod.submitted().container("trainer", image="sidecar:1").presets("trainer-gpu")
           .queue("vision-train").obj())
    once, decision = admit(pod, NS, catalog)
    assert decision.warnings == ()
    containers = once["spec"]["containers"]
    assert "resources" not in containers[0]
    assert containers[1]["resources"] == {
        "requests": {keys.GPU_RESOURCE: "2"},
        "limits": {keys.GPU_RESOURCE: "2"},
    }
    _, again = admit(once, NS, catalog)
    assert again.patch == ()


# --- 8. a merge that would leave the pod invalid is refused, naming the preset ----------------

SCRATCH_MOUNT = {"name": "data", "mountPath": "/data"}


@pytest.mark.parametrize(
    ("pod", "preset", "message"),
    [
        pytest.param(
            MakePod.submitted()
            .spec(volumes=[{"name": "data", "emptyDir": {}}])
            .main("volumeMounts", [SCRATCH_MOUNT]),
            MakePreset("shm").pod("volumes", [{"name": "shm", "emptyDir": {"medium": "Memory"}}]),
            'preset "shm" (patchStrategy replace) would make the pod invalid: container "main" mounts '
            'volume "data" at /data, which spec.volumes does not have; ask a platform administrator to '
            "fix the preset",
            id="replacing the volumes a container mounts",
        ),
        pytest.param(
            MakePod.submitted(),
            MakePreset("mounts").strategy("post_merge").container("volumeMounts", [SCRATCH_MOUNT]),
            'preset "mounts" (patchStrategy post_merge) would make the pod invalid: container "main" mounts '
            'volume "data" at /data, which spec.volumes does not have; ask a platform administrator to '
            "fix the preset",
            id="mounting a volume nobody defines",
        ),
        pytest.param(
            MakePod.submitted(),
            MakePreset("bogus").pod("tolerations", [{"key": "a", "operator": "Bogus"}]),
            'preset "bogus" (patchStrategy replace) would make the pod invalid: the toleration of key "a" '
            "has operator Bogus; it must be Equal or Exists; ask a platform administrator to fix the preset",
            id="a toleration with an operator Kubernetes does not know",
        ),
        pytest.param(
            MakePod.submitted(),
            MakePreset("spot").pod("tolerations", [{"key": "spot", "operator": "Exists", "value": "yes"}]),
            'preset "spot" (patchStrategy replace) would make the pod invalid: the toleration of key "spot" '
            "has operator Exists and a value; Exists takes no value; ask a platform administrator to fix "
            "the preset",
            id="a toleration that both matches any value and names one",
        ),
    ],
)
def test_a_merge_that_would_leave_the_pod_invalid_is_refused(
    pod: MakePod, preset: Any, message: str
) -> None:
    catalog = vision_catalog(presets=[preset.obj()])
    name = preset.obj()["metadata"]["name"]
    decision = run(create(pod.queue("vision-train").presets(name).obj()), NS, catalog)
    assert decision == Deny(message)


def test_a_pod_already_invalid_is_not_blamed_on_a_preset() -> None:
    pod = (MakePod.submitted().queue("vision-train").presets("connections")
           .main("volumeMounts", [SCRATCH_MOUNT]))
    assert isinstance(run(create(pod.obj())), Admit)


def test_a_later_preset_giving_back_what_an_earlier_one_replaced_is_admitted_and_again_unchanged() -> None:
    # "scratch" replaces the volumes with one the container does not mount; "data" then
    # replaces them with the one it does. The end result is valid, and stays valid when the
    # admitted pod is admitted again (its own volumes then already hold what "data" adds).
    catalog = vision_catalog(presets=[
        MakePreset("scratch").pod("volumes", [{"name": "scratch", "emptyDir": {}}]).obj(),
        MakePreset("data").pod("volumes", [{"name": "data", "emptyDir": {}}]).obj(),
    ])
    pod = (MakePod.submitted().queue("vision-train").presets("scratch,data")
           .main("volumeMounts", [SCRATCH_MOUNT]).obj())
    once, _ = admit(pod, NS, catalog)
    assert [v["name"] for v in once["spec"]["volumes"]] == ["data"]
    _, again = admit(once, NS, catalog)
    assert again.patch == ()


def test_the_preset_blamed_is_the_one_from_which_the_problem_stayed_to_the_end() -> None:
    catalog = vision_catalog(presets=[
        MakePreset("shm").pod("volumes", [{"name": "shm", "emptyDir": {"medium": "Memory"}}]).obj(),
        MakePreset("env").container("env", [{"name": "MODE", "value": "train"}]).obj(),
    ])
    pod = (MakePod.submitted().queue("vision-train").presets("shm,env")
           .spec(volumes=[{"name": "data", "emptyDir": {}}]).main("volumeMounts", [SCRATCH_MOUNT]).obj())
    decision = run(create(pod), NS, catalog)
    assert isinstance(decision, Deny) and decision.message.startswith('preset "shm" '), decision
