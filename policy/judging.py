"""Judging a managed pod or pod template: every check admission runs, and what it would write.

``is_managed`` says whether admission manages a pod or pod template at all. ``judge`` settles
the submitter's teams, the presets, the queue and the keys Sluicegate writes,
or says why the pod may not go in. ``admitting`` calls it for a pod's CREATE (with the admission
stamp) and for an owner's CREATE (its pod template, without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from policy import fields, keys
from policy.access import (
    Who,
    check_queue,
    namespace_allows_preset,
    preset_alternatives,
    queue_alternatives,
    who,
)
from policy.catalog import POLICY_KEY, UNREADABLE, Catalog
from policy.devices import NO_DEVICES, Devices, requests_with_devices
from policy.fields import Obj
from policy.model import Namespace
from policy.pods import Submitter, pod_requests
from policy.presets import Preset
from policy.reviews import Deny


def is_managed(shape: Obj, catalog: Catalog, devices: Devices = NO_DEVICES) -> bool:
    """A pod (or pod template) is managed when it names a queue or presets or asks for a
    managed resource, its DRA ``devices`` included. Raises ``InvalidObject`` when its resource
    quantities cannot be read."""
    # Read first, so a pod that names a queue never gets in with quantities no one can read.
    requests = requests_with_devices(pod_requests(fields.obj(shape.get("spec"))), devices)
    meta = fields.obj(shape.get("metadata"))
    if fields.string_map(meta.get("labels")).get(keys.QUEUE_LABEL, "").strip():
        return True
    if fields.csv(fields.string_map(meta.get("annotations")).get(keys.PRESETS_ANNOTATION)):
        return True
    return any(amount > 0 and catalog.manages(name) for name, amount in requests.items())


def managed_or_refusal(
    shape: Obj, catalog: Catalog, where: str, devices: Devices = NO_DEVICES
) -> bool | Deny:
    """``is_managed``, or the refusal naming the quantity that cannot be read (``where``
    prefixes its path)."""
    try:
        return is_managed(shape, catalog, devices)
    except UNREADABLE as e:
        return Deny(f"{where}spec.{e}")


def closed_refusal(catalog: Catalog) -> Deny:
    """The refusal of every managed pod while no valid Policy is known."""
    return Deny(
        "Sluicegate admits no pods that use GPUs, queues or presets until its Policy is fixed "
        f"(a platform administrator's job): {catalog.closed}"
    )


@dataclass(frozen=True, slots=True)
class Judgement:
    """Everything admission settled about an admitted pod (or pod template)."""

    who: Who
    queue: str
    presets: tuple[Preset, ...]
    labels: Mapping[str, str]  # what Sluicegate writes: queue, team, workflow
    annotations: Mapping[str, str]  # submitter, applied presets, stamp, a workflow limit
    warnings: tuple[str, ...] = ()


def judge(
    namespace: Namespace,
    catalog: Catalog,
    shape: Obj,
    submitter: Submitter,
    where: str = "",
    stamp: str | None = None,
    devices: str | None = None,
) -> Judgement | Deny:
    """Run every check on a managed pod or pod template; ``where`` prefixes field paths.

    ``stamp`` is the admission stamp a pod gets; a template gets none (each of its pods is
    stamped at its own CREATE). ``devices`` is what a pod's DRA claims count as
    (``policy.devices``), written when they count for anything.
    """
    meta = fields.obj(shape.get("metadata"))
    labels = fields.string_map(meta.get("labels"))
    notes = fields.string_map(meta.get("annotations"))
    if keys.MIRROR_POD_ANNOTATION in notes:
        return Deny(
            f"annotation {keys.MIRROR_POD_ANNOTATION} marks a mirror pod, which only a node "
            "creates for a static pod it runs; remove the annotation"
        )
    if fields.obj(shape.get("spec")).get("nodeName"):
        return Deny(
            f"{where}spec.nodeName is set: pods that Sluicegate manages are placed by kube-scheduler "
            "once dispatched; remove spec.nodeName (a nodeSelector or a preset can choose nodes)"
        )
    policy = catalog.policy
    person = who(submitter, namespace, catalog)
    workflow = labels.get(keys.WORKFLOW_LABEL) or next(
        (labels[k] for k in policy.workflow_labels if labels.get(k)), ""
    )
    warnings = _check_user_keys(labels, notes, workflow)
    if isinstance(warnings, Deny):
        return warnings
    presets = resolve_presets(notes, namespace, catalog)
    if isinstance(presets, Deny):
        return presets
    written_labels = {keys.TEAM_LABEL: namespace.team or ""}
    if workflow and not labels.get(keys.WORKFLOW_LABEL):
        written_labels[keys.WORKFLOW_LABEL] = workflow
    written_notes = {keys.SUBMITTER_ANNOTATION: person.submitter.to_annotation()}
    if presets:
        written_notes[keys.APPLIED_PRESETS_ANNOTATION] = ",".join(p.name for p in presets)
    if stamp is not None:
        written_notes[keys.ADMITTED_AT_ANNOTATION] = stamp
    if devices is not None:
        written_notes[keys.DEVICES_ANNOTATION] = devices
    bypass = check_written_keys(labels, notes, written_labels, written_notes, person.submitter)
    if bypass is not None:
        return bypass
    queue = _resolve_queue(labels, presets, namespace, catalog, person)
    if isinstance(queue, Deny):
        return queue
    written_labels[keys.QUEUE_LABEL] = queue
    if workflow:
        warnings = (*warnings, *_workflow_ceiling(notes, presets, written_notes))
    problem = catalog.invalid.get(POLICY_KEY)
    if problem is not None:
        warnings = (*warnings, f"the Policy is invalid and the last valid one stays in force: {problem}")
    return Judgement(person, queue, presets, written_labels, written_notes, warnings)


def _workflow_ceiling(
    notes: Mapping[str, str], presets: tuple[Preset, ...], written: dict[str, str]
) -> tuple[str, ...]:
    """An admin's ``workflowMaxRunning`` is a ceiling: the pod may ask for fewer, never more."""
    limited = [p for p in presets if p.workflow_max_running]
    if not limited:
        return ()
    tightest = min(limited, key=lambda p: p.workflow_max_running or 0)
    ceiling = tightest.workflow_max_running or 0
    own = fields.positive_int(notes.get(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, ""))
    if own is not None and own <= ceiling:
        return ()
    written[keys.WORKFLOW_MAX_RUNNING_ANNOTATION] = str(ceiling)
    if own is None:
        return ()
    return (
        f"annotation {keys.WORKFLOW_MAX_RUNNING_ANNOTATION} lowered from {own} to {ceiling}: "
        f'preset "{tightest.name}" lets a workflow run at most {ceiling} pods at once',
    )


