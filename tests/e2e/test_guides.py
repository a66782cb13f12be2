"""Every command of docs/admin-guide.md and docs/user-guide.md, run as written, in order, through
bash with errexit, against the real local control plane: the kustomize install and the Helm
install each on an empty cluster of its own; the upgrade and the rollback on another, where the
previous release was installed by its own guide; the rest on the session's cluster with
Sluicegate running (the user guide's as alice of team vision, through a kubeconfig that
impersonates her, so the commands carry no --as)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from policy import keys
from process import kubeyaml
from tests.chart import RELEASE, RELEASE_NAMESPACE, Helm, objects
from tests.doc_commands import GUIDES, ROOT, Block, run, scripts, shell_env
from tests.e2e.releases import PLURALS, checked_out, read_all, stored_as, stored_versions
from tests.manifest_files import kind_name

ADMIN_GUIDE, USER_GUIDE = GUIDES
# An upper bound for one block (waits inside it have their own timeouts), not a target.
BLOCK_SECONDS = 400
SAMPLES = ROOT / "manifests" / "samples"
IMAGE = "ghcr.io/sluicegate/sluicegate"
DEPLOYMENTS = ("sluicegate-webhook", "sluicegate-controller")


def play(block: Block, cluster: LocalCluster, workdir: Path, kubeconfig: Path,
         helm: Helm | None = None) -> None:
    """Run ``block`` as the reader would; with ``helm``, that helm is first on ``PATH``."""
    env = shell_env(cluster, kubeconfig)
    if helm is not None:
        env = {**helm.env(), **env, "PATH": os.pathsep.join([str(helm.binary.parent), env["PATH"]])}
    done = run(block, env, cwd=workdir, timeout=BLOCK_SECONDS)
    assert done.returncode == 0, (f"{block} failed with {done.returncode}:\n{block.text}\n--- stdout\n"
                                  f"{done.stdout}\n--- stderr\n{done.stderr}")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory like a checkout's top: the guides name manifests/ and charts/ relative to it
    and write files (certificates) into it."""
    shutil.copytree(ROOT / "manifests", tmp_path / "manifests")
    shutil.copytree(ROOT / "charts", tmp_path / "charts")
    return tmp_path


@pytest.fixture
def samples(cluster: LocalCluster, running: LocalSluicegate) -> Iterator[LocalCluster]:
    """The shared cluster with Sluicegate; afterwards the samples and what the guides made are
    deleted (the sample Policy and queues would change what other tests dispatch)."""
    yield cluster
    for args in (("delete", "namespace", "speech-research"),
                 ("delete", "queue", "speech-train"), ("delete", "team", "speech"),
                 ("delete", "clusterrolebinding", "sluicegate-reader-speech"),
                 ("delete", "priorityclass", "speech-urgent"),
                 ("delete", "-k", str(SAMPLES))):
        cluster.kubectl(*args, "--ignore-not-found", "--timeout=120s", check=False)


def test_the_admin_guides_install_commands_pass_on_an_empty_cluster(workdir: Path) -> None:
    cluster = LocalCluster(workdir / "cluster", nodes=1, gpus_per_node=8)
    cluster.up(progress=lambda line: None)
    try:
        for block in scripts(ADMIN_GUIDE, "install"):
            play(block, cluster, workdir, cluster.kubeconfig)
        assert (workdir / "tls" / "webhook" / "secret.yaml").exists()
        hooks = yaml.safe_load(cluster.kubectl("get", "mutatingwebhookconfiguration", "sluicegate",
                                               "-o", "yaml").stdout)
        assert all(w["clientConfig"].get("caBundle") for w in hooks["webhooks"]), "the CA is filled in"
        api = yaml.safe_load(cluster.kubectl("get", "apiservice", "v1alpha1.records.sluicegate.dev",
                                             "-o", "yaml").stdout)
        assert api["spec"].get("caBundle"), "the records API trusts the CA too"
        assert cluster.kubectl("get", "secret", "sluicegate-extender-tls", "-n", "sluicegate-system",
                               check=False).returncode == 0
    finally:
        cluster.down()


