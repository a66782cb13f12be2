"""Fixtures for the manifests' e2e tests: Sluicegate's CRDs and RBAC installed for real, the
samples applied for a module, and a rendering of any kustomization by the cluster's own kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from controlplane.launching import LocalCluster
from tests.manifest_files import MANIFESTS

CRDS = ("queues", "teams", "presets", "policies")


def render(cluster: LocalCluster, kustomization: str) -> str:
    """``kubectl kustomize manifests/<kustomization>`` with the control plane's kubectl."""
    return cluster.kubectl("kustomize", str(MANIFESTS / kustomization)).stdout


def rendered_objects(cluster: LocalCluster, kustomization: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render(cluster, kustomization)) if doc]


@pytest.fixture(scope="session")
def installed(cluster: LocalCluster) -> LocalCluster:
    """The CRDs, the namespace, the ServiceAccounts and their RBAC, applied as an admin would.

    Left in place: they are what every Sluicegate installation on this cluster uses, and
    applying them again is a no-op.
    """
    cluster.kubectl("apply", "-k", str(MANIFESTS / "crds"))
    cluster.kubectl("apply", "-k", str(MANIFESTS / "base"))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s",
        *(f"customresourcedefinition/{plural}.sluicegate.dev" for plural in CRDS),
    )
    return cluster


@pytest.fixture(scope="module")
def samples(installed: LocalCluster) -> Iterator[LocalCluster]:
    """manifests/samples applied for one test module, and deleted after it (the sample Policy and
    queues would otherwise change what other tests dispatch)."""
    installed.kubectl("apply", "-k", str(MANIFESTS / "samples"))
    yield installed
    installed.kubectl("delete", "-k", str(MANIFESTS / "samples"), "--ignore-not-found", "--timeout=90s")
