"""Installing Sluicegate with its manifests, against the real API server, through the real kubectl:
the default install passes server-side validation, the local overlay does once `make up` fills
it in, the samples apply and `kubectl get queues` shows their columns, RBAC grants each process
what it needs and nothing more, and kube-scheduler accepts the extender configuration."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from controlplane.launching import LocalCluster
from process import kubeyaml
from tests.e2e.manifests.conftest import dry_run_lines, render, rendered_objects
from tests.manifest_files import (
    ACCOUNT_GROUPS,
    CONTROLLER_ACCOUNT,
    LOCAL_PLACEHOLDERS,
    MANIFESTS,
    WEBHOOK_ACCOUNT,
    kind_name,
)


def test_the_default_install_passes_server_side_dry_run(installed: LocalCluster) -> None:
    """`kubectl apply -k manifests/default --dry-run=server` -- every object validated by the API
    server (Deployments against the namespace's enforced "restricted" Pod Security, webhook
    matchConditions compiled as CEL), none stored. The namespace and CRDs exist already
    (`installed`): a dry run cannot create a namespace for the objects that go in it."""
    result = installed.kubectl("apply", "-k", str(MANIFESTS / "default"), "--dry-run=server", check=False)
    accepted = dry_run_lines(result)
    expected = {kind_name(o) for o in rendered_objects(installed, "default")}
    assert accepted == expected
    assert {"deployment.apps/sluicegate-webhook", "deployment.apps/sluicegate-controller",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/sluicegate",
            "validatingwebhookconfiguration.admissionregistration.k8s.io/sluicegate"} <= accepted


def test_the_local_overlay_applies_once_its_placeholders_are_filled(installed: LocalCluster) -> None:
    text = render(installed, "local")
    for placeholder in LOCAL_PLACEHOLDERS:
        assert placeholder in text
    ca = base64.b64encode(installed.layout.pki.ca_cert.read_bytes()).decode()
    filled = text.replace("${SLUICEGATE_WEBHOOK_PORT}", "9443").replace("${SLUICEGATE_CA_BUNDLE}", ca)
    objects = [o for o in yaml.safe_load_all(filled) if o]
    configs = [o for o in objects if o["kind"].endswith("WebhookConfiguration")]
    urls = [w["clientConfig"]["url"] for c in configs for w in c["webhooks"]]
    # pods, Jobs and CronJobs, the apps owners (Deployments, ReplicaSets, StatefulSets,
    # DaemonSets, ReplicationControllers) and the operators' kinds (PyTorchJobs, RayClusters,
    # RayJobs): mutated, then the final checks of each and the guard of the stamps
    assert urls == ["https://127.0.0.1:9443/mutate"] * 5 + ["https://127.0.0.1:9443/validate"] * 6
    assert not any(o["kind"] in ("Deployment", "Service") for o in objects)
    result = installed.kubectl("apply", "--dry-run=server", "-f", "-", input=filled, check=False)
    assert dry_run_lines(result) == {kind_name(o) for o in objects}


def test_the_cert_manager_overlay_issues_both_certificates_and_injects_the_ca(cluster: LocalCluster) -> None:
    objects = rendered_objects(cluster, "default-cert-manager")
    certificates = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Certificate"}
    assert certificates["sluicegate-webhook"]["secretName"] == "sluicegate-webhook-tls"
    assert "sluicegate-webhook.sluicegate-system.svc" in certificates["sluicegate-webhook"]["dnsNames"]
    assert certificates["sluicegate-extender"]["secretName"] == "sluicegate-extender-tls"
    for config in (o for o in objects if o["kind"].endswith("WebhookConfiguration")):
        annotations = config["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == "sluicegate-system/sluicegate-webhook"
    mounted = {v["secret"]["secretName"] for o in objects if o["kind"] == "Deployment"
               for v in o["spec"]["template"]["spec"]["volumes"] if "secret" in v}
    assert mounted == {c["secretName"] for name, c in certificates.items() if name != "sluicegate-ca"}


def _table(cluster: LocalCluster, *args: str) -> list[list[str]]:
    lines = cluster.kubectl("get", *args).stdout.splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines]


def test_kubectl_get_queues_shows_priority_running_pending_gpus_and_paused(samples: LocalCluster) -> None:
    header, *rows = _table(samples, "queues")
    assert header == ["NAME", "PRIORITY", "RUNNING", "PENDING", "GPUS", "PAUSED", "AGE"]
    names = [row[0] for row in rows]
    assert {"notebooks", "vision-train", "nlp-train", "urgent-retrain", "sweeps", "cpu-batch"} <= set(names)
    # The gate controller reports through the status subresource, as its ServiceAccount.
    status = {"status": {"pending": 5, "running": 3, "usage": {"nvidia.com/gpu": "12"},
                         "oldestPendingTime": "2026-01-01T00:00:00Z",
                         "display": {"running": "3/8", "gpus": "12/16"}}}
    samples.kubectl(
        "patch", "queue", "vision-train", "--subresource=status", "--type=merge", "-p", json.dumps(status),
        f"--as={CONTROLLER_ACCOUNT}", *(f"--as-group={g}" for g in ACCOUNT_GROUPS),
    )
    (row,) = _table(samples, "queue", "vision-train", "--no-headers")
    assert row[:6] == ["vision-train", "10", "3/8", "5", "12/16", "false"]
    wide_header, wide_row = _table(samples, "queue", "vision-train", "-o", "wide")
    assert wide_header[-2:] == ["ORDERING", "OLDEST-PENDING"]
    assert wide_row[-2] == "StrictFIFO"
    header, *_ = _table(samples, "teams")
    assert header == ["NAME", "RUNNING", "PENDING", "GPUS", "AGE"]
    header, *_ = _table(samples, "presets")
    assert header == ["NAME", "STRATEGY", "QUEUE", "AGE"]


def _can(cluster: LocalCluster, user: str, groups: tuple[str, ...], *question: str) -> bool:
    result = cluster.kubectl(
        "auth", "can-i", *question, f"--as={user}", *(f"--as-group={g}" for g in groups), check=False,
    )
    return result.stdout.strip() == "yes"


def test_break_glass_lets_the_on_call_group_release_urgent_retraining_only(samples: LocalCluster) -> None:
    oncall = ("carol", ("ml-oncall", "system:authenticated"))
    vision = ("alice", ("vision-devs", "system:authenticated"))
    assert _can(samples, *oncall, "release", "queues.sluicegate.dev/urgent-retrain")
    assert not _can(samples, *oncall, "release", "queues.sluicegate.dev/vision-train")
    assert not _can(samples, *vision, "release", "queues.sluicegate.dev/urgent-retrain")
    assert _can(samples, *vision, "list", "queues.sluicegate.dev")
    assert not _can(samples, *vision, "update", "queues.sluicegate.dev/vision-train")
    assert _can(samples, *vision, "create", "pods", "-n", "vision-research")
    assert not _can(samples, *vision, "create", "pods", "-n", "nlp-research")


RBAC = [
    # (account, question..., allowed)
    (WEBHOOK_ACCOUNT, ("list", "queues.sluicegate.dev"), True),
    (WEBHOOK_ACCOUNT, ("watch", "presets.sluicegate.dev"), True),
    (WEBHOOK_ACCOUNT, ("watch", "namespaces"), True),
    (WEBHOOK_ACCOUNT, ("create", "subjectaccessreviews.authorization.k8s.io"), True),
    (WEBHOOK_ACCOUNT, ("watch", "jobs.batch", "-A"), True),
    (WEBHOOK_ACCOUNT, ("create", "jobs.batch", "-n", "default"), False),
    (WEBHOOK_ACCOUNT, ("list", "pods", "-A"), False),
    (WEBHOOK_ACCOUNT, ("patch", "pods", "-n", "default"), False),
    (WEBHOOK_ACCOUNT, ("update", "queues.sluicegate.dev", "--subresource=status"), False),
    (WEBHOOK_ACCOUNT, ("get", "secrets", "-n", "sluicegate-system"), False),
    (WEBHOOK_ACCOUNT, ("create", "events", "-n", "default"), False),
    (CONTROLLER_ACCOUNT, ("watch", "pods", "-A"), True),
    (CONTROLLER_ACCOUNT, ("patch", "pods", "-n", "default"), True),
    (CONTROLLER_ACCOUNT, ("patch", "pods", "--subresource=status", "-n", "default"), True),
    (CONTROLLER_ACCOUNT, ("create", "events", "-n", "default"), True),
    (CONTROLLER_ACCOUNT, ("create", "events.events.k8s.io", "-n", "default"), True),
    (CONTROLLER_ACCOUNT, ("watch", "nodes"), True),
    (CONTROLLER_ACCOUNT, ("patch", "queues.sluicegate.dev", "--subresource=status"), True),
    (CONTROLLER_ACCOUNT, ("update", "teams.sluicegate.dev", "--subresource=status"), True),
    (CONTROLLER_ACCOUNT, ("update", "queues.sluicegate.dev"), False),
    (CONTROLLER_ACCOUNT, ("create", "pods", "-n", "default"), False),
    (CONTROLLER_ACCOUNT, ("delete", "pods", "-n", "default"), False),
    (CONTROLLER_ACCOUNT, ("update", "pods", "-n", "default"), False),
    (CONTROLLER_ACCOUNT, ("patch", "nodes"), False),
    (CONTROLLER_ACCOUNT, ("get", "secrets", "-n", "sluicegate-system"), False),
    (CONTROLLER_ACCOUNT, ("create", "leases.coordination.k8s.io", "-n", "sluicegate-system"), True),
    (CONTROLLER_ACCOUNT, ("update", "leases.coordination.k8s.io/sluicegate-controller",
                          "-n", "sluicegate-system"), True),
    (CONTROLLER_ACCOUNT, ("update", "leases.coordination.k8s.io/kube-scheduler", "-n", "kube-system"), False),
    (CONTROLLER_ACCOUNT, ("update", "leases.coordination.k8s.io/someone-else",
                          "-n", "sluicegate-system"), False),
    (CONTROLLER_ACCOUNT, ("create", "leases.coordination.k8s.io", "-n", "default"), False),
]


def test_each_process_may_do_what_it_needs_and_nothing_more(installed: LocalCluster) -> None:
    wrong = [
        f"{account.rsplit(':', 1)[1]} {'may' if not allowed else 'may not'} {' '.join(question)}"
        for account, question, allowed in RBAC
        if _can(installed, account, ACCOUNT_GROUPS, *question) != allowed
    ]
    assert not wrong, "; ".join(wrong)


@pytest.mark.parametrize(("weight", "accepted"), [(5, True), (0, False)])
def test_kube_scheduler_accepts_the_extender_configuration(
    cluster: LocalCluster, tmp_path: Path, weight: int, accepted: bool
) -> None:
    """kube-scheduler of the cluster's release loads the configuration, validates it and builds
    its extender client (`--write-config-to` does all that, writes the result and exits). Paths
    of a control-plane node are pointed at this cluster's files; a weight of 0 shows that an
    invalid extender really is refused."""
    config = yaml.safe_load((MANIFESTS / "scheduler" / "scheduler-config.yaml").read_text())
    config["clientConnection"]["kubeconfig"] = str(cluster.kubeconfig)
    (extender,) = config["extenders"]
    extender["tlsConfig"]["caFile"] = str(cluster.layout.pki.ca_cert)
    extender["weight"] = weight
    source, written = tmp_path / "scheduler.yaml", tmp_path / "written.yaml"
    source.write_text(kubeyaml.dump(config))
    result = subprocess.run(
        [cluster.binary("kube-scheduler"), f"--config={source}", f"--write-config-to={written}",
         "--secure-port=0"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    if not accepted:
        assert result.returncode != 0 and "weight" in result.stderr
        return
    assert result.returncode == 0, result.stderr[-2000:]
    (loaded,) = yaml.safe_load(written.read_text())["extenders"]
    assert loaded["urlPrefix"] == "https://sluicegate-extender.sluicegate-system.svc:443"
    assert (loaded["filterVerb"], loaded["prioritizeVerb"]) == ("filter", "prioritize")
    assert loaded["ignorable"] is True and loaded["nodeCacheCapable"] is True
    # ignoredByScheduler: false is the default, which the written configuration leaves out.
    assert loaded["managedResources"] == [{"name": "nvidia.com/gpu"}]
    assert loaded["tlsConfig"]["serverName"] == "sluicegate-extender.sluicegate-system.svc"
