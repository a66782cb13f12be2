"""Hypothesis strategies for pods and presets, shared by the preset and admission properties.

Names are drawn from small pools so that pods and presets collide on keys often. Pods may carry
what Kubernetes injects before Sluicegate sees them (the service-account token volume and its
mount in every container, the default not-ready toleration), and both pods and presets may set
``kubectl.kubernetes.io/default-container``, so which container is the main one can change
with the presets.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from policy import keys
from policy.presets import LIST_KEYS, Preset, Strategy
from policy.validating import amount, overcommitable

CONTAINER_NAMES = ("main", "side", "log")
TOKEN_VOLUME = {"name": "kube-api-access-x7k2p", "projected": {"sources": [{"serviceAccountToken": {}}]}}
TOKEN_MOUNT = {
    "name": "kube-api-access-x7k2p", "mountPath": keys.SERVICE_ACCOUNT_TOKEN_PATH, "readOnly": True
}
NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}

small = st.sampled_from(["a", "b", "c"])
words = st.sampled_from(["x", "y", "", "z/1", "~"])
quantities = st.sampled_from(["1", "2", "500m", "16Gi", 4])
resource_names = st.sampled_from(["cpu", "memory", keys.GPU_RESOURCE])


def maps(values: st.SearchStrategy[Any] = words) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(["app", "tier", "x.io/a", "pool"]), values, max_size=3)


tolerations = st.fixed_dictionaries(
    {"key": st.sampled_from(["gpu", "spot", "", NOT_READY["key"]]), "operator": st.just("Exists")},
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


def consistent(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with every resource set on both sides made valid: a GPU's request equals its
    limit, a cpu or memory request is at most its limit (what Preset.parse requires)."""
    requests, limits = raw.get("requests", {}), raw.get("limits", {})
    for name in set(requests) & set(limits):
        request, limit = amount(requests[name]), amount(limits[name])
        if not overcommitable(name) or (request or 0) > (limit or 0):
            limits[name] = requests[name]
    return raw


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


@st.composite
def containers(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(CONTAINER_NAMES), min_size=1, max_size=3, unique=True))
    out = []
    for name in names:
        container: dict[str, Any] = {"name": name, "image": "i"}
        for field, strategy in (
            ("resources", resources),
            ("env", st.lists(env, max_size=3)),
            ("envFrom", st.lists(env_from, max_size=2)),
            ("volumeMounts", st.lists(mounts, max_size=2, unique_by=lambda m: m["mountPath"])),
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
    if draw(st.booleans()):
        inject(spec)
    if draw(st.booleans()) and len(spec["containers"]) > 1:
        meta.setdefault("annotations", {})[keys.DEFAULT_CONTAINER_ANNOTATION] = draw(
            st.sampled_from([c["name"] for c in spec["containers"]])
        )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def inject(spec: dict[str, Any]) -> None:
    """What the ServiceAccount and DefaultTolerationSeconds admission plugins add."""
    spec["volumes"] = [*(spec.get("volumes") or []), copy.deepcopy(TOKEN_VOLUME)]
    for container in spec["containers"]:
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), copy.deepcopy(TOKEN_MOUNT)]
    held = {(t.get("key"), t.get("effect")) for t in spec.get("tolerations") or []}
    if (NOT_READY["key"], NOT_READY["effect"]) not in held:
        spec["tolerations"] = [*(spec.get("tolerations") or []), copy.deepcopy(NOT_READY)]


def _unique(items: st.SearchStrategy[Any], field: str) -> st.SearchStrategy[list[Any]]:
    return st.lists(items, max_size=3, unique_by=LIST_KEYS[field])


PRESET_POD_FIELDS = {
    "nodeSelector": maps(st.sampled_from(["x", "y"])),
    "tolerations": _unique(tolerations, "tolerations"),
    "affinity": affinity,
    "priorityClassName": words,
    "runtimeClassName": words,
    "volumes": _unique(volumes, "volumes"),
}
PRESET_CONTAINER_FIELDS = {
    "env": _unique(env, "env"),
    "envFrom": _unique(env_from, "envFrom"),
    "volumeMounts": _unique(mounts, "volumeMounts"),
}
STRATEGIES = st.sampled_from([s.value for s in Strategy])
PRESET_METADATA = maps(st.sampled_from(["x", "y"]))


@st.composite
def preset_specs(draw: st.DrawFn, strategy: str | None = None) -> dict[str, Any]:
    """A preset's spec as an admin writes it (valid: Preset.parse accepts it)."""
    annotations = draw(PRESET_METADATA)
    if draw(st.booleans()):
        annotations[keys.DEFAULT_CONTAINER_ANNOTATION] = draw(st.sampled_from(CONTAINER_NAMES))
    spec: dict[str, Any] = {
        "patchStrategy": strategy or draw(STRATEGIES),
        "metadata": {"labels": draw(PRESET_METADATA), "annotations": annotations},
        "pod": {f: draw(s) for f, s in PRESET_POD_FIELDS.items() if draw(st.booleans())},
        "container": {f: draw(s) for f, s in PRESET_CONTAINER_FIELDS.items() if draw(st.booleans())},
    }
    if draw(st.booleans()):
        spec["container"]["resources"] = consistent(draw(resources))
    return spec


@st.composite
def presets(draw: st.DrawFn, name: str = "p", strategy: str | None = None) -> Preset:
    return Preset.parse({"metadata": {"name": name}, "spec": draw(preset_specs(strategy))})
