"""The manifests of the visibility API, without a cluster: the APIService names the controller's
Service and port, every installation registers it, the certificate it is served with names the
Service, the controller may judge its callers, and the sample ML-engineer role reads pending pods
in its team's namespaces only."""

from __future__ import annotations

from typing import Any

import yaml

from certs.issuing import VISIBILITY
from kube.resources import PENDING_PODS
from tests.manifest_files import MANIFESTS, NAMESPACE, find

API = f"{PENDING_PODS.version}.{PENDING_PODS.group}"


def _controller_subject(binding: dict[str, Any]) -> bool:
    return bool(binding["subjects"] == [{"kind": "ServiceAccount", "name": "sluicegate-controller",
                                         "namespace": NAMESPACE}])


def test_the_visibility_api_is_served_by_every_controller_replica_on_its_own_tls_port() -> None:
    spec = find("APIService", API, "visibility-api")["spec"]
    assert (spec["group"], spec["version"]) == (PENDING_PODS.group, PENDING_PODS.version)
    assert "insecureSkipTLSVerify" not in spec  # its caBundle is filled like the webhooks'
    assert spec["service"]["name"] == VISIBILITY
    service = find("Service", VISIBILITY, "default")
    assert service["metadata"]["namespace"] == spec["service"]["namespace"] == NAMESPACE
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == spec["service"]["port"]]
    pod = find("Deployment", "sluicegate-controller", "default")["spec"]["template"]
    assert service["spec"]["selector"] == pod["metadata"]["labels"]  # leader and standby alike
    (container,) = pod["spec"]["containers"]
    (served,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    assert served["containerPort"] == 8445  # the controller's --visibility-port default
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["visibility-tls"] == "/etc/sluicegate/visibility-tls"
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "visibility-tls"]
    assert volume["secret"]["secretName"] == "sluicegate-webhook-tls"  # the CA every APIService trusts


def test_every_installation_registers_the_visibility_api() -> None:
    for overlay in ("default", "local"):
        kustomization = yaml.safe_load((MANIFESTS / overlay / "kustomization.yaml").read_text())
        assert "../visibility-api" in kustomization["resources"], overlay


def test_cert_manager_names_the_visibility_service_and_injects_its_ca() -> None:
    certificate = find("Certificate", "sluicegate-webhook", "components/cert-manager")
    assert f"{VISIBILITY}.sluicegate-system.svc" in certificate["spec"]["dnsNames"]
    component = yaml.safe_load((MANIFESTS / "components" / "cert-manager" / "kustomization.yaml").read_text())
    (patch,) = [p for p in component["patches"] if p["target"].get("name") == API]
    (op,) = yaml.safe_load(patch["patch"])
    assert op["value"] == {"cert-manager.io/inject-ca-from": "sluicegate-system/sluicegate-webhook"}


def test_the_controller_may_ask_who_calls_and_read_the_front_proxys_ca() -> None:
    delegator = find("ClusterRoleBinding", "sluicegate-controller-auth-delegator", "base")
    assert delegator["roleRef"]["name"] == "system:auth-delegator" and _controller_subject(delegator)
    reader = find("RoleBinding", "sluicegate-controller-authentication-reader", "base")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert _controller_subject(reader)


def test_the_sample_ml_engineer_reads_pending_pods_in_team_namespaces_and_nothing_cluster_wide() -> None:
    role = find("ClusterRole", "sluicegate-ml-engineer", "samples")
    assert role["rules"] == [{"apiGroups": [PENDING_PODS.group], "resources": [PENDING_PODS.plural],
                              "verbs": ["get", "list"]}]
    samples = [d for d in yaml.safe_load_all((MANIFESTS / "samples" / "access.yaml").read_text()) if d]
    bound = [d for d in samples if d.get("roleRef", {}).get("name") == "sluicegate-ml-engineer"]
    assert {d["kind"] for d in bound} == {"RoleBinding"}
    assert {(d["metadata"]["namespace"], s["name"]) for d in bound for s in d["subjects"]} == {
        ("vision-research", "vision-devs"), ("vision-notebooks", "vision-devs"), ("nlp-research", "nlp-devs")}
