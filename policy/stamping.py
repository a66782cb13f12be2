"""Admitting an owner (a Job, a Deployment, a PyTorchJob, ...): judging and stamping its pod
templates, and the pod group of an operator's object.

``create_owner`` judges every pod template of an owner at its CREATE as the account that
creates it (or, for an object its own owner's controller creates, as the stamp names), so
``kubectl apply`` fails at once when the user may not use the queue, and stamps the submitter
on each; presets and the gate are left to each pod's own CREATE, which sees the pod as it will
run. The pods of a kind that starts them together (``OwnerKind.gang``: a PyTorchJob, a
RayCluster) get one pod group, its size and its queue on every template. ``update_owner``
judges a changed template again. ``admitting.review`` calls both.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from policy import fields, keys, owners, priorities
from policy.catalog import Catalog
from policy.creators import honours_stamp, stamp_of_owner, untrusted_stamp
from policy.fields import Obj
from policy.judging import (
    check_written_keys,
    closed_refusal,
    judge,
    managed_or_refusal,
    written_by_sluicegate,
)
from policy.merging import apply_presets, dict_at, thaw
from policy.model import Namespace
from policy.patching import diff
from policy.pods import Submitter
from policy.presets import Preset
from policy.priorities import PriorityClasses
from policy.reviews import Admit, Decision, Deny, OwnerKind, Request


def create_owner(
    request: Request,
    namespace: Namespace,
    catalog: Catalog,
    row: OwnerKind,
    classes: PriorityClasses,
    now: datetime,
) -> Decision:
    """A Job (or another owner kind) is judged as the account that creates it, whoever that is:
    a stamp on one of its templates that names anyone else is refused in every namespace. The
    one exception is an object its own owner's controller creates from a stamped template (a Job
    the cronjob controller creates for a CronJob, a RayCluster KubeRay creates for a RayJob): it
    is judged as the stamp names. Every template is judged and stamped; the pods of a kind that
    starts them together form one pod group (``_gang``)."""
    obj = request.object
    own = fields.obj(obj.get("metadata"))
    templates = [(path, owners.at(obj, path)) for path in owners.template_paths(obj, row.templates)]
    honoured = honours_stamp(request, own, catalog.policy)
    stamps = [_notes(t).get(keys.SUBMITTER_ANNOTATION) for _, t in templates]
    first = next((raw for raw in stamps if raw), None)
    stamped = Submitter.from_annotation(first) if first else None
    submitter = stamped if honoured is not None and stamped is not None else request.creator
    for (_, template), raw in zip(templates, stamps, strict=True):
        if raw is None:
            continue
        if honoured is None:
            untrusted = untrusted_stamp(request, _stamp_view(obj, template), catalog.policy)
            if untrusted is not None:
                return untrusted
        mine = Submitter.from_annotation(raw) if raw else None
        if mine != submitter:
            copied = None if mine is None else stamp_of_owner(request, own, mine)
            return copied or written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION)
    if not namespace.opted_in:
        return Admit()
    managed: list[bool] = []
    for path, template in templates:
        one = managed_or_refusal(template, catalog, _where(path))
        if isinstance(one, Deny):
            return one
        managed.append(one)
    if any(managed) and catalog.closed is not None:
        return closed_refusal(catalog)
    gang = _gang(request, row, templates, managed, namespace, catalog, submitter, now)
    if isinstance(gang, Deny):
        return gang
    out = thaw(obj)
    warnings: list[str] = []
    for (path, template), is_managed_ in zip(templates, managed, strict=True):
        shaped = _with(template, *gang) if gang else template
        if gang or is_managed_:
            judgement = judge(namespace, catalog, shaped, submitter, _where(path))
            if isinstance(judgement, Deny):
                return judgement
            presets, warnings = judgement.presets, [*warnings, *judgement.warnings]
        else:
            # Stamped even when the template is not managed today: if the Policy later manages
            # its resources, the object's new pods are judged as the person who created it.
            bypass = check_written_keys(_labels(template), _notes(template), {}, {}, submitter)
            if bypass is not None:
                return bypass
            presets = ()
        # Its pods may not preempt, managed or not.
        preempting = _template_preempting(request, template, presets, classes)
        if preempting is not None:
            return preempting
        meta = owners.dict_at(out, (*path, "metadata"))
        if gang:
            dict_at(meta, "labels").update(gang[0])
            dict_at(meta, "annotations").update(gang[1])
        dict_at(meta, "annotations")[keys.SUBMITTER_ANNOTATION] = submitter.to_annotation()
    return Admit(diff(obj, out), tuple(dict.fromkeys(warnings)))


Gang = tuple[Mapping[str, str], Mapping[str, str]]
"""The labels and annotations that make an owner's pods one pod group."""


