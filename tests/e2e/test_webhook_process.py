"""The webhook as a running process: fail closed while it is down, a malformed body is answered
400 and it keeps serving, and a changed Queue or Preset is used without a restart."""

from __future__ import annotations

import http.client
import json
import ssl

import yaml

from controlplane.deploying import LocalSluicegate
from policy import keys
from tests.admission_builders import make_preset, make_queue, make_team
from tests.e2e.conftest import eventually
from tests.e2e.projects import Project, gpu_pod


def test_with_the_webhook_stopped_a_managed_pod_is_refused_and_submissions_flow_once_it_is_back(
    project: Project, running: LocalSluicegate
) -> None:
    train = project.name("train")
    project.create(make_queue(train))
    project.opt_in(default_queue=train)
    alice = project.user("alice", "vision-devs")

    running.stop("webhook")
    try:
        pod = yaml.safe_dump(gpu_pod("while-down", project.namespace))
        refusal = alice.fails("create", "-f", "-", input=pod)
        assert "failed calling webhook" in refusal
        assert alice.run("get", "pods", "-o", "name") == ""
    finally:
        running.start("webhook")

    alice.apply(gpu_pod("after", project.namespace))
    assert project.pod("after")["spec"]["schedulingGates"] == [{"name": keys.GATE}]


def post(running: LocalSluicegate, body: bytes) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(running.tls.ca_cert))
    connection = http.client.HTTPSConnection("127.0.0.1", running.port("webhook", "admission"),
                                             context=context, timeout=30)
    try:
        connection.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_the_running_webhook_answers_garbage_400_and_a_huge_body_413_and_keeps_serving(
    project: Project, running: LocalSluicegate
) -> None:
    status, text = post(running, b"\x00garbage")
    assert status == 400
    assert json.loads(text)["error"].startswith("malformed AdmissionReview: the body is not JSON")
    status, text = post(running, b"{" * (5 * 1000 * 1000))
    assert status == 413

    train = project.name("train")
    project.create(make_queue(train))
    project.opt_in(default_queue=train)
    project.user("alice").apply(gpu_pod("still-served", project.namespace))
    assert project.pod("still-served")["spec"]["schedulingGates"] == [{"name": keys.GATE}]


def test_a_changed_queue_or_preset_is_used_by_the_next_admission_without_a_restart(
    project: Project, running: LocalSluicegate
) -> None:
    webhook = running.pid("webhook")
    train, shape = project.name("train"), project.name("shape")
    project.create(
        make_team(project.team, users=["alice"]),
        make_queue(train, teams=[project.team]),
        make_preset(shape).requests(cpu="1").obj(),
    )
    project.opt_in(default_queue=train, default_presets=[shape])
    alice = project.user("alice")
    pod = yaml.safe_dump(gpu_pod("probe", project.namespace))

    def cpu_of_next_pod() -> str:
        out = json.loads(alice.run("create", "--dry-run=server", "-o", "json", "-f", "-", input=pod))
        return str(out["spec"]["containers"][0]["resources"]["requests"]["cpu"])

    assert cpu_of_next_pod() == "1"
    project.create(make_preset(shape).requests(cpu="3").obj())
    eventually(lambda: cpu_of_next_pod() == "3", "the changed preset in the next pod")

    project.create(make_queue(train, users=["bob"]))  # no longer open to alice's team

    def refused() -> str | None:
        result = alice.cluster.kubectl("--as=alice", "-n", project.namespace, "create", "--dry-run=server",
                                       "-f", "-", input=pod, check=False)
        return result.stderr if result.returncode != 0 else None

    refusal = eventually(refused, "the queue closed to alice")
    source = f"(the default queue of namespace {project.namespace})"
    assert f'queue "{train}" {source} is not open to user alice' in refusal
    assert running.pid("webhook") == webhook, "the same webhook process answered throughout"
