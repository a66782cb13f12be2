"""Admission: what Sluicegate decides about a pod (or a Job) on its way into the cluster.

``review`` is the one entry point. For a managed pod CREATE it resolves the submitter, team,
presets and queue, checks access, merges the presets and returns the JSON patch that adds
Sluicegate's labels, annotations (the admission stamp among them) and scheduling gate. For the
CREATE of an owner (a Job, a PyTorchJob, ...) it judges each pod template the same way, so
``kubectl apply -f job.yaml`` fails at once when the user may not use the queue, and stamps the
submitter on it (``stamping``); presets and the gate are left to each pod's own CREATE, which
sees the pod as it will run. On UPDATE only
Sluicegate's controller may remove the gate or touch ``sluicegate.dev/`` keys (``guarding``),
except that a person allowed to ``release`` the pod's queue may remove the gate by hand.

On every pod, managed or not, in an opted-in namespace or not (the webhook sees the latter
only when the pod carries a ``sluicegate.dev/`` mark), ``sluicegate.dev/`` keys that only
Sluicegate writes are refused unless they say exactly what Sluicegate itself would write, and
so is a ``sluicegate.dev/`` scheduling gate on a pod Sluicegate does not manage. A real mirror
pod carries no ``sluicegate.dev/`` key at all. ``pods/status`` UPDATEs are guarded like pod
UPDATEs, and a stamped Job or CronJob belongs to the user the stamp names: only they change
what it runs (anyone may suspend it).

In a namespace opted in to a team no pod preempts, managed or not (``policy.priorities``; a
node's mirror pods aside): any member can create a pod Sluicegate does not manage there, and
one of a class that preempts would evict other teams' running work. A Job's or CronJob's pod
template is judged the same way at its CREATE and whenever it changes.

Admission is idempotent: reviewing the pod it produced yields an empty patch, because a value
identical to what Sluicegate itself writes is not a bypass and every preset merge is idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

from policy import fields, keys, marks, priorities
from policy.catalog import Catalog
from policy.creators import (
    is_mirror_pod,
    submitter_of,
)
from policy.devices import pod_devices
from policy.fields import Obj
from policy.guarding import guard
from policy.judging import check_written_keys, closed_refusal, judge, managed_or_refusal
from policy.merging import dict_at, main_container_index, preset_steps, thaw
from policy.model import Namespace
from policy.patching import diff
from policy.pods import Submitter
from policy.presets import Preset
from policy.priorities import PriorityClasses
from policy.reviews import OWNERS, POD, Admit, Decision, Deny, Operation, Request
from policy.shapes import check_request
from policy.stamping import create_owner, update_owner
from policy.validating import problems

Claims = Mapping[tuple[str, str], Obj | None]
"""The DRA claims a pod names, by ``(kind, name)`` (``policy.devices.pod_devices``)."""
NO_CLAIMS: Final[Claims] = MappingProxyType({})

ANNOTATION_BYTES: Final = 256 * 1024
"""The API server's bound on a pod's annotations, keys and values together."""
ANNOTATION_BYTES_ADMITTED: Final = ANNOTATION_BYTES - 16 * 1024
"""What admission lets a managed pod carry: the rest is the gate controller's, for the release
stamp and the hold's words (at most 2,048 characters, up to 4 bytes each)."""


