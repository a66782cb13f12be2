"""The JSON shapes of the objects admission reads, as an API server sends them.

An API server decodes every object into its typed form before admission, so a pod always
arrives with ``spec.containers`` a list of objects and label values strings. Admission reads
requests leniently elsewhere; this module is the one gate that refuses a shape no API server
sends (``containers: 5``, labels that are numbers) with ``MalformedReview``, which the webhook
answers with HTTP 400, instead of letting it fail somewhere deep inside a decision.

Only the fields admission reads are described; anything else may be anything. ``null`` counts
as absent everywhere, as it does in Kubernetes' JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from policy.fields import Obj
from policy.owners import ANY, Pattern
from policy.reviews import OWNERS, POD, MalformedReview, Operation, Request


class _AnyObject:
    """Any JSON object."""


class _StringMap:
    """An object whose values are all strings (labels, annotations, a node selector)."""


@dataclass(frozen=True, slots=True)
class _Each:
    """A list, or an object keyed by any names, every item of which fits ``shape`` (the
    ``*`` step of an owner's template pattern)."""

    shape: Shape


Shape = type | _AnyObject | _StringMap | _Each | list["Shape"] | dict[str, "Shape"]

ANY_OBJECT: Final = _AnyObject()
STRING_MAP: Final = _StringMap()

_RESOURCES: Final[Shape] = {"requests": ANY_OBJECT, "limits": ANY_OBJECT}
_CONTAINER: Final[Shape] = {
    "name": str,
    "restartPolicy": str,
    "resources": _RESOURCES,
    "env": [{"name": str}],
    "envFrom": [{"configMapRef": {"name": str}, "secretRef": {"name": str}}],
    "volumeMounts": [{"name": str, "mountPath": str}],
}
_METADATA: Final[Shape] = {
    "name": str,
    "namespace": str,
    "labels": STRING_MAP,
    "annotations": STRING_MAP,
    "ownerReferences": [{"apiVersion": str, "kind": str, "name": str, "controller": bool}],
}
POD_SHAPE: Final[Shape] = {
    "metadata": _METADATA,
    "spec": {
        "containers": [_CONTAINER],
        "initContainers": [_CONTAINER],
        "nodeName": str,
        "nodeSelector": STRING_MAP,
        "schedulingGates": [{"name": str}],
        "tolerations": [{"key": str, "effect": str}],
        "volumes": [{"name": str}],
        "affinity": ANY_OBJECT,
        "priorityClassName": str,
        "runtimeClassName": str,
        "priority": int,
        "overhead": ANY_OBJECT,
        "resources": _RESOURCES,
    },
}
"""A pod, or a pod template (metadata and spec)."""


def check_request(request: Request) -> None:
    """Raise ``MalformedReview`` when the objects of a CREATE or UPDATE of a pod or an owner
    kind are of a shape no API server sends."""
    if request.operation not in (Operation.CREATE, Operation.UPDATE):
        return
    objects = [("object", request.object)]
    if request.operation is Operation.UPDATE and request.old_object is not None:
        objects.append(("oldObject", request.old_object))
    for name, obj in objects:
        if request.kind == POD:
            check(obj, POD_SHAPE, name)
        elif request.kind in OWNERS:
            check(obj, owner_shape(OWNERS[request.kind].templates), name)


def owner_shape(templates: tuple[Pattern, ...]) -> Shape:
    """An owner object: its metadata, and a pod template at each of ``templates``."""
    shape: dict[str, Shape] = {"metadata": _METADATA}
    for pattern in templates:
        _place(shape, pattern)
    return shape


def _place(shape: dict[str, Shape], pattern: Pattern) -> None:
    """Add a pod template at ``pattern`` to ``shape``, beside what it describes already."""
    step, rest = pattern[0], pattern[1:]
    if not rest:
        shape[step] = POD_SHAPE
        return
    if rest[0] == ANY:
        inner = shape.get(step)
        each = inner.shape if isinstance(inner, _Each) and isinstance(inner.shape, dict) else {}
        _place(each, rest[1:])
        shape[step] = _Each(each)
        return
    child = shape.get(step)
    nested: dict[str, Shape] = child if isinstance(child, dict) else {}
    _place(nested, rest)
    shape[step] = nested


def check(value: object, shape: Shape, where: str) -> None:
    """Raise ``MalformedReview`` naming the first field of ``value`` that does not fit ``shape``."""
    if value is None:
        return
    if isinstance(shape, type):
        # A bool is an int to Python but never to Kubernetes.
        if not isinstance(value, shape) or (shape is int and isinstance(value, bool)):
            raise MalformedReview(f"{where}: expected {_NAMES[shape]}, got {_show(value)}")
    elif isinstance(shape, _AnyObject):
        _object(value, where)
    elif isinstance(shape, _Each):
        if isinstance(value, list):
            items: list[tuple[str, object]] = [(f"{where}[{i}]", item) for i, item in enumerate(value)]
        else:
            items = [(f"{where}.{key}", item) for key, item in _object(value, where).items()]
        for at, item in items:
            if item is None:
                raise MalformedReview(f"{at}: expected an object, got null")
            check(item, shape.shape, at)
    elif isinstance(shape, _StringMap):
        for key, item in _object(value, where).items():
            if not isinstance(item, str):
                raise MalformedReview(f"{where}.{key}: expected a string, got {_show(item)}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise MalformedReview(f"{where}: expected a list, got {_show(value)}")
        for i, item in enumerate(value):
            if item is None:
                raise MalformedReview(f"{where}[{i}]: expected an object, got null")
            check(item, shape[0], f"{where}[{i}]")
    else:
        data = _object(value, where)
        for name, inner in shape.items():
            check(data.get(name), inner, f"{where}.{name}")


def _object(value: object, where: str) -> Obj:
    if not isinstance(value, Mapping):
        raise MalformedReview(f"{where}: expected an object, got {_show(value)}")
    return value


_NAMES: Final = {str: "a string", int: "a whole number", bool: "true or false"}


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
