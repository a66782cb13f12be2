"""GPUs asked through Dynamic Resource Allocation (``resource.k8s.io/v1``), counted as quota
resources.

A pod names its claims in ``spec.resourceClaims``: each entry names either a ResourceClaim
(``resourceClaimName``: an object of its own, which several pods may share) or a
ResourceClaimTemplate (``resourceClaimTemplateName``: Kubernetes makes one claim per pod from
it). A claim's ``spec.devices.requests`` ask for devices of a DeviceClass, ``exactly`` (a
``count``, 1 when absent, in ``allocationMode`` ``ExactCount``; or ``All``, every matching
device of the node) or as ``firstAvailable`` alternatives.

What a device is worth is the Policy's ``deviceClasses``: a DeviceClass name and the quota
resource each of its devices counts as (``gpu.nvidia.com: nvidia.com/gpu``). Devices of a class
it does not map count for nothing. The rules (record 0047-gpus-through-dra):

- ``exactly`` with a count: that many of the mapped resource;
- ``firstAvailable``: for each resource, the most that any alternative takes of it (whichever
  the scheduler picks, no more is used);
- ``allocationMode: All`` of a mapped class cannot be counted before it is allocated, so the pod
  is refused with a way out (ask for an exact count);
- a claim that does not exist when the pod is admitted cannot be counted: the pod is refused (a
  controller creates it again, and it is counted once the claim exists);
- a pod that names more than ``MOST_CLAIMS`` claims is refused: it bounds what one admission
  reads;
- a ResourceClaim shared by several pods counts once per workload: each pod carries it under the
  claim's name (``Devices.shared``) and ``policy.workloads`` adds each name once;
- a pod whose claims, as they are when it would be released, ask for more than (or other than)
  admission counted is not released (``claims_changed``): a claim can be deleted and made again
  under its name with another spec while its pod waits.

Admission counts a pod's claims once, with ``pod_devices``, and writes the answer on the pod
(annotation ``sluicegate.dev/devices``, one of the keys only Sluicegate writes); everything that
counts a pod's requests afterwards (dispatch, the CLI, the recorder, the simulator through the
records) reads it from there through ``requests_with_devices``. Only the gate controller reads
the claims again, before it releases a pod, with ``claims_changed``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from policy import fields
from policy.fields import InvalidObject, Obj
from policy.quantities import EMPTY, Resources, add, format_amount, maximum

CLAIM: Final = "ResourceClaim"
TEMPLATE: Final = "ResourceClaimTemplate"
ALL: Final = "All"
MOST_CLAIMS: Final = 32
"""The most entries of ``spec.resourceClaims`` a managed pod may have. Kubernetes sets no limit
of its own; 32 is the most devices one claim's allocation may hold in ``resource.k8s.io/v1``
(``AllocationResultsMaxSize``), far more claims than a pod on one node has use for, and it bounds
what one admission review reads."""


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims``: its name in the pod, and the ResourceClaim
    (``kind`` CLAIM) or ResourceClaimTemplate (``kind`` TEMPLATE) it names."""

    name: str
    kind: str
    source: str


def pod_claims(spec: Obj) -> tuple[PodClaim, ...]:
    """The claims a pod (or a pod template) names; entries that name neither are left out."""
    out = []
    for raw in spec.get("resourceClaims") or ():
        entry = fields.obj(raw)
        name = str(entry.get("name") or "")
        claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        if isinstance(claim, str) and claim:
            out.append(PodClaim(name, CLAIM, claim))
        elif isinstance(template, str) and template:
            out.append(PodClaim(name, TEMPLATE, template))
    return tuple(out)


def _request_devices(request: Obj, classes: Mapping[str, str]) -> Resources | str:
    """The quota resources one request of a claim counts as, or why it cannot be counted."""
    if request.get("exactly") is not None:
        return _exactly(fields.obj(request.get("exactly")), classes, str(request.get("name") or ""))
    alternatives = request.get("firstAvailable")
    most: Resources = EMPTY
    for raw in alternatives if isinstance(alternatives, list) else ():
        sub = fields.obj(raw)
        counted = _exactly(sub, classes, f"{request.get('name')}/{sub.get('name')}")
        if isinstance(counted, str):
            return counted
        most = maximum(most, counted)
    return most


