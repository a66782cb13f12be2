"""Admission: what Sluicegate decides about a pod (or a Job) on its way into the cluster.

``review`` is the one entry point. For a managed pod CREATE it resolves the submitter, team,
presets and queue, checks access, merges the presets and returns the JSON patch that adds
Sluicegate's labels, annotations and scheduling gate. For a Job CREATE it judges the pod
template the same way, so ``kubectl apply -f job.yaml`` fails at once when the user may not use
the queue, and stamps the submitter on the template; presets and the gate are left to each pod's
own CREATE, which sees the pod as it will run (a preset changed in between applies to new pods).
On UPDATE only Sluicegate's controller may remove the gate or touch ``sluicegate.dev/`` keys.

Admission is idempotent: reviewing the pod it produced yields an empty patch, because a value
identical to what Sluicegate itself writes is not a bypass and every preset merge is idempotent.
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
from policy.catalog import Catalog
from policy.fields import InvalidObject, Obj
from policy.guarding import guard
from policy.merging import apply_presets, dict_at, main_container_index, thaw
from policy.model import Namespace, Policy
from policy.patching import diff
from policy.pods import Submitter, pod_requests
from policy.presets import Preset
from policy.reviews import OWNER_TEMPLATES, POD, Admit, Decision, Deny, Kind, Operation, Request


def review(request: Request, namespace: Namespace, catalog: Catalog, *, controller: str) -> Decision:
    """Decide on one admission request.

    ``namespace`` is the request's namespace; ``controller`` is the username of Sluicegate's
    gate controller (``system:serviceaccount:<ns>:<sa>``), the only account that may remove the
    gate or change Sluicegate's keys once a pod exists.
    """
    if request.subresource:
        return Admit()
    if request.operation is Operation.CREATE:
        if request.kind == POD:
            return _create_pod(request, namespace, catalog)
        if request.kind in OWNER_TEMPLATES:
            return _create_owner(request, namespace, catalog, OWNER_TEMPLATES[request.kind])
    if request.operation is Operation.UPDATE and request.user != controller:
        return guard(request)
    return Admit()


# --- the facts every rule reads -------------------------------------------------------------


def is_managed(shape: Obj, policy: Policy) -> bool:
    """A pod (or pod template) is managed when it names a queue or presets or asks for a
    managed resource. Raises ``InvalidObject`` when its resource quantities cannot be read.

    A mirror pod never is: it is the API's record of a static pod the kubelet already runs.
    """
    meta = fields.obj(shape.get("metadata"))
    if keys.MIRROR_POD_ANNOTATION in fields.string_map(meta.get("annotations")):
        return False
    if fields.string_map(meta.get("labels")).get(keys.QUEUE_LABEL, "").strip():
        return True
    if fields.csv(fields.string_map(meta.get("annotations")).get(keys.PRESETS_ANNOTATION)):
        return True
    requests = pod_requests(fields.obj(shape.get("spec")))
    return any(requests.get(name, 0) > 0 for name in policy.managed_resources)


def controller_owner(meta: Obj) -> Kind | None:
    """The kind of the object's controller ownerReference, if it has one."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
            return Kind(group, version, str(ref.get("kind") or ""))
    return None


def submitter_of(
    request: Request, owner_meta: Obj, annotations: Mapping[str, str], policy: Policy
) -> Submitter:
    """Who the object is submitted on behalf of.

    The stamp on a pod is honoured only when a trusted controller created it for an owner of a
    kind whose CREATE admission intercepts (and therefore stamped); anything else is judged as
    the account that created it.
    """
    if request.user in policy.trusted_controllers and controller_owner(owner_meta) in OWNER_TEMPLATES:
        raw = annotations.get(keys.SUBMITTER_ANNOTATION)
        stamped = Submitter.from_annotation(raw) if raw else None
        if stamped is not None:
            return stamped
    return request.creator


# --- judging a pod or a pod template --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Judgement:
    """Everything admission settled about an admitted pod (or pod template)."""

    who: Who
    queue: str
    presets: tuple[Preset, ...]
    labels: Mapping[str, str]  # what Sluicegate writes: queue, team, workflow
    annotations: Mapping[str, str]  # submitter, applied presets, a preset's workflow limit
    warnings: tuple[str, ...] = ()


