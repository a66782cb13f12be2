"""The installation manifests keep their promises without a cluster: least-privilege RBAC,
hardened pods, ports and Secrets that line up, webhook configurations that fail closed, and an
image whose user is the one the Deployments run as."""

from __future__ import annotations

import re
from typing import Any

import pytest

from policy import keys
from tests.manifest_files import (
    CONTAINERFILE,
    CONTROLLER_ACCOUNT,
    LOCAL_PLACEHOLDERS,
    MANIFESTS,
    ROOT,
    documents,
    find,
    objects,
)

# --- RBAC ---------------------------------------------------------------------------------------


def _rules(kind: str, name: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = find(kind, name, "base")["rules"]
    return rules


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_no_rbac_rule_uses_wildcards_or_touches_secrets() -> None:
    for obj in objects("base", "samples"):
        for rule in obj.get("rules", ()):
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"{obj['metadata']['name']}: wildcard {field}"
            assert "secrets" not in rule["resources"], obj["metadata"]["name"]


def test_the_webhook_reads_our_kinds_namespaces_jobs_priority_classes_and_claims_and_asks_access_reviews(
) -> None:
    grants = _grants(_rules("ClusterRole", "sluicegate-webhook"))
    reads = {(g, r, v) for g, r in [("sluicegate.dev", k) for k in ("queues", "teams", "presets", "policies")]
             + [("", "namespaces"), ("batch", "jobs")] for v in ("get", "list", "watch")}
    watches = {("scheduling.k8s.io", "priorityclasses", v) for v in ("list", "watch")}
    claims = {("resource.k8s.io", r, v) for r in ("resourceclaims", "resourceclaimtemplates")
              for v in ("get", "list", "watch")}
    assert grants == reads | watches | claims | {("authorization.k8s.io", "subjectaccessreviews", "create")}


def test_the_controller_may_patch_pods_and_their_status_but_never_create_or_delete_them() -> None:
    grants = _grants(_rules("ClusterRole", "sluicegate-controller"))
    assert ("", "pods", "patch") in grants
    assert ("", "pods/status", "patch") in grants
    assert not {v for g, r, v in grants if r == "pods"} - {"get", "list", "watch", "patch"}
    assert {(g, r, v) for g, r, v in grants if g == "resource.k8s.io"} == {
        ("resource.k8s.io", "resourceclaims", "list"), ("resource.k8s.io", "resourceclaims", "watch")}
    writes = {(g, r) for g, r, v in grants if v not in ("get", "list", "watch")}
    assert writes == {
        ("", "pods"), ("", "pods/status"), ("", "events"), ("events.k8s.io", "events"),
        ("sluicegate.dev", "queues/status"), ("sluicegate.dev", "teams/status"),
        ("sluicegate.dev", "policies/status"),
    }


def test_the_controller_holds_only_its_own_lease_in_its_own_namespace() -> None:
    role = find("Role", "sluicegate-controller-leader-election", "base")
    assert role["metadata"]["namespace"] == "sluicegate-system"
    named = [r for r in role["rules"] if "resourceNames" in r]
    assert named == [{
        "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
        "resourceNames": ["sluicegate-controller"], "verbs": ["get", "watch", "update", "patch"],
    }]
    unnamed = [r for r in role["rules"] if "resourceNames" not in r]
    assert unnamed == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}]


# --- the Deployments ----------------------------------------------------------------------------


def _containerfile_uid() -> int:
    match = re.search(r"^USER (\d+)(?::\d+)?$", CONTAINERFILE.read_text(), re.MULTILINE)
    assert match, "the Containerfile must end with a numeric USER"
    return int(match[1])


