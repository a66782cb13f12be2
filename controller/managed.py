"""Managed pods as the gate controller keeps them: the policy ``Pod`` plus what writing needs.

The pod reflector converts each pod once per change into a ``ManagedPod``: the ``Pod`` that
policy decides over, the exact gate list (the release patch tests it), whether the pod has an
annotations map (the patch adds a key to it, or the map), and the Dispatched condition as the
pod carries it (the controller rewrites a condition only when what it would write differs).

Only pods that Sluicegate admitted are watched: those with both the queue and the team label
(admission adds the team label to every pod it manages; a queue label alone, on a pod of a
namespace that has not opted in, is a user's label that nobody manages). Terminal pods are
left out by a field selector: a pod that finishes leaves the watch as if deleted, which frees
its slot, and a finished Job's pods cost the controller nothing. Both selectors are
``policy.marks``', so that the CLI reads exactly these pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policy import fields, keys
from policy.devices import Devices, PodClaims
from policy.fields import Obj
from policy.marks import FIELD_SELECTOR as FIELD_SELECTOR  # what the reflector watches, kept in policy
from policy.marks import LABEL_SELECTOR as LABEL_SELECTOR  # so that the CLI reads the same pods
from policy.marks import counts_for_dispatch
from policy.pods import Pod


@dataclass(frozen=True, slots=True)
class Dispatched:
    """The ``sluicegate.dev/Dispatched`` condition as a pod carries it."""

    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ManagedPod:
    pod: Pod
    gates: tuple[str, ...] = ()
    has_annotations: bool = True
    condition: Dispatched | None = None
    marked: bool = True
    """Admission marked it (``policy.marks.counts_for_dispatch``): only such pods count for dispatch,
    so a pod whose Sluicegate keys were written by hand (before its namespace opted in) counts for
    nothing and is never released."""
    claims: PodClaims | None = None
    """The DRA claims it names and what admission sealed of them (None: it names none): checked
    again before it is released (``policy.devices.claims_changed``)."""

    @property
    def uid(self) -> str:
        return self.pod.uid

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def dispatched_by_sluicegate(self) -> bool:
        """The controller stamped it when it removed the gate (else someone released it by hand)."""
        return keys.DISPATCHED_AT_ANNOTATION in self.pod.annotations


def managed_pod(obj: Obj) -> ManagedPod:
    """Convert a pod from the API server; ``InvalidObject`` when it cannot be read."""
    pod = Pod.parse(obj)
    spec = fields.obj(obj.get("spec"))
    meta = fields.obj(obj.get("metadata"))
    status = fields.obj(obj.get("status"))
    gates = tuple(str(fields.obj(g).get("name") or "") for g in spec.get("schedulingGates") or ())
    condition = None
    for raw in status.get("conditions") or ():
        c = fields.obj(raw)
        if c.get("type") == keys.CONDITION:
            condition = Dispatched(str(c.get("status") or ""), str(c.get("reason") or ""),
                                   str(c.get("message") or ""))
    # Pod.parse read the devices annotation already: it parses here too.
    sealed = Devices.from_annotation(pod.annotations.get(keys.DEVICES_ANNOTATION))
    return ManagedPod(pod, gates, isinstance(meta.get("annotations"), Mapping), condition,
                      counts_for_dispatch(pod), PodClaims.of(spec, status, sealed))
