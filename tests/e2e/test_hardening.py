"""Issue 7 through the real API server: forged mirror pods and forged group members are refused,
a node's own mirror pod is admitted unchanged, and break glass works only for a user allowed to
``release`` the pod's Queue."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from policy import keys
from policy.pods import Submitter
from tests.admission_builders import make_queue, make_team
from tests.e2e.projects import Project, gpu_pod

NODE = "gpu-node-0"
WRITTEN_BY_SLUICEGATE = "is written by Sluicegate and cannot be set by users"
GATE_REMOVED = f"only Sluicegate's controller may remove the scheduling gate {keys.GATE}"


@pytest.fixture
def train(project: Project) -> str:
    """A queue open to the project's team (alice, group vision-devs); the namespace opted in. It
    dispatches nothing (the gate controller runs beside the webhook), so a pod keeps its gate
    until someone releases it by hand."""
    queue = project.name("train")
    project.create(make_team(project.team, users=["alice"], groups=["vision-devs"]),
                   make_queue(queue, teams=[project.team], max_running=0))
    project.opt_in(default_queue=queue)
    return queue


def mirror_pod(name: str, namespace: str) -> dict[str, Any]:
    pod = gpu_pod(name, namespace)
    pod["metadata"]["annotations"][keys.MIRROR_POD_ANNOTATION] = "0123456789abcdef"
    pod["spec"]["nodeName"] = NODE
    return pod


def cluster_object(project: Project, obj: dict[str, Any]) -> Iterator[None]:
    project.admin.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))
    try:
        yield
    finally:
        project.admin.cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--wait=false",
                                      check=False)


@pytest.fixture
def node_kubectl(project: Project, tmp_path: Path) -> Iterator[list[str]]:
    """kubectl with a kubelet's credentials: a client certificate for ``system:node:<node>`` in
    ``system:nodes`` signed by the cluster CA. The cluster authorizes with RBAC alone (no Node
    authorizer), so the node's built-in role is bound to it, as the Node authorizer would allow."""
    cluster = project.admin.cluster
    pki = cluster.layout.pki
    user = f"{keys.NODE_USER_PREFIX}{NODE}"
    pair = pki.authority().issue_client(user, (keys.NODES_GROUP,))
    config = tmp_path / "node.kubeconfig"
    pki.write_client_kubeconfig(config, cluster.server, user, pair)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": project.name("e2e-node")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
    }
    for _ in cluster_object(project, binding):
        yield [cluster.binary("kubectl"), f"--kubeconfig={config}", "-n", project.namespace]


def test_a_mirror_pod_forged_by_a_user_is_refused(project: Project, train: str) -> None:
    pod = mirror_pod("forged-mirror", project.namespace)
    pod["metadata"]["labels"][keys.TEAM_LABEL] = "someone-else"
    refusal = project.user("alice", "vision-devs").fails("create", "-f", "-", input=yaml.safe_dump(pod))
    assert f"annotation {keys.MIRROR_POD_ANNOTATION} marks a mirror pod, which only a node creates" in refusal
    assert project.admin.run("get", "pods", "-o", "name") == ""


def test_a_mirror_pod_created_by_its_node_is_admitted_unchanged(
    project: Project, train: str, node_kubectl: list[str]
) -> None:
    pod = mirror_pod("static-gpu", project.namespace)
    created = subprocess.run([*node_kubectl, "create", "-f", "-", "-o", "json"], input=yaml.safe_dump(pod),
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    stored = json.loads(created.stdout)
    assert "schedulingGates" not in stored["spec"]
    assert stored["metadata"].get("labels", {}) == {}
    assert {k for k in stored["metadata"]["annotations"] if k.startswith(keys.GROUP)} == set()
    assert stored["spec"]["nodeName"] == NODE


def test_a_forged_group_member_is_refused(project: Project, train: str) -> None:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "cpu-member", "namespace": project.namespace,
            "labels": {keys.TEAM_LABEL: project.team, keys.GROUP_LABEL: "big-run", keys.QUEUE_LABEL: ""},
            "annotations": {keys.SUBMITTER_ANNOTATION: Submitter("alice").to_annotation()},
        },
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/cpu:1"}]},
    }
    refusal = project.user("alice", "vision-devs").fails("create", "-f", "-", input=yaml.safe_dump(pod))
    assert WRITTEN_BY_SLUICEGATE in refusal
    assert project.admin.run("get", "pods", "-o", "name") == ""


@pytest.fixture
def oncall_may_release(project: Project, train: str) -> Iterator[str]:
    """User oncall may ``release`` the queue (a ClusterRole with resourceNames), and may edit pods
    here like mallory, who may not release it."""
    project.grant(users=("alice", "oncall", "mallory"))
    name = project.name("release")
    role: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": project.name("release")},
        "rules": [{"apiGroups": [keys.GROUP], "resources": ["queues"], "verbs": [keys.RELEASE_VERB],
                   "resourceNames": [train]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": project.name("release")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": "oncall", "apiGroup": "rbac.authorization.k8s.io"}],
    }
    for _ in cluster_object(project, role):
        for _ in cluster_object(project, binding):
            yield train


UNGATE = json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}])


def test_break_glass_releases_only_for_a_user_allowed_to_release_the_queue(
    project: Project, oncall_may_release: str
) -> None:
    project.user("alice", "vision-devs").apply(gpu_pod("urgent", project.namespace))
    assert project.pod("urgent")["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert project.user("oncall").run("auth", "can-i", "release",
                                      f"queues.{keys.GROUP}/{oncall_may_release}").strip() == "yes"

    refusal = project.user("mallory").fails("patch", "pod", "urgent", "--type=json", "-p", UNGATE)
    assert GATE_REMOVED in refusal
    assert project.pod("urgent")["spec"]["schedulingGates"] == [{"name": keys.GATE}]

    project.user("oncall").run("patch", "pod", "urgent", "--type=json", "-p", UNGATE)
    released = project.pod("urgent")
    assert "schedulingGates" not in released["spec"]
    assert released["metadata"]["labels"][keys.QUEUE_LABEL] == oncall_may_release
