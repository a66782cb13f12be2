"""What each operator's module ships (CRDs, the manager's ClusterRole and its binding), adapted
to run the operator as a process on loopback beside the local control plane instead of as a
Deployment in the cluster, and the flags that run it so.

Everything is read from the operator module's own manifests in the Go module cache, so the
objects always match the binary's version; the functions here are pure.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controlplane import building


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where an operator listens, all on 127.0.0.1 (``webhook``: the training-operator's only)."""

    metrics: int
    health: int
    webhook: int = 0


@dataclass(frozen=True, slots=True)
class Shape:
    """One operator as this harness runs it: the binary, where its manifests are in its module,
    and the namespace and ServiceAccount a release installs it as."""

    name: str  # the process's name in cluster.json, which is its binary's name
    build: building.Operator
    namespace: str
    service_account: str
    crds: tuple[str, ...]  # paths inside the module
    roles: tuple[str, ...]  # paths inside the module: the manager's ClusterRole

    @property
    def user(self) -> str:
        """The user name the API server gives the ServiceAccount's token: the certificate's CN."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    @property
    def groups(self) -> tuple[str, ...]:
        """A ServiceAccount's groups (``system:authenticated`` the API server adds to anyone)."""
        return ("system:serviceaccounts", f"system:serviceaccounts:{self.namespace}")


# The release's Deployment runs in ``kubeflow`` (the training-operator's own default namespace,
# where its certificate Secret lives) as the ServiceAccount ``training-operator``. Only the
# PyTorchJob CRD is installed, and only the PyTorchJob controller runs (``--enable-scheme``).
TRAINING_OPERATOR = Shape(
    name=building.TRAINING_OPERATOR.binary,
    build=building.TRAINING_OPERATOR,
    namespace="kubeflow",
    service_account="training-operator",
    crds=("manifests/base/crds/kubeflow.org_pytorchjobs.yaml",),
    roles=("manifests/base/rbac/role.yaml",),
)
# KubeRay's Helm chart installs into a namespace of the user's choice; ``ray-system`` is the one
# its documentation uses. The RayService CRD is installed too: its controller always runs, and a
# controller whose kind the API server does not serve stops the whole manager.
KUBERAY = Shape(
    name=building.KUBERAY.binary,
    build=building.KUBERAY,
    namespace="ray-system",
    service_account="kuberay-operator",
    crds=("config/crd/bases/ray.io_rayclusters.yaml", "config/crd/bases/ray.io_rayjobs.yaml",
          "config/crd/bases/ray.io_rayservices.yaml"),
    roles=("config/rbac/role.yaml",),
)
SHAPES = (TRAINING_OPERATOR, KUBERAY)

# The training-operator's certificate rotator (always on in v1.8.1) reads and rewrites this
# Secret in the operator's namespace; the release creates it empty.
WEBHOOK_SECRET = "training-operator-webhook-cert"
# Where controller-runtime's webhook server, and the rotator's check that certificates are
# mounted, look for tls.crt and tls.key: the release mounts the Secret there.
WEBHOOK_CERT_DIR = Path("k8s-webhook-server/serving-certs")  # below /tmp


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def crd_files(source: Path, shape: Shape) -> list[Path]:
    return [source / relative for relative in shape.crds]


def shipped_roles(source: Path, shape: Shape) -> list[dict[str, Any]]:
    return [d for relative in shape.roles for d in _documents(source / relative)
            if d.get("kind") == "ClusterRole"]


def rbac(shape: Shape, roles: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The operator's namespace and ServiceAccount, its ClusterRoles as shipped, and a
    ClusterRoleBinding of each to the ServiceAccount, as the release binds them: the operator's
    client certificate names that ServiceAccount's user, so the bindings apply to it."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": shape.namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": shape.service_account, "namespace": shape.namespace}},
    ]
    for role in roles:
        name = role["metadata"]["name"]
        objects.append({**copy.deepcopy(dict(role)), "metadata": {"name": name}})
        objects.append({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": shape.service_account,
                          "namespace": shape.namespace}],
        })
    return objects


def webhook_secret() -> dict[str, Any]:
    """The empty Secret the training-operator's certificate rotator fills."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": WEBHOOK_SECRET, "namespace": TRAINING_OPERATOR.namespace}}


def training_operator_args(endpoints: Endpoints) -> list[str]:
    """The PyTorchJob controller alone, without leader election (one process) or gang
    scheduling, with its metrics and probes on 127.0.0.1.

    v1.8.1 has no flag to turn its webhook server or certificate rotation off: the server
    listens on every address at ``endpoints.webhook`` (no flag sets its host), and no webhook
    configuration points the API server at it, so nothing calls it.
    """
    return [
        "--enable-scheme=pytorchjob",
        "--leader-elect=false",
        f"--metrics-bind-address=127.0.0.1:{endpoints.metrics}",
        f"--health-probe-bind-address=127.0.0.1:{endpoints.health}",
        f"--webhook-server-port={endpoints.webhook}",
        "--zap-log-level=info",
    ]


def kuberay_args(endpoints: Endpoints) -> list[str]:
    """Without leader election (on by default), its webhook (off unless ``ENABLE_WEBHOOKS``) or a
    batch scheduler, with its metrics and probes on 127.0.0.1."""
    return [
        "--enable-leader-election=false",
        f"--metrics-addr=127.0.0.1:{endpoints.metrics}",
        f"--health-probe-bind-address=127.0.0.1:{endpoints.health}",
        "--log-stdout-encoder=console",
    ]
