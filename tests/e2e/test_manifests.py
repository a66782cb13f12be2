"""The installation manifests over a running local install: the output of ``kubectl kustomize
manifests/default`` passes strict server-side validation (every field known to the server's
schemas) and applies cleanly over what ``make up`` installed. (The dry run of ``kubectl apply
-k manifests/default`` on a cluster without Sluicegate is in ``manifests/test_install.py``.)"""

from __future__ import annotations

from pathlib import Path

from controlplane.deploying import LocalSluicegate

ROOT = Path(__file__).resolve().parents[2]


def test_the_kustomize_output_passes_strict_server_side_validation(running: LocalSluicegate) -> None:
    cluster = running.cluster
    rendered = cluster.kubectl("kustomize", str(ROOT / "manifests" / "default")).stdout
    result = cluster.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered,
                             check=False)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