def judge(
    request: Request, namespace: Namespace, catalog: Catalog, shape: Obj, owner_meta: Obj, where: str = ""
) -> Judgement | Deny:
    """Run every check on a managed pod or pod template; ``where`` prefixes field paths."""
    meta = fields.obj(shape.get("metadata"))
    labels = fields.string_map(meta.get("labels"))
    notes = fields.string_map(meta.get("annotations"))
    if fields.obj(shape.get("spec")).get("nodeName"):
        return Deny(
            f"{where}spec.nodeName is set: pods that Sluicegate manages are placed by kube-scheduler "
            "once dispatched; remove spec.nodeName (a nodeSelector or a preset can choose nodes)"
        )
    policy = catalog.policy
    person = who(submitter_of(request, owner_meta, notes, policy), namespace, catalog.teams)
    workflow = labels.get(keys.WORKFLOW_LABEL) or next(
        (labels[k] for k in policy.workflow_labels if labels.get(k)), ""
    )
    warnings = _check_user_keys(labels, notes, workflow)
    if isinstance(warnings, Deny):
        return warnings
    presets = _resolve_presets(notes, namespace, catalog)
    if isinstance(presets, Deny):
        return presets
    written_labels = {keys.TEAM_LABEL: namespace.team or ""}
    if workflow and not labels.get(keys.WORKFLOW_LABEL):
        written_labels[keys.WORKFLOW_LABEL] = workflow
    written_notes = {keys.SUBMITTER_ANNOTATION: person.submitter.to_annotation()}
    if presets:
        written_notes[keys.APPLIED_PRESETS_ANNOTATION] = ",".join(p.name for p in presets)
    bypass = _check_written_keys(labels, notes, written_labels, written_notes, person.submitter)
    if bypass is not None:
        return bypass
    queue = _resolve_queue(labels, presets, namespace, catalog, person)
    if isinstance(queue, Deny):
        return queue
    written_labels[keys.QUEUE_LABEL] = queue
    limit = next((p.workflow_max_running for p in presets if p.workflow_max_running), None)
    if workflow and limit and keys.WORKFLOW_MAX_RUNNING_ANNOTATION not in notes:
        written_notes[keys.WORKFLOW_MAX_RUNNING_ANNOTATION] = str(limit)
    problem = catalog.problem("Policy", keys.POLICY_NAME)
    if problem is not None:
        warnings = (*warnings, f"the Policy is invalid and its defaults apply: {problem}")
    return Judgement(person, queue, presets, written_labels, written_notes, warnings)


def _check_user_keys(
    labels: Mapping[str, str], notes: Mapping[str, str], workflow: str
) -> tuple[str, ...] | Deny:
    warnings: list[str] = []
    for key in (keys.WORKFLOW_MAX_RUNNING_ANNOTATION, keys.GROUP_SIZE_ANNOTATION):
        raw = notes.get(key)
        if raw is not None and fields.positive_int(raw) is None:
            return Deny(f'annotation {key} must be a positive integer, got "{raw}"')
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


def _check_written_keys(
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
            return _written_by_sluicegate(what, key)
    return None


def _written_by_sluicegate(what: str, key: str) -> Deny:
    return Deny(f"{what} {key} is written by Sluicegate and cannot be set by users ({_USER_KEYS})")


def _resolve_presets(
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


# --- CREATE ---------------------------------------------------------------------------------


def _managed(shape: Obj, policy: Policy, where: str) -> bool | Deny:
    try:
        return is_managed(shape, policy)
    except InvalidObject as e:
        return Deny(f"{where}spec.{e}")


def _create_pod(request: Request, namespace: Namespace, catalog: Catalog) -> Decision:
    pod = request.object
    if not namespace.opted_in:
        return Admit()
    managed = _managed(pod, catalog.policy, "")
    if managed is not True:
        return Admit() if managed is False else managed
    meta = fields.obj(pod.get("metadata"))
    judgement = judge(request, namespace, catalog, pod, meta)
    if isinstance(judgement, Deny):
        return judgement
    out = apply_presets(pod, judgement.presets)
    dict_at(out, "metadata", "labels").update(judgement.labels)
    dict_at(out, "metadata", "annotations").update(judgement.annotations)
    spec = dict_at(out, "spec")
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        gates = spec["schedulingGates"] = []
    if not any(isinstance(g, Mapping) and g.get("name") == keys.GATE for g in gates):
        gates.append({"name": keys.GATE})
    return Admit(diff(pod, out), (*judgement.warnings, *_container_warnings(pod, judgement.presets)))


def _container_warnings(pod: Obj, presets: tuple[Preset, ...]) -> tuple[str, ...]:
    meta = fields.obj(pod.get("metadata"))
    wanted = fields.string_map(meta.get("annotations")).get(keys.DEFAULT_CONTAINER_ANNOTATION)
    if not wanted or not any(p.container or p.resources for p in presets):
        return ()
    index = main_container_index(pod)
    containers = fields.obj(pod.get("spec")).get("containers")
    if index is None or not isinstance(containers, list):
        return ()
    name = fields.obj(containers[index]).get("name")
    if name == wanted:
        return ()
    return (
        f'annotation {keys.DEFAULT_CONTAINER_ANNOTATION} names no container "{wanted}"; '
        f'presets were applied to the first container, "{name}"',
    )


def _create_owner(
    request: Request, namespace: Namespace, catalog: Catalog, path: tuple[str, ...]
) -> Decision:
    if not namespace.opted_in:
        return Admit()
    obj = request.object
    owner_meta = fields.obj(obj.get("metadata"))
    template = fields.at(obj, path)
    where = "".join(f"{p}." for p in path)
    managed = _managed(template, catalog.policy, where)
    if isinstance(managed, Deny):
        return managed
    warnings: tuple[str, ...] = ()
    notes = fields.string_map(fields.obj(template.get("metadata")).get("annotations"))
    if managed:
        judgement = judge(request, namespace, catalog, template, owner_meta, where)
        if isinstance(judgement, Deny):
            return judgement
        submitter, warnings = judgement.who.submitter, judgement.warnings
    else:
        # Stamped even when the template is not managed today: if the Policy later manages its
        # resources, the Job's new pods are judged as the person who created the Job.
        submitter = submitter_of(request, owner_meta, notes, catalog.policy)
        raw = notes.get(keys.SUBMITTER_ANNOTATION)
        if raw is not None and Submitter.from_annotation(raw) != submitter:
            return _written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION)
    out = thaw(obj)
    dict_at(out, *path, "metadata", "annotations")[keys.SUBMITTER_ANNOTATION] = submitter.to_annotation()
    return Admit(diff(obj, out), warnings)
