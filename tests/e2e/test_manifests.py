"""The installation manifests against the real API server: ``kubectl apply -k
manifests/default`` passes a server-side dry run, and its output passes strict server-side
validation (every field known to the server's schemas)."""

from __future__ import annotations

from pathlib import Path

from controlplane.deploying import LocalSluicegate

ROOT = Path(__file__).resolve().parents[2]


def test_apply_k_manifests_default_succeeds_as_a_server_side_dry_run(running: LocalSluicegate) -> None:
    result = running.cluster.kubectl("apply", "-k", str(ROOT / "manifests" / "default"), "--dry-run=server")
    applied = result.stdout.splitlines()
    assert all(line.endswith("(server dry run)") for line in applied), result.stdout
    for expected in ("deployment.apps/sluicegate-webhook", "service/sluicegate-webhook",
                     "mutatingwebhookconfiguration.admissionregistration.k8s.io/sluicegate",
                     "validatingwebhookconfiguration.admissionregistration.k8s.io/sluicegate",
                     "poddisruptionbudget.policy/sluicegate-webhook"):
        assert any(line.startswith(expected + " ") for line in applied), f"{expected} in {applied}"


def test_the_kustomize_output_passes_strict_server_side_validation(running: LocalSluicegate) -> None:
    cluster = running.cluster
    rendered = cluster.kubectl("kustomize", str(ROOT / "manifests" / "default")).stdout
    result = cluster.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered,
                             check=False)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
