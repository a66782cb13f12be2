"""Invariants of presets and admission, over generated pods and presets.

- ``isnull`` never overwrites a value the pod set;
- every strategy is idempotent, and so is any sequence of presets (which is what makes
  admission idempotent);
- merging never mutates its input;
- a patch from ``diff`` turns the old document into the new one;
- admitting an admitted pod again yields an empty patch.

Names are drawn from small pools so that pods and presets collide on keys often.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import keys
from policy.merging import apply_preset, apply_presets, empty, main_container_index
from policy.patching import apply, diff
from policy.presets import CONTAINER_FIELDS, LIST_KEYS, POD_FIELDS, FieldKind, Preset, Strategy
from policy.reviews import Admit
from tests.admission_builders import create, make_namespace, run, vision_catalog

# Enough examples to hit key collisions in every field; the suite stays within a few seconds.
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

small = st.sampled_from(["a", "b", "c"])
words = st.sampled_from(["x", "y", "", "z/1", "~"])
quantities = st.sampled_from(["1", "2", "500m", "16Gi", 4])
resource_names = st.sampled_from(["cpu", "memory", keys.GPU_RESOURCE])


def maps(values: st.SearchStrategy[Any] = words) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(["app", "tier", "x.io/a", "pool"]), values, max_size=3)


tolerations = st.fixed_dictionaries(
    {"key": st.sampled_from(["gpu", "spot", ""]), "operator": st.just("Exists")},
    optional={"effect": st.sampled_from(["NoSchedule", "NoExecute"])},
)
volumes = st.builds(
    lambda name, pvc: {
        "name": name,
        **({"persistentVolumeClaim": {"claimName": pvc}} if pvc else {"emptyDir": {}}),
    },
    small,
    st.sampled_from(["", "set"]),
)
env = st.builds(lambda name, value: {"name": name, "value": value}, small, words)
env_from = st.builds(
    lambda ref, name: {ref: {"name": name}}, st.sampled_from(["configMapRef", "secretRef"]), small
)
mounts = st.builds(
    lambda name, path: {"name": name, "mountPath": path}, small, st.sampled_from(["/d", "/e", "/f"])
)
affinity_keys = st.sampled_from(["nodeAffinity", "podAffinity", "terms", "weight"])
affinity = st.dictionaries(
    affinity_keys,
    st.sampled_from(["p", 1])
    | st.lists(small, max_size=2)
    | st.dictionaries(affinity_keys, small, max_size=2),
    max_size=2,
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": st.dictionaries(resource_names, quantities, max_size=3),
        "limits": st.dictionaries(resource_names, quantities, max_size=3),
    },
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


@st.composite
def containers(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(["main", "side", "log"]), min_size=1, max_size=3, unique=True))
    out = []
    for name in names:
        container: dict[str, Any] = {"name": name, "image": "i"}
        for field, strategy in (
            ("resources", resources),
            ("env", st.lists(env, max_size=3)),
            ("envFrom", st.lists(env_from, max_size=2)),
            ("volumeMounts", st.lists(mounts, max_size=2)),
        ):
            if draw(st.booleans()):
                container[field] = draw(strategy)
        out.append(container)
    return out


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "vision-ml"}
    if draw(st.booleans()):
        meta["labels"] = draw(maps())
    if draw(st.booleans()):
        meta["annotations"] = draw(maps())
    spec: dict[str, Any] = {"containers": draw(containers())}
    optional = {
        "nodeSelector": maybe(maps()),
        "tolerations": maybe(st.lists(tolerations, max_size=3)),
        "affinity": maybe(affinity),
        "priorityClassName": maybe(words),
        "runtimeClassName": maybe(words),
        "volumes": maybe(st.lists(volumes, max_size=3, unique_by=lambda v: v["name"])),
    }
    for field, strategy in optional.items():
        if draw(st.booleans()):
            spec[field] = draw(strategy)
    if draw(st.booleans()) and len(spec["containers"]) > 1:
        meta.setdefault("annotations", {})[keys.DEFAULT_CONTAINER_ANNOTATION] = spec["containers"][-1]["name"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@st.composite
def presets(draw: st.DrawFn, name: str = "p", strategy: str | None = None) -> Preset:
    def unique(items: st.SearchStrategy[Any], field: str) -> st.SearchStrategy[list[Any]]:
        return st.lists(items, max_size=3, unique_by=LIST_KEYS[field])

    pod_fields = {
        "nodeSelector": maps(st.sampled_from(["x", "y"])),
        "tolerations": unique(tolerations, "tolerations"),
        "affinity": affinity,
        "priorityClassName": words,
        "runtimeClassName": words,
        "volumes": unique(volumes, "volumes"),
    }
    container_fields = {
        "env": unique(env, "env"),
        "envFrom": unique(env_from, "envFrom"),
        "volumeMounts": unique(mounts, "volumeMounts"),
    }
    spec: dict[str, Any] = {
        "patchStrategy": strategy or draw(st.sampled_from([s.value for s in Strategy])),
        "metadata": {
            "labels": draw(maps(st.sampled_from(["x", "y"]))),
            "annotations": draw(maps(st.sampled_from(["x", "y"]))),
        },
        "pod": {f: draw(s) for f, s in pod_fields.items() if draw(st.booleans())},
        "container": {f: draw(s) for f, s in container_fields.items() if draw(st.booleans())},
    }
    if draw(st.booleans()):
        spec["container"]["resources"] = draw(resources)
    return Preset.parse({"metadata": {"name": name}, "spec": spec})


# --- what the pod set -----------------------------------------------------------------------


def set_values(pod: dict[str, Any]) -> dict[tuple[str, ...], Any]:
    """Every non-empty value the pod set, per field a preset can set (maps: per key)."""
    out: dict[tuple[str, ...], Any] = {}
    meta = pod.get("metadata") or {}
    for name in ("labels", "annotations"):
        for key, value in (meta.get(name) or {}).items():
            out[("metadata", name, key)] = value
    spec = pod.get("spec") or {}
    for name, kind in POD_FIELDS.items():
        value = spec.get(name)
        if kind is FieldKind.MAP:
            out.update({("spec", name, k): v for k, v in (value or {}).items()})
        elif not empty(value):
            out[("spec", name)] = value
    index = main_container_index(pod)
    if index is not None:
        container = spec["containers"][index]
        for name in CONTAINER_FIELDS:
            if not empty(container.get(name)):
                out[("container", name)] = container[name]
        for part in ("requests", "limits"):
            for key, value in ((container.get("resources") or {}).get(part) or {}).items():
                out[("container", "resources", part, key)] = value
    return out


@SETTINGS
@given(pods(), presets(strategy="isnull"))
def test_isnull_never_overwrites_a_value_the_pod_set(pod: dict[str, Any], preset: Preset) -> None:
    before = set_values(pod)
    after = set_values(apply_preset(pod, preset))
    assert {path: after.get(path) for path in before} == before


@SETTINGS
@given(pods(), presets(strategy="replace"))
def test_replace_is_idempotent(pod: dict[str, Any], preset: Preset) -> None:
    once = apply_preset(pod, preset)
    assert apply_preset(once, preset) == once


@SETTINGS
@given(pods(), presets())
def test_every_strategy_is_idempotent_and_leaves_its_input_alone(pod: dict[str, Any], preset: Preset) -> None:
    original = copy.deepcopy(pod)
    once = apply_preset(pod, preset)
    assert pod == original
    assert apply_preset(once, preset) == once


@SETTINGS
@given(pods(), st.lists(presets(), min_size=1, max_size=4))
def test_a_sequence_of_presets_is_idempotent(pod: dict[str, Any], chain: list[Preset]) -> None:
    once = apply_presets(pod, chain)
    assert apply_presets(once, chain) == once


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "a", "b/c", "~1"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c/d", "~"]), inner, max_size=3)
    ),
    max_leaves=10,
)


@SETTINGS
@given(json_values, json_values)
def test_a_diff_turns_the_old_document_into_the_new(before: Any, after: Any) -> None:
    assert apply(before, diff(before, after)) == after


@SETTINGS
@given(pods(), presets())
def test_the_diff_of_a_merge_applies_back_to_the_merge(pod: dict[str, Any], preset: Preset) -> None:
    merged = apply_preset(pod, preset)
    assert apply(pod, diff(pod, merged)) == merged


# --- admission ------------------------------------------------------------------------------


@st.composite
def preset_objects(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Presets named p0..pN as raw objects for the catalog (queue-free, so access stays simple)."""
    out = []
    for i in range(draw(st.integers(1, 3))):
        preset = draw(presets(name=f"p{i}"))
        spec: dict[str, Any] = {
            "patchStrategy": preset.strategy.value,
            "metadata": {"labels": dict(preset.labels), "annotations": dict(preset.annotations)},
            "pod": copy.deepcopy(dict(preset.pod)),
            "container": {
                **copy.deepcopy(dict(preset.container)),
                "resources": {k: dict(v) for k, v in preset.resources.items()},
            },
        }
        if draw(st.booleans()):
            spec["workflowMaxRunning"] = draw(st.integers(1, 5))
        out.append({"metadata": {"name": f"p{i}"}, "spec": spec})
    return out