def _check_user_keys(
    labels: Mapping[str, str], notes: Mapping[str, str], workflow: str
) -> tuple[str, ...] | Deny:
    warnings: list[str] = []
    for key in (keys.WORKFLOW_MAX_RUNNING_ANNOTATION, keys.GROUP_SIZE_ANNOTATION):
        raw = notes.get(key)
        if raw is not None and fields.positive_int(raw) is None:
            return Deny(
                f"annotation {key} must be a positive integer no larger than {fields.MAX_COUNT}, "
                f"got {fields.shown(raw)}"
            )
    if labels.get(keys.GROUP_LABEL) and keys.GROUP_SIZE_ANNOTATION not in notes:
        return Deny(
            f"label {keys.GROUP_LABEL} needs annotation {keys.GROUP_SIZE_ANNOTATION}: "
            "the number of pods in the group, a positive integer"
        )
    if keys.GROUP_SIZE_ANNOTATION in notes and not labels.get(keys.GROUP_LABEL):
        warnings.append(
            f"annotation {keys.GROUP_SIZE_ANNOTATION} has no effect without label {keys.GROUP_LABEL}"
        )
    if keys.WORKFLOW_MAX_RUNNING_ANNOTATION in notes and not workflow:
        warnings.append(
            f"annotation {keys.WORKFLOW_MAX_RUNNING_ANNOTATION} has no effect without label "
            f"{keys.WORKFLOW_LABEL}"
        )
    return tuple(warnings)


