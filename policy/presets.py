"""Presets: reusable pod shapes that admins own and admission merges into pods.

A preset sets *fields* of a pod. ``Preset.parse`` checks its spec and keeps only the fields it
gives a non-empty value: an empty map, list or string in a preset means "this preset does not
set that field", so a preset never wipes a pod's field by accident. How the fields are merged
into a pod is ``merging``'s business; this module only says what the fields are.

Fields, by kind (the kind decides how each strategy treats them, see ``merging``):

- maps, combined key by key: ``metadata.labels``, ``metadata.annotations``,
  ``spec.nodeSelector``, and the main container's ``resources.requests`` and
  ``resources.limits``;
- keyed lists, whose items are matched by a natural key (``LIST_KEYS``): ``spec.tolerations``,
  ``spec.volumes`` and the main container's ``env``, ``envFrom`` and ``volumeMounts``;
- objects: ``spec.affinity``;
- strings: ``spec.priorityClassName``, ``spec.runtimeClassName``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

from policy import fields, keys
from policy.fields import InvalidObject, Obj
from policy.validating import resource_problems


class Strategy(StrEnum):
    """How a preset's fields meet the pod's (``spec.patchStrategy``)."""

    REPLACE = "replace"  # the preset's value replaces the pod's
    ISNULL = "isnull"  # the preset fills only what the pod left empty
    POST_MERGE = "post_merge"  # merged, the preset wins on conflicts
    PRE_MERGE = "pre_merge"  # merged, the pod wins on conflicts


class FieldKind(StrEnum):
    MAP = "map"
    LIST = "list"
    OBJECT = "object"
    STRING = "string"


ListKey = tuple[str, ...]


def _env_from_key(item: Obj) -> ListKey:
    for ref in ("configMapRef", "secretRef"):
        source = item.get(ref)
        if isinstance(source, Mapping):
            return (ref, str(source.get("name") or ""))
    return ("", "")


LIST_KEYS: Final[Mapping[str, Callable[[Obj], ListKey]]] = MappingProxyType({
    # A toleration is identified by the taint it tolerates: its key and effect ("" = any effect).
    "tolerations": lambda t: (str(t.get("key") or ""), str(t.get("effect") or "")),
    "volumes": lambda v: (str(v.get("name") or ""),),
    "env": lambda e: (str(e.get("name") or ""),),
    # The same ConfigMap or Secret imported twice is one source, whatever its prefix.
    "envFrom": _env_from_key,
    # A path holds one mount; the same volume may be mounted at several paths.
    "volumeMounts": lambda m: (str(m.get("mountPath") or ""),),
})
"""The natural key of each list's items, by the list's field name."""

INJECTED: Final[Mapping[str, Callable[[Obj], bool]]] = MappingProxyType({
    # DefaultTolerationSeconds adds not-ready and unreachable; every node.kubernetes.io/ taint is
    # Kubernetes' own node-lifecycle machinery, never a preset's to take away.
    "tolerations": lambda t: str(t.get("key") or "").startswith(keys.NODE_TAINT_PREFIX),
    # The ServiceAccount admission plugin's projected token volume and its mount.
    "volumes": lambda v: str(v.get("name") or "").startswith(keys.SERVICE_ACCOUNT_VOLUME_PREFIX),
    "volumeMounts": lambda m: (
        m.get("mountPath") == keys.SERVICE_ACCOUNT_TOKEN_PATH
        or str(m.get("name") or "").startswith(keys.SERVICE_ACCOUNT_VOLUME_PREFIX)
    ),
})
"""List items that Kubernetes put in the pod before Sluicegate saw it; every strategy keeps them."""

POD_FIELDS: Final[Mapping[str, FieldKind]] = MappingProxyType({
    "nodeSelector": FieldKind.MAP,
    "tolerations": FieldKind.LIST,
    "affinity": FieldKind.OBJECT,
    "priorityClassName": FieldKind.STRING,
    "runtimeClassName": FieldKind.STRING,
    "volumes": FieldKind.LIST,
})
"""What ``spec.pod`` may set on the pod's spec."""

CONTAINER_FIELDS: Final[Mapping[str, FieldKind]] = MappingProxyType({
    "env": FieldKind.LIST,
    "envFrom": FieldKind.LIST,
    "volumeMounts": FieldKind.LIST,
})
"""What ``spec.container`` may set on the main container, besides ``resources``."""

RESOURCE_FIELDS: Final = ("requests", "limits")

_SPEC_FIELDS: Final = frozenset(
    {"patchStrategy", "queue", "workflowMaxRunning", "metadata", "pod", "container"}
)