def review(
    request: Request,
    namespace: Namespace,
    catalog: Catalog,
    *,
    controller: str,
    now: datetime,
    may_release: bool = False,
    owner_creator: Submitter | None = None,
    classes: PriorityClasses = fields.EMPTY_OBJ,
    claims: Claims = NO_CLAIMS,
) -> Decision:
    """Decide on one admission request.

    ``namespace`` is the request's namespace; ``controller`` is the username of Sluicegate's
    gate controller (``system:serviceaccount:<ns>:<sa>``), the only account that may remove the
    gate or change Sluicegate's keys once a pod exists. ``now`` is the time of the request,
    stamped on each admitted managed pod. ``may_release`` is whether the requester may
    ``release`` the queue that ``guarding.release_queue(request, controller)`` names (the webhook
    asks the API server with a SubjectAccessReview; False when it names none).
    ``owner_creator`` is who created the pod's controller owner, when the webhook knows it.
    ``classes`` are the cluster's PriorityClasses by name, as far as the webhook knows them.
    ``claims`` are the DRA claims a pod names, as the webhook read them (``policy.devices``:
    by kind and name, a ResourceClaim's spec or a template's claim spec, None when missing).

    Raises ``MalformedReview`` for a request of a shape no API server sends.
    """
    if request.subresource == "status" and request.kind == POD and request.operation is Operation.UPDATE:
        # Labels and annotations change through pods/status as through pods: judged alike.
        check_request(request)
        return guard(request) if request.user != controller else Admit()
    if request.subresource:
        return Admit()
    check_request(request)
    if request.operation is Operation.CREATE:
        if request.kind == POD:
            return _create_pod(request, namespace, catalog, now, owner_creator, classes, claims)
        if request.kind in OWNERS:
            return create_owner(request, namespace, catalog, OWNERS[request.kind], classes, now)
    if request.operation is Operation.UPDATE and request.user != controller:
        guarded = guard(request, may_release=may_release, policy=catalog.policy)
        if isinstance(guarded, Admit) and request.kind in OWNERS:
            return update_owner(request, namespace, catalog, OWNERS[request.kind], classes) or guarded
        return guarded
    return Admit()


# --- CREATE ---------------------------------------------------------------------------------


def _create_pod(
    request: Request,
    namespace: Namespace,
    catalog: Catalog,
    now: datetime,
    owner_creator: Submitter | None,
    classes: PriorityClasses,
    claims: Claims,
) -> Decision:
    pod = request.object
    if is_mirror_pod(request):
        return _mirror(pod)
    if not namespace.opted_in:
        # Nothing to manage here, but a key or gate only Sluicegate writes would count once the
        # namespace opts in: refused as on any other pod.
        elsewhere = submitter_of(request, catalog.policy)
        return elsewhere if isinstance(elsewhere, Deny) else _unmanaged(pod, elsewhere)
    devices = pod_devices(fields.obj(pod.get("spec")), claims, catalog.policy.device_classes)
    if isinstance(devices, str):
        return Deny(devices)
    managed = managed_or_refusal(pod, catalog, "", devices)
    if isinstance(managed, Deny):
        return managed
    submitter = submitter_of(request, catalog.policy, owner_creator)
    if isinstance(submitter, Deny):
        return submitter
    if not managed:
        # Any member of the team can create such a pod: it may not preempt either.
        arrived = fields.obj(pod.get("spec"))
        return _preempting(arrived, arrived, classes, "this pod") or _unmanaged(pod, submitter)
    foreign = _foreign_gate(pod, keys.GATE)
    if foreign is not None:
        return foreign
    if catalog.closed is not None:
        return closed_refusal(catalog)
    notes = fields.string_map(fields.obj(pod.get("metadata")).get("annotations"))
    existing = notes.get(keys.ADMITTED_AT_ANNOTATION)
    stamp = existing if existing is not None and marks.fresh(existing, now) else marks.admitted_at(now)
    sealed = notes.get(keys.SEAL_ANNOTATION)
    judgement = judge(namespace, catalog, _unsealed(pod) if sealed is not None else pod, submitter,
                      stamp=stamp, devices=devices.to_annotation() if devices else None)
    if isinstance(judgement, Deny):
        return judgement
    out = _merged(pod, judgement.presets)
    if isinstance(out, Deny):
        return out
    spec, arrived = dict_at(out, "spec"), fields.obj(pod.get("spec"))
    preempting = _preempting(spec, arrived, classes, "this pod")
    if preempting is not None:
        return preempting
    if priorities.class_name(spec) != priorities.class_name(arrived):
        # A preset set another class: the API server resolves priority and preemptionPolicy
        # again from it, but only if the ones it resolved from the old class are gone.
        spec.pop("priority", None)
        spec.pop("preemptionPolicy", None)
    dict_at(out, "metadata", "labels").update(judgement.labels)
    dict_at(out, "metadata", "annotations").update(judgement.annotations)
    spec = dict_at(out, "spec")
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        gates = spec["schedulingGates"] = []
    if not any(isinstance(g, Mapping) and g.get("name") == keys.GATE for g in gates):
        gates.append({"name": keys.GATE})
    meta = dict_at(out, "metadata")
    seal = marks.seal(fields.string_map(meta.get("labels")), fields.string_map(meta.get("annotations")),
                      (str(fields.obj(g).get("name") or "") for g in gates))
    if sealed is not None and sealed != seal:
        return _changed_after_admission()
    dict_at(out, "metadata", "annotations")[keys.SEAL_ANNOTATION] = seal
    crowded = _crowded(fields.string_map(meta.get("annotations")))
    if crowded is not None:
        return crowded
    return Admit(diff(pod, out), (*judgement.warnings, *_container_warnings(out, judgement.presets)))


