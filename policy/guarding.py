"""Guarding what admission wrote: on UPDATE, Sluicegate's keys and gate belong to its controller.

Once a pod exists, removing the scheduling gate would release it without dispatch, and changing
its queue, team, submitter or group would move it past the checks its CREATE passed. Only the
controller's service account may do either; ``admitting.review`` calls ``guard`` for everyone
else. The same holds for the pod template of an owner (a suspended Job's template can change).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from policy import fields, keys
from policy.fields import Obj
from policy.reviews import OWNER_TEMPLATES, POD, Admit, Decision, Deny, Request


def guard(request: Request) -> Decision:
    """Refuse an UPDATE that removes the gate or touches a ``sluicegate.dev/`` label or
    annotation; the caller has checked that the requester is not the controller."""
    old = request.old_object or MappingProxyType({})
    new = request.object
    if request.kind == POD:
        noun = "a pod"
        if gated(old) and not gated(new):
            return Deny(
                f"only Sluicegate's controller may remove the scheduling gate {keys.GATE}; "
                "the pod starts when its queue dispatches it"
            )
    elif request.kind in OWNER_TEMPLATES:
        noun = f"the pod template of a {request.kind.kind}"
        path = OWNER_TEMPLATES[request.kind]
        old, new = fields.at(old, path), fields.at(new, path)
    else:
        return Admit()
    old_meta, new_meta = fields.obj(old.get("metadata")), fields.obj(new.get("metadata"))
    for what, field in (("label", "labels"), ("annotation", "annotations")):
        before, after = fields.obj(old_meta.get(field)), fields.obj(new_meta.get(field))
        for key in sorted({*before, *after}):
            if not key.startswith(keys.PREFIX) or before.get(key) == after.get(key):
                continue
            if key not in before:
                change = "added to"
            elif key not in after:
                change = "removed from"
            else:
                change = "changed on"
            return Deny(
                f"{what} {key} cannot be {change} {noun} once it exists: only Sluicegate's "
                f"controller may change {keys.PREFIX} labels and annotations"
            )
    return Admit()


def gated(pod: Obj) -> bool:
    """The pod carries Sluicegate's scheduling gate."""
    gates = fields.obj(pod.get("spec")).get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == keys.GATE for g in gates
    )
