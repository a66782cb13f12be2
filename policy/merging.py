"""Merging presets into pods: pure functions from a pod dict to a new pod dict.

The input is never mutated; the output is plain ``dict``/``list`` data, ready for diffing.

What each strategy does to a field the preset sets (``presets`` lists the fields):

============  ===========================  ==========================  ========================
field kind    replace / post_merge         pre_merge                   isnull
============  ===========================  ==========================  ========================
map           key by key, preset wins      key by key, pod wins        key by key, pod wins
keyed list    replace: preset's list;      items by natural key,       items by natural key,
              post_merge: items by         pod's item wins             pod's item wins (an item
              natural key, preset's wins                               is added when the pod
                                                                       has none with its key)
object        replace: preset's object;    deep merge, pod wins        preset's object only
              post_merge: deep merge,                                  when the pod's is empty
              preset wins
string        preset's                     pod's unless empty          pod's unless empty
============  ===========================  ==========================  ========================

Maps (labels, annotations, nodeSelector, resource requests and limits) always combine key by
key: each key is its own field, so a preset that sets ``nvidia.com/gpu`` never drops the pod's
``memory`` request, and Sluicegate's own labels survive every preset.

Items of a keyed list are units: when the pod and the preset both define an env var, volume,
mount, toleration or envFrom source with the same key, the winner's item is taken whole.
Merging two definitions field by field would build invalid one-of combinations (an env var with
both ``value`` and ``valueFrom``, a volume with two sources). Pod items keep their order; the
preset's new items follow in the preset's order. Lists inside objects (``affinity``'s terms)
have no natural key and are taken whole from the winner. Items Kubernetes injected before
admission (``presets.INJECTED``: the service-account token volume and its mount, tolerations of
``node.kubernetes.io/`` taints) survive ``replace`` too, and stay at the end of their list,
where Kubernetes puts them.

A resource's request and limit move together. When a preset wins (``replace``, ``post_merge``)
and sets one side, the other side follows where it would contradict it: a GPU (any resource that
cannot be overcommitted) gets request = limit = the preset's value; for cpu or memory a limit
below the preset's request rises to it, a request above the preset's limit falls to it. When the
pod wins (``pre_merge``, ``isnull``), a resource the pod names on either side keeps its pair as
it is; one it does not name takes the preset's.

The container section applies to the main container: the one named by the annotation
``kubectl.kubernetes.io/default-container`` as it reads once every preset's metadata is merged
(a preset may set it), else the first. Every strategy is idempotent: merging a preset into its
own result changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from policy import keys
from policy.fields import Obj
from policy.presets import (
    CONTAINER_FIELDS,
    INJECTED,
    LIST_KEYS,
    POD_FIELDS,
    RESOURCE_FIELDS,
    FieldKind,
    ListKey,
    Preset,
    Strategy,
)
from policy.validating import amount, overcommitable


def thaw(value: Any) -> Any:
    """A deep copy as plain ``dict`` and ``list`` (read-only mappings and tuples included)."""
    if isinstance(value, Mapping):
        return {str(k): thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def empty(value: object) -> bool:
    """What ``isnull`` treats as unset: absent, null, or an empty string, list or object."""
    return value is None or value == "" or value == [] or value == {}


def main_container_index(pod: Obj) -> int | None:
    """The container presets apply to: the default-container annotation's, else the first."""
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list) or not containers:
        return None
    meta = pod.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    wanted = notes.get(keys.DEFAULT_CONTAINER_ANNOTATION) if isinstance(notes, Mapping) else None
    for i, container in enumerate(containers):
        if wanted and isinstance(container, Mapping) and container.get("name") == wanted:
            return i
    return 0


def apply_presets(pod: Obj, presets: Iterable[Preset]) -> dict[str, Any]:
    """Merge each preset in turn, each by its own strategy."""
    out: dict[str, Any] = thaw(pod)
    for _, state in preset_steps(pod, presets):
        out = state
    return out


