"""Guarding what admission wrote: on UPDATE, Sluicegate's keys and gate belong to its controller.

Once a pod exists, removing the scheduling gate would release it without dispatch, and changing
its queue, team, submitter or group would move it past the checks its CREATE passed. Only the
controller's service account may do either; ``admitting.review`` calls ``guard`` for everyone
else. The same holds for the keys Sluicegate writes on the pod template of an owner; the keys
users write there (queue, presets, workflow, group) may change with the rest of the template,
which admission then judges again as at CREATE.

A stamped Job or CronJob belongs to the person its stamp names: its pods run, and count, as
theirs. So anyone else (but a trusted controller) is refused any change to its spec that
changes what runs or how much (``owner_changes``): its template, parallelism, completions,
schedule, deadlines, everything but one field. Anyone allowed to edit it may still suspend it
(``spec.suspend: true``), an emergency brake; resuming it is again the submitter's.

Break glass: a person allowed the verb ``release`` on the pod's Queue
(``kubectl auth can-i release queues.sluicegate.dev/<name>``) may remove the gate by hand in
an emergency. The webhook asks ``release_queue`` which queue a request needs that permission
on, asks the API server with a SubjectAccessReview, and passes the answer as ``may_release``;
the ``Admit`` it gets back carries a ``Release`` to log and record as an Event. Sluicegate's
keys stay the controller's even then.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from policy import fields, keys
from policy.fields import Obj
from policy.model import Policy
from policy.owners import ANY, Path, Pattern, at, shown, template_paths
from policy.pods import Submitter
from policy.reviews import (
    CRONJOB,
    DEPLOYMENT,
    JOB,
    OWNERS,
    POD,
    RAYCLUSTER,
    RAYJOB,
    REPLICASET,
    REPLICATIONCONTROLLER,
    STATEFULSET,
    Admit,
    Decision,
    Deny,
    Kind,
    Operation,
    OwnerKind,
    Release,
    Request,
)

DEFAULT_POLICY: Final = Policy()


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


def guard(request: Request, *, may_release: bool = False, policy: Policy = DEFAULT_POLICY) -> Decision:
    """Refuse an UPDATE that removes the gate or touches a ``sluicegate.dev/`` label or
    annotation; the caller has checked that the requester is not the controller.

    ``may_release``: the requester may ``release`` the queue ``release_queue`` named, so removing
    the gate is a break-glass release rather than a bypass.

    A stamped owner (Job, CronJob) belongs to the person the stamp names: anyone else (but a
    controller the ``policy`` trusts, or an operator account it names) who changes what it runs
    is refused, since its pods would run and count as that person's.
    """
    old = request.old_object or MappingProxyType({})
    new = request.object
    release = None
    pairs: list[tuple[Obj, Obj]] = [(old, new)]
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
    elif request.kind in OWNERS:
        noun = f"the pod template of a {request.kind.kind}"
        row = OWNERS[request.kind]
        if not _trusted(request.user, row, policy):
            owned = _someone_elses(request, row)
            if owned is not None:
                return owned
        paths = dict.fromkeys((*template_paths(old, row.templates), *template_paths(new, row.templates)))
        pairs = [(at(old, path), at(new, path)) for path in paths]
    else:
        return Admit()
    for before_template, after_template in pairs:
        refused = _keys_changed(request, noun, before_template, after_template)
        if refused is not None:
            return refused
    return Admit(release=release)


def _trusted(user: str, row: OwnerKind, policy: Policy) -> bool:
    """A controller the Policy trusts, or the operator account it names for the kind."""
    return user in policy.trusted_controllers or (
        bool(row.operator) and policy.operator_accounts.get(row.operator) == user
    )


def _keys_changed(request: Request, noun: str, old: Obj, new: Obj) -> Deny | None:
    """The refusal for a ``sluicegate.dev/`` key of a pod (or one template) changed by hand."""
    old_meta, new_meta = fields.obj(old.get("metadata")), fields.obj(new.get("metadata"))
    for what, field in (("label", "labels"), ("annotation", "annotations")):
        before, after = fields.obj(old_meta.get(field)), fields.obj(new_meta.get(field))
        for key in sorted({*before, *after}):
            if not key.startswith(keys.PREFIX) or before.get(key) == after.get(key):
                continue
            if request.kind != POD and (
                key in (keys.USER_LABELS if field == "labels" else keys.USER_ANNOTATIONS)
                or _stamps_itself(request, field, key, before, after)
            ):
                continue  # a template's own choices: judged again as a whole (``admitting``)
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
    return None


def _stamps_itself(request: Request, field: str, key: str, before: Obj, after: Obj) -> bool:
    """The submitter stamp added to an owner's template that had none, naming the account that
    changes it: admission stamps an unstamped template when it changes (``admitting``), and the
    final check sees that stamp as added. An unstamped owner is anyone's with RBAC to change."""
    return (
        field == "annotations"
        and key == keys.SUBMITTER_ANNOTATION
        and key not in before
        and after.get(key) == request.creator.to_annotation()
    )


