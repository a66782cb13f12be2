"""Invariants of presets and admission, over generated pods and presets.

- ``isnull`` never overwrites a value the pod set (list items: by their natural key);
- every strategy keeps what Kubernetes injected (the token volume and mount, node-lifecycle
  tolerations);
- merging never makes a container's requests and limits contradict each other;
- every strategy is idempotent, and so is any sequence of presets (which is what makes
  admission idempotent), whichever container a preset names the main one;
- merging never mutates its input;
- a patch from ``diff`` turns the old document into the new one;
- admitting an admitted pod again yields an empty patch.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import keys
from policy.merging import apply_preset, apply_presets, empty
from policy.patching import apply, diff
from policy.presets import CONTAINER_FIELDS, INJECTED, LIST_KEYS, POD_FIELDS, FieldKind, Preset
from policy.reviews import Admit, Deny
from policy.validating import problems
from tests.admission_world import run, vision_catalog, vision_ml
from tests.builders import NOW, create
from tests.property.pod_shapes import inject, pods, preset_specs, presets

# Enough examples to hit key collisions in every field; the suite stays within a few seconds.
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- what the pod set -----------------------------------------------------------------------


def set_values(pod: dict[str, Any]) -> dict[tuple[str, ...], Any]:
    """Every non-empty value the pod set, per field a preset can set: maps per key, keyed lists
    per item, containers by name (a preset may make another container the main one)."""
    out: dict[tuple[str, ...], Any] = {}
    meta = pod.get("metadata") or {}
    for name in ("labels", "annotations"):
        for key, value in (meta.get(name) or {}).items():
            out[("metadata", name, key)] = value
    spec = pod.get("spec") or {}
    for name, kind in POD_FIELDS.items():
        out.update(_field_values(("spec", name), name, kind, spec.get(name)))
    for container in spec.get("containers") or []:
        at = ("container", container["name"])
        for name, kind in CONTAINER_FIELDS.items():
            out.update(_field_values((*at, name), name, kind, container.get(name)))
        for part in ("requests", "limits"):
            for key, value in ((container.get("resources") or {}).get(part) or {}).items():
                out[(*at, "resources", part, key)] = value
    return out


def _field_values(at: tuple[str, ...], name: str, kind: FieldKind, value: Any) -> dict[tuple[str, ...], Any]:
    if kind is FieldKind.MAP:
        return {(*at, k): v for k, v in (value or {}).items()}
    if kind is FieldKind.LIST:
        return {(*at, *LIST_KEYS[name](item)): item for item in value or []}
    return {} if empty(value) else {at: value}


@SETTINGS
@given(pods(), presets(strategy="isnull"))
def test_isnull_never_overwrites_a_value_the_pod_set(pod: dict[str, Any], preset: Preset) -> None:
    before = set_values(pod)
    after = set_values(apply_preset(pod, preset))
    assert {path: after.get(path) for path in before} == before


def injected(pod: dict[str, Any]) -> set[tuple[str, ...]]:
    """The natural keys of the list items Kubernetes injected, by field and container."""
    spec = pod["spec"]
    out = {("spec", name, *LIST_KEYS[name](item))
           for name in ("tolerations", "volumes") for item in spec.get(name) or [] if INJECTED[name](item)}
    for container in spec["containers"]:
        out |= {(container["name"], *LIST_KEYS["volumeMounts"](m))
                for m in container.get("volumeMounts") or [] if INJECTED["volumeMounts"](m)}
    return out


@SETTINGS
@given(pods(), presets())
def test_every_strategy_keeps_what_kubernetes_injected(pod: dict[str, Any], preset: Preset) -> None:
    inject(pod["spec"])
    assert injected(apply_preset(pod, preset)) >= injected(pod)


def resource_problems(pod: dict[str, Any]) -> frozenset[str]:
    return frozenset(p for p in problems(pod) if " mounts volume " not in p)


@SETTINGS
@given(pods(), st.lists(presets(), min_size=1, max_size=3))
def test_merging_never_makes_requests_and_limits_contradict(pod: dict[str, Any], chain: list[Preset]) -> None:
    assert resource_problems(apply_presets(pod, chain)) <= resource_problems(pod)


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
        spec = draw(preset_specs())
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
        if data.draw(st.booleans(), "with its own limit"):
            meta.setdefault("annotations", {})[keys.WORKFLOW_MAX_RUNNING_ANNOTATION] = str(
                data.draw(st.integers(1, 8), "limit")
            )
    if own:
        meta.setdefault("annotations", {})[keys.PRESETS_ANNOTATION] = ",".join(own)
    namespace = vision_ml().default_presets(defaults).model()
    catalog = vision_catalog(presets=objects)
    first = run(create(pod), namespace, catalog)
    if isinstance(first, Deny):
        # A preset whose merge would leave the pod invalid is refused, and only that.
        assert " would make the pod invalid: " in first.message, first
        return
    admitted = apply(pod, first.patch)
    assert admitted["spec"]["schedulingGates"][-1] == {"name": keys.GATE}
    later = data.draw(st.sampled_from([0, 1, 29]), "seconds until reinvocation")
    again = run(create(copy.deepcopy(admitted)), namespace, catalog, now=NOW + timedelta(seconds=later))
    assert isinstance(again, Admit), again
    assert again.patch == ()