def preset_steps(pod: Obj, presets: Iterable[Preset]) -> Iterator[tuple[Preset, dict[str, Any]]]:
    """The pod after each preset, in turn: every preset's metadata first (it may name the main
    container), then each preset's spec and container sections.

    The same dict is yielded each time, changed in place: read it before taking the next step.
    """
    chain = tuple(presets)
    out: dict[str, Any] = thaw(pod)
    for preset in chain:
        _merge_metadata(out, preset)
    index = main_container_index(out)
    for preset in chain:
        _merge_spec(out, preset, index)
        yield preset, out


def apply_preset(pod: Obj, preset: Preset) -> dict[str, Any]:
    """The pod with ``preset`` merged in by the preset's strategy."""
    return apply_presets(pod, (preset,))


def merge_field(kind: FieldKind, name: str, current: Any, value: Any, strategy: Strategy) -> Any:
    """The new value of one field of kind ``kind`` that the preset sets to ``value``."""
    if kind is FieldKind.MAP:
        return _merge_map(current, value, preset_wins=preset_wins(strategy))
    if kind is FieldKind.LIST:
        if strategy is Strategy.REPLACE:
            merged = _replace_list(name, current, value)
        else:
            merged = _merge_list(name, current, value, preset_wins=strategy is Strategy.POST_MERGE)
        return _injected_last(name, merged)
    if strategy is Strategy.ISNULL:
        return thaw(value) if empty(current) else current
    if strategy is Strategy.REPLACE:
        return thaw(value)
    wins = strategy is Strategy.POST_MERGE
    if kind is FieldKind.OBJECT:
        base = current if isinstance(current, Mapping) else {}
        return _deep_merge(base, value) if wins else _deep_merge(value, base)
    return thaw(value) if wins or empty(current) else current


def preset_wins(strategy: Strategy) -> bool:
    """Whether the preset's value beats the pod's where both set one."""
    return strategy in (Strategy.REPLACE, Strategy.POST_MERGE)


# --- internals ------------------------------------------------------------------------------


def _merge_metadata(pod: dict[str, Any], preset: Preset) -> None:
    for name, values in (("labels", preset.labels), ("annotations", preset.annotations)):
        if values:
            meta = dict_at(pod, "metadata")
            meta[name] = merge_field(FieldKind.MAP, name, meta.get(name), values, preset.strategy)


def _merge_spec(pod: dict[str, Any], preset: Preset, index: int | None) -> None:
    strategy = preset.strategy
    if preset.pod:
        spec = dict_at(pod, "spec")
        for name, value in preset.pod.items():
            spec[name] = merge_field(POD_FIELDS[name], name, spec.get(name), value, strategy)
    if not (preset.container or preset.resources) or index is None:
        return
    container = pod["spec"]["containers"][index]
    if not isinstance(container, dict):
        return
    for name, value in preset.container.items():
        container[name] = merge_field(CONTAINER_FIELDS[name], name, container.get(name), value, strategy)
    if preset.resources:
        resources = dict_at(container, "resources")
        before: dict[str, Mapping[str, Any]] = {
            part: dict(_map(resources.get(part))) for part in RESOURCE_FIELDS if part in resources
        }
        for part, amounts in preset.resources.items():
            resources[part] = merge_field(FieldKind.MAP, part, resources.get(part), amounts, strategy)
        _pair_up(resources, before, preset)


def _map(raw: object) -> Mapping[str, Any]:
    return raw if isinstance(raw, Mapping) else {}


def _pair_up(resources: dict[str, Any], before: Mapping[str, Mapping[str, Any]], preset: Preset) -> None:
    """Make each resource the preset names consistent between its request and its limit.

    When the pod wins, a resource it names on either side keeps its pair as it is: filling in
    the other side would depend on the amounts, which later presets may change, and the chain
    would not be idempotent.
    """
    asked = {part: _map(preset.resources.get(part)) for part in RESOURCE_FIELDS}
    had = {part: _map(before.get(part)) for part in RESOURCE_FIELDS}
    requests, limits = dict_at(resources, "requests"), dict_at(resources, "limits")
    for name in sorted({*asked["requests"], *asked["limits"]}):
        value = asked["limits"].get(name, asked["requests"].get(name))
        if not preset_wins(preset.strategy):
            if name in had["requests"] or name in had["limits"]:
                _restore(requests, had["requests"], name)
                _restore(limits, had["limits"], name)
            elif not overcommitable(name):
                limits[name] = value
            continue
        if not overcommitable(name):
            limits[name] = value
            if name in requests:
                requests[name] = value
            continue
        request, limit = amount(requests.get(name)), amount(limits.get(name))
        if request is None or limit is None or request <= limit:
            continue
        if name in asked["requests"] and name not in asked["limits"]:
            limits[name] = requests[name]
        elif name in asked["limits"] and name not in asked["requests"]:
            requests[name] = limits[name]
    for part in RESOURCE_FIELDS:
        if not resources[part] and part not in before:
            del resources[part]


