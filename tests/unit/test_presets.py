"""Presets: what a preset spec may say, and what each strategy does to a pod."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policy import keys
from policy.fields import InvalidObject
from policy.merging import apply_preset, apply_presets, main_container_index
from policy.presets import Preset, Strategy
from tests.builders import MakePod, MakePreset

# --- parsing --------------------------------------------------------------------------------


def test_a_bare_preset_replaces_and_sets_nothing() -> None:
    preset = Preset.parse(MakePreset("empty").obj())
    assert preset.strategy is Strategy.REPLACE
    assert preset.queue == ""
    assert preset.workflow_max_running is None
    assert not preset.sets_anything


def test_the_full_shape_from_the_design_parses() -> None:
    preset = Preset.parse({
        "metadata": {"name": "single-gpu"},
        "spec": {
            "patchStrategy": "post_merge",
            "queue": "vision-train",
            "workflowMaxRunning": 4,
            "metadata": {"labels": {"team-app": "train"}, "annotations": {"note": "x"}},
            "pod": {"nodeSelector": {"pool": "a100"}, "tolerations": [], "affinity": {},
                    "priorityClassName": "", "runtimeClassName": "nvidia", "volumes": []},
            "container": {"resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": 1}},
                          "env": [{"name": "A", "value": "1"}], "envFrom": [], "volumeMounts": []},
        },
    })
    assert preset.strategy is Strategy.POST_MERGE
    assert preset.queue == "vision-train"
    assert preset.workflow_max_running == 4
    assert dict(preset.labels) == {"team-app": "train"}
    # Empty values in a preset set nothing, so they can never wipe a pod's field.
    assert dict(preset.pod) == {"nodeSelector": {"pool": "a100"}, "runtimeClassName": "nvidia"}
    assert dict(preset.container) == {"env": [{"name": "A", "value": "1"}]}
    assert {k: dict(v) for k, v in preset.resources.items()} == {
        "requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": 1}
    }


@pytest.mark.parametrize(
    ("builder", "message"),
    [
        pytest.param(
            MakePreset("p").strategy("merge"),
            "Preset p: spec.patchStrategy: 'merge' is not one of replace, isnull, post_merge, pre_merge",
            id="an unknown strategy is refused, naming the four",
        ),
        pytest.param(
            MakePreset("p").workflow_max_running(-1),
            "Preset p: spec.workflowMaxRunning: must be at least 1, got -1",
            id="a negative workflow limit is refused",
        ),
        pytest.param(
            MakePreset("p").workflow_max_running(0),
            "Preset p: spec.workflowMaxRunning: must be at least 1, got 0",
            id="a zero workflow limit is refused: no workflow could ever run",
        ),
        pytest.param(
            MakePreset("p").workflow_max_running("4"),
            "Preset p: spec.workflowMaxRunning: expected a whole number, got '4'",
            id="a workflow limit written as a string is refused",
        ),
        pytest.param(
            MakePreset("p").requests(gpu="8x"),
            "Preset p: spec.container.resources.requests.nvidia.com/gpu: "
            "'8x' is not a quantity (examples: 2, 500m, 16Gi, 1e3)",
            id="a malformed quantity is refused, naming the resource",
        ),
        pytest.param(
            MakePreset("p").limits(memory="-1Gi"),
            "Preset p: spec.container.resources.limits.memory: '-1Gi' is negative",
            id="a negative quantity is refused",
        ),
        pytest.param(
            MakePreset("p").pod("hostNetwork", True),
            "Preset p: spec.pod: unknown field hostNetwork (known: affinity, nodeSelector, "
            "priorityClassName, runtimeClassName, tolerations, volumes)",
            id="a pod field presets do not carry is refused, listing the known ones",
        ),
        pytest.param(
            MakePreset("p").container("command", ["sh"]),
            "Preset p: spec.container: unknown field command (known: env, envFrom, resources, volumeMounts)",
            id="a container field presets do not carry is refused",
        ),
        pytest.param(
            MakePreset("p").pod_label(keys.QUEUE_LABEL, "q"),
            "Preset p: spec.metadata.labels.sluicegate.dev/queue: presets may not set sluicegate.dev/ keys "
            "(use spec.queue and spec.workflowMaxRunning)",
            id="a preset may not write Sluicegate's keys",
        ),
        pytest.param(
            MakePreset("p").container("env", [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]),
            "Preset p: spec.container.env[1]: name 'A' appears twice",
            id="an env var defined twice is refused: the merge could not be idempotent",
        ),
        pytest.param(
            MakePreset("p").container("volumeMounts", [{"name": "data"}]),
            "Preset p: spec.container.volumeMounts[0]: mountPath is missing",
            id="a mount without a path is refused",
        ),
        pytest.param(
            MakePreset("p").container("envFrom", [{"prefix": "X_"}]),
            "Preset p: spec.container.envFrom[0]: configMapRef.name or secretRef.name is missing",
            id="an envFrom without a source is refused",
        ),
        pytest.param(
            MakePreset("p").pod("tolerations", {"key": "gpu"}),
            "Preset p: spec.pod.tolerations: expected a list, got dict",
            id="a list written as an object is refused",
        ),
        pytest.param(
            MakePreset("p").pod("priorityClassName", 5),
            "Preset p: spec.pod.priorityClassName: expected a string, got 5",
            id="a priority class that is not a string is refused",
        ),
        pytest.param(
            MakePreset("p").pod("nodeSelector", {"pool": 1}),
            "Preset p: spec.pod.nodeSelector.pool: expected a string, got 1",
            id="a node selector value that is not a string is refused",
        ),
        pytest.param(
            MakePreset("p").queue(["a"]),  # type: ignore[arg-type]
            "Preset p: spec.queue: expected a queue name, got ['a']",
            id="a queue that is not a name is refused",
        ),
    ],
)
def test_a_bad_spec_is_refused_with_the_field_named(builder: MakePreset, message: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        Preset.parse(builder.obj())
    assert str(caught.value) == message


def test_a_preset_without_a_name_is_refused() -> None:
    with pytest.raises(InvalidObject) as caught:
        Preset.parse({"spec": {}})
    assert str(caught.value) == "Preset: metadata.name is missing"


# --- merging --------------------------------------------------------------------------------

GPU = keys.GPU_RESOURCE


def merged(pod: dict[str, Any], builder: MakePreset) -> dict[str, Any]:
    return apply_preset(pod, Preset.parse(builder.obj()))


def main_container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


POD_WITH_EVERYTHING = (
    MakePod.submitted()
    .label("app", "train")
    .spec(nodeSelector={"pool": "h100", "zone": "a"})
    .spec(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                           {"key": "spot", "operator": "Exists"}])
    .spec(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}})
    .spec(priorityClassName="low")
    .spec(volumes=[{"name": "data", "emptyDir": {}}])
    .requests(cpu="4", memory="16Gi")
    .env("MODE", "pod")
    .env("SEED", "1")
    .main("envFrom", [{"configMapRef": {"name": "settings"}}])
    .main("volumeMounts", [{"name": "data", "mountPath": "/data"}])
    .obj()
)


def preset_for_everything(strategy: str) -> MakePreset:
    return (
        MakePreset("shape")
        .strategy(strategy)
        .pod_label("app", "preset")
        .pod_label("cost-center", "ml")
        .pod("nodeSelector", {"pool": "a100"})
        .pod("tolerations", [{"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"},
                             {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}])
        .pod("affinity", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}})
        .pod("priorityClassName", "high")
        .pod("runtimeClassName", "nvidia")
        .pod("volumes", [{"name": "data", "persistentVolumeClaim": {"claimName": "set"}},
                         {"name": "cache", "emptyDir": {}}])
        .requests(gpu="1", cpu="8")
        .limits(gpu="1")
        .container("env", [{"name": "MODE", "value": "preset"}, {"name": "NCCL", "value": "1"}])
        .container("envFrom", [{"configMapRef": {"name": "settings", "optional": True}},
                               {"secretRef": {"name": "settings"}}])
        .container("volumeMounts", [{"name": "cache", "mountPath": "/data"},
                                    {"name": "cache", "mountPath": "/cache"}])
    )


REQUIRED_GPU = {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}
PREFERRED = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}


@pytest.mark.parametrize(
    ("strategy", "path", "expected"),
    [
        # replace: maps key by key with the preset winning; everything else is the preset's.
        pytest.param("replace", ("metadata", "labels"), {"app": "preset", "cost-center": "ml"},
                     id="replace: a label the preset sets replaces the pod's, others stay"),
        pytest.param("replace", ("spec", "nodeSelector"), {"pool": "a100", "zone": "a"},
                     id="replace: node selector keys are replaced one by one"),
        pytest.param("replace", ("spec", "tolerations"),
                     [{"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"},
                      {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
                     id="replace: the pod's tolerations give way to the preset's list"),
        pytest.param("replace", ("spec", "affinity"), {"nodeAffinity": REQUIRED_GPU},
                     id="replace: the preset's affinity replaces the pod's whole"),
        pytest.param("replace", ("spec", "priorityClassName"), "high",
                     id="replace: the preset's priority class wins"),
        pytest.param("replace", ("spec", "volumes"),
                     [{"name": "data", "persistentVolumeClaim": {"claimName": "set"}},
                      {"name": "cache", "emptyDir": {}}],
                     id="replace: the pod's volumes give way to the preset's list"),
        pytest.param("replace", ("resources",),
                     {"requests": {"cpu": "8", "memory": "16Gi", GPU: "1"}, "limits": {GPU: "1"}},
                     id="replace: a GPU preset keeps the pod's memory request"),
        pytest.param("replace", ("env",),
                     [{"name": "MODE", "value": "preset"}, {"name": "NCCL", "value": "1"}],
                     id="replace: the container's env is the preset's"),
        # isnull: fill only what the pod left empty.
        pytest.param("isnull", ("metadata", "labels"), {"app": "train", "cost-center": "ml"},
                     id="isnull: a label the pod set is kept, a missing one is filled"),
        pytest.param("isnull", ("spec", "nodeSelector"), {"pool": "h100", "zone": "a"},
                     id="isnull: node selector keys the pod set are kept"),
        pytest.param("isnull", ("spec", "tolerations"),
                     [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                      {"key": "spot", "operator": "Exists"},
                      {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
                     id="isnull: the pod's tolerations are kept, one for a taint it lacks is added"),
        pytest.param("isnull", ("spec", "affinity"), {"nodeAffinity": PREFERRED},
                     id="isnull: the pod's affinity is kept"),
        pytest.param("isnull", ("spec", "priorityClassName"), "low",
                     id="isnull: the pod's priority class is kept"),
        pytest.param("isnull", ("spec", "runtimeClassName"), "nvidia",
                     id="isnull: a runtime class the pod left empty is filled"),
        pytest.param("isnull", ("resources",),
                     {"requests": {"cpu": "4", "memory": "16Gi", GPU: "1"}, "limits": {GPU: "1"}},
                     id="isnull: the pod's cpu request is kept, the GPU request filled"),
        pytest.param("isnull", ("env",),
                     [{"name": "MODE", "value": "pod"}, {"name": "SEED", "value": "1"},
                      {"name": "NCCL", "value": "1"}],
                     id="isnull: the pod's env vars are kept, a variable it lacks is added"),
        # post_merge: merged, the preset wins.
        pytest.param("post_merge", ("spec", "tolerations"),
                     [{"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"},
                      {"key": "spot", "operator": "Exists"},
                      {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
                     id="post_merge: tolerations match by key and effect, the preset's replaces the pod's"),
        pytest.param("post_merge", ("spec", "affinity"), {"nodeAffinity": {**PREFERRED, **REQUIRED_GPU}},
                     id="post_merge: affinities merge deeply"),
        pytest.param("post_merge", ("spec", "volumes"),
                     [{"name": "data", "persistentVolumeClaim": {"claimName": "set"}},
                      {"name": "cache", "emptyDir": {}}],
                     id="post_merge: volumes match by name and the preset's is taken whole"),
        pytest.param("post_merge", ("env",),
                     [{"name": "MODE", "value": "preset"}, {"name": "SEED", "value": "1"},
                      {"name": "NCCL", "value": "1"}],
                     id="post_merge: env vars match by name, the preset's value wins, new ones follow"),
        pytest.param("post_merge", ("envFrom",),
                     [{"configMapRef": {"name": "settings", "optional": True}},
                      {"secretRef": {"name": "settings"}}],
                     id="post_merge: envFrom matches by ConfigMap or Secret name, not by name alone"),
        pytest.param("post_merge", ("volumeMounts",),
                     [{"name": "cache", "mountPath": "/data"}, {"name": "cache", "mountPath": "/cache"}],
                     id="post_merge: volume mounts match by mount path"),
        pytest.param("post_merge", ("spec", "priorityClassName"), "high",
                     id="post_merge: the preset's priority class wins"),
        # pre_merge: merged, the pod wins.
        pytest.param("pre_merge", ("metadata", "labels"), {"app": "train", "cost-center": "ml"},
                     id="pre_merge: the pod's label wins, the preset's new label is added"),
        pytest.param("pre_merge", ("spec", "tolerations"),
                     [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                      {"key": "spot", "operator": "Exists"},
                      {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}],
                     id="pre_merge: the pod's toleration wins, the preset's other effect is added"),
        pytest.param("pre_merge", ("spec", "affinity"), {"nodeAffinity": {**REQUIRED_GPU, **PREFERRED}},
                     id="pre_merge: affinities merge deeply"),
        pytest.param("pre_merge", ("spec", "volumes"),
                     [{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}],
                     id="pre_merge: the pod's volume of the same name wins"),
        pytest.param("pre_merge", ("env",),
                     [{"name": "MODE", "value": "pod"}, {"name": "SEED", "value": "1"},
                      {"name": "NCCL", "value": "1"}],
                     id="pre_merge: the pod's env var wins, the preset's new one is added"),
        pytest.param("pre_merge", ("volumeMounts",),
                     [{"name": "data", "mountPath": "/data"}, {"name": "cache", "mountPath": "/cache"}],
                     id="pre_merge: the pod's mount at the same path wins"),
        pytest.param("pre_merge", ("spec", "priorityClassName"), "low",
                     id="pre_merge: the pod's priority class wins"),
        pytest.param("pre_merge", ("resources",),
                     {"requests": {"cpu": "4", "memory": "16Gi", GPU: "1"}, "limits": {GPU: "1"}},
                     id="pre_merge: the pod's cpu request wins"),
    ],
)
def test_each_strategy_treats_each_field(strategy: str, path: tuple[str, ...], expected: Any) -> None:
    pod = merged(POD_WITH_EVERYTHING, preset_for_everything(strategy))
    node: Any = pod if path[0] in ("metadata", "spec") else main_container(pod)
    for name in path:
        node = node[name]
    assert node == expected


@pytest.mark.parametrize("strategy", [s.value for s in Strategy])
def test_merging_never_changes_the_input_pod(strategy: str) -> None:
    pod = copy.deepcopy(POD_WITH_EVERYTHING)
    merged(pod, preset_for_everything(strategy))
    assert pod == POD_WITH_EVERYTHING


@pytest.mark.parametrize("strategy", [s.value for s in Strategy])
def test_merging_twice_is_merging_once(strategy: str) -> None:
    preset = Preset.parse(preset_for_everything(strategy).obj())
    once = apply_preset(POD_WITH_EVERYTHING, preset)
    assert apply_preset(once, preset) == once


@pytest.mark.parametrize("strategy", [s.value for s in Strategy])
def test_a_bare_pod_takes_everything_the_preset_sets(strategy: str) -> None:
    pod = merged(MakePod.submitted().obj(), preset_for_everything(strategy))
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert pod["spec"]["nodeSelector"] == {"pool": "a100"}
    assert main_container(pod)["resources"] == {"requests": {GPU: "1", "cpu": "8"}, "limits": {GPU: "1"}}
    assert [e["name"] for e in main_container(pod)["env"]] == ["MODE", "NCCL"]


@pytest.mark.parametrize(
    ("pod", "index"),
    [
        pytest.param(MakePod.submitted().container("sidecar", image="sidecar:1").obj(), 0,
                     id="the first container when none is named"),
        pytest.param(
            MakePod.submitted().container("sidecar", image="sidecar:1")
                     .annotation(keys.DEFAULT_CONTAINER_ANNOTATION, "sidecar").obj(),
            1,
            id="the container named by kubectl.kubernetes.io/default-container",
        ),
        pytest.param(
            MakePod.submitted().container("sidecar", image="sidecar:1")
                     .annotation(keys.DEFAULT_CONTAINER_ANNOTATION, "ghost").obj(),
            0,
            id="the first container when the named one does not exist",
        ),
        pytest.param(MakePod.submitted().spec(containers=[]).obj(), None,
                     id="none when the pod has no containers"),
    ],
)
def test_the_container_section_applies_to_the_main_container(pod: dict[str, Any], index: int | None) -> None:
    assert main_container_index(pod) == index
    result = merged(pod, MakePreset("gpu").gpus(1))
    for i, container in enumerate(result["spec"]["containers"]):
        assert ("resources" in container) is (i == index)


def test_presets_merge_in_order_each_by_its_own_strategy() -> None:
    base = Preset.parse(MakePreset("base").pod("priorityClassName", "normal").container(
        "env", [{"name": "A", "value": "base"}]).obj())
    fill = Preset.parse(MakePreset("fill").strategy("isnull").pod("priorityClassName", "low").pod(
        "runtimeClassName", "nvidia").obj())
    add = Preset.parse(MakePreset("add").strategy("post_merge").container(
        "env", [{"name": "B", "value": "add"}]).obj())
    pod = apply_presets(MakePod.submitted().obj(), [base, fill, add])
    assert pod["spec"]["priorityClassName"] == "normal"
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert main_container(pod)["env"] == [{"name": "A", "value": "base"}, {"name": "B", "value": "add"}]


def test_a_null_in_the_pod_counts_as_empty() -> None:
    pod = MakePod.submitted().spec(tolerations=None).spec(affinity=None).obj()
    pod["metadata"]["labels"] = None
    result = merged(pod, MakePreset("p").strategy("isnull").pod_label("a", "b").pod(
        "tolerations", [{"key": "gpu", "operator": "Exists"}]).pod("affinity", {"podAffinity": {}}))
    assert result["metadata"]["labels"] == {"a": "b"}
    assert result["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert result["spec"]["affinity"] == {"podAffinity": {}}
