"""The DRA claims a pod names, read for admission (``policy.devices``).

Only a pod CREATE in an opted-in namespace, while the Policy maps some DeviceClass
(``deviceClasses``), and only for a pod that names claims, costs a GET per claim it names: a
ResourceClaimTemplate (Kubernetes makes the pod's own claim from it after the pod exists) or a
shared ResourceClaim. A claim that does not exist is passed as None, and admission refuses the
pod (its devices cannot be counted); any other failure is a ``KubeError`` (503: the client, or
the controller that creates the pod, tries again).
"""

from __future__ import annotations

from collections.abc import Mapping

from kube.connecting import ApiError, Connection
from kube.resources import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from policy import fields
from policy.admitting import NO_CLAIMS, Claims
from policy.devices import CLAIM, pod_claims
from policy.fields import Obj
from policy.model import Policy
from policy.reviews import POD, Operation, Request


class ClaimReader:
    """``claims(request, namespace, policy)``: the specs of the claims the pod names."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def claims(self, request: Request, namespace: str, policy: Policy) -> Claims:
        if request.kind != POD or request.operation is not Operation.CREATE or not policy.device_classes:
            return NO_CLAIMS
        found: dict[tuple[str, str], Obj | None] = {}
        for claim in pod_claims(fields.obj(request.object.get("spec"))):
            key = (claim.kind, claim.source)
            if key not in found:
                found[key] = await self._spec(claim.kind, claim.source, namespace)
        return found

    async def _spec(self, kind: str, name: str, namespace: str) -> Mapping[str, object] | None:
        resource = RESOURCE_CLAIMS if kind == CLAIM else RESOURCE_CLAIM_TEMPLATES
        try:
            obj = await self.connection.get(resource.path(name, namespace=namespace))
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        spec = fields.obj(obj.get("spec"))
        return spec if kind == CLAIM else fields.obj(spec.get("spec"))
