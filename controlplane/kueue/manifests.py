"""What Kueue's release ships (CRDs, RBAC, webhooks, its Configuration), adapted to run Kueue as a
process on loopback beside the local control plane instead of as a Deployment in the cluster.

Everything is read from the Kueue module's own ``config/components`` in the Go module cache, so
the objects always match the binary's version; the functions that adapt them are pure.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Kueue's user: its client certificate's CN, so its API requests can be told apart from the
# control plane's (audit, flow-control metrics, RBAC).
USER = "kueue"
# The namespaces Kueue manages carry this label (its managedJobsNamespaceSelector); the pod
# webhooks are registered for these namespaces only, so Kueue never sees other pods.
NAMESPACE_LABEL = "benchmarks.sluicegate.dev/system"
NAMESPACE_LABEL_VALUE = "kueue"
# Kueue's own API group, and the core group of the pod integration: the only webhooks kept.
_KEPT_GROUPS = {"kueue.x-k8s.io", ""}
_WEBHOOK_CONFIGURATIONS = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}
# The roles of the release that the manager itself needs (the rest are for users); the Role in
# manager_secrets_role.yaml lets it watch Secrets in its own namespace.
_MANAGER_ROLES = ("role.yaml", "metrics_auth_role.yaml", "manager_secrets_role.yaml")
# Kueue's own namespace (the release's default), where it watches Secrets.
NAMESPACE = "kueue-system"


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """Kueue's client-side rate limit towards the API server (Configuration.clientConnection)."""

    qps: float
    burst: int


# The release's shipped Configuration (config/components/manager) sets QPS 50, burst 100; this
# raises the limit so far that the API server and the CPU decide Kueue's pace instead.
RAISED_LIMITS = ClientLimits(qps=1000.0, burst=1000)


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where Kueue listens, all on 127.0.0.1."""

    webhook: int
    metrics: int
    health: int


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def crd_files(source: Path) -> list[Path]:
    """Every CRD of the release, as shipped (no conversion webhook: only v1beta2, the storage
    version, is ever used here)."""
    return sorted((source / "config/components/crd/bases").glob("*.yaml"))


def shipped_configuration(source: Path) -> dict[str, Any]:
    """The Configuration a release installation starts from."""
    documents = _documents(source / "config/components/manager/controller_manager_config.yaml")
    return documents[0]


def configuration(
    shipped: Mapping[str, Any], endpoints: Endpoints, cert_dir: Path, limits: ClientLimits | None
) -> dict[str, Any]:
    """The shipped Configuration with what running outside the cluster needs changed, and the
    client limits replaced when ``limits`` is given (None keeps the shipped ones).

    Changed: the plain-pod integration only, for labelled namespaces; no leader election (one
    replica); no internal certificate management (its certificates name the in-cluster Service,
    not 127.0.0.1) but ``certDir`` holding ours; every listener on 127.0.0.1 at a free port; the
    VisibilityOnDemand feature off (its server binds 0.0.0.0:8082, which two peers would share).
    The shipped controller concurrency is kept.
    """
    config = copy.deepcopy(dict(shipped))
    config["namespace"] = NAMESPACE
    config["health"] = {"healthProbeBindAddress": f"127.0.0.1:{endpoints.health}"}
    config["metrics"] = {**config.get("metrics", {}), "bindAddress": f"127.0.0.1:{endpoints.metrics}"}
    config["webhook"] = {"host": "127.0.0.1", "port": endpoints.webhook, "certDir": str(cert_dir)}
    config["leaderElection"] = {"leaderElect": False}
    config["internalCertManagement"] = {"enable": False}
    config["managedJobsNamespaceSelector"] = {"matchLabels": {NAMESPACE_LABEL: NAMESPACE_LABEL_VALUE}}
    config["manageJobsWithoutQueueName"] = False
    config["integrations"] = {"frameworks": ["pod"]}
    config["featureGates"] = {**config.get("featureGates", {}), "VisibilityOnDemand": False}
    if limits is not None:
        config["clientConnection"] = {"qps": limits.qps, "burst": limits.burst}
    return config


def _kept(webhook: Mapping[str, Any]) -> bool:
    return all(set(rule.get("apiGroups", [])) <= _KEPT_GROUPS for rule in webhook.get("rules", []))


def _serves_pods(webhook: Mapping[str, Any]) -> bool:
    return any("pods" in rule.get("resources", []) for rule in webhook.get("rules", []))


def webhook_configurations(
    shipped: Iterable[Mapping[str, Any]], url: str, ca_pem: bytes
) -> list[dict[str, Any]]:
    """The release's webhook configurations, reduced to Kueue's own kinds and pods, and pointed
    at ``url`` (``https://127.0.0.1:<port>``) with ``ca_pem`` as the CA bundle.

    Webhooks of integrations that are off are dropped: Kueue does not serve them, and their
    ``failurePolicy: Fail`` would refuse every Job, Deployment or StatefulSet in the cluster.
    The pod webhooks select the labelled namespaces only (the release excludes kube-system and
    kueue-system instead), so pods elsewhere never wait on Kueue.
    """
    bundle = base64.b64encode(ca_pem).decode()
    result = []
    for document in shipped:
        kind = document["kind"]
        if kind not in _WEBHOOK_CONFIGURATIONS:
            continue
        webhooks = []
        for webhook in document.get("webhooks", []):
            if not _kept(webhook):
                continue
            adapted = copy.deepcopy(dict(webhook))
            path = webhook["clientConfig"]["service"]["path"]
            adapted["clientConfig"] = {"url": f"{url}{path}", "caBundle": bundle}
            if _serves_pods(webhook):
                adapted["namespaceSelector"] = {"matchLabels": {NAMESPACE_LABEL: NAMESPACE_LABEL_VALUE}}
            webhooks.append(adapted)
        result.append({
            "apiVersion": document["apiVersion"],
            "kind": kind,
            "metadata": {"name": _WEBHOOK_CONFIGURATIONS[kind]},
            "webhooks": webhooks,
        })
    return result


def shipped_webhooks(source: Path) -> list[dict[str, Any]]:
    return _documents(source / "config/components/webhook/manifests.yaml")


def shipped_roles(source: Path) -> list[dict[str, Any]]:
    rbac = source / "config/components/rbac"
    return [d for name in _MANAGER_ROLES for d in _documents(rbac / name)]


def rbac(roles: Iterable[Mapping[str, Any]], user: str = USER) -> list[dict[str, Any]]:
    """Kueue's namespace, the manager's roles (renamed ``kueue-<name>``; a namespaced Role goes to
    Kueue's namespace) and a binding of each to ``user``."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    ]
    for role in roles:
        name = f"kueue-{role['metadata']['name']}"
        metadata = {"name": name} if role["kind"] == "ClusterRole" else {"name": name, "namespace": NAMESPACE}
        objects.append({**copy.deepcopy(dict(role)), "metadata": metadata})
        objects.append({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": f"{role['kind']}Binding",
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        })
    return objects


def managed_namespace(name: str) -> dict[str, Any]:
    """A namespace whose pods Kueue manages (when they name a LocalQueue)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {NAMESPACE_LABEL: NAMESPACE_LABEL_VALUE}},
    }
