"""Guarding what admission wrote: on UPDATE, Sluicegate's keys and gate belong to its controller.

Once a pod exists, removing the scheduling gate would release it without dispatch, and changing
its queue, team, submitter or group would move it past the checks its CREATE passed. Only the
controller's service account may do either; ``admitting.review`` calls ``guard`` for everyone
else. The same holds for the pod template of an owner (a suspended Job's template can change).

Break glass: a person allowed the verb ``release`` on the pod's Queue
(``kubectl auth can-i release queues.sluicegate.dev/<name>``) may remove the gate by hand in
an emergency. The webhook asks ``release_queue`` which queue a request needs that permission
on, asks the API server with a SubjectAccessReview, and passes the answer as ``may_release``;
the ``Admit`` it gets back carries a ``Release`` to log and record as an Event. Sluicegate's
keys stay the controller's even then.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType

from policy import fields, keys
from policy.fields import Obj
from policy.pods import Submitter
from policy.reviews import OWNER_TEMPLATES, POD, Admit, Decision, Deny, Operation, Release, Request


def release_queue(request: Request, controller: str) -> str | None:
    """The queue whose ``release`` permission decides this request, or None.

    A request needs it when it is an UPDATE of a pod (not a subresource) by anyone but the
    controller that removes Sluicegate's gate from a pod admitted to a queue.
    """
    if request.operation is not Operation.UPDATE or request.kind != POD or request.subresource:
        return None
    if request.user == controller or request.old_object is None:
        return None
    if not gated(request.old_object) or gated(request.object):
        return None
    labels = fields.string_map(fields.obj(request.old_object.get("metadata")).get("labels"))
    return labels.get(keys.QUEUE_LABEL) or None


def guard(
    request: Request, *, may_release: bool = False, trusted: Collection[str] = ()
) -> Decision:
    """Refuse an UPDATE that removes the gate or touches a ``sluicegate.dev/`` label or
    annotation; the caller has checked that the requester is not the controller.

    ``may_release``: the requester may ``release`` the queue ``release_queue`` named, so removing
    the gate is a break-glass release rather than a bypass.

    An owner's stamped pod template belongs to the person the stamp names: anyone else (but a
    ``trusted`` controller) who changes it is refused, since its pods would run as that person.
    """
    old = request.old_object or MappingProxyType({})
    new = request.object
    release = None
    if request.kind == POD:
        noun = "a pod"
        if gated(old) and not gated(new):
            queue = fields.string_map(fields.obj(old.get("metadata")).get("labels")).get(keys.QUEUE_LABEL)
            if not (may_release and queue):
                return Deny(
                    f"only Sluicegate's controller may remove the scheduling gate {keys.GATE}; "
                    "the pod starts when its queue dispatches it"
                )
            meta = fields.obj(new.get("metadata"))
            release = Release(f"{meta.get('namespace')}/{meta.get('name')}", queue, request.user)
    elif request.kind in OWNER_TEMPLATES:
        noun = f"the pod template of a {request.kind.kind}"
        path = OWNER_TEMPLATES[request.kind]
        old, new = fields.at(old, path), fields.at(new, path)
        if old != new and request.user not in trusted:
            owned = _someone_elses(old, request)
            if owned is not None:
                return owned
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
    return Admit(release=release)


def _someone_elses(template: Obj, request: Request) -> Deny | None:
    """The refusal for changing a template stamped for someone other than the requester."""
    notes = fields.string_map(fields.obj(template.get("metadata")).get("annotations"))
    raw = notes.get(keys.SUBMITTER_ANNOTATION)
    if raw is None:
        return None
    stamped = Submitter.from_annotation(raw)
    if stamped is not None and stamped.user == request.user:
        return None
    owner = f"user {stamped.user}" if stamped is not None else f'"{raw}"'
    return Deny(
        f"the pod template of this {request.kind.kind} was submitted by {owner} "
        f"(annotation {keys.SUBMITTER_ANNOTATION}) and only they may change it: its pods run as "
        f"{owner}'s; create a {request.kind.kind} of your own instead"
    )


def gated(pod: Obj) -> bool:
    """The pod carries Sluicegate's scheduling gate."""
    gates = fields.obj(pod.get("spec")).get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == keys.GATE for g in gates
    )