def _someone_elses(request: Request, row: OwnerKind) -> Deny | None:
    """The refusal for changing what an owner stamped for someone other than the requester runs."""
    before = request.old_object or fields.EMPTY_OBJ
    raw = next(
        (
            stamp
            for path in template_paths(before, row.templates)
            if (stamp := _stamp(at(before, path))) is not None
        ),
        None,
    )
    if raw is None:
        return None
    stamped = Submitter.from_annotation(raw)
    if stamped is not None and stamped.user == request.user:
        return None
    changed = owner_changes(before, request.object, row.templates, row.scaling)
    if not changed:
        return None
    kind = request.kind.kind
    name = fields.obj(before.get("metadata")).get("name")
    owner = f"user {stamped.user}" if stamped is not None else f'"{raw}"'
    scaled = "" if not row.scaling else f", or scale it ({', '.join(shown(p) for p in row.scaling)})"
    return Deny(
        f"{kind} {name} was submitted by {owner} (annotation {keys.SUBMITTER_ANNOTATION} on its pod "
        f"template) and only they may change what it runs or how much ({', '.join(changed)}): its "
        f"pods run and count as {owner}'s; create a {kind} of your own instead.{_brake(request.kind, scaled)}"
    )


def _brake(kind: Kind, scaled: str) -> str:
    """What the refusal tells anyone allowed to edit an object of ``kind`` they may still do to
    stop its pods: suspend it, where its kind has ``spec.suspend``; scale it to zero, where it
    has the scale subresource and no ``spec.suspend``; else nothing."""
    if kind in SUSPENDED:
        return f" Anyone allowed to edit it may still suspend it (spec.{SUSPEND}: true){scaled}"
    if kind in SCALED:
        return " Anyone allowed to edit it may still scale it to zero (kubectl scale --replicas=0)"
    return ""


SUSPEND = "suspend"
"""The one field of a Job's or CronJob's spec anyone may set (to true): the emergency brake."""
SUSPENDED: Final = frozenset({JOB, CRONJOB, RAYCLUSTER, RAYJOB})
"""The owner kinds with ``spec.suspend``."""
SCALED: Final = frozenset({DEPLOYMENT, REPLICASET, STATEFULSET, REPLICATIONCONTROLLER})
"""The owner kinds without ``spec.suspend`` whose replicas the scale subresource sets."""


def owner_changes(
    old: Obj, new: Obj, templates: tuple[Pattern, ...], scaling: tuple[Pattern, ...] = ()
) -> list[str]:
    """The fields of an owner's spec that an UPDATE from ``old`` to ``new`` changes, as paths
    (``spec.parallelism``, ``spec.jobTemplate.spec.template``): a pod template counts as one
    field, and the objects and lists that lead to it (a CronJob's ``jobTemplate``, a
    RayCluster's ``workerGroupSpecs``) are looked into. Suspending is no change here; resuming
    is (``spec.suspend``); nor is a change of one of the kind's ``scaling`` fields.
    """
    changed: list[str] = []
    leading = (*templates, *scaling)

    def walk(was: object, now: object, here: Path) -> None:
        if here == ("spec", SUSPEND):
            if was is True and now is not True:
                changed.append(shown(here))
            return
        if any(_matches(here, p) for p in scaling) or was == now:
            return
        leads = any(len(here) < len(p) and _matches(here, p[: len(here)]) for p in leading)
        if leads and isinstance(was, Mapping) and isinstance(now, Mapping):
            for key in sorted({*was, *now}, key=str):
                walk(was.get(key), now.get(key), (*here, str(key)))
        elif leads and isinstance(was, list) and isinstance(now, list) and len(was) == len(now):
            for i, (a, b) in enumerate(zip(was, now, strict=True)):
                walk(a, b, (*here, i))
        else:
            changed.append(shown(here))

    before, after = fields.obj(old.get("spec")), fields.obj(new.get("spec"))
    for key in sorted({*before, *after}, key=str):
        walk(before.get(key), after.get(key), ("spec", str(key)))
    return changed


def _matches(path: Path, pattern: Pattern) -> bool:
    return len(path) == len(pattern) and all(
        p == ANY or str(s) == p for s, p in zip(path, pattern, strict=True)
    )


def _stamp(template: Obj) -> str | None:
    notes = fields.string_map(fields.obj(template.get("metadata")).get("annotations"))
    return notes.get(keys.SUBMITTER_ANNOTATION)


def gated(pod: Obj) -> bool:
    """The pod carries Sluicegate's scheduling gate."""
    gates = fields.obj(pod.get("spec")).get("schedulingGates")
    return isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == keys.GATE for g in gates
    )