def _restore(current: dict[str, Any], before: Mapping[str, Any], name: str) -> None:
    if name in before:
        current[name] = before[name]
    else:
        current.pop(name, None)


def dict_at(doc: dict[str, Any], *path: str) -> dict[str, Any]:
    """The dict at ``path``, creating (or replacing a null with) empty dicts on the way."""
    node = doc
    for name in path:
        child = node.get(name)
        if not isinstance(child, dict):
            child = node[name] = {}
        node = child
    return node


def _merge_map(current: Any, value: Mapping[str, Any], *, preset_wins: bool) -> dict[str, Any]:
    out: dict[str, Any] = dict(current) if isinstance(current, Mapping) else {}
    for key, item in value.items():
        if preset_wins or key not in out:
            out[key] = thaw(item)
    return out


def _replace_list(name: str, current: Any, value: list[Any]) -> list[Any]:
    """The preset's list, plus the items Kubernetes injected that the preset does not redefine.

    For lists that hold injected items the pod's order is kept for items the preset redefines
    (their order means nothing to Kubernetes), so that replacing after other merges, or again,
    gives the same list; the preset's other items follow in its order.
    """
    key_of, injected = LIST_KEYS[name], INJECTED.get(name)
    if injected is None or not isinstance(current, list):
        return thaw(value)  # type: ignore[no-any-return]
    ours = {key_of(item): item for item in value}
    out: list[Any] = []
    placed: set[ListKey] = set()
    for item in current:
        if not isinstance(item, Mapping):
            continue
        key = key_of(item)
        if key in ours:
            if key not in placed:
                out.append(thaw(ours[key]))
                placed.add(key)
        elif injected(item):
            out.append(item)
    out.extend(thaw(item) for item in value if key_of(item) not in placed)
    return out


def _injected_last(name: str, items: list[Any]) -> list[Any]:
    """The list with the items Kubernetes injected moved to its end, each part in its order.

    Kubernetes appends them there itself, and the order of tolerations, volumes and mounts means
    nothing to it; keeping them apart is what makes a chain of presets idempotent when one
    ``replace`` drops what a merge added before the injected items.
    """
    injected = INJECTED.get(name)
    if injected is None:
        return items
    tail = [i for i in items if isinstance(i, Mapping) and injected(i)]
    return [i for i in items if not (isinstance(i, Mapping) and injected(i))] + tail


def _merge_list(name: str, current: Any, value: list[Any], *, preset_wins: bool) -> list[Any]:
    key_of = LIST_KEYS[name]
    ours: dict[ListKey, Any] = {key_of(item): item for item in value}
    theirs = current if isinstance(current, list) else []
    seen: set[ListKey] = set()
    out = []
    for item in theirs:
        key = key_of(item) if isinstance(item, Mapping) else None
        if key is None:
            out.append(item)
            continue
        seen.add(key)
        out.append(thaw(ours[key]) if preset_wins and key in ours else item)
    out.extend(thaw(item) for item in value if key_of(item) not in seen)
    return out


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in; ``over`` wins on conflicts, nulls in it count as unset."""
    out: dict[str, Any] = thaw(base)
    for key, item in over.items():
        if item is None and key in out:
            continue
        mine = out.get(key)
        if isinstance(mine, Mapping) and isinstance(item, Mapping):
            out[key] = _deep_merge(mine, item)
        else:
            out[key] = thaw(item)
    return out
