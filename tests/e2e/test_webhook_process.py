"""The webhook as a running process: fail closed while it is down, a malformed body is answered
400 and it keeps serving, and a changed Queue or Preset is used without a restart."""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from pathlib import Path
from typing import Any

from aiohttp import web

from certs.issuing import issue
from controlplane.deploying import LocalSluicegate
from policy import keys
from process import kubeyaml
from process.certificates import server_context
from tests.builders import MakePreset, MakeQueue, MakeTeam
from tests.e2e.conftest import eventually
from tests.e2e.projects import Project, gpu_pod
from tests.webhook_builders import ServedApp

# The gate controller runs beside the webhook in these tests; queues that dispatch nothing keep
# every admitted pod gated, so what admission wrote can be read back as it left it.
HOLD = 0


def test_with_the_webhook_stopped_a_managed_pod_is_refused_and_submissions_flow_once_it_is_back(
    project: Project, running: LocalSluicegate
) -> None:
    train = project.name("train")
    project.create(MakeQueue(train).priority(10).access().max_running(HOLD).obj())
    project.opt_in(default_queue=train)
    alice = project.user("alice", "vision-devs")

    running.stop("webhook")
    try:
        pod = kubeyaml.dump(gpu_pod("while-down", project.namespace))
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
    project.create(MakeQueue(train).priority(10).access().max_running(HOLD).obj())
    project.opt_in(default_queue=train)
    project.user("alice").apply(gpu_pod("still-served", project.namespace))
    assert project.pod("still-served")["spec"]["schedulingGates"] == [{"name": keys.GATE}]


def test_a_changed_queue_or_preset_is_used_by_the_next_admission_without_a_restart(
    project: Project, running: LocalSluicegate
) -> None:
    webhook = running.pid("webhook")
    train, shape = project.name("train"), project.name("shape")
    project.create(
        MakeTeam(project.team).members(users=["alice"]).obj(),
        MakeQueue(train).priority(10).access(teams=[project.team]).max_running(HOLD).obj(),
        MakePreset(shape).requests(cpu="1").obj(),
    )
    project.opt_in(default_queue=train, default_presets=[shape])
    alice = project.user("alice")
    pod = kubeyaml.dump(gpu_pod("probe", project.namespace))

    def cpu_of_next_pod() -> str:
        out = json.loads(alice.run("create", "--dry-run=server", "-o", "json", "-f", "-", input=pod))
        return str(out["spec"]["containers"][0]["resources"]["requests"]["cpu"])

    assert cpu_of_next_pod() == "1"
    project.create(MakePreset(shape).requests(cpu="3").obj())
    eventually(lambda: cpu_of_next_pod() == "3", "the changed preset in the next pod")

    # no longer open to alice's team
    project.create(MakeQueue(train).priority(10).access(users=["bob"]).max_running(HOLD).obj())

    def refused() -> str | None:
        result = alice.cluster.kubectl("--as=alice", "-n", project.namespace, "create", "--dry-run=server",
                                       "-f", "-", input=pod, check=False)
        return result.stderr if result.returncode != 0 else None

    refusal = eventually(refused, "the queue closed to alice")
    source = f"(the default queue of namespace {project.namespace})"
    assert f'queue "{train}" {source} is not open to user alice' in refusal
    assert running.pid("webhook") == webhook, "the same webhook process answered throughout"


def ungating_webhook() -> web.Application:
    """Another mutating webhook, run later than Sluicegate's, that strips every scheduling gate."""

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        pod = review["request"]["object"]
        response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": True}
        if pod["spec"].get("schedulingGates"):
            patch = [{"op": "remove", "path": "/spec/schedulingGates"}]
            encoded = base64.b64encode(json.dumps(patch).encode()).decode()
            response |= {"patchType": "JSONPatch", "patch": encoded}
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": response})

    app = web.Application()
    app.add_routes([web.post("/", mutate)])
    return app


def test_a_pod_that_a_later_webhook_ungates_is_refused_by_the_final_check(
    project: Project, tmp_path: Path
) -> None:
    train = project.name("train")
    project.create(MakeQueue(train).priority(10).access().max_running(HOLD).obj())
    project.opt_in(default_queue=train)
    files = issue(tmp_path, hosts=["127.0.0.1"])
    name = f"zz-ungate-{project.suffix}"  # webhooks are called in name order: after Sluicegate's
    cluster = project.admin.cluster
    with ServedApp(ungating_webhook(), server_context(files.cert, files.key)) as other:
        cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": "ungate.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "reinvocationPolicy": "IfNeeded", "timeoutSeconds": 5,
                "clientConfig": {"url": f"https://127.0.0.1:{other.port}/",
                                 "caBundle": base64.b64encode(files.ca_cert.read_bytes()).decode()},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": project.namespace}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                           "operations": ["CREATE"]}],
            }],
        }))
        try:
            pod = kubeyaml.dump(gpu_pod("ungated", project.namespace))

            def refusal() -> str | None:  # once the API server has loaded the new configuration
                result = cluster.kubectl("--as=alice", "-n", project.namespace, "create", "--dry-run=server",
                                         "-f", "-", input=pod, check=False)
                return result.stderr if "changed after Sluicegate admitted it" in result.stderr else None

            eventually(refusal, "the other webhook in place")
            message = project.user("alice").fails("create", "-f", "-", input=pod)
            assert project.admin.run("get", "pods", "-o", "name") == ""
        finally:
            cluster.kubectl("delete", "mutatingwebhookconfiguration", name)
    assert 'admission webhook "pods.validate.sluicegate.dev" denied the request' in message
    assert f"{project.namespace}/ungated was changed after Sluicegate admitted it" in message
    assert "/spec/schedulingGates" in message
