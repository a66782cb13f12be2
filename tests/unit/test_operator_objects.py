"""The operators beside the local control plane: the user each runs as, the RBAC it is given,
the flags that keep its listeners on loopback, and where its build and manifests come from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from controlplane import building
from controlplane.operators import KUBERAY, SHAPES, TRAINING_OPERATOR, Endpoints, manifests

ENDPOINTS = Endpoints(metrics=40001, health=40002, webhook=40003)
ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "kuberay-operator", "labels": {"app": "kuberay"}},
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "list", "watch"]}],
}


@pytest.mark.parametrize(("shape", "user", "groups"), [
    (TRAINING_OPERATOR, "system:serviceaccount:kubeflow:training-operator",
     ("system:serviceaccounts", "system:serviceaccounts:kubeflow")),
    (KUBERAY, "system:serviceaccount:ray-system:kuberay-operator",
     ("system:serviceaccounts", "system:serviceaccounts:ray-system")),
])
def test_each_operator_is_the_user_and_groups_its_service_account_would_be(
    shape: manifests.Shape, user: str, groups: tuple[str, ...]
) -> None:
    assert (shape.user, shape.groups) == (user, groups)


def test_the_shipped_role_is_bound_to_the_operators_service_account_in_its_namespace() -> None:
    objects = manifests.rbac(KUBERAY, [ROLE])

    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    assert [n["metadata"]["name"] for n in by_kind["Namespace"]] == ["ray-system"]
    assert [a["metadata"] for a in by_kind["ServiceAccount"]] == [
        {"name": "kuberay-operator", "namespace": "ray-system"}]
    [role] = by_kind["ClusterRole"]
    assert role["rules"] == ROLE["rules"] and role["metadata"] == {"name": "kuberay-operator"}
    [binding] = by_kind["ClusterRoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "kuberay-operator"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kuberay-operator",
                                    "namespace": "ray-system"}]


def test_only_cluster_roles_are_taken_from_the_shipped_files(tmp_path: Path) -> None:
    rbac = tmp_path / "config/rbac"
    rbac.mkdir(parents=True)
    (rbac / "role.yaml").write_text(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        "metadata: {name: kuberay-operator}\nrules: []\n"
        "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: other}\n")

    assert [r["metadata"]["name"] for r in manifests.shipped_roles(tmp_path, KUBERAY)] == ["kuberay-operator"]


@pytest.mark.parametrize("args", [
    manifests.training_operator_args(ENDPOINTS), manifests.kuberay_args(ENDPOINTS),
], ids=["training-operator", "kuberay"])
def test_metrics_and_probes_listen_on_loopback_and_leader_election_is_off(args: list[str]) -> None:
    addresses = [a.split("=", 1)[1] for a in args if re.match(r"--(metrics|health)[-a-z]*=", a)]

    assert sorted(addresses) == ["127.0.0.1:40001", "127.0.0.1:40002"]
    assert any(re.fullmatch(r"--(enable-)?leader-elect(ion)?=false", a) for a in args)


def test_the_training_operator_runs_the_pytorch_job_controller_alone_without_gang_scheduling() -> None:
    args = manifests.training_operator_args(ENDPOINTS)

    assert [a for a in args if a.startswith("--enable-scheme")] == ["--enable-scheme=pytorchjob"]
    assert "--webhook-server-port=40003" in args
    assert not any(a.startswith("--gang-scheduler-name") for a in args)
    assert TRAINING_OPERATOR.crds == ("manifests/base/crds/kubeflow.org_pytorchjobs.yaml",)


def test_each_operator_is_pinned_in_its_own_module_and_built_from_its_main_package() -> None:
    assert (building.TRAINING_OPERATOR.version, building.KUBERAY.version) == ("v1.8.1", "v1.5.0")
    assert {s.build.module for s in SHAPES} == {"training-operator", "kuberay"}
    for shape in SHAPES:
        target = shape.build.target()
        assert target.name == shape.name, "the binary's name is the process's name in cluster.json"
        module = (building.GO_ROOT / target.module / "go.mod").read_text()
        assert f"\ntool {target.package}\n" in module
