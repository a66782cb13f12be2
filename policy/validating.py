"""What the API server would refuse in the fields presets set: resources, volume mounts and
tolerations.

Admission merges presets into a pod that the API server validates afterwards. A merge that
produced a pod the API server rejects would show the user an error about fields they never
wrote, so admission checks the rules a preset can break and refuses the merge itself, naming
the preset (``admitting``). The rules, as Kubernetes states them:

- a request is at most its limit; for resources that cannot be overcommitted (extended resources
  such as GPUs, and hugepages) a request equals its limit, and a request needs a limit;
- every volume mount names a volume of the pod;
- a toleration's operator is ``Equal`` (or empty) or ``Exists``; ``Exists`` has no value; an
  empty key needs ``Exists``; the effect is empty, ``NoSchedule``, ``PreferNoSchedule`` or
  ``NoExecute``; ``tolerationSeconds`` goes only with ``NoExecute``.

Problems are described by container name and mount path rather than by list index, so the
problems of a pod before and after a merge compare as sets.
"""

from __future__ import annotations

from collections.abc import Mapping

from policy import fields
from policy.fields import Obj
from policy.quantities import parse


def overcommitable(resource: str) -> bool:
    """Kubernetes lets a request stay below its limit only for native resources other than
    hugepages; an extended resource (``nvidia.com/gpu``) or hugepages needs request = limit."""
    native = "/" not in resource or "kubernetes.io/" in resource
    return native and not resource.startswith("hugepages-")


def amount(value: object) -> int | None:
    """A quantity in milli-units, or None when it cannot be read (then no rule applies)."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    try:
        return parse(value)
    except (ValueError, ArithmeticError):
        return None


def resource_problems(resources: object, subject: str) -> set[str]:
    """Requests and limits that break Kubernetes' rules, for one container's ``resources``."""
    requests = fields.obj(fields.obj(resources).get("requests"))
    limits = fields.obj(fields.obj(resources).get("limits"))
    out = set()
    for name in sorted({*requests, *limits}):
        request, limit = amount(requests.get(name)), amount(limits.get(name))
        asked, cap = _written(requests.get(name)), _written(limits.get(name))
        if not overcommitable(name):
            if name in requests and name not in limits:
                out.add(f"{subject} requests {name} without a limit, which {name} needs")
            elif request is not None and limit is not None and request != limit:
                out.add(
                    f"{subject} requests {asked} {name} but its limit is {cap}; "
                    f"{name} needs request = limit"
                )
        elif request is not None and limit is not None and request > limit:
            out.add(f"{subject} requests {asked} {name}, more than its limit {cap}")
    return out


def _written(value: object) -> str:
    """A quantity as its author wrote it, cut short when it is absurdly long."""
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def problems(pod: Obj) -> frozenset[str]:
    """Every way the pod's containers break the rules above."""
    spec = fields.obj(pod.get("spec"))
    volumes = {
        v.get("name") for v in _items(spec.get("volumes")) if isinstance(v.get("name"), str)
    }
    out: set[str] = set()
    for field in ("containers", "initContainers"):
        for i, container in enumerate(_items(spec.get(field))):
            name = container.get("name")
            subject = f'container "{name}"' if isinstance(name, str) and name else f"spec.{field}[{i}]"
            out |= resource_problems(container.get("resources"), subject)
            for mount in _items(container.get("volumeMounts")):
                volume = mount.get("name")
                if volume not in volumes:
                    out.add(
                        f'{subject} mounts volume "{volume}" at {mount.get("mountPath")}, '
                        "which spec.volumes does not have"
                    )
    for toleration in _items(spec.get("tolerations")):
        out |= toleration_problems(toleration)
    return frozenset(out)


OPERATORS = frozenset({"", "Equal", "Exists"})
EFFECTS = frozenset({"", "NoSchedule", "PreferNoSchedule", "NoExecute"})


def toleration_problems(toleration: Obj) -> set[str]:
    """How one toleration breaks Kubernetes' rules (described by its key, so that the problems
    before and after a merge compare as sets)."""
    key, operator, value, effect = (_text(toleration.get(f)) for f in ("key", "operator", "value", "effect"))
    subject = f'the toleration of key "{key}"' if key else "a toleration without a key"
    out = set()
    if operator not in OPERATORS:
        out.add(f"{subject} has operator {_written(operator)}; it must be Equal or Exists")
    elif operator == "Exists" and value:
        out.add(f"{subject} has operator Exists and a value; Exists takes no value")
    elif not key and operator != "Exists":
        out.add(f"{subject} has operator {operator or 'Equal'}; an empty key needs Exists")
    if effect not in EFFECTS:
        out.add(f"{subject} has effect {_written(effect)}; it must be NoSchedule, PreferNoSchedule or "
                "NoExecute")
    elif toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        out.add(f"{subject} has tolerationSeconds, which only effect NoExecute takes")
    return out


def _text(value: object) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def _items(raw: object) -> list[Obj]:
    return [item for item in raw if isinstance(item, Mapping)] if isinstance(raw, list) else []
