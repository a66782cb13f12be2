"""Admission through the real API server and kubectl, as impersonated users: a submitted GPU
pod gets its queue, team, submitter, presets and gate; Jobs and CronJobs are judged at once
and their pods carry the person who submitted them; each preset strategy gives its pod."""

from __future__ import annotations

from typing import Any

import pytest

from policy import keys
from process import kubeyaml
from tests.builders import MakePreset, MakeQueue, MakeTeam
from tests.e2e.conftest import eventually
from tests.e2e.projects import Project, condition, gpu_pod, submitter

# The gate controller runs beside the webhook in these tests; queues that dispatch nothing keep
# every admitted pod gated, so what admission wrote can be read back as it left it.
HOLD = 0


def vision_world(project: Project) -> tuple[str, str]:
    """Team members alice and group vision-devs; a training queue open to the team, and a
    production queue that is not. Returns (training queue, production queue)."""
    train, prod = project.name("train"), project.name("prod")
    project.create(
        MakeTeam(project.team).members(users=["alice"], groups=["vision-devs"]).obj(),
        MakeQueue(train).priority(10).access(teams=[project.team]).max_running(HOLD).obj(),
        MakeQueue(prod).priority(10).access(teams=[project.name("prod-team")]).max_running(HOLD).obj(),
    )
    return train, prod


def test_a_gpu_pod_without_a_queue_gets_the_default_queue_team_submitter_presets_and_the_gate(
    project: Project,
) -> None:
    train, _ = vision_world(project)
    data = project.name("data")
    project.create(MakePreset(data).strategy("post_merge")
                   .container("env", [{"name": "DATA_URL", "value": "s3://vision/data"}])
                   .pod("volumes", [{"name": "scratch", "emptyDir": {}}])
                   .container("volumeMounts", [{"name": "scratch", "mountPath": "/scratch"}]).obj())
    project.opt_in(default_queue=train, default_presets=[data])

    project.user("alice", "vision-devs").apply(gpu_pod("trainer", project.namespace))

    pod = project.admin.wait_for("pod", "trainer", lambda p: condition(p, "PodScheduled"), "PodScheduled")
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["labels"][keys.QUEUE_LABEL] == train
    assert meta["labels"][keys.TEAM_LABEL] == project.team
    assert submitter(meta) == "alice"
    assert meta["annotations"][keys.APPLIED_PRESETS_ANNOTATION] == data
    assert {"name": "DATA_URL", "value": "s3://vision/data"} in spec["containers"][0]["env"]
    assert {"mountPath": "/scratch", "name": "scratch"} in spec["containers"][0]["volumeMounts"]
    assert {"name": "scratch", "emptyDir": {}} in spec["volumes"]
    assert spec["schedulingGates"] == [{"name": keys.GATE}]
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulingGated")
    assert "nodeName" not in project.pod("trainer")["spec"]


def job(name: str, namespace: str, queue: str) -> dict[str, Any]:
    pod = gpu_pod("ignored", namespace, **{keys.QUEUE_LABEL: queue})
    del pod["metadata"]["name"], pod["metadata"]["namespace"]
    template = {"metadata": pod["metadata"], "spec": pod["spec"]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"backoffLimit": 0, "template": template}}