def _exactly(request: Obj, classes: Mapping[str, str], name: str) -> Resources | str:
    device_class = str(request.get("deviceClassName") or "")
    resource = classes.get(device_class)
    if resource is None:
        return EMPTY
    if request.get("allocationMode") == ALL:
        return (
            f'request "{name}" asks for every device of class {device_class} (allocationMode All), '
            f"which cannot be counted in {resource} before Kubernetes allocates them; ask for an "
            "exact count (allocationMode ExactCount, count: N)"
        )
    count = request.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return f'request "{name}": count must be a positive integer, got {fields.shown(str(count))}'
    return MappingProxyType({resource: count * 1000})


def claim_devices(claim_spec: Obj, classes: Mapping[str, str]) -> Resources | str:
    """What one claim (a ResourceClaim's ``spec``, or a template's ``spec.spec``) counts as in
    quotas, by the Policy's ``deviceClasses``; a string says why it cannot be counted."""
    total: Resources = EMPTY
    requests = fields.obj(claim_spec.get("devices")).get("requests")
    for raw in requests if isinstance(requests, list) else ():
        counted = _request_devices(fields.obj(raw), classes)
        if isinstance(counted, str):
            return counted
        total = add(total, counted)
    return total


@dataclass(frozen=True, slots=True)
class Devices:
    """What a pod's claims count as: those of its own (made from templates) and those of each
    shared ResourceClaim it names, by the claim's name."""

    own: Resources = field(default_factory=lambda: EMPTY)
    shared: Mapping[str, Resources] = field(default_factory=lambda: MappingProxyType({}))

    def __bool__(self) -> bool:
        return bool(self.own) or any(self.shared.values())

    @property
    def total(self) -> Resources:
        out = self.own
        for amounts in self.shared.values():
            out = add(out, amounts)
        return out

    def to_annotation(self) -> str:
        data: dict[str, object] = {}
        if self.own:
            data["pod"] = _amounts(self.own)
        shared = {name: _amounts(r) for name, r in sorted(self.shared.items()) if r}
        if shared:
            data["claims"] = shared
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_annotation(cls, raw: str | None, where: str = "") -> Devices:
        """Raises ``InvalidObject`` when ``raw`` is not what ``to_annotation`` writes."""
        if not raw:
            return NO_DEVICES
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise InvalidObject(f"{where}: not JSON") from e
        root = fields.mapping(data, where)
        claims = fields.mapping(root.get("claims"), f"{where}.claims")
        return cls(
            own=fields.resources(root.get("pod"), f"{where}.pod"),
            shared=MappingProxyType({str(name): fields.resources(amounts, f"{where}.claims.{name}")
                                     for name, amounts in claims.items()}),
        )


NO_DEVICES: Final = Devices()


def _amounts(resources: Resources) -> dict[str, str]:
    return {name: format_amount(amount) for name, amount in sorted(resources.items())}


def pod_devices(
    spec: Obj, found: Mapping[tuple[str, str], Obj | None], classes: Mapping[str, str]
) -> Devices | str:
    """What a pod's claims count as. ``found`` holds, by ``(kind, name)``, each claim's spec as
    the API server has it (a ResourceClaim's ``spec``, a ResourceClaimTemplate's ``spec.spec``),
    or None when it does not exist; a string says why the pod's devices cannot be counted."""
    if not classes:
        return NO_DEVICES
    named = pod_claims(spec)
    if len(named) > MOST_CLAIMS:
        return (f"spec.resourceClaims names {len(named)} claims; a pod may name at most {MOST_CLAIMS}: "
                "ask for several devices in one claim (count: N) instead")
    own: Resources = EMPTY
    shared: dict[str, Resources] = {}
    for i, claim in enumerate(named):
        where = f"spec.resourceClaims[{i}] ({claim.name})"
        claim_spec = found.get((claim.kind, claim.source))
        if claim_spec is None:
            return (
                f"{where} names {claim.kind} {claim.source}, which does not exist in the pod's "
                "namespace: its devices cannot be counted in quotas; create it before the pod "
                "(a controller creates its pods again until it exists)"
            )
        counted = claim_devices(claim_spec, classes)
        if isinstance(counted, str):
            return f"{where}: {claim.kind} {claim.source}: {counted}"
        if claim.kind == CLAIM:
            shared[claim.source] = counted
        else:
            own = add(own, counted)
    return Devices(own, MappingProxyType({k: v for k, v in shared.items() if v}))


