"""The abuse list, tried while a stream of honest submissions flows, and the RBAC of
Sluicegate's own accounts.

Every attempt to jump the queue must be refused with a message that says why; the webhook must
answer a body of several MB and thousands of concurrent connections and keep admitting; the
honest stream must end with the auditor's verdict (no limit exceeded, every pod finished, none
released twice, none lost). Single attempts are also covered one by one in test_refusals.py and
test_hardening.py; here they run together, under load, and are counted for docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audit.checking import Cap, Limits
from audit.connection import Credentials
from audit.naming import RUN_LABEL
from audit.recording import recording
from controlplane.deploying import LocalSluicegate
from policy import keys
from process import kubeyaml
from tests.builders import MakeQueue, MakeTeam
from tests.e2e.conftest import Kubectl
from tests.e2e.faults import DRAIN_SECONDS, Row, Stream, judge, scale, scenario
from tests.e2e.projects import Project, gpu_pod
from tests.e2e.test_admission import job
from tests.e2e.test_faults_webhook import WEBHOOK_DOWN
from tests.e2e.test_refusals import GATE_REMOVED, NODE_NAME
from tests.e2e.test_webhook_process import post
from webhook.settings import MAX_CONNECTIONS

WRITTEN = "is written by Sluicegate and cannot be set by users"
CONTROLLER_ACCOUNT = "system:serviceaccount:sluicegate-system:sluicegate-controller"
WEBHOOK_ACCOUNT = "system:serviceaccount:sluicegate-system:sluicegate-webhook"


class Attempts:
    """Each abuse attempt: run it, check its refusal says what it must, count it."""

    def __init__(self, row: Row) -> None:
        self.row = row
        self.failures: list[str] = []

    def refused(self, what: str, attempt: Callable[[], str], expected: str) -> None:
        self.row.add("abuse_tried")
        try:
            message = attempt()
        except AssertionError as e:  # the attempt succeeded: the worst outcome
            self.failures.append(f"{what}: not refused ({e})")
            return
        if expected in message:
            self.row.add("abuse_refused")
        else:
            self.failures.append(f"{what}: refused without saying {expected!r}: {message.strip()}")


def edit_away_the_gate(kubectl: Kubectl, pod: str, tmp_path: Path) -> str:
    """``kubectl edit`` with an editor that deletes the pod's scheduling gates; its error."""
    editor = tmp_path / "ungate.py"
    editor.write_text("import sys, yaml\nfrom process import kubeyaml\npath = sys.argv[1]\n"
                      "pod = yaml.safe_load(open(path))\npod['spec'].pop('schedulingGates')\n"
                      "open(path, 'w').write(kubeyaml.dump(pod))\n")
    cluster = kubectl.cluster
    result = subprocess.run(
        [cluster.binary("kubectl"), f"--kubeconfig={cluster.kubeconfig}", *kubectl.identity,
         "-n", kubectl.namespace, "edit", "pod", pod],
        env={**os.environ, "KUBE_EDITOR": f"{sys.executable} {editor}"},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0, "kubectl edit removed the gate"
    return result.stderr


ANSWERED = "answered 400"
CLOSED = "closed before TLS"
CLOSED_IDLE = "answered nothing"  # accepted, then closed by the server while it idled


async def flood(port: int, ca: Path, count: int) -> Counter[str]:
    """Open ``count`` TLS connections to the webhook at once and, once every one has been
    accepted or turned away, send a malformed review on each accepted; how each ended."""
    context = ssl.create_default_context(cafile=str(ca))
    settled = 0
    everyone = asyncio.Event()

    async def one() -> str:
        nonlocal settled
        try:
            opening = asyncio.open_connection("127.0.0.1", port, ssl=context)
            reader, writer = await asyncio.wait_for(opening, 120)
        except TimeoutError:
            return "timed out connecting"
        except (OSError, asyncio.IncompleteReadError):  # ssl.SSLError and resets are OSErrors
            return CLOSED
        finally:
            settled += 1
            if settled == count:
                everyone.set()
        try:
            async with asyncio.timeout(300):
                await everyone.wait()  # all of them held open at once before any asks
            writer.write(b"POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1\r\nConnection: close\r\n\r\nx")
            async with asyncio.timeout(120):
                line = await reader.readline()
            return "answered " + (line.split()[1].decode() if line else "nothing")
        except (OSError, TimeoutError) as e:
            return f"read {type(e).__name__}"
        finally:
            writer.close()

    return Counter(await asyncio.gather(*(one() for _ in range(count))))


def test_every_abuse_attempt_under_flow_is_refused_with_a_reason_and_the_flow_is_untouched(
    project: Project, credentials: Credentials, running: LocalSluicegate, tmp_path: Path
) -> None:
    run = f"a{uuid.uuid4().hex[:7]}"
    train, held = project.name("train"), project.name("held")
    other_team, prod = project.name("prod-team"), project.name("prod")
    project.create(MakeTeam(project.team).members(users=["alice"], groups=["vision-devs"]).obj(),
                   # open to all: the honest stream is the admin
                   MakeQueue(train).priority(10).access().max_running(4).obj(),
                   MakeQueue(held).priority(10).access(teams=[project.team]).max_running(0).obj(),
                   MakeTeam(other_team).members(users=["carol"]).obj(),
                   MakeQueue(prod).priority(10).access(teams=[other_team]).obj())
    project.opt_in(default_queue=train)
    admin = project.admin.cluster
    elsewhere = f"prod-{run}"  # a namespace of the other team, where alice may create Jobs
    admin.kubectl("create", "namespace", elsewhere)
    admin.kubectl("label", "namespace", elsewhere, f"{keys.TEAM_LABEL}={other_team}")
    admin.kubectl("annotate", "namespace", elsewhere, f"{keys.DEFAULT_QUEUE_ANNOTATION}={prod}")
    admin.kubectl("create", "rolebinding", "alice-edit", "-n", elsewhere, "--clusterrole=edit",
                  "--user=alice")
    alice = project.user("alice", "vision-devs")
    alice.apply(gpu_pod("target", project.namespace, **{keys.QUEUE_LABEL: held}))
    connections = scale(2000, 5000)

    def honest(i: int) -> dict[str, Any]:
        pod = gpu_pod(f"honest-{i:04d}", project.namespace, **{RUN_LABEL: run})
        pod["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/delay"] = "1s"
        return pod

    def create(pod: dict[str, Any], where: Kubectl = alice) -> str:
        return where.fails("create", "-f", "-", input=kubeyaml.dump(pod))

    def spoofed(where: str, key: str, value: str) -> dict[str, Any]:
        pod = gpu_pod(f"spoof-{uuid.uuid4().hex[:5]}", project.namespace)
        pod["metadata"][where][key] = value
        return pod

    def placed() -> dict[str, Any]:
        pod = gpu_pod("placed", project.namespace)
        pod["spec"]["nodeName"] = "gpu-node-0"
        return pod

    def stamped_template() -> dict[str, Any]:
        claimed = job("claims", project.namespace, train)
        claimed["spec"]["template"]["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION] = json.dumps(
            {"user": keys.JOB_CONTROLLER, "groups": ["system:serviceaccounts"]})
        return claimed

    try:
        with scenario("abuse under flow") as row, \
                recording(credentials, selector=f"{RUN_LABEL}={run}") as recorder, \
                Stream(credentials, honest, pause=0.25) as stream:
            tried = Attempts(row)
            ungate = '[{"op": "remove", "path": "/spec/schedulingGates"}]'
            tried.refused("remove the gate with kubectl patch",
                          lambda: alice.fails("patch", "pod", "target", "--type=json", "-p", ungate),
                          GATE_REMOVED)
            tried.refused("remove the gate with kubectl edit",
                          lambda: edit_away_the_gate(alice, "target", tmp_path), GATE_REMOVED)
            tried.refused("set spec.nodeName", lambda: create(placed()), NODE_NAME)
            someone = json.dumps({"user": "admin", "groups": []})
            tried.refused("spoof the submitter annotation",
                          lambda: create(spoofed("annotations", keys.SUBMITTER_ANNOTATION, someone)), WRITTEN)
            tried.refused("spoof the team label",
                          lambda: create(spoofed("labels", keys.TEAM_LABEL, other_team)), WRITTEN)
            move = f"{keys.QUEUE_LABEL}={train}"
            tried.refused("move a gated pod to another queue",
                          lambda: alice.fails("label", "pod", "target", move, "--overwrite"),
                          f"label {keys.QUEUE_LABEL} cannot be changed on")
            there = Kubectl(admin, elsewhere).as_user("alice", "vision-devs")
            tried.refused("a Job in another team's namespace",
                          lambda: create(job("jump", elsewhere, prod), there),
                          f'queue "{prod}" is not open to user alice')
            tried.refused("a pod template claiming the Job controller's identity",
                          lambda: create(stamped_template()), WRITTEN)
            huge = b"{" * (5 * 1000 * 1000)
            tried.refused("an AdmissionReview of 5 MB", lambda: str(post(running, huge)), "413")
            ended = asyncio.run(flood(running.port("webhook", "admission"), running.tls.ca_cert, connections))
            row.add("abuse_tried")
            # Accepted connections left idle while the rest of the flood is opened (slowly, on a
            # loaded machine) may be closed by the server before the test asks on them: that is
            # the bound at work too. Those answered were all open at once: never more than allowed.
            accepted = ended[ANSWERED] + ended[CLOSED_IDLE]
            bounded = ended[ANSWERED] <= MAX_CONNECTIONS
            if set(ended) <= {ANSWERED, CLOSED, CLOSED_IDLE} and accepted >= 1 and bounded:
                row.add("abuse_refused")
            else:
                tried.failures.append(f"{connections} concurrent connections: {dict(ended)}")
            stream.more(5, lambda status: status == 201, "honest submissions admitted after the flood")
            stream.stop()
            recorder.wait(lambda t: t.finished >= len(stream.accepted), DRAIN_SECONDS)
            verdict = judge(recorder.snapshot(), Limits(queues={train: Cap(running=4)}))
            row.verdict(verdict)
    finally:
        admin.kubectl("delete", "namespace", elsewhere, "--wait=false", check=False)

    assert tried.failures == []
    # Honest submissions are refused only while the flood holds every connection the webhook
    # allows, and then fail closed (never admitted ungated); they flow again once it is over.
    assert [s for s in stream.refused if WEBHOOK_DOWN not in s.message] == []
    verdict.check()
    assert project.pod("target")["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert project.pod("target")["metadata"]["labels"][keys.QUEUE_LABEL] == held


def rules(kubectl: Kubectl, account: str, namespace: str) -> set[tuple[str, str, str]]:
    """What ``account`` may do in ``namespace`` (cluster-wide rules included), as the API server
    answers ``kubectl auth can-i --list``: (resource, resource names, verb) triples."""
    out = kubectl.cluster.kubectl("auth", "can-i", "--list", f"--as={account}", "-n", namespace).stdout
    found = set()
    for line in out.splitlines()[1:]:
        row = RULE.match(line)
        if row is None:  # non-resource URLs (/healthz, /version...): every account reads those
            continue
        resource, names, verbs = row.groups()
        for verb in verbs.split():
            found.add((resource, names, verb))
    return found


# "resource   [non-resource URLs]   [resource names]   [verbs]", for rows that name a resource.
RULE = re.compile(r"^(\S+)\s+\[[^]]*\]\s+\[([^]]*)\]\s+\[([^]]*)\]\s*$")
EVERYONE = {(f"{r}", "", "create") for r in (
    "selfsubjectreviews.authentication.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io")}
READ = ("get", "list", "watch")
SLUICEGATE_KINDS = ("queues", "teams", "presets", "policies")
CONTROLLER = EVERYONE | {
    *(("pods", "", v) for v in (*READ, "patch")), ("pods/status", "", "patch"),
    *((e, "", v) for e in ("events", "events.events.k8s.io") for v in ("create", "patch")),
    *((r, "", v) for r in ("nodes", "namespaces") for v in READ),
    *((f"{k}.sluicegate.dev", "", v) for k in SLUICEGATE_KINDS for v in READ),
    *((f"{k}.sluicegate.dev/status", "", v) for k in ("queues", "teams", "policies")
      for v in ("get", "update", "patch")),
    # a gated pod's DRA claims, checked again before its release
    *(("resourceclaims.resource.k8s.io", "", v) for v in ("list", "watch")),
}
# The visibility API it serves, as an aggregated API server (system:auth-delegator).
CONTROLLER |= {("tokenreviews.authentication.k8s.io", "", "create"),
               ("subjectaccessreviews.authorization.k8s.io", "", "create")}
CONTROLLER_LEASE = {("leases.coordination.k8s.io", "", "create"),
                    *(("leases.coordination.k8s.io", "sluicegate-controller", v)
                      for v in ("get", "watch", "update", "patch")),
                    # the run records its start estimates draw on (the Role sluicegate-records-reader)
                    *(("records.records.sluicegate.dev", "", v) for v in ("get", "list"))}
WEBHOOK = EVERYONE | {
    *((f"{k}.sluicegate.dev", "", v) for k in SLUICEGATE_KINDS for v in READ),
    *(("namespaces", "", v) for v in READ),
    *(("jobs.batch", "", v) for v in READ),  # a Job's creator, for its pods' stamps
    *(("priorityclasses.scheduling.k8s.io", "", v) for v in ("list", "watch")),  # may a class preempt?
    ("subjectaccessreviews.authorization.k8s.io", "", "create"),
    # what a pod's DRA claims count as, while the Policy maps a DeviceClass (watched)
    *((f"{r}.resource.k8s.io", "", v) for r in ("resourceclaims", "resourceclaimtemplates") for v in READ),
}


def test_sluicegates_accounts_may_do_exactly_what_they_need_and_nothing_more(
    project: Project, running: LocalSluicegate
) -> None:
    admin = project.admin
    with scenario("RBAC of the controller and webhook accounts") as row:
        checks = [(CONTROLLER_ACCOUNT, "default", CONTROLLER), (CONTROLLER_ACCOUNT, "sluicegate-system",
                  CONTROLLER | CONTROLLER_LEASE), (WEBHOOK_ACCOUNT, "default", WEBHOOK),
                  (WEBHOOK_ACCOUNT, "sluicegate-system", WEBHOOK)]
        extra = {}
        for account, namespace, allowed in checks:
            granted = rules(admin, account, namespace)
            row.add("abuse_tried")
            if granted - allowed:
                extra[(account, namespace)] = sorted(granted - allowed)
            else:
                row.add("abuse_refused")
            assert allowed - granted == set(), f"{account} lacks what it needs in {namespace}"
        forbidden = ["get secrets --all-namespaces", "list secrets -n sluicegate-system", "create pods",
                     "delete pods", "update pods", "patch nodes", "delete queues.sluicegate.dev",
                     "create clusterrolebindings", "impersonate users", "create pods/exec",
                     "create serviceaccounts/token -n sluicegate-system"]
        allowed_anyway = []
        for account in (CONTROLLER_ACCOUNT, WEBHOOK_ACCOUNT):
            for ask in forbidden:
                row.add("abuse_tried")
                answer = admin.cluster.kubectl("auth", "can-i", *ask.split(), f"--as={account}", check=False)
                if answer.stdout.strip() == "no":
                    row.add("abuse_refused")
                else:
                    allowed_anyway.append(f"{account}: {ask}")

    assert extra == {}, f"accounts may do more than they need: {extra}"
    assert allowed_anyway == []