def annotation_bytes(annotations: Mapping[str, str]) -> int:
    """Kubernetes' measure of a pod's annotations: the bytes of every key and value."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())


def release_crowded(annotations: Mapping[str, str], stamp: Mapping[str, str]) -> str | None:
    """Why the API server would refuse to release a pod with these annotations: the release
    ``stamp`` would take them past Kubernetes' bound. Admission leaves room for it
    (``_crowded``), but annotations may grow after admission, and such an update does not reach
    the webhook. None when the stamp fits."""
    size = annotation_bytes({**annotations, **stamp})
    if size <= ANNOTATION_BYTES:
        return None
    return (f"metadata.annotations: {size} bytes with the release stamp, over the {ANNOTATION_BYTES} "
            "Kubernetes allows: remove some annotations")


def _crowded(annotations: Mapping[str, str]) -> Deny | None:
    """Refuse a pod whose annotations, with admission's stamps, leave the gate controller no room
    for its own (the release stamp, the hold's words): the API server would refuse those writes,
    and the pod could never be released nor say why it waits."""
    size = annotation_bytes(annotations)
    if size <= ANNOTATION_BYTES_ADMITTED:
        return None
    return Deny(
        f"metadata.annotations: {size} bytes with Sluicegate's stamps; at most "
        f"{ANNOTATION_BYTES_ADMITTED} are admitted, so that the gate controller can still write its own "
        f"(Kubernetes allows {ANNOTATION_BYTES} in all): remove some annotations"
    )


def _unsealed(pod: Obj) -> Obj:
    """The pod without its seal, for the checks of the keys it carries: the seal is checked
    against what admission writes, once that is known."""
    meta = fields.obj(pod.get("metadata"))
    notes = {k: v for k, v in fields.obj(meta.get("annotations")).items() if k != keys.SEAL_ANNOTATION}
    return {**pod, "metadata": {**meta, "annotations": notes}}


def _changed_after_admission() -> Deny:
    """A seal that is not what admission would write: the pod was sealed by an earlier call of
    admission in this request and a later webhook changed what it sealed, or someone wrote it."""
    return Deny(
        f"annotation {keys.SEAL_ANNOTATION} does not match the pod's {keys.PREFIX} labels, annotations "
        f"and scheduling gates: they were changed after Sluicegate admitted it (by a mutating webhook "
        f"that ran later?), or the annotation was written by hand (only Sluicegate writes it)"
    )


def _merged(pod: Obj, presets: tuple[Preset, ...]) -> dict[str, Any] | Deny:
    """The pod with every preset merged in, or a refusal naming the preset whose merge left the
    pod in a state the API server rejects (a problem the pod did not have before).

    The end result is judged, not each step: a later preset may supply what an earlier one
    took away, and judging the steps would refuse a pod admitted once when it is admitted
    again (its own fields then already hold what the later preset adds). The preset blamed is
    the one from which the problem stayed to the end."""
    out: dict[str, Any] = thaw(pod)
    found: list[tuple[Preset, frozenset[str]]] = []
    for preset, out in preset_steps(pod, presets):
        found.append((preset, problems(out)))
    new = found[-1][1] - problems(pod) if found else frozenset()
    if not new:
        return out
    problem = min(new)
    blamed = found[-1][0]
    for preset, seen in reversed(found):
        if problem not in seen:
            break
        blamed = preset
    return Deny(
        f'preset "{blamed.name}" (patchStrategy {blamed.strategy.value}) would make the pod '
        f"invalid: {problem}; ask a platform administrator to fix the preset"
    )


def _unmanaged(pod: Obj, submitter: Submitter) -> Decision:
    """A pod Sluicegate does not manage: admitted unchanged, without keys only Sluicegate writes
    and without a ``sluicegate.dev/`` scheduling gate (nothing would ever remove it)."""
    meta = fields.obj(pod.get("metadata"))
    labels = fields.string_map(meta.get("labels"))
    notes = fields.string_map(meta.get("annotations"))
    bypass = check_written_keys(labels, notes, {}, {}, submitter)
    if bypass is not None:
        return bypass
    foreign = _foreign_gate(pod, None)
    if foreign is not None:
        return foreign
    if labels.get(keys.GROUP_LABEL):
        return Admit(warnings=(
            f"label {keys.GROUP_LABEL} has no effect: Sluicegate does not manage this pod (it names "
            "no queue or presets and asks for no managed resource), so it is no member of the group",
        ))
    return Admit()


def _mirror(pod: Obj) -> Decision:
    """A real mirror pod is admitted unchanged, but carries no ``sluicegate.dev/`` key or gate:
    Sluicegate never manages a static pod, and such a key would make it count for a queue."""
    meta = fields.obj(pod.get("metadata"))
    for what, present in (
        ("label", fields.string_map(meta.get("labels"))),
        ("annotation", fields.string_map(meta.get("annotations"))),
    ):
        for key in sorted(present):
            if key.startswith(keys.PREFIX):
                return Deny(
                    f"{what} {key} cannot be set on a mirror pod: Sluicegate does not manage static "
                    f"pods, so a mirror pod carries no {keys.PREFIX} labels or annotations; remove "
                    "it from the static pod's manifest"
                )
    return _foreign_gate(pod, None) or Admit()


def _foreign_gate(pod: Obj, allowed: str | None) -> Deny | None:
    """A ``sluicegate.dev/`` scheduling gate other than ``allowed``, refused: only admission adds
    Sluicegate's gate (to a pod it manages), and only its controller removes it."""
    gates = fields.obj(pod.get("spec")).get("schedulingGates")
    for gate in gates if isinstance(gates, list) else ():
        name = str(fields.obj(gate).get("name") or "")
        if name.startswith(keys.PREFIX) and name != allowed:
            why = (
                "Sluicegate adds its gate itself to the pods it manages, and this pod is not one of "
                "them (it names no queue or presets and asks for no managed resource in a namespace "
                "opted in to a team), so nothing would ever remove it"
                if allowed is None else f"the only one Sluicegate uses is {keys.GATE}"
            )
            return Deny(f"scheduling gate {name} cannot be set by users: {why}")
    return None


def _container_warnings(pod: Obj, presets: tuple[Preset, ...]) -> tuple[str, ...]:
    """A default-container annotation (as the presets left it) that names no container."""
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


# --- preemption -----------------------------------------------------------------------------


def _preempting(spec: Obj, before: Obj, classes: PriorityClasses, subject: str) -> Deny | None:
    """No pod of a team's namespace preempts (``policy.priorities``): ``spec`` is the pod's spec
    as admission leaves it, ``before`` as it arrived."""
    priority = priorities.of(spec, before, classes)
    problem = None if priority is None else priorities.refusal(priority, classes, subject)
    return None if problem is None else Deny(problem)