@dataclass(frozen=True, slots=True)
class Preset:
    """A parsed preset. ``pod`` and ``container`` hold only the fields the preset sets.

    ``resources`` maps ``requests``/``limits`` to the quantity strings as written (the pod
    receives them verbatim); they were checked to be quantities when parsed.
    """

    name: str
    strategy: Strategy = Strategy.REPLACE
    queue: str = ""
    workflow_max_running: int | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    pod: Obj = field(default_factory=lambda: MappingProxyType({}))
    container: Obj = field(default_factory=lambda: MappingProxyType({}))
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def sets_anything(self) -> bool:
        return bool(self.labels or self.annotations or self.pod or self.container or self.resources)

    @classmethod
    def parse(cls, obj: Obj) -> Preset:
        meta = fields.mapping(obj.get("metadata"), "Preset.metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidObject("Preset: metadata.name is missing")
        where = f"Preset {name}: spec"
        spec = fields.mapping(obj.get("spec"), where)
        _known(spec, _SPEC_FIELDS, where)
        strategy = spec.get("patchStrategy") or Strategy.REPLACE.value
        if strategy not in Strategy.__members__.values():
            raise InvalidObject(
                f"{where}.patchStrategy: {strategy!r} is not one of "
                + ", ".join(s.value for s in Strategy)
            )
        queue = spec.get("queue") or ""
        if not isinstance(queue, str):
            raise InvalidObject(f"{where}.queue: expected a queue name, got {queue!r}")
        metadata = fields.mapping(spec.get("metadata"), f"{where}.metadata")
        _known(metadata, frozenset({"labels", "annotations"}), f"{where}.metadata")
        container = fields.mapping(spec.get("container"), f"{where}.container")
        _known(container, frozenset({*CONTAINER_FIELDS, "resources"}), f"{where}.container")
        return cls(
            name=name,
            strategy=Strategy(strategy),
            queue=queue.strip(),
            workflow_max_running=fields.positive(
                spec.get("workflowMaxRunning"), f"{where}.workflowMaxRunning"
            ),
            labels=_strings(metadata.get("labels"), f"{where}.metadata.labels"),
            annotations=_strings(metadata.get("annotations"), f"{where}.metadata.annotations"),
            pod=_fields(spec.get("pod"), POD_FIELDS, f"{where}.pod"),
            container=_fields(
                {k: v for k, v in container.items() if k != "resources"},
                CONTAINER_FIELDS,
                f"{where}.container",
            ),
            resources=_resources(container.get("resources"), f"{where}.container.resources"),
        )


# --- checks ---------------------------------------------------------------------------------


def _known(data: Obj, allowed: frozenset[str], where: str) -> None:
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise InvalidObject(
            f"{where}: unknown field {', '.join(unknown)} (known: {', '.join(sorted(allowed))})"
        )


def _strings(raw: object, where: str) -> Mapping[str, str]:
    data = fields.mapping(raw, where)
    for key, value in data.items():
        if not isinstance(value, str):
            raise InvalidObject(f"{where}.{key}: expected a string, got {value!r}")
        if str(key).startswith(keys.PREFIX):
            raise InvalidObject(
                f"{where}.{key}: presets may not set {keys.PREFIX} keys "
                "(use spec.queue and spec.workflowMaxRunning)"
            )
    return MappingProxyType(dict(data))


def _fields(raw: object, kinds: Mapping[str, FieldKind], where: str) -> Obj:
    data = fields.mapping(raw, where)
    _known(data, frozenset(kinds), where)
    out: dict[str, Any] = {}
    for name, value in data.items():
        at = f"{where}.{name}"
        kind = kinds[name]
        if value is None or value == "" or value == {} or value == []:
            continue  # an empty value sets nothing
        if kind is FieldKind.STRING and not isinstance(value, str):
            raise InvalidObject(f"{at}: expected a string, got {value!r}")
        if kind is FieldKind.OBJECT:
            fields.mapping(value, at)
        if kind is FieldKind.MAP:
            value = dict(fields.labels(value, at))
        if kind is FieldKind.LIST:
            _keyed_list(value, name, at)
        out[name] = copy.deepcopy(value)
    return MappingProxyType(out)


def _keyed_list(raw: object, name: str, where: str) -> None:
    if not isinstance(raw, list):
        raise InvalidObject(f"{where}: expected a list, got {type(raw).__name__}")
    key_of = LIST_KEYS[name]
    seen: set[ListKey] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise InvalidObject(f"{where}[{i}]: expected an object, got {item!r}")
        key = key_of(item)
        if name != "tolerations" and not all(key):
            raise InvalidObject(f"{where}[{i}]: {_KEY_NAMES[name]} is missing")
        if key in seen:
            raise InvalidObject(f"{where}[{i}]: {_KEY_NAMES[name]} {'/'.join(key)!r} appears twice")
        seen.add(key)


_KEY_NAMES: Final = {
    "tolerations": "key and effect",
    "volumes": "name",
    "env": "name",
    "envFrom": "configMapRef.name or secretRef.name",
    "volumeMounts": "mountPath",
}


def _resources(raw: object, where: str) -> Mapping[str, Mapping[str, Any]]:
    """Requests and limits, each checked to be quantities; a resource the preset sets on both
    sides must be consistent by itself (request at most the limit; equal for GPUs)."""
    data = fields.mapping(raw, where)
    _known(data, frozenset(RESOURCE_FIELDS), where)
    out: dict[str, Mapping[str, Any]] = {}
    for part in RESOURCE_FIELDS:
        amounts = fields.mapping(data.get(part), f"{where}.{part}")
        fields.resources(amounts, f"{where}.{part}")
        if amounts:
            out[part] = MappingProxyType(dict(amounts))
    both = set(out.get("requests", {})) & set(out.get("limits", {}))
    paired = {part: {k: v for k, v in out.get(part, {}).items() if k in both} for part in RESOURCE_FIELDS}
    problems = resource_problems(paired, where)
    if problems:
        raise InvalidObject(min(problems))
    return MappingProxyType(out)