def cronjob(name: str, namespace: str, queue: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": job(name, namespace, queue)["spec"]}}}


@pytest.mark.parametrize("build", [job, cronjob], ids=["a Job", "a CronJob"])
def test_applying_an_owner_whose_queue_the_user_may_not_use_is_refused_at_once(
    project: Project, build: Any
) -> None:
    train, prod = vision_world(project)
    project.opt_in(default_queue=train)

    refusal = project.user("alice", "vision-devs").fails(
        "apply", "-f", "-", input=kubeyaml.dump(build("nightly", project.namespace, prod))
    )

    assert (
        f'queue "{prod}" is not open to user alice (team {project.team}); '
        f"this namespace may use: {train}"
    ) in refusal
    assert project.admin.run("get", "jobs,cronjobs", "-o", "name") == ""


def test_the_pods_of_a_permitted_job_carry_the_user_who_submitted_it(project: Project) -> None:
    train, _ = vision_world(project)
    project.opt_in()

    project.user("alice", "vision-devs").apply(job("sweep", project.namespace, train))

    pods = eventually(lambda: project.admin.items("pods", "-l", "job-name=sweep"), "the Job's pod")
    meta = pods[0]["metadata"]
    assert meta["ownerReferences"][0]["kind"] == "Job"
    assert submitter(meta) == "alice"
    assert meta["labels"][keys.QUEUE_LABEL] == train
    assert pods[0]["spec"]["schedulingGates"] == [{"name": keys.GATE}]


POD_SHAPE = {
    "nodeSelector": {"pool": "pod"},
    "tolerations": [{"key": "k1", "operator": "Exists", "effect": "NoSchedule"}],
}


@pytest.mark.parametrize(
    ("strategy", "node_selector", "env", "tolerations", "requests"),
    [
        pytest.param("replace", {"pool": "preset", "zone": "z"}, [("A", "preset"), ("B", "preset")], ["k2"],
                     {"cpu": "2", "memory": "1Gi"}, id="replace: the preset's lists, its map values win"),
        pytest.param("isnull", {"pool": "pod", "zone": "z"}, [("A", "pod"), ("C", "pod"), ("B", "preset")],
                     ["k1", "k2"], {"cpu": "1", "memory": "1Gi"},
                     id="isnull: only what the pod left empty, lists item by item"),
        pytest.param("post_merge", {"pool": "preset", "zone": "z"}, [("A", "preset"), ("C", "pod"),
                     ("B", "preset")], ["k1", "k2"], {"cpu": "2", "memory": "1Gi"},
                     id="post_merge: merged, the preset wins"),
        pytest.param("pre_merge", {"pool": "pod", "zone": "z"}, [("A", "pod"), ("C", "pod"), ("B", "preset")],
                     ["k1", "k2"], {"cpu": "1", "memory": "1Gi"}, id="pre_merge: merged, the pod wins"),
    ],
)
def test_each_preset_strategy_gives_the_pod_read_back_from_the_api_server(
    project: Project,
    strategy: str,
    node_selector: dict[str, str],
    env: list[tuple[str, str]],
    tolerations: list[str],
    requests: dict[str, str],
) -> None:
    train, _ = vision_world(project)
    shape = project.name(strategy.replace("_", "-"))
    project.create(
        MakePreset(shape).strategy(strategy)
        .pod("nodeSelector", {"pool": "preset", "zone": "z"})
        .pod("tolerations", [{"key": "k2", "operator": "Exists", "effect": "NoSchedule"}])
        .container("env", [{"name": "A", "value": "preset"}, {"name": "B", "value": "preset"}])
        .requests(cpu="2", memory="1Gi").obj()
    )
    project.opt_in(default_queue=train)
    pod = gpu_pod("shaped", project.namespace)
    pod["metadata"]["annotations"][keys.PRESETS_ANNOTATION] = shape
    pod["spec"].update(POD_SHAPE)
    main = pod["spec"]["containers"][0]
    main["env"] = [{"name": "A", "value": "pod"}, {"name": "C", "value": "pod"}]
    main["resources"]["requests"] = {"cpu": "1"}

    project.user("alice", "vision-devs").apply(pod)

    spec = project.pod("shaped")["spec"]
    container = spec["containers"][0]
    assert spec["nodeSelector"] == node_selector
    assert [(e["name"], e["value"]) for e in container["env"]] == env
    # The API server adds its own NoExecute tolerations (DefaultTolerationSeconds).
    assert [t["key"] for t in spec["tolerations"] if t["key"] in ("k1", "k2")] == tolerations
    assert {k: v for k, v in container["resources"]["requests"].items() if k != keys.GPU_RESOURCE} == requests
    assert spec["schedulingGates"] == [{"name": keys.GATE}]
