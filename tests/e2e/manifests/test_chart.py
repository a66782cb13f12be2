"""The Helm chart charts/sluicegate and the kustomize install are one install: rendered with the
same choices they give the same objects (Helm's four labels aside); ``helm lint`` is clean; and
the chart passes the API server's strict server-side dry run as ``manifests/default`` does
(``test_install.py``). ``helm install`` and ``helm uninstall`` on a cluster of their own are the
admin guide's commands, run with their checks by ``tests/e2e/test_guides.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controlplane.launching import LocalCluster
from tests.chart import CHART, RELEASE, Helm, differences, objects
from tests.e2e.manifests.conftest import dry_run_lines, render
from tests.manifest_files import MANIFESTS, kind_name


def _with_monitoring(cluster: LocalCluster, tmp_path: Path) -> str:
    """manifests/default with the monitoring component, as the admin guide's overlay adds it
    (kustomize takes only relative paths)."""
    overlay = tmp_path / "with-monitoring"
    overlay.mkdir()
    default, monitoring = (os.path.relpath(MANIFESTS / p, overlay)
                           for p in ("default", "components/monitoring"))
    overlay.joinpath("kustomization.yaml").write_text(
        f"resources:\n- {default}\ncomponents:\n- {monitoring}\n")
    return cluster.kubectl("kustomize", str(overlay)).stdout


def test_the_chart_with_its_defaults_renders_what_manifests_default_renders(
    cluster: LocalCluster, helm: Helm
) -> None:
    assert differences(helm.template(), render(cluster, "default")) == []


def test_the_chart_with_cert_manager_renders_what_the_cert_manager_overlay_renders(
    cluster: LocalCluster, helm: Helm
) -> None:
    chart = helm.template("--set", "certificates.source=certManager")
    assert differences(chart, render(cluster, "default-cert-manager")) == []
    assert any(o["kind"] == "Certificate" for o in objects(chart).values())


def test_the_chart_given_the_ca_fills_it_in_as_the_certificates_command_does(
    cluster: LocalCluster, helm: Helm, tmp_path: Path
) -> None:
    """``--set-file certificates.caCert=ca.crt`` against ``kubectl kustomize manifests/default |
    python -m certs bundle --ca ca.crt``: the same caBundle in the same places."""
    subprocess.run([sys.executable, "-m", "certs", "webhook", "--dir", str(tmp_path)], check=True,
                   capture_output=True, timeout=60)
    ca = tmp_path / "ca.crt"
    kustomize = subprocess.run([sys.executable, "-m", "certs", "bundle", "--ca", str(ca)], check=True,
                               input=render(cluster, "default"), capture_output=True, text=True,
                               timeout=60).stdout
    chart = helm.template("--set-file", f"certificates.caCert={ca}")
    assert differences(chart, kustomize) == []
    filled = [o for o in objects(chart).values() if o["kind"] == "APIService"]
    assert filled and all(o["spec"].get("caBundle") for o in filled)


def test_the_chart_with_monitoring_renders_the_monitoring_component(
    cluster: LocalCluster, helm: Helm, tmp_path: Path
) -> None:
    chart = helm.template("--set", "monitoring.enabled=true")
    assert differences(chart, _with_monitoring(cluster, tmp_path)) == []
    kinds = {o["kind"] for o in objects(chart).values()}
    assert "PrometheusRule" in kinds


def test_helm_lint_finds_nothing_with_the_defaults_or_with_every_option(helm: Helm) -> None:
    every = "monitoring.enabled=true,samples.enabled=true,certificates.source=certManager"
    for values in ((), ("--set", every)):
        result = helm.run("lint", "--strict", str(CHART), *values, check=False)
        assert result.returncode == 0 and "0 chart(s) failed" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize(("values", "message"), [
    (("--namespace", "sluicegate-system"), "install the release from another namespace"),
    (("--set", "certificates.source=vault"),
     'certificates.source is "vault": it must be secrets or certManager'),
])
def test_a_release_the_chart_cannot_make_is_refused_saying_why(
    helm: Helm, values: tuple[str, ...], message: str
) -> None:
    result = helm.run("template", RELEASE, str(CHART), *values, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_the_chart_passes_strict_server_side_dry_run(installed: LocalCluster, helm: Helm) -> None:
    """The chart's objects validated by the API server (Pod Security, CEL match conditions),
    none stored; the namespace and CRDs exist already, as for the kustomize dry run."""
    rendered = helm.template()
    result = installed.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered,
                               check=False)
    assert dry_run_lines(result) == {kind_name(o) for o in objects(rendered).values()}


def test_the_values_reach_every_workload(helm: Helm) -> None:
    """What the values say lands where a reader of values.yaml expects it, in all three workloads;
    a value set in part (the controller's memory limit) keeps the rest of its defaults."""
    chart = objects(helm.template(
        "--set", "image.repository=registry.example.com/sluicegate,image.tag=1.2.3,image.pullPolicy=Always",
        "--set", "webhook.replicas=3,controller.replicas=4,controller.resources.limits.memory=2Gi",
        "--set", "nodeSelector.pool=system,priorityClassName=platform-critical",
        "--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists",
        "--set", "tolerations[0].effect=NoSchedule",
        "--set", "recorder.storage=20Gi,recorder.storageClassName=fast,recorder.retention=30d",
    ))
    workloads = {o["metadata"]["name"]: o for o in chart.values()
                 if o["kind"] in ("Deployment", "StatefulSet")}
    assert set(workloads) == {"sluicegate-webhook", "sluicegate-controller", "sluicegate-recorder"}
    for workload in workloads.values():
        pod = workload["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == "registry.example.com/sluicegate:1.2.3"
        assert container["imagePullPolicy"] == "Always"
        assert pod["nodeSelector"] == {"pool": "system"}
        assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
        assert pod["priorityClassName"] == "platform-critical"
    assert workloads["sluicegate-webhook"]["spec"]["replicas"] == 3
    assert workloads["sluicegate-controller"]["spec"]["replicas"] == 4
    controller = workloads["sluicegate-controller"]["spec"]["template"]["spec"]["containers"][0]
    assert controller["resources"] == {"requests": {"cpu": "200m", "memory": "256Mi"},
                                       "limits": {"memory": "2Gi"}}
    recorder = workloads["sluicegate-recorder"]["spec"]
    (claim,) = recorder["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    env = {e["name"]: e.get("value") for e in recorder["template"]["spec"]["containers"][0]["env"]}
    assert env["SLUICEGATE_RETENTION"] == "30d"
