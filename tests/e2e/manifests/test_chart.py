"""The Helm chart charts/sluicegate and the kustomize install are one install: rendered with the
same choices they give the same objects (Helm's four labels aside, and the samples' resource
policy); a release it cannot make safely is refused saying why; ``helm lint`` is clean; and
the chart passes the API server's strict server-side dry run as ``manifests/default`` does
(``test_install.py``). ``helm install`` and ``helm uninstall`` on a cluster of their own are the
admin guide's commands, run with their checks by ``tests/e2e/test_guides.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controlplane.launching import LocalCluster
from tests.chart import CHART, KEEP, RELEASE, RELEASE_NAMESPACE, Helm, differences, objects
from tests.e2e.manifests.conftest import dry_run_lines, render
from tests.manifest_files import MANIFESTS, kind_name


def _overlay(cluster: LocalCluster, tmp_path: Path, resources: tuple[str, ...],
             components: tuple[str, ...] = ()) -> str:
    """An overlay of kustomizations of manifests/ rendered, as the admin guide's overlays add
    components (kustomize takes only relative paths)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    kustomization = {field: [os.path.relpath(MANIFESTS / p, overlay) for p in paths]
                     for field, paths in (("resources", resources), ("components", components)) if paths}
    overlay.joinpath("kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return cluster.kubectl("kustomize", str(overlay)).stdout


def _bundled(kustomize: str, ca: Path) -> str:
    """kustomize's rendering with the CA filled in, as the admin guide's install does it."""
    return subprocess.run([sys.executable, "-m", "certs", "bundle", "--ca", str(ca)], check=True,
                          input=kustomize, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The webhook's CA, as the certificates command writes it (tls/webhook/ca.crt)."""
    directory = tmp_path_factory.mktemp("tls")
    subprocess.run([sys.executable, "-m", "certs", "webhook", "--dir", str(directory)], check=True,
                   capture_output=True, timeout=60)
    return directory / "ca.crt"


def test_the_chart_given_the_ca_renders_what_manifests_default_renders_with_it(
    cluster: LocalCluster, helm: Helm, ca: Path
) -> None:
    """``--set-file certificates.caCert=ca.crt`` against ``kubectl kustomize manifests/default |
    python -m certs bundle --ca ca.crt``: the same objects, the same caBundle in the same places."""
    chart = helm.template("--set-file", f"certificates.caCert={ca}")
    assert differences(chart, _bundled(render(cluster, "default"), ca)) == []
    filled = [o for o in objects(chart).values() if o["kind"] == "APIService"]
    assert filled and all(o["spec"].get("caBundle") for o in filled)


def test_the_chart_with_cert_manager_renders_what_the_cert_manager_overlay_renders(
    cluster: LocalCluster, helm: Helm
) -> None:
    chart = helm.template("--set", "certificates.source=certManager")
    assert differences(chart, render(cluster, "default-cert-manager")) == []
    assert any(o["kind"] == "Certificate" for o in objects(chart).values())


def test_the_chart_with_monitoring_renders_the_monitoring_component(
    cluster: LocalCluster, helm: Helm, ca: Path, tmp_path: Path
) -> None:
    chart = helm.template("--set-file", f"certificates.caCert={ca}", "--set", "monitoring.enabled=true")
    kustomize = _overlay(cluster, tmp_path, ("default",), ("components/monitoring",))
    assert differences(chart, _bundled(kustomize, ca)) == []
    kinds = {o["kind"] for o in objects(chart).values()}
    assert "PrometheusRule" in kinds


def test_the_chart_with_samples_renders_them_and_tells_helm_to_keep_them(
    cluster: LocalCluster, helm: Helm, ca: Path, tmp_path: Path
) -> None:
    """The samples' objects are kustomize's with one annotation more, which makes ``helm
    uninstall`` (and an upgrade turning the samples off) leave them and the pods in their
    namespaces; the annotation is forgiven on them and nowhere else."""
    chart = helm.template("--set-file", f"certificates.caCert={ca}", "--set", "samples.enabled=true")
    samples = objects(render(cluster, "samples")).keys()
    kustomize = _bundled(_overlay(cluster, tmp_path, ("default", "samples")), ca)
    assert differences(chart, kustomize, kept=samples) == []
    rendered = objects(chart)
    kept = {k for k, o in rendered.items() if o["metadata"].get("annotations", {}).get(KEEP[0]) == KEEP[1]}
    assert kept == samples
    assert {k[1] for k in kept} >= {"Namespace", "Queue", "Team", "Preset", "Policy"}


def test_helm_lint_finds_nothing_with_the_defaults_or_with_every_option(helm: Helm, ca: Path) -> None:
    """The defaults with the one value they need (the CA), and every option on; rendered into the
    release namespace, so that no ``fail`` of the chart goes by as lint's mere information."""
    every = "monitoring.enabled=true,samples.enabled=true,certificates.source=certManager"
    for values in (("--set-file", f"certificates.caCert={ca}"), ("--set", every)):
        result = helm.run("lint", "--strict", str(CHART), "--namespace", RELEASE_NAMESPACE, *values,
                          check=False)
        output = result.stdout + result.stderr
        assert result.returncode == 0 and "0 chart(s) failed" in result.stdout, output
        assert "Fail:" not in output, output


NAMESPACE_REFUSED = (
    "the release may not be recorded in the namespace default: Helm keeps the release record as a Secret "
    "there, and whoever may write Secrets in the release namespace chooses what the next upgrade deploys; "
    "install into a namespace only cluster administrators write (e.g. --namespace sluicegate-release "
    "--create-namespace)")
CA_REFUSED = (
    "certificates.caCert must be the webhook's CA certificate in PEM (with certificates.source=secrets): "
    "give the file with --set-file certificates.caCert=<path to ca.crt> (e.g. tls/webhook/ca.crt; --set "
    "would give its path, not its content), and on upgrade keep it with --reuse-values")


@pytest.mark.parametrize(("namespace", "ca_value", "message"), [
    pytest.param("sluicegate-system", "", "the chart creates the namespace sluicegate-system itself, with "
                 "its Pod Security labels: install the release from another namespace, one only cluster "
                 "administrators write", id="the chart's own namespace"),
    pytest.param("default", "", NAMESPACE_REFUSED, id="default, whose editors may write the release record"),
    pytest.param(RELEASE_NAMESPACE, None, CA_REFUSED,
                 id="no CA (an install without it, or an upgrade without --reuse-values)"),
    pytest.param(RELEASE_NAMESPACE, "tls/webhook/ca.crt", CA_REFUSED,
                 id="the CA's path given with --set instead of its content"),
    pytest.param(RELEASE_NAMESPACE, "not a pem", CA_REFUSED, id="a CA that is not PEM"),
])
def test_a_release_the_chart_cannot_make_safely_is_refused_saying_why(
    helm: Helm, ca: Path, namespace: str, ca_value: str | None, message: str
) -> None:
    """``ca_value`` "" gives the right CA (only the namespace is wrong), None none at all."""
    given = {"": ("--set-file", f"certificates.caCert={ca}"), None: ()}.get(
        ca_value, ("--set", f"certificates.caCert={ca_value}"))
    result = helm.run("template", RELEASE, str(CHART), "--namespace", namespace, *given, check=False)
    assert result.returncode != 0, result.stdout
    assert result.stderr.startswith("Error: execution error at (sluicegate/templates/base.yaml"), \
        result.stderr
    assert message in result.stderr, result.stderr


SCHEMA_REFUSED = ("Error: values don't meet the specifications of the schema(s) in the following chart(s):\n"
                  "sluicegate:\n")


@pytest.mark.parametrize(("values", "message"), [
    (("--set", "webhook.replicas=0"), "- at '/webhook/replicas': minimum: got 0, want 1"),
    (("--set", "controller.replicas=two"), "- at '/controller/replicas': got string, want integer"),
    (("--set", "image.repository="), "- at '/image/repository': minLength: got 0, want 1"),
    (("--set", "certificates.source=vault"), "- at '/certificates/source': value must be one of 'secrets', "
                                             "'certManager'"),
    (("--set", "recorder.retention=90x"), "'90x' does not match pattern"),
    (("--set", "recorder.retention=0d"), "'0d' does not match pattern '[1-9]'"),
    (("--set", "samples.enabled=yes"), "- at '/samples/enabled': got string, want boolean"),
    (("--set", "tolerations=none"), "- at '/tolerations': got string, want array"),
])
def test_values_the_schema_refuses_are_named_by_helm(
    helm: Helm, ca: Path, values: tuple[str, ...], message: str
) -> None:
    result = helm.run("template", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE,
                      "--set-file", f"certificates.caCert={ca}", *values, check=False)
    assert result.returncode != 0 and result.stderr.startswith(SCHEMA_REFUSED), result.stderr
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("retention", ["90d", "2w", "36h", "1h30m", "250ms", "3600", "0.5d"])
def test_a_retention_the_recorder_accepts_passes_the_schema(helm: Helm, ca: Path, retention: str) -> None:
    chart = objects(helm.template("--set-file", f"certificates.caCert={ca}",
                                  "--set-string", f"recorder.retention={retention}"))
    recorder = next(o for o in chart.values() if o["kind"] == "StatefulSet")
    env = {e["name"]: e.get("value") for e in recorder["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SLUICEGATE_RETENTION"] == retention
    assert subprocess.run([sys.executable, "-c", "import sys; from recorder.settings import parse; "
                           "parse(['--retention', sys.argv[1]])", retention], capture_output=True,
                          timeout=60).returncode == 0, f"the recorder refuses {retention}"


def test_the_chart_passes_strict_server_side_dry_run(installed: LocalCluster, helm: Helm, ca: Path) -> None:
    """The chart's objects validated by the API server (Pod Security, CEL match conditions),
    none stored; the namespace and CRDs exist already, as for the kustomize dry run."""
    rendered = helm.template("--set-file", f"certificates.caCert={ca}")
    result = installed.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered,
                               check=False)
    assert dry_run_lines(result) == {kind_name(o) for o in objects(rendered).values()}


def test_the_values_reach_every_workload(helm: Helm, ca: Path) -> None:
    """What the values say lands where a reader of values.yaml expects it, in all three workloads;
    a value set in part (the controller's memory limit) keeps the rest of its defaults."""
    chart = objects(helm.template(
        "--set-file", f"certificates.caCert={ca}",
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