@pytest.mark.parametrize(("name", "command", "secret", "tls_port"), [
    ("sluicegate-webhook", ["python", "-m", "webhook"], "sluicegate-webhook-tls", 8443),
    ("sluicegate-controller", ["python", "-m", "controller"], "sluicegate-extender-tls", 8444),
])
def test_each_deployment_runs_hardened_with_probes_and_its_certificate(
    name: str, command: list[str], secret: str, tls_port: int
) -> None:
    deployment = find("Deployment", name, "default")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == _containerfile_uid()
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["command"] == command
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http-metrics"] == 8080 and tls_port in ports.values()
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert "memory" in container["resources"]["limits"] and container["resources"]["requests"]
    (tls,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == secret
    assert {"name": "tls", "mountPath": "/etc/sluicegate/tls", "readOnly": True} in container["volumeMounts"]
    budget = find("PodDisruptionBudget", name, "default")
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(("service", "deployment", "container_port"), [
    ("sluicegate-webhook", "sluicegate-webhook", 8443),
    ("sluicegate-extender", "sluicegate-controller", 8444),
])
def test_each_service_sends_443_to_the_tls_port_of_its_pods(
    service: str, deployment: str, container_port: int
) -> None:
    svc = find("Service", service, "default")["spec"]
    pods = find("Deployment", deployment, "default")["spec"]["template"]
    assert svc["selector"] == pods["metadata"]["labels"]
    (https,) = [p for p in svc["ports"] if p["port"] == 443]
    ports = {p["name"]: p["containerPort"] for p in pods["spec"]["containers"][0]["ports"]}
    assert ports[https["targetPort"]] == container_port


def test_the_containerfile_installs_the_project_on_python_3_11_slim_as_a_non_root_user() -> None:
    text = CONTAINERFILE.read_text()
    assert re.findall(r"^FROM (\S+)", text, re.MULTILINE) == ["python:3.11-slim", "python:3.11-slim"]
    assert _containerfile_uid() != 0
    for source in re.findall(r"^COPY (?!--from)(\S+)", text, re.MULTILINE):
        assert (ROOT / source).exists(), f"the Containerfile copies {source}, which does not exist"


# --- the webhook configurations -----------------------------------------------------------------


def _webhooks() -> list[tuple[str, dict[str, Any]]]:
    return [(o["kind"], w) for o in objects("admission") for w in o["webhooks"]]


STAMP_CHECKS = ("jobs.validate.sluicegate.dev", "cronjobs.validate.sluicegate.dev",
                "apps.validate.sluicegate.dev", "operators.validate.sluicegate.dev")
OPERATORS_MUTATE = "operators.mutate.sluicegate.dev"
"""Sent every CREATE of the operators' kinds in an opted-in namespace, and every change of their
spec: no condition names Sluicegate's prefix."""
ELSEWHERE = "pods-elsewhere.validate.sluicegate.dev"
SPARED_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease", "sluicegate-system"]


def test_every_webhook_fails_closed_and_only_the_mark_checks_reach_namespaces_not_opted_in() -> None:
    hooks = _webhooks()
    assert [w["name"] for _, w in hooks] == [
        "pods.mutate.sluicegate.dev", "jobs.mutate.sluicegate.dev", "cronjobs.mutate.sluicegate.dev",
        "apps.mutate.sluicegate.dev", OPERATORS_MUTATE, "pods.validate.sluicegate.dev", *STAMP_CHECKS[:2],
        ELSEWHERE, *STAMP_CHECKS[2:],
    ]
    for kind, hook in hooks:
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] <= 5
        # Every namespace but the system ones and Sluicegate's own, which must never depend on
        # the webhook being up.
        spared = {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": SPARED_NAMESPACES}
        if hook["name"] in STAMP_CHECKS:
            assert hook["namespaceSelector"] == {"matchExpressions": [spared]}
        elif hook["name"] == ELSEWHERE:
            not_opted_in = {"key": keys.TEAM_LABEL, "operator": "DoesNotExist"}
            assert hook["namespaceSelector"] == {"matchExpressions": [not_opted_in, spared]}
        else:
            opted_in = {"key": keys.TEAM_LABEL, "operator": "Exists"}
            assert hook["namespaceSelector"] == {"matchExpressions": [opted_in]}
        assert hook["matchConditions"]
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["namespace"], service["port"]) == (
            "sluicegate-webhook", "sluicegate-system", 443)
        if kind == "MutatingWebhookConfiguration":
            assert hook["reinvocationPolicy"] == "IfNeeded"
            assert service["path"] == "/mutate"
        else:
            assert service["path"] == "/validate"
    find("Namespace", SPARED_NAMESPACES[-1], "base")