def requests_with_devices(requests: Resources, devices: Devices) -> Resources:
    """A pod's requests with what its claims count as (each shared claim once)."""
    return add(requests, devices.total) if devices else requests


@dataclass(frozen=True, slots=True)
class PodClaims:
    """What a pod says of its claims: the entries of its ``spec.resourceClaims``, the names of
    the ResourceClaims Kubernetes made for it from templates (``status.resourceClaimStatuses``:
    the pod's claim name -> the claim's), and what admission sealed on it."""

    named: tuple[PodClaim, ...]
    generated: tuple[tuple[str, str], ...] = ()
    sealed: Devices = field(default_factory=Devices)

    @classmethod
    def of(cls, spec: Obj, status: Obj, sealed: Devices) -> PodClaims | None:
        """A pod's claims; None when it names none."""
        named = pod_claims(spec)
        if not named:
            return None
        generated = []
        for raw in status.get("resourceClaimStatuses") or ():
            entry = fields.obj(raw)
            name, claim = entry.get("name"), entry.get("resourceClaimName")
            if isinstance(name, str) and isinstance(claim, str) and claim:
                generated.append((name, claim))
        return cls(named, tuple(sorted(generated)), sealed)


def claims_changed(
    claims: PodClaims, live: Callable[[str], Obj | None], classes: Mapping[str, str]
) -> str | None:
    """Why a pod's claims, as they are now, are not what admission counted; None when they ask
    no more, and nothing else, than it sealed on the pod. The gate controller's check before it
    releases a pod (record 0047-gpus-through-dra).

    ``live(name)`` is the spec of the ResourceClaim of that name in the pod's namespace as the
    API server has it now (None: it does not exist). A shared claim is compared with what was
    sealed under its name; the claims made from templates, together, with what was sealed as
    the pod's own. A claim that does not exist now (deleted, or not yet made from its template)
    cannot be counted, as at admission, so it does not pass either."""
    if not classes:
        return None
    generated = dict(claims.generated)
    sealed = claims.sealed
    own: Resources = EMPTY
    for i, claim in enumerate(claims.named):
        where = f"spec.resourceClaims[{i}] ({claim.name})"
        name = claim.source if claim.kind == CLAIM else generated.get(claim.name, "")
        if not name:
            return (f"{where}: no ResourceClaim has been made from ResourceClaimTemplate "
                    f"{claim.source} yet, so its devices cannot be counted")
        claim_spec = live(name)
        if claim_spec is None:
            return f"{where}: ResourceClaim {name} does not exist now, so its devices cannot be counted"
        counted = claim_devices(claim_spec, classes)
        if isinstance(counted, str):
            return f"{where}: ResourceClaim {name}: {counted}"
        if claim.kind == CLAIM:
            more = _beyond(counted, sealed.shared.get(name, EMPTY))
            if more is not None:
                return f"{where}: ResourceClaim {name} now asks for {more}"
        else:
            own = add(own, counted)
    more = _beyond(own, sealed.own)
    if more is not None:
        return f"the ResourceClaims made from its templates now ask for {more}"
    return None


def _beyond(counted: Resources, sealed: Resources) -> str | None:
    """What ``counted`` asks beyond ``sealed``, in words; None when it asks no more of anything."""
    over = [(name, amount) for name, amount in sorted(counted.items()) if amount > sealed.get(name, 0)]
    if not over:
        return None
    return "; ".join(f"{format_amount(amount, name)} {name}, {format_amount(sealed.get(name, 0), name)} "
                     "counted when the pod was admitted" for name, amount in over)


def claims_changed_message(why: str) -> str:
    """The message of the ``ClaimsChanged`` condition: why, and what to do."""
    return (f"its DRA claims are not what was counted when it was admitted: {why}; it is not "
            "released while they are so: delete the pod and create it again to have its claims "
            "counted anew (or make the claims ask no more than was counted)")
