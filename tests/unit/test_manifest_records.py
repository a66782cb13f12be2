"""The manifests that decide who reads the run records, without a cluster: the records API the
API server serves (APIService), the recorder's right to ask the API server about its callers,
the one Role that lets people read, and the NetworkPolicy in front of the recorder."""

from __future__ import annotations

from typing import Any

import yaml

from kube.resources import RECORDS
from tests.manifest_files import MANIFESTS, NAMESPACE, find, objects


def _recorder_subject(binding: dict[str, Any]) -> bool:
    account = {"kind": "ServiceAccount", "name": "sluicegate-recorder", "namespace": NAMESPACE}
    return bool(binding["subjects"] == [account])


def test_the_recorder_may_ask_who_calls_and_whether_they_may_and_read_the_front_proxys_ca() -> None:
    delegator = find("ClusterRoleBinding", "sluicegate-recorder-auth-delegator", "base")
    assert delegator["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                    "name": "system:auth-delegator"}
    assert _recorder_subject(delegator)
    reader = find("RoleBinding", "sluicegate-recorder-authentication-reader", "base")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert _recorder_subject(reader)


def test_the_recorders_own_role_still_reads_pods_and_nothing_else() -> None:
    role = find("ClusterRole", "sluicegate-recorder", "base")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]


def test_reading_the_records_is_one_role_listing_records_in_the_recorders_namespace() -> None:
    role = find("Role", "sluicegate-records-reader", "base")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [{"apiGroups": [RECORDS.group], "resources": [RECORDS.plural],
                              "verbs": ["get", "list"]}]


def test_the_records_api_is_served_by_the_recorders_service_on_its_tls_port() -> None:
    api = find("APIService", f"{RECORDS.version}.{RECORDS.group}", "records-api")
    spec = api["spec"]
    assert (spec["group"], spec["version"]) == (RECORDS.group, RECORDS.version)
    assert "insecureSkipTLSVerify" not in spec  # its caBundle is filled like the webhooks'
    service = find("Service", spec["service"]["name"], "default")
    assert service["metadata"]["namespace"] == spec["service"]["namespace"] == NAMESPACE
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == spec["service"]["port"]]
    statefulset = find("StatefulSet", "sluicegate-recorder", "default")
    pod = statefulset["spec"]["template"]
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    (container,) = pod["spec"]["containers"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    namespace = {"name": "SLUICEGATE_NAMESPACE",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    assert namespace in container["env"]


def test_every_installation_registers_the_records_api() -> None:
    for overlay in ("default", "local"):
        kustomization = yaml.safe_load((MANIFESTS / overlay / "kustomization.yaml").read_text())
        assert "../records-api" in kustomization["resources"], overlay


def test_cert_manager_names_the_recorder_and_injects_its_ca_into_the_records_api() -> None:
    certificate = find("Certificate", "sluicegate-webhook", "components/cert-manager")
    assert "sluicegate-recorder.sluicegate-system.svc" in certificate["spec"]["dnsNames"]
    component = yaml.safe_load((MANIFESTS / "components" / "cert-manager" / "kustomization.yaml").read_text())
    (patch,) = [p for p in component["patches"] if p["target"]["kind"] == "APIService"
                and p["target"]["name"] == f"{RECORDS.version}.{RECORDS.group}"]
    (op,) = yaml.safe_load(patch["patch"])
    assert op["value"] == {"cert-manager.io/inject-ca-from": "sluicegate-system/sluicegate-webhook"}


def test_the_network_policy_admits_only_the_api_server_and_the_namespaces_pods_to_the_records_port() -> None:
    policy = find("NetworkPolicy", "sluicegate-recorder", "default")["spec"]
    pod = find("StatefulSet", "sluicegate-recorder", "default")["spec"]["template"]
    assert policy["podSelector"]["matchLabels"] == pod["metadata"]["labels"]
    assert policy["policyTypes"] == ["Ingress"]
    records, probes = policy["ingress"]
    assert records["ports"] == [{"port": "https", "protocol": "TCP"}]
    # This namespace's pods, and the API server: an address the admin narrows (see the comment).
    anywhere = [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]
    assert records["from"] == [{"podSelector": {}}, *anywhere]
    assert probes == {"ports": [{"port": "http-metrics", "protocol": "TCP"}]}
    ports = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports == {"https", "http-metrics"}  # a port added later is closed until a rule names it


def test_no_one_but_the_reader_role_is_granted_the_records() -> None:
    granted = [obj["metadata"]["name"] for obj in objects("base", "samples", "default")
               for rule in obj.get("rules", ()) if RECORDS.group in rule.get("apiGroups", ())]
    assert granted == ["sluicegate-records-reader"]  # the recorder serves the records; it needs none