_USER_KEYS: Final = (
    "users may set labels " + ", ".join(sorted(keys.USER_LABELS))
    + " and annotations " + ", ".join(sorted(keys.USER_ANNOTATIONS))
)


def check_written_keys(
    labels: Mapping[str, str],
    notes: Mapping[str, str],
    written_labels: Mapping[str, str],
    written_notes: Mapping[str, str],
    submitter: Submitter,
) -> Deny | None:
    """Refuse Sluicegate's own keys set by hand, unless they say exactly what it would write."""
    for what, present, user_keys, written in (
        ("label", labels, keys.USER_LABELS, written_labels),
        ("annotation", notes, keys.USER_ANNOTATIONS, written_notes),
    ):
        for key in sorted(present):
            if not key.startswith(keys.PREFIX) or key in user_keys:
                continue
            value = present[key]
            if key == keys.SUBMITTER_ANNOTATION and Submitter.from_annotation(value) == submitter:
                continue
            if written.get(key) == value:
                continue
            return written_by_sluicegate(what, key)
    return None


def written_by_sluicegate(what: str, key: str) -> Deny:
    return Deny(f"{what} {key} is written by Sluicegate and cannot be set by users ({_USER_KEYS})")


def resolve_presets(
    notes: Mapping[str, str], namespace: Namespace, catalog: Catalog
) -> tuple[Preset, ...] | Deny:
    """The namespace's default presets, then the pod's, each once, in that order."""
    defaults = set(namespace.default_presets)
    names = dict.fromkeys((*namespace.default_presets, *fields.csv(notes.get(keys.PRESETS_ANNOTATION))))
    out = []
    for name in names:
        subject = f'preset "{name}"'
        if name in defaults:
            subject += f" (a default of namespace {namespace.name})"
        if not namespace_allows_preset(namespace, name):
            return Deny(
                f"{subject} is not allowed in namespace {namespace.name}; "
                f"{preset_alternatives(namespace, catalog)}"
            )
        problem = catalog.problem("Preset", name)
        if problem is not None:
            return Deny(f"{subject} is invalid ({problem}); {preset_alternatives(namespace, catalog)}")
        preset = catalog.presets.get(name)
        if preset is None:
            return Deny(f"{subject} does not exist; {preset_alternatives(namespace, catalog)}")
        out.append(preset)
    return tuple(out)


def _resolve_queue(
    labels: Mapping[str, str],
    presets: tuple[Preset, ...],
    namespace: Namespace,
    catalog: Catalog,
    person: Who,
) -> str | Deny:
    """The pod's label, else the first preset's queue, else the namespace's, else the Policy's."""
    candidates = [(labels.get(keys.QUEUE_LABEL, "").strip(), "")]
    candidates += [(p.queue, f' (from preset "{p.name}")') for p in presets]
    candidates.append((namespace.default_queue, f" (the default queue of namespace {namespace.name})"))
    candidates.append((catalog.policy.default_queue, " (the Policy's default queue)"))
    for queue, source in candidates:
        if queue:
            problem = check_queue(namespace, catalog, person, queue, source)
            return queue if problem is None else Deny(problem)
    return Deny(
        f"no queue for this pod: it has no label {keys.QUEUE_LABEL}, and neither its presets, "
        f"namespace {namespace.name} nor the Policy name a default; "
        f"{queue_alternatives(namespace, catalog, person)}"
    )
