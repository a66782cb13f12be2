"""Separate client identities, so the API server counts each system's requests apart.

The API server has no per-client request counter, but API Priority and Fairness classifies
every request by a FlowSchema and counts it under that schema's name (``scraping``). An
``Identity`` is a ServiceAccount bound to a ClusterRole, a bearer token for it (TokenRequest),
and a FlowSchema that matches only that account, sent to the priority level the account would
reach anyway (``workload-low``: where APF's stock ``service-accounts`` schema sends it), so
classifying it apart changes its counting, not its treatment. Works on any cluster whose admin
we are; no access to the cluster's CA key is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from audit.connection import ApiError, Connection, Credentials
from audit.records import Obj

NAMESPACE = "sluicegate-audit"
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
# Below the stock service-accounts schema (9000), above every system schema (at most 900).
PRECEDENCE = 1000
TOKEN_SECONDS = 24 * 3600


@dataclass(frozen=True, slots=True)
class Identity:
    name: str
    namespace: str
    credentials: Credentials
    flow_schema: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


def flow_schema(name: str, namespace: str, priority_level: str) -> Obj:
    return {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": f"{namespace}-{name}"},
        "spec": {
            "priorityLevelConfiguration": {"name": priority_level},
            "matchingPrecedence": PRECEDENCE,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount",
                              "serviceAccount": {"name": name, "namespace": namespace}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                   "clusterScope": True, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            }],
        },
    }


async def _create(connection: Connection, path: str, body: Obj) -> None:
    try:
        await connection.create(path, body)
    except ApiError as e:
        if e.status != 409:
            raise


async def provision(
    connection: Connection,
    name: str,
    *,
    namespace: str = NAMESPACE,
    cluster_role: str = "cluster-admin",
    priority_level: str = "workload-low",
) -> Identity:
    """A service account ``name`` with ``cluster_role``, its token and its own FlowSchema.
    ``connection`` must be allowed to create all of these (a cluster admin)."""
    await _create(connection, "/api/v1/namespaces",
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await _create(connection, f"/api/v1/namespaces/{namespace}/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    await _create(connection, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{namespace}:{name}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    })
    schema = flow_schema(name, namespace, priority_level)
    await _create(connection, f"{FLOWCONTROL}/flowschemas", schema)
    answer = await connection.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": TOKEN_SECONDS}},
    )
    token = answer["status"]["token"]
    credentials = replace(connection.credentials, cert_pem=None, key_pem=None, token=token)
    return Identity(name, namespace, credentials, schema["metadata"]["name"])


async def retire(connection: Connection, identity: Identity) -> None:
    """Remove what ``provision`` made for ``identity`` (the namespace stays for others)."""
    for path in (
        f"{FLOWCONTROL}/flowschemas/{identity.flow_schema}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{identity.namespace}:{identity.name}",
        f"/api/v1/namespaces/{identity.namespace}/serviceaccounts/{identity.name}",
    ):
        try:
            await connection.delete(path)
        except ApiError as e:
            if e.status != 404:
                raise
