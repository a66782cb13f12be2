"""A project for one e2e test: its namespace opted in for a team of its own, users who may
work in it, and cluster-scoped Queues, Teams and Presets named after it (and removed after it),
so tests sharing one cluster and one running Sluicegate never see each other's objects."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from policy import keys
from process import kubeyaml

if TYPE_CHECKING:
    from tests.e2e.conftest import Kubectl

RUN_LABEL: Final = "e2e.sluicegate.dev/namespace"
GPU_DELAY: Final = "pod-complete.stage.kwok.x-k8s.io/delay"


class Project:
    def __init__(self, admin: Kubectl) -> None:
        self.admin = admin
        self.namespace = admin.namespace
        self.suffix = self.namespace.removeprefix("e2e-")
        self.team = f"vision-{self.suffix}"

    def name(self, base: str) -> str:
        """A cluster-wide name that belongs to this test."""
        return f"{base}-{self.suffix}"

    def user(self, name: str = "alice", *groups: str) -> Kubectl:
        return self.admin.as_user(name, *groups)

    # --- setting it up --------------------------------------------------------------------

    def opt_in(
        self,
        *,
        team: str | None = None,
        default_queue: str = "",
        allowed_queues: Iterable[str] | None = None,
        default_presets: Iterable[str] = (),
        allowed_presets: Iterable[str] | None = None,
    ) -> None:
        """Label the namespace for a team and set what it may use, as a platform admin does."""
        annotations: dict[str, str | None] = {
            keys.DEFAULT_QUEUE_ANNOTATION: default_queue or None,
            keys.ALLOWED_QUEUES_ANNOTATION: None if allowed_queues is None else ",".join(allowed_queues),
            keys.DEFAULT_PRESETS_ANNOTATION: ",".join(default_presets) or None,
            keys.ALLOWED_PRESETS_ANNOTATION: None if allowed_presets is None else ",".join(allowed_presets),
        }
        patch = {"metadata": {"labels": {keys.TEAM_LABEL: team or self.team}, "annotations": annotations}}
        self.admin.cluster.kubectl("patch", "namespace", self.namespace, "--type=merge",
                                   "-p", json.dumps(patch))

    def grant(
        self, users: Iterable[str] = ("alice", "bob"), groups: Iterable[str] = ("vision-devs",)
    ) -> None:
        """Let these users and groups create pods and Jobs here (the built-in ``edit`` role)."""
        subjects = [{"kind": "User", "name": u, "apiGroup": "rbac.authorization.k8s.io"} for u in users]
        subjects += [{"kind": "Group", "name": g, "apiGroup": "rbac.authorization.k8s.io"} for g in groups]
        self.admin.apply({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "e2e-edit", "namespace": self.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": subjects,
        })

    def create(self, *objects: dict[str, Any]) -> None:
        """Apply cluster-scoped Sluicegate objects (Queues, Teams, Presets) owned by this test."""
        for obj in objects:
            obj.setdefault("metadata", {}).setdefault("labels", {})[RUN_LABEL] = self.namespace
        self.admin.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(objects))

    def cleanup(self) -> None:
        self.admin.cluster.kubectl("delete", "queues,teams,presets", "-l", f"{RUN_LABEL}={self.namespace}",
                                   "--wait=false", check=False)

    # --- reading back ---------------------------------------------------------------------

    def pod(self, name: str) -> dict[str, Any]:
        return self.admin.get("pod", name)


def gpu_pod(name: str, namespace: str, gpus: int = 1, **labels: str) -> dict[str, Any]:
    """A pod asking for ``gpus`` GPUs as limits, as users usually write it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels),
                     "annotations": {GPU_DELAY: "30s"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "train",
                "image": "registry.invalid/train:1",
                "resources": {"limits": {keys.GPU_RESOURCE: str(gpus)}},
            }],
        },
    }


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in pod.get("status", {}).get("conditions", []):
        if c.get("type") == kind:
            return dict(c)
    return None


def submitter(obj_meta: dict[str, Any]) -> str:
    raw = obj_meta.get("annotations", {}).get(keys.SUBMITTER_ANNOTATION)
    return str(json.loads(raw)["user"]) if raw else ""
