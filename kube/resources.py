"""The API resources Sluicegate reads and writes, and the URL paths that address them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from policy import keys


@dataclass(frozen=True, slots=True)
class Resource:
    """One kind of object on the API server, addressed by group, version and plural."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, name: str = "", *, namespace: str = "", subresource: str = "") -> str:
        """The URL path of the collection (no ``name``) or of one object.

        A namespaced resource without ``namespace`` is the collection across all namespaces.
        """
        out = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace:
            out += f"/namespaces/{quote(namespace, safe='')}"
        out += f"/{self.plural}"
        if name:
            out += f"/{quote(name, safe='')}"
        if subresource:
            out += f"/{subresource}"
        return out

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


QUEUES: Final = Resource(keys.GROUP, keys.VERSION, "queues", "Queue")
TEAMS: Final = Resource(keys.GROUP, keys.VERSION, "teams", "Team")
PRESETS: Final = Resource(keys.GROUP, keys.VERSION, "presets", "Preset")
POLICIES: Final = Resource(keys.GROUP, keys.VERSION, "policies", "Policy")
NAMESPACES: Final = Resource("", "v1", "namespaces", "Namespace")
PODS: Final = Resource("", "v1", "pods", "Pod", namespaced=True)
JOBS: Final = Resource("batch", "v1", "jobs", "Job", namespaced=True)
NODES: Final = Resource("", "v1", "nodes", "Node")
PRIORITY_CLASSES: Final = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass")
EVENTS: Final = Resource("events.k8s.io", "v1", "events", "Event", namespaced=True)
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
RECORDS: Final = Resource("records.sluicegate.dev", "v1alpha1", "records", "Record", namespaced=True)
# The visibility API the controller serves: each namespace's waiting pods, and per queue for admins
# (the subresource ``pendingpods`` of the cluster-scoped ``queues`` of that group).
PENDING_PODS: Final = Resource("visibility.sluicegate.dev", "v1alpha1", "pendingpods", "PendingPod",
                               namespaced=True)
"""The run records: the recorder serves them as an aggregated API (the APIService
``v1alpha1.records.sluicegate.dev``), one collection in the recorder's own namespace, so the
API server authenticates every reader and RBAC (``list records``) decides."""
CORE_EVENTS: Final = Resource("", "v1", "events", "Event", namespaced=True)
"""Events as ``kubectl describe`` reads them (their ``involvedObject`` field selectors)."""
CRDS: Final = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition")
CATALOG: Final = (QUEUES, TEAMS, PRESETS, POLICIES)
"""Sluicegate's own kinds, each a CustomResourceDefinition named ``<plural>.<group>``."""
RESOURCE_CLAIMS: Final = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", namespaced=True)
RESOURCE_CLAIM_TEMPLATES: Final = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True
)
"""Dynamic Resource Allocation: what a pod's ``spec.resourceClaims`` name (``policy.devices``)."""
