"""Kueue as a benchmark peer: the Configuration, webhooks, RBAC and queue objects it is given."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from controlplane.kueue import manifests
from controlplane.kueue.manifests import ClientLimits, Endpoints
from controlplane.kueue.queues import KueueCohort, KueueQueue, policy_objects

SHIPPED = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    "controller": {"groupKindConcurrency": {"Pod": 5, "Workload.kueue.x-k8s.io": 5}},
    "clientConnection": {"qps": 50, "burst": 100},
    "integrations": {"frameworks": ["batch/job", "pod", "deployment"]},
}
ENDPOINTS = Endpoints(webhook=40001, metrics=40002, health=40003)
CA = b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"


def webhook(name: str, group: str, resource: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "failurePolicy": "Fail",
        "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": [resource]}],
        "sideEffects": "None",
    }


SHIPPED_WEBHOOKS = [{
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "mutating-webhook-configuration"},
    "webhooks": [
        webhook("mjob.kb.io", "batch", "jobs", "/mutate-batch-v1-job"),
        webhook("mpod.kb.io", "", "pods", "/mutate--v1-pod"),
        webhook("mclusterqueue.kb.io", "kueue.x-k8s.io", "clusterqueues",
                "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue"),
    ],
}]


def test_the_configuration_runs_the_plain_pod_integration_on_loopback_for_labelled_namespaces() -> None:
    config = manifests.configuration(SHIPPED, ENDPOINTS, Path("/run/kueue/serving"), None)

    assert config["namespace"] == "kueue-system"
    assert config["integrations"] == {"frameworks": ["pod"]}
    assert config["managedJobsNamespaceSelector"] == {
        "matchLabels": {manifests.NAMESPACE_LABEL: manifests.NAMESPACE_LABEL_VALUE}
    }
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 40001, "certDir": "/run/kueue/serving"}
    assert config["metrics"]["bindAddress"] == "127.0.0.1:40002"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:40003"
    assert config["featureGates"]["VisibilityOnDemand"] is False
    assert config["controller"] == SHIPPED["controller"], "the shipped concurrency is kept"
    assert config["clientConnection"] == {"qps": 50, "burst": 100}, "no limits given: the shipped ones"
    assert SHIPPED["leaderElection"]["leaderElect"] is True, "the shipped document is not changed"


def test_raised_client_limits_replace_the_shipped_ones() -> None:
    config = manifests.configuration(SHIPPED, ENDPOINTS, Path("/x"), ClientLimits(qps=1000.0, burst=1000))

    assert config["clientConnection"] == {"qps": 1000.0, "burst": 1000}


def test_webhooks_keep_kueues_own_kinds_and_pods_and_point_at_loopback_with_our_ca() -> None:
    [mutating] = manifests.webhook_configurations(SHIPPED_WEBHOOKS, "https://127.0.0.1:40001", CA)

    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    by_name = {w["name"]: w for w in mutating["webhooks"]}
    assert set(by_name) == {"mpod.kb.io", "mclusterqueue.kb.io"}, "the Job integration is off: no webhook"
    pod = by_name["mpod.kb.io"]
    assert pod["clientConfig"] == {
        "url": "https://127.0.0.1:40001/mutate--v1-pod",
        "caBundle": base64.b64encode(CA).decode(),
    }
    labelled = {manifests.NAMESPACE_LABEL: manifests.NAMESPACE_LABEL_VALUE}
    assert pod["namespaceSelector"] == {"matchLabels": labelled}
    assert pod["failurePolicy"] == "Fail"
    assert "namespaceSelector" not in by_name["mclusterqueue.kb.io"], "cluster-scoped kinds need none"


def test_the_managers_roles_are_renamed_and_bound_to_kueues_own_user_in_its_namespace() -> None:
    cluster_role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": "manager-role"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"]}]}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "manager-secrets-role", "namespace": "system"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"]}]}

    namespace, kueue_cluster_role, cluster_binding, kueue_role, binding = manifests.rbac([cluster_role, role])

    assert namespace["metadata"] == {"name": "kueue-system"}
    assert kueue_cluster_role["metadata"] == {"name": "kueue-manager-role"}
    assert kueue_cluster_role["rules"] == cluster_role["rules"]
    assert cluster_binding["kind"] == "ClusterRoleBinding"
    assert cluster_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                          "name": "kueue-manager-role"}
    assert cluster_binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                            "name": "kueue"}]
    assert kueue_role["metadata"] == {"name": "kueue-manager-secrets-role", "namespace": "kueue-system"}
    assert binding["kind"] == "RoleBinding"
    assert binding["metadata"] == kueue_role["metadata"]
    assert binding["roleRef"]["kind"] == "Role"


def quotas(obj: dict[str, Any]) -> dict[str, dict[str, str]]:
    [group] = obj["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    assert group["coveredResources"] == [r["name"] for r in flavor["resources"]]
    return {r["name"]: {k: v for k, v in r.items() if k != "name"} for r in flavor["resources"]}


def test_a_queue_on_its_own_owns_its_gpu_and_pods_quota() -> None:
    flavor, cq, lq_a, lq_b = policy_objects([KueueQueue("train", gpus=16, max_running=8)], ["a", "b"])

    assert flavor["kind"] == "ResourceFlavor"
    assert cq["kind"] == "ClusterQueue"
    assert cq["spec"]["namespaceSelector"] == {}, "empty: every namespace (absent would be none)"
    assert "cohortName" not in cq["spec"]
    owned = quotas(cq)
    assert owned["nvidia.com/gpu"] == {"nominalQuota": "16"}
    assert owned["pods"] == {"nominalQuota": "8"}
    assert {"cpu", "memory"} <= set(owned), "pods that also ask for cpu or memory stay admissible"
    assert [(q["metadata"], q["spec"]) for q in (lq_a, lq_b)] == [
        ({"name": "train", "namespace": "a"}, {"clusterQueue": "train"}),
        ({"name": "train", "namespace": "b"}, {"clusterQueue": "train"}),
    ]


def test_queues_in_a_cohort_borrow_up_to_their_own_limits_from_the_cohorts_capacity() -> None:
    objects = policy_objects(
        [KueueQueue("a", gpus=8, cohort="cluster"), KueueQueue("b", max_running=4, cohort="cluster")],
        ["ns"],
        [KueueCohort("cluster", gpus=64, max_running=32)],
    )

    kinds = [o["kind"] for o in objects]
    assert kinds == ["ResourceFlavor", "Cohort", "ClusterQueue", "ClusterQueue", "LocalQueue", "LocalQueue"]
    shared, a, b = objects[1], objects[2], objects[3]
    assert quotas(shared)["nvidia.com/gpu"] == {"nominalQuota": "64"}
    assert quotas(shared)["pods"] == {"nominalQuota": "32"}
    assert a["spec"]["cohortName"] == "cluster"
    assert quotas(a)["nvidia.com/gpu"] == {"nominalQuota": "0", "borrowingLimit": "8"}
    assert quotas(a)["pods"] == {"nominalQuota": "0"}, "no limit of its own: as much as the cohort has"
    assert quotas(b)["pods"] == {"nominalQuota": "0", "borrowingLimit": "4"}


def test_a_queue_naming_a_cohort_that_is_not_given_is_refused() -> None:
    with pytest.raises(ValueError, match="names cohort 'shared', which is not given"):
        policy_objects([KueueQueue("a", cohort="shared")], ["ns"])
