"""Owner kinds' pod templates and gangs: where an owner keeps its templates, and how many pods
it makes of them.

An owner kind (``reviews.OWNERS``) names its pod templates by path patterns: a step ``*``
stands for every value of a map (a PyTorchJob's ``spec.pytorchReplicaSpecs.<Master|Worker>``)
or every item of a list (a RayCluster's ``spec.workerGroupSpecs[*]``). ``template_paths``
turns the patterns into the concrete paths an object has, map keys as strings and list
positions as ints.

The kinds whose pods must start together (a PyTorchJob's master and workers, a RayCluster's head
and workers) form one pod group without user labels: admission writes ``sluicegate.dev/group``
and ``sluicegate.dev/group-size`` on every template at the object's CREATE, the size counted from
its replica counts as its operator counts them (``pytorchjob_pods``, ``raycluster_pods``), the
name from the object's (``gang_name``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from policy import fields
from policy.fields import Obj

ANY: Final = "*"
"""A step of a template pattern: every value of a map, or every item of a list."""

Pattern = tuple[str, ...]
Path = tuple[str | int, ...]

GROUP_NAME_LENGTH: Final = 63
"""A label value's limit: a group name longer than this is cut and ends in a hash."""


def template_paths(obj: Obj, patterns: tuple[Pattern, ...]) -> tuple[Path, ...]:
    """The concrete paths of ``obj``'s pod templates, in the order of ``patterns`` and then of
    the object. A pattern without ``*`` names its one path whether it is there or not."""
    out: list[Path] = []
    for pattern in patterns:
        out.extend(_expand(obj, pattern, ()))
    return tuple(out)


def _expand(node: object, pattern: Pattern, at: Path) -> list[Path]:
    if not pattern:
        return [at]
    step, rest = pattern[0], pattern[1:]
    if step != ANY:
        child = node.get(step) if isinstance(node, Mapping) else None
        return _expand(child, rest, (*at, step))
    if isinstance(node, Mapping):
        return [p for key in node for p in _expand(node[key], rest, (*at, str(key)))]
    if isinstance(node, list):
        return [p for i, item in enumerate(node) for p in _expand(item, rest, (*at, i))]
    return []


def at(root: Obj, path: Path) -> Obj:
    """The object at ``path`` below ``root``; empty where any step is missing."""
    node: object = root
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, Mapping) else None
    return fields.obj(node)


def dict_at(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """The dict at ``path`` in a thawed document, creating empty dicts for missing map steps
    (a list position must exist: ``template_paths`` only names those)."""
    node: Any = doc
    for step in path:
        if isinstance(step, int):
            node = node[step]
            continue
        child = node.get(step)
        if not isinstance(child, dict | list):
            child = node[step] = {}
        node = child
    if not isinstance(node, dict):
        raise TypeError(f"not an object at {shown(path)}")
    return node


def shown(path: Path) -> str:
    """A path as field paths are written in messages: ``spec.workerGroupSpecs[0].template``."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


# --- gangs ----------------------------------------------------------------------------------


def _count(raw: object, default: int) -> int:
    """A replica count as the API server stores it; anything else counts as ``default``."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    return default


def pytorchjob_pods(job: Obj) -> int:
    """The pods a PyTorchJob runs: the sum of its replica types' ``replicas`` (1 when absent, as
    the training operator defaults it)."""
    specs = fields.obj(fields.obj(job.get("spec")).get("pytorchReplicaSpecs"))
    return sum(_count(fields.obj(spec).get("replicas"), 1) for spec in specs.values())


_MAX_REPLICAS: Final = 2**31 - 1
"""A worker group's ``maxReplicas`` when absent (the CRD's default)."""


def raycluster_pods(cluster: Obj) -> int:
    """The pods a RayCluster starts with: its head, and each worker group's desired replicas as
    KubeRay counts them (``replicas`` held between ``minReplicas`` and ``maxReplicas``, times
    ``numOfHosts``; none for a suspended group)."""
    spec = fields.obj(cluster.get("spec"))
    groups = spec.get("workerGroupSpecs")
    total = 1
    for raw in groups if isinstance(groups, list) else ():
        group = fields.obj(raw)
        if group.get("suspend") is True:
            continue
        low = _count(group.get("minReplicas"), 0)
        high = _count(group.get("maxReplicas"), _MAX_REPLICAS)
        wanted = group.get("replicas")
        if low > high:
            replicas = high
        elif not isinstance(wanted, int) or _count(wanted, 0) < low:
            replicas = low
        else:
            replicas = min(wanted, high)
        total += replicas * max(_count(group.get("numOfHosts"), 1), 1)
    return total


def gang_name(kind: str, meta: Obj, now: datetime) -> str:
    """The pod group of one object: its kind and name, and a short hash of the instant of its
    admission, so that an object deleted and created again under its name forms a new group
    while the old one's pods are still ending. An object named by ``generateName`` has no name
    yet at admission: the prefix is used. Cut to a label value's length, ending in a hash."""
    name = str(meta.get("name") or meta.get("generateName") or "").strip("-.")
    seed = f"{kind}/{meta.get('namespace') or ''}/{name}/{now.isoformat()}"
    digest = hashlib.sha256(seed.encode()).hexdigest()
    out = f"{kind.lower()}-{name}-{digest[:6]}" if name else f"{kind.lower()}-{digest[:6]}"
    if len(out) <= GROUP_NAME_LENGTH:
        return out
    head = out[: GROUP_NAME_LENGTH - 11].rstrip("-._")
    return f"{head}-{digest[6:16]}"