def _gang(
    request: Request,
    row: OwnerKind,
    templates: list[tuple[owners.Path, Obj]],
    managed: list[bool],
    namespace: Namespace,
    catalog: Catalog,
    submitter: Submitter,
    now: datetime,
) -> Gang | Deny | None:
    """The pod group of an object of a kind whose pods start together (``OwnerKind.gang``), when
    any of its templates is managed and none names a group of its own: its name and size, and the
    one queue every template resolves to, written on each template so that every pod (a CPU-only
    Ray head too) is managed, gated and released with the others. None for the other kinds."""
    if row.gang is None or not any(managed):
        return None
    if any(_labels(t).get(keys.GROUP_LABEL) for _, t in templates):
        return None  # the user's own grouping, judged as written
    queues: dict[str, str] = {}
    for (path, template), is_managed_ in zip(templates, managed, strict=True):
        if not is_managed_:
            continue
        judgement = judge(namespace, catalog, template, submitter, _where(path))
        if isinstance(judgement, Deny):
            return judgement
        queues.setdefault(judgement.queue, owners.shown(path))
    if len(queues) > 1:
        named = ", ".join(f"{where} in {queue}" for queue, where in queues.items())
        return Deny(
            f"the pods of this {request.kind.kind} start together as one pod group, so they run in "
            f"one queue, but its templates name different ones ({named}): name the same queue "
            f"(label {keys.QUEUE_LABEL}) on every template"
        )
    meta = fields.obj(request.object.get("metadata"))
    labels = {
        keys.GROUP_LABEL: owners.gang_name(request.kind.kind, meta, now),
        keys.QUEUE_LABEL: next(iter(queues)),
    }
    return labels, {keys.GROUP_SIZE_ANNOTATION: str(row.gang(request.object))}


def _with(template: Obj, labels: Mapping[str, str], notes: Mapping[str, str]) -> Obj:
    meta = fields.obj(template.get("metadata"))
    return {
        **template,
        "metadata": {
            **meta,
            "labels": {**_labels(template), **labels},
            "annotations": {**_notes(template), **notes},
        },
    }


def _labels(template: Obj) -> Mapping[str, str]:
    return fields.string_map(fields.obj(template.get("metadata")).get("labels"))


def _notes(template: Obj) -> Mapping[str, str]:
    return fields.string_map(fields.obj(template.get("metadata")).get("annotations"))


def _where(path: owners.Path) -> str:
    return owners.shown(path) + "."


def _stamp_view(obj: Obj, template: Obj) -> Obj:
    """The owner's metadata (its ownerReferences) with its template's annotations (the stamp)."""
    meta = fields.obj(obj.get("metadata"))
    return {**meta, "annotations": fields.obj(template.get("metadata")).get("annotations")}


def update_owner(
    request: Request,
    namespace: Namespace,
    catalog: Catalog,
    row: OwnerKind,
    classes: PriorityClasses,
) -> Decision | None:
    """A changed pod template of an owner (a Deployment's or StatefulSet's on every rollout, a
    CronJob's, a suspended Job's in part) is judged again, as at CREATE: its next pods would
    otherwise be refused one by one, out of sight of whoever applied it. It is judged as the
    person its stamp names (only they, or a trusted controller, may change it: ``guarding``);
    a template that carries no stamp yet (an object older than Sluicegate's webhooks, a worker
    group added to a RayCluster) is judged as the account that changes it, and stamped with it.
    None when no template changed."""
    obj = request.object
    old_obj = request.old_object or fields.EMPTY_OBJ
    if not namespace.opted_in:
        return None
    out = thaw(obj)
    stamped = False
    warnings: list[str] = []
    changed = False
    for path in owners.template_paths(obj, row.templates):
        template = owners.at(obj, path)
        if template == owners.at(old_obj, path):
            continue
        changed = True
        managed = managed_or_refusal(template, catalog, _where(path))
        if isinstance(managed, Deny):
            return managed
        raw = _notes(template).get(keys.SUBMITTER_ANNOTATION)
        submitter = (Submitter.from_annotation(raw) if raw else None) or request.creator
        presets: tuple[Preset, ...] = ()
        if managed:
            if catalog.closed is not None:
                return closed_refusal(catalog)
            judgement = judge(namespace, catalog, template, submitter, _where(path))
            if isinstance(judgement, Deny):
                return judgement
            presets, warnings = judgement.presets, [*warnings, *judgement.warnings]
        preempting = _template_preempting(request, template, presets, classes)
        if preempting is not None:
            return preempting
        if raw is None:
            meta = owners.dict_at(out, (*path, "metadata"))
            dict_at(meta, "annotations")[keys.SUBMITTER_ANNOTATION] = submitter.to_annotation()
            stamped = True
    if not changed:
        return None
    return Admit(diff(obj, out) if stamped else (), tuple(dict.fromkeys(warnings)))


# --- preemption -----------------------------------------------------------------------------


def _template_preempting(
    request: Request, template: Obj, presets: tuple[Preset, ...], classes: PriorityClasses
) -> Deny | None:
    """The same for an owner's pod template, with its presets merged as its pods will have them."""
    spec = fields.obj(apply_presets(template, presets).get("spec"))
    priority = priorities.resolve(spec, classes)
    problem = None if priority is None else priorities.refusal(
        priority, classes, f"the pods of this {request.kind.kind}"
    )
    return None if problem is None else Deny(problem)
