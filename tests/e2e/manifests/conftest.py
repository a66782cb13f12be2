"""Fixtures for the manifests' e2e tests: Sluicegate's CRDs and RBAC installed for real, the
samples applied for a module, a rendering of any kustomization by the cluster's own kubectl, and
helm of the pinned release."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.launching import LocalCluster
from tests.chart import Helm
from tests.manifest_files import MANIFESTS

CRDS = ("queues", "teams", "presets", "policies")


def render(cluster: LocalCluster, kustomization: str) -> str:
    """``kubectl kustomize manifests/<kustomization>`` with the control plane's kubectl."""
    return cluster.kubectl("kustomize", str(MANIFESTS / kustomization)).stdout


def rendered_objects(cluster: LocalCluster, kustomization: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render(cluster, kustomization)) if doc]


def dry_run_lines(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The objects a ``kubectl apply --dry-run=server`` accepted, as ``kind_name`` names them; it
    must have succeeded without a warning."""
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, f"the API server warned: {result.stderr}"
    return {line.split(" ", 1)[0] for line in result.stdout.splitlines() if line.endswith("(server dry run)")}


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm v3.22.0, built into its cache first if missing (a few minutes), with a home of its own."""
    home: Path = tmp_path_factory.mktemp("helm")
    return Helm.built(home)


@pytest.fixture(scope="session")
def installed(cluster: LocalCluster) -> LocalCluster:
    """The CRDs, the namespace, the ServiceAccounts and their RBAC, applied as an admin would.

    Left in place: they are what every Sluicegate installation on this cluster uses, and
    applying them again is a no-op.
    """
    return install(cluster)


def install(cluster: LocalCluster) -> LocalCluster:
    """What ``installed`` applies, on ``cluster``."""
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
