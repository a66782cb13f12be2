"""The DRA claims and claim templates, mirrored from the API server (``policy.devices``).

Admission counts the claims a pod names from here, and the gate controller checks a pod's
claims from here before it releases it (record 0047-gpus-through-dra), so neither costs an API
request per claim. Each object is kept as the spec that ``policy.devices`` counts (a
ResourceClaim's ``spec``, a ResourceClaimTemplate's ``spec.spec``): a change of status alone
(an allocation, a reservation) is no change to them, and wakes no one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kube.cache import Cache
from kube.connecting import JSON
from kube.reflecting import Change, Reflector
from kube.resources import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from policy import fields
from policy.devices import CLAIM
from policy.fields import Obj


def claim_spec(obj: JSON) -> Obj:
    return fields.obj(obj.get("spec"))


def template_spec(obj: JSON) -> Obj:
    return fields.obj(fields.obj(obj.get("spec")).get("spec"))


class ClaimCache:
    """The ResourceClaims (and, with ``templates``, the ResourceClaimTemplates) of every
    namespace, as quiet reflectors of ``cache``; ``on_change`` hears of a claim or template
    added, deleted, or whose spec changed."""

    def __init__(self, cache: Cache, *, templates: bool = True) -> None:
        self.claims: Reflector[Obj] = cache.watch(RESOURCE_CLAIMS, claim_spec, quiet=True)
        self.templates: Reflector[Obj] | None = (
            cache.watch(RESOURCE_CLAIM_TEMPLATES, template_spec, quiet=True) if templates else None)

    def spec(self, kind: str, name: str, namespace: str) -> Obj | None:
        """The spec ``policy.devices`` counts of a ResourceClaim (``kind`` CLAIM) or a
        ResourceClaimTemplate, as last seen; None when the cache does not hold it."""
        if kind == CLAIM:
            return self.claims.named(name, namespace)
        return self.templates.named(name, namespace) if self.templates is not None else None

    def claim(self, namespace: str) -> Callable[[str], Obj | None]:
        """``name -> spec`` of the ResourceClaims of ``namespace`` (``policy.devices.claims_changed``)."""
        return lambda name: self.claims.named(name, namespace)

    def on_change(self, callback: Callable[[], None]) -> None:
        def changed(change: Change[Any]) -> None:
            if change.old != change.new:
                callback()

        self.claims.add_listener(changed)
        if self.templates is not None:
            self.templates.add_listener(changed)