def test_the_stamp_checks_are_sent_only_what_carries_or_changes_the_submitter_stamp() -> None:
    for _, hook in _webhooks():
        if hook["name"] in STAMP_CHECKS:
            (condition,) = hook["matchConditions"]
            # On CREATE the new object's template, on UPDATE the old and the new one's; the
            # operators' kinds: each of their templates, of either object.
            stamps = 3 if hook["name"] == STAMP_CHECKS[3] else 4
            assert condition["expression"].count(f"'{keys.SUBMITTER_ANNOTATION}'") == stamps


def test_the_webhooks_intercept_pods_jobs_cronjobs_and_apps_owners_as_agreed() -> None:
    apps = [(["apps"], ["deployments", "replicasets", "statefulsets", "daemonsets"], ["CREATE", "UPDATE"]),
            ([""], ["replicationcontrollers"], ["CREATE", "UPDATE"])]
    operators = [(["kubeflow.org"], ["pytorchjobs"], ["CREATE", "UPDATE"]),
                 (["ray.io"], ["rayclusters", "rayjobs"], ["CREATE", "UPDATE"])]
    rules = {w["name"]: [(r["apiGroups"], r["resources"], r["operations"]) for r in w["rules"]]
             for _, w in _webhooks()}
    assert rules == {
        "pods.mutate.sluicegate.dev": [([""], ["pods"], ["CREATE"])],
        "jobs.mutate.sluicegate.dev": [(["batch"], ["jobs"], ["CREATE", "UPDATE"])],
        "cronjobs.mutate.sluicegate.dev": [(["batch"], ["cronjobs"], ["CREATE", "UPDATE"])],
        "pods.validate.sluicegate.dev": [([""], ["pods"], ["CREATE", "UPDATE"]),
                                         ([""], ["pods/status"], ["UPDATE"])],
        "jobs.validate.sluicegate.dev": [(["batch"], ["jobs"], ["CREATE", "UPDATE"])],
        "cronjobs.validate.sluicegate.dev": [(["batch"], ["cronjobs"], ["CREATE", "UPDATE"])],
        ELSEWHERE: [([""], ["pods"], ["CREATE", "UPDATE"]), ([""], ["pods/status"], ["UPDATE"])],
        "apps.mutate.sluicegate.dev": apps,
        "apps.validate.sluicegate.dev": apps,
        OPERATORS_MUTATE: operators,
        "operators.validate.sluicegate.dev": operators,
    }


def test_the_match_conditions_name_our_prefix_and_the_controllers_real_account() -> None:
    for _, hook in _webhooks():
        text = " ".join(c["expression"] for c in hook["matchConditions"])
        assert f"'{keys.PREFIX}'" in text or hook["name"] in (*STAMP_CHECKS, OPERATORS_MUTATE)
    (validating, *_) = [w for kind, w in _webhooks() if kind == "ValidatingWebhookConfiguration"]
    assert validating["name"] == "pods.validate.sluicegate.dev"
    accounts = re.findall(r"'(system:serviceaccount:[^']+)'", validating["matchConditions"][0]["expression"])
    assert accounts == [CONTROLLER_ACCOUNT]
    find("ServiceAccount", CONTROLLER_ACCOUNT.rsplit(":", 1)[1], "base")


def test_the_local_overlay_leaves_exactly_the_documented_placeholders() -> None:
    local = MANIFESTS / "local"
    patches = "".join((local / f).read_text() for f in ("webhook-url.yaml", "webhook-url-validating.yaml"))
    assert set(re.findall(r"\$\{[A-Z_]+\}", patches)) == set(LOCAL_PLACEHOLDERS)
    readme = (local / "kustomization.yaml").read_text()
    for placeholder in LOCAL_PLACEHOLDERS:
        assert placeholder in readme


def test_the_scheduler_calls_the_extender_for_every_default_managed_resource() -> None:
    (config,) = documents(MANIFESTS / "scheduler" / "scheduler-config.yaml")
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "https://sluicegate-extender.sluicegate-system.svc:443"
    assert (extender["filterVerb"], extender["prioritizeVerb"]) == ("filter", "prioritize")
    assert extender["ignorable"] is True and extender["nodeCacheCapable"] is True
    assert extender["enableHTTPS"] is True
    assert {r["name"] for r in extender["managedResources"]} >= set(keys.DEFAULT_MANAGED_RESOURCES)
    assert all(r["ignoredByScheduler"] is False for r in extender["managedResources"])