def test_the_admin_guides_helm_commands_pass_on_an_empty_cluster(workdir: Path) -> None:
    """The Helm install on a cluster of its own (the release's webhook configurations would judge
    every other test's pods): every object of the release is created, the CA filled in and the
    Secrets applied; then the uninstall removes every object but the CRDs, as Helm does. kwok
    runs no containers, so the objects are checked, not the processes."""
    helm = Helm.built(workdir / "helm-home")
    cluster = LocalCluster(workdir / "cluster", nodes=1, gpus_per_node=8)
    cluster.up(progress=lambda line: None)
    try:
        *install, uninstall = scripts(ADMIN_GUIDE, "helm")
        for block in install:
            play(block, cluster, workdir, cluster.kubeconfig, helm)
        manifest = helm.run("get", "manifest", RELEASE, "--namespace", RELEASE_NAMESPACE,
                            kubeconfig=cluster.kubeconfig).stdout
        released = {kind_name(o) for o in objects(manifest).values()}
        assert {"deployment.apps/sluicegate-webhook", "statefulset.apps/sluicegate-recorder",
                "configmap/sluicegate-scheduler-config", "namespace/sluicegate-system"} <= released
        assert set(cluster.kubectl("get", "-f", "-", "-o", "name", input=manifest).stdout.split()) == released
        hooks = yaml.safe_load(cluster.kubectl("get", "validatingwebhookconfiguration", "sluicegate",
                                               "-o", "yaml").stdout)
        assert hooks["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert all(w["clientConfig"].get("caBundle") for w in hooks["webhooks"]), "the CA is filled in"
        assert cluster.kubectl("get", "secret", "sluicegate-webhook-tls", "sluicegate-extender-tls",
                               "-n", "sluicegate-system", check=False).returncode == 0
        assert "kind: Certificate" in (workdir / "sluicegate-helm-cert-manager.yaml").read_text()
        history = helm.run("history", RELEASE, "--namespace", RELEASE_NAMESPACE, "-o", "json",
                           kubeconfig=cluster.kubeconfig).stdout
        assert [r["description"] for r in json.loads(history)][-2:] == ["Upgrade complete", "Rollback to 1"]
        assert not images(cluster) & {f"{IMAGE}:0.2.0"}, "the upgrade's image is rolled back"

        records = cluster.kubectl("get", "secrets", "-n", RELEASE_NAMESPACE, "-o", "name",
                                  "-l", f"owner=helm,name={RELEASE}").stdout.split()
        assert len(records) == 3, "the install's, upgrade's and rollback's records are in its namespace"

        play(uninstall, cluster, workdir, cluster.kubeconfig, helm)
        assert cluster.kubectl("get", "namespace", RELEASE_NAMESPACE, check=False).returncode != 0
        left = cluster.kubectl("get", "-f", "-", "-o", "name", "--ignore-not-found", input=manifest).stdout
        assert left.split() == [], "helm uninstall --wait returns once every object is gone"
        crds = [f"customresourcedefinition.apiextensions.k8s.io/{plural}.sluicegate.dev"
                for plural in ("queues", "teams", "presets", "policies")]
        assert cluster.kubectl("get", *crds, "-o", "name").stdout.split() == crds, "Helm keeps the CRDs"
    finally:
        cluster.down()


def test_the_admin_guides_commands_pass_on_a_cluster_running_sluicegate(
    samples: LocalCluster, workdir: Path
) -> None:
    for block in scripts(ADMIN_GUIDE, "cluster"):
        play(block, samples, workdir, samples.kubeconfig)
    assert samples.kubectl("get", "queue", "speech-train", check=False).returncode != 0, "the guide cleans up"


def test_the_user_guides_commands_pass_as_a_team_member(samples: LocalCluster, workdir: Path) -> None:
    samples.kubectl("apply", "-k", str(SAMPLES))  # what the platform team set up
    config = yaml.safe_load(samples.kubeconfig.read_text())
    for user in config["users"]:
        user["user"]["as"] = "alice"
        user["user"]["as-groups"] = ["vision-devs"]
    alice = workdir / "alice.kubeconfig"
    alice.write_text(kubeyaml.dump(config))
    whoami = subprocess.run([samples.binary("kubectl"), f"--kubeconfig={alice}", "auth", "whoami"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert "alice" in whoami and "vision-devs" in whoami
    for block in scripts(USER_GUIDE, "cluster"):
        play(block, samples, workdir, alice)


def images(cluster: LocalCluster) -> set[str]:
    """The image of every Sluicegate Deployment's pods."""
    image = "jsonpath={.spec.template.spec.containers[0].image}"
    return {cluster.kubectl("get", "deployment", name, "-n", "sluicegate-system", "-o", image).stdout
            for name in DEPLOYMENTS}


def test_the_admin_guides_upgrade_and_rollback_pass_on_a_cluster_running_the_previous_release(
    workdir: Path, tmp_path: Path
) -> None:
    """The previous release installed by its own guide, with its samples (``v1alpha1``); then
    this guide's upgrade from this checkout, with a new image tag as the guide asks: every object
    reads back unchanged through both versions, is stored as ``v1beta1``, and ``v1beta1`` alone
    is in ``storedVersions``; then the rollback puts the previous image back and keeps it so."""
    cluster = LocalCluster(workdir / "cluster", nodes=2, gpus_per_node=8)
    with checked_out(tmp_path / "previous") as previous:
        cluster.up(progress=lambda line: None)
        try:
            before_env = {**shell_env(cluster), "PYTHONPATH": str(previous)}
            for block in scripts(previous / "docs" / "admin-guide.md", "install"):
                done = run(block, before_env, cwd=previous, timeout=BLOCK_SECONDS)
                assert done.returncode == 0, f"the previous release's {block}: {done.stderr}"
            cluster.kubectl("apply", "-k", str(previous / "manifests" / "samples"))
            was = read_all(cluster, "v1alpha1")
            assert {plural for plural, _ in was} == set(PLURALS)
            (old_image,) = images(cluster)

            shutil.copytree(previous / "tls", workdir / "tls")  # kept safe since the install
            kustomization = workdir / "manifests" / "default" / "kustomization.yaml"
            tag = f"newTag: {old_image.rsplit(':', 1)[1]}"
            assert tag in kustomization.read_text()
            kustomization.write_text(kustomization.read_text().replace(tag, "newTag: upgraded"))
            for block in scripts(ADMIN_GUIDE, "upgrade"):
                play(block, cluster, workdir, cluster.kubeconfig)
            assert images(cluster) == {f"{IMAGE}:upgraded"}
            assert read_all(cluster, "v1alpha1") == was
            assert read_all(cluster, "v1beta1") == was
            for plural in PLURALS:
                assert stored_versions(cluster, plural) == ["v1beta1"]
                assert set(stored_as(cluster, plural).values()) == {keys.API_VERSION}

            for block in scripts(ADMIN_GUIDE, "rollback"):
                play(block, cluster, workdir, cluster.kubeconfig)
            assert images(cluster) == {old_image}
            assert read_all(cluster, "v1alpha1") == was
            assert stored_versions(cluster, "queues") == ["v1beta1"]
        finally:
            cluster.down()