@SETTINGS
@given(pods(), preset_objects(), st.data())
def test_admitting_an_admitted_pod_again_changes_nothing(
    pod: dict[str, Any], objects: list[dict[str, Any]], data: st.DataObject
) -> None:
    names = [o["metadata"]["name"] for o in objects]
    defaults = data.draw(st.lists(st.sampled_from(names), max_size=2, unique=True), "default presets")
    own = data.draw(st.lists(st.sampled_from(names), max_size=3), "pod presets")
    meta = pod["metadata"]
    meta.setdefault("labels", {})[keys.QUEUE_LABEL] = "vision-train"
    if data.draw(st.booleans(), "in a workflow"):
        meta["labels"][keys.WORKFLOW_LABEL] = "w1"
    if own:
        meta.setdefault("annotations", {})[keys.PRESETS_ANNOTATION] = ",".join(own)
    namespace = make_namespace(default_presets=defaults)
    catalog = vision_catalog(presets=objects)
    first = run(create(pod), namespace, catalog)
    assert isinstance(first, Admit), first
    admitted = apply(pod, first.patch)
    assert admitted["spec"]["schedulingGates"][-1] == {"name": keys.GATE}
    again = run(create(admitted), namespace, catalog)
    assert isinstance(again, Admit), again
    assert again.patch == ()
