"""What admission refuses, through kubectl as an impersonated user, each with a message that
says what was wrong; and what it leaves alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policy import keys
from process import kubeyaml
from tests.builders import MakePreset, MakeQueue, MakeTeam
from tests.e2e.conftest import Kubectl
from tests.e2e.projects import Project, gpu_pod

# The gate controller runs beside the webhook in these tests; queues that dispatch nothing keep
# every admitted pod gated, so what admission wrote can be read back as it left it.
HOLD = 0

NODE_NAME = (
    "spec.nodeName is set: pods that Sluicegate manages are placed by kube-scheduler once "
    "dispatched; remove spec.nodeName (a nodeSelector or a preset can choose nodes)"
)
GATE_REMOVED = (
    f"only Sluicegate's controller may remove the scheduling gate {keys.GATE}; "
    "the pod starts when its queue dispatches it"
)


@pytest.fixture
def world(project: Project) -> dict[str, str]:
    """Queues train and other (both open to the team), presets small and large."""
    names = {n: project.name(n) for n in ("train", "other", "small", "large")}
    project.create(
        MakeTeam(project.team).members(users=["alice"], groups=["vision-devs"]).obj(),
        MakeQueue(names["train"]).priority(10).access(teams=[project.team]).max_running(HOLD).obj(),
        MakeQueue(names["other"]).priority(10).access(teams=[project.team]).max_running(HOLD).obj(),
        MakePreset(names["small"]).gpus(1).obj(),
        MakePreset(names["large"]).gpus(8).obj(),
    )
    return names


def submit(project: Project, pod: dict[str, Any]) -> str:
    """Alice creates ``pod``, which must be refused; the refusal."""
    return project.user("alice", "vision-devs").fails("create", "-f", "-", input=kubeyaml.dump(pod))


def test_an_unknown_queue_is_refused_with_the_queues_to_use(project: Project, world: dict[str, str]) -> None:
    # Outside the namespace's allowed list an unknown queue reads like any queue it may not use,
    # so refusals do not reveal which queues exist.
    project.opt_in(allowed_queues=[world["train"]])
    refusal = submit(project, gpu_pod("p", project.namespace, **{keys.QUEUE_LABEL: "nope"}))
    assert (
        f'queue "nope" is not allowed in namespace {project.namespace}; '
        f"this namespace may use: {world['train']}"
    ) in refusal


def test_a_queue_the_namespace_does_not_allow_is_refused(project: Project, world: dict[str, str]) -> None:
    project.opt_in(allowed_queues=[world["train"]])
    refusal = submit(project, gpu_pod("p", project.namespace, **{keys.QUEUE_LABEL: world["other"]}))
    assert (
        f'queue "{world["other"]}" is not allowed in namespace {project.namespace}; '
        f"this namespace may use: {world['train']}"
    ) in refusal


def test_a_preset_the_namespace_may_not_use_is_refused(project: Project, world: dict[str, str]) -> None:
    project.opt_in(default_queue=world["train"], allowed_presets=[world["small"]])
    pod = gpu_pod("p", project.namespace)
    pod["metadata"]["annotations"][keys.PRESETS_ANNOTATION] = world["large"]
    refusal = submit(project, pod)
    assert (
        f'preset "{world["large"]}" is not allowed in namespace {project.namespace}; '
        f"this namespace may use presets: {world['small']}"
    ) in refusal


def test_a_managed_pod_with_a_node_name_is_refused(project: Project, world: dict[str, str]) -> None:
    project.opt_in(default_queue=world["train"])
    pod = gpu_pod("p", project.namespace)
    pod["spec"]["nodeName"] = "gpu-node-0"
    assert NODE_NAME in submit(project, pod)


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("labels", keys.TEAM_LABEL, "prod"),
        ("annotations", keys.SUBMITTER_ANNOTATION, json.dumps({"user": "pat", "groups": []})),
    ],
    ids=["the team label", "the submitter annotation"],
)
def test_a_pod_that_sets_sluicegates_own_keys_is_refused(
    project: Project, world: dict[str, str], where: str, key: str, value: str
) -> None:
    project.opt_in(default_queue=world["train"])
    pod = gpu_pod("p", project.namespace)
    pod["metadata"][where][key] = value
    what = "label" if where == "labels" else "annotation"
    assert f"{what} {key} is written by Sluicegate and cannot be set by users" in submit(project, pod)


def gated_pod(project: Project, queue: str) -> Kubectl:
    alice = project.user("alice", "vision-devs")
    alice.apply(gpu_pod("held", project.namespace, **{keys.QUEUE_LABEL: queue}))
    assert project.pod("held")["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    return alice


def test_a_user_cannot_remove_the_gate_with_kubectl_patch(project: Project, world: dict[str, str]) -> None:
    project.opt_in()
    alice = gated_pod(project, world["train"])

    refusal = alice.fails("patch", "pod", "held", "--type=json",
                          "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')

    assert GATE_REMOVED in refusal
    assert project.pod("held")["spec"]["schedulingGates"] == [{"name": keys.GATE}]


def test_a_user_cannot_remove_the_gate_with_kubectl_edit(
    project: Project, world: dict[str, str], tmp_path: Path
) -> None:
    project.opt_in()
    gated_pod(project, world["train"])
    editor = tmp_path / "ungate.py"
    editor.write_text(
        "import sys, yaml\n"
        "from process import kubeyaml\n"
        "path = sys.argv[1]\n"
        "pod = yaml.safe_load(open(path))\n"
        "pod['spec'].pop('schedulingGates')\n"
        "open(path, 'w').write(kubeyaml.dump(pod))\n"
    )
    cluster = project.admin.cluster
    result = subprocess.run(
        [cluster.binary("kubectl"), f"--kubeconfig={cluster.kubeconfig}", "--as=alice",
         "--as-group=vision-devs", "-n", project.namespace, "edit", "pod", "held"],
        env={**os.environ, "KUBE_EDITOR": f"{sys.executable} {editor}"},
        capture_output=True, text=True, timeout=120,
    )

    assert result.returncode != 0
    assert GATE_REMOVED in result.stderr
    assert project.pod("held")["spec"]["schedulingGates"] == [{"name": keys.GATE}]


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param({"kind": "Queue", "metadata": {"name": "bad-queue"}, "spec": {"priority": "high"}},
                     "spec.priority", id="a Queue with a priority that is not a number"),
        pytest.param({"kind": "Queue", "metadata": {"name": "bad-queue"}, "spec": {"ordering": "Random"}},
                     "spec.ordering", id="a Queue with an unknown ordering"),
        pytest.param({"kind": "Team", "metadata": {"name": "bad-team"}, "spec": {"maxRunning": -1}},
                     "spec.maxRunning", id="a Team with a negative limit"),
        pytest.param({"kind": "Preset", "metadata": {"name": "bad-preset"},
                      "spec": {"patchStrategy": "merge"}}, "spec.patchStrategy",
                     id="a Preset with an unknown strategy"),
        pytest.param({"kind": "Policy", "metadata": {"name": "global"}, "spec": {}},
                     "metadata.name", id="a Policy not named cluster"),
    ],
)
def test_an_invalid_admin_object_is_rejected_by_its_schema_naming_the_field(
    project: Project, obj: dict[str, Any], field: str
) -> None:
    obj = {"apiVersion": keys.API_VERSION, **obj}
    result = project.admin.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump(obj), check=False)
    assert result.returncode != 0
    assert field in result.stderr, result.stderr
    assert "is invalid" in result.stderr


def test_pods_outside_opted_in_namespaces_and_cpu_pods_without_a_queue_pass_untouched(
    project: Project, world: dict[str, str]
) -> None:
    # Not opted in: a GPU pod is stored as written and scheduled at once.
    alice = project.user("alice", "vision-devs")
    alice.apply(gpu_pod("free", project.namespace))
    free = project.admin.wait_for("pod", "free", lambda p: p["spec"].get("nodeName"), "bound to a node")
    assert not [k for k in free["metadata"].get("labels", {}) if k.startswith(keys.PREFIX)]
    assert "schedulingGates" not in free["spec"]

    # Opted in: a pod that asks for no GPU and names no queue is not Sluicegate's business.
    project.opt_in(default_queue=world["train"])
    cpu = gpu_pod("cpu", project.namespace)
    cpu["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    alice.apply(cpu)
    stored = project.admin.wait_for("pod", "cpu", lambda p: p["spec"].get("nodeName"), "bound to a node")
    assert not [k for k in stored["metadata"].get("labels", {}) if k.startswith(keys.PREFIX)]
    assert not [k for k in stored["metadata"].get("annotations", {}) if k.startswith(keys.PREFIX)]
    assert "schedulingGates" not in stored["spec"]
