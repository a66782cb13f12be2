"""The DRA claims a pod names, read for admission (``policy.devices``) from the webhook's cache.

Only a pod CREATE in an opted-in namespace, while the Policy maps some DeviceClass
(``deviceClasses``), and only for a pod that names claims, reads them: a ResourceClaimTemplate
(Kubernetes makes the pod's own claim from it after the pod exists) or a shared ResourceClaim.
They are read from watched copies (``kube.claims``), so a review costs no API request per claim
(record 0047-gpus-through-dra). A claim the cache does not hold is passed as None, and admission
refuses the pod (its devices cannot be counted); but the watch may not have delivered a claim
created a moment before the pod, so the first claim the cache lacks is read once from the API
server, as a namespace the cache lacks is (``kube.cache.Cache.current_namespace``): one request
at most per review, however many claims the pod names. That read failing otherwise than 404 is
a ``KubeError`` (503: the client, or the controller that creates the pod, tries again). A pod
naming more than ``policy.devices.MOST_CLAIMS`` claims is read no further: admission refuses it.
"""

from __future__ import annotations

from kube.claims import ClaimCache, claim_spec, template_spec
from kube.connecting import ApiError, Connection
from kube.resources import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from policy import fields
from policy.admitting import NO_CLAIMS, Claims
from policy.devices import CLAIM, MOST_CLAIMS, pod_claims
from policy.fields import Obj
from policy.model import Policy
from policy.reviews import POD, Operation, Request


class ClaimReader:
    """``claims(request, namespace, policy)``: the specs of the claims the pod names."""

    def __init__(self, connection: Connection, cache: ClaimCache) -> None:
        self.connection = connection
        self.cache = cache

    async def claims(self, request: Request, namespace: str, policy: Policy) -> Claims:
        if request.kind != POD or request.operation is not Operation.CREATE or not policy.device_classes:
            return NO_CLAIMS
        named = pod_claims(fields.obj(request.object.get("spec")))
        if len(named) > MOST_CLAIMS:
            return NO_CLAIMS
        found: dict[tuple[str, str], Obj | None] = {}
        read = False
        for claim in named:
            key = (claim.kind, claim.source)
            if key in found:
                continue
            spec = self.cache.spec(claim.kind, claim.source, namespace)
            if spec is None and not read:
                read = True
                spec = await self._read(claim.kind, claim.source, namespace)
            found[key] = spec
            if spec is None:
                break  # admission refuses the pod at its first missing claim
        return found

    async def _read(self, kind: str, name: str, namespace: str) -> Obj | None:
        resource = RESOURCE_CLAIMS if kind == CLAIM else RESOURCE_CLAIM_TEMPLATES
        try:
            obj = await self.connection.get(resource.path(name, namespace=namespace))
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        return claim_spec(obj) if kind == CLAIM else template_spec(obj)
