"""Issue 7 through the real API server: forged mirror pods and forged group members are refused,
a node's own mirror pod is admitted unchanged, and break glass works only for a user allowed to
``release`` the pod's Queue; marks forged before a namespace opts in or through pods/status,
someone else's stamped CronJob (edited, made to run more, or run by hand with kubectl create
job --from) and a count of thousands of digits are refused, while anyone may suspend it;
relabelling a namespace does not free its running pods' slots."""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controlplane.deploying import LocalSluicegate
from policy import keys
from policy.pods import Submitter
from process import kubeyaml
from tests.builders import MakeQueue, MakeTeam
from tests.e2e.conftest import eventually
from tests.e2e.projects import GPU_DELAY, Project, condition, gpu_pod, submitter

NODE = "gpu-node-0"
WRITTEN_BY_SLUICEGATE = "is written by Sluicegate and cannot be set by users"
GATE_REMOVED = f"only Sluicegate's controller may remove the scheduling gate {keys.GATE}"


@pytest.fixture
def train(project: Project) -> str:
    """A queue open to the project's team (alice, group vision-devs); the namespace opted in. It
    dispatches nothing (the gate controller runs beside the webhook), so a pod keeps its gate
    until someone releases it by hand."""
    queue = project.name("train")
    project.create(MakeTeam(project.team).members(users=["alice"], groups=["vision-devs"]).obj(),
                   MakeQueue(queue).priority(10).access(teams=[project.team]).max_running(0).obj())
    project.opt_in(default_queue=queue)
    return queue


def mirror_pod(name: str, namespace: str) -> dict[str, Any]:
    pod = gpu_pod(name, namespace)
    pod["metadata"]["annotations"][keys.MIRROR_POD_ANNOTATION] = "0123456789abcdef"
    pod["spec"]["nodeName"] = NODE
    return pod


def cluster_object(project: Project, obj: dict[str, Any]) -> Iterator[None]:
    project.admin.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump(obj))
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
    refusal = project.user("alice", "vision-devs").fails("create", "-f", "-", input=kubeyaml.dump(pod))
    assert f"annotation {keys.MIRROR_POD_ANNOTATION} marks a mirror pod, which only a node creates" in refusal
    assert project.admin.run("get", "pods", "-o", "name") == ""


def test_a_mirror_pod_created_by_its_node_is_admitted_unchanged(
    project: Project, train: str, node_kubectl: list[str]
) -> None:
    pod = mirror_pod("static-gpu", project.namespace)
    created = subprocess.run([*node_kubectl, "create", "-f", "-", "-o", "json"], input=kubeyaml.dump(pod),
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    stored = json.loads(created.stdout)
    assert "schedulingGates" not in stored["spec"]
    assert not [k for k in stored["metadata"].get("labels", {}) if k.startswith(keys.PREFIX)]
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
    refusal = project.user("alice", "vision-devs").fails("create", "-f", "-", input=kubeyaml.dump(pod))
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


# --- stamps on Jobs, wherever they are written (item 7) ---------------------------------------


JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"


def suspended_job(name: str, namespace: str, stamp: str | None = None) -> dict[str, Any]:
    """A GPU Job that starts no pods (suspended), its template stamped for ``stamp`` if given."""
    pod = gpu_pod("x", namespace)
    del pod["metadata"]["name"], pod["metadata"]["namespace"]
    template = {"metadata": pod["metadata"], "spec": pod["spec"]}
    if stamp is not None:
        template["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION] = Submitter(stamp).to_annotation()
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"suspend": True, "backoffLimit": 0, "template": template}}


def test_a_job_stamped_for_someone_else_is_refused_in_a_namespace_not_opted_in(project: Project) -> None:
    alice = project.user("alice", "vision-devs")
    forged = kubeyaml.dump(suspended_job("forged", project.namespace, stamp="pat"))
    # The API server picks up a webhook configuration on its own time after `up`.
    eventually(lambda: "jobs.validate.sluicegate.dev" in alice.cluster.kubectl(
        *alice.identity, "-n", project.namespace, "create", "--dry-run=server", "-f", "-", input=forged,
        check=False).stderr, "the API server to call the validating Job webhook")
    refusal = alice.fails("create", "-f", "-", input=forged)
    assert "jobs.validate.sluicegate.dev" in refusal
    assert f"annotation {keys.SUBMITTER_ANNOTATION} {WRITTEN_BY_SLUICEGATE}" in refusal
    assert project.admin.run("get", "jobs", "-o", "name") == ""


def test_a_job_without_sluicegate_keys_in_a_namespace_not_opted_in_is_admitted_unchanged(
    project: Project,
) -> None:
    job = suspended_job("plain", project.namespace)
    project.user("alice", "vision-devs").run("create", "-f", "-", input=kubeyaml.dump(job))
    stored = project.admin.get("job", "plain")["spec"]["template"]
    assert stored["metadata"]["annotations"] == job["spec"]["template"]["metadata"]["annotations"]
    assert not [k for k in stored["metadata"].get("labels", {}) if k.startswith(keys.PREFIX)]
    assert stored["spec"]["containers"][0]["resources"] == job["spec"]["template"]["spec"]["containers"][0][
        "resources"]


def test_a_pod_claiming_a_job_is_judged_against_the_jobs_creator(project: Project, train: str) -> None:
    """Whoever acts as the Job controller, a pod of alice's Job is submitted by alice."""
    project.user("alice", "vision-devs").run(
        "create", "-f", "-", input=kubeyaml.dump(suspended_job("sweep", project.namespace)))
    job = project.admin.get("job", "sweep")
    stamp = job["spec"]["template"]["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION]
    assert json.loads(stamp)["user"] == "alice"

    def pod(stamp: str) -> str:
        obj = gpu_pod("sweep-0", project.namespace)
        obj["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION] = stamp
        obj["metadata"]["ownerReferences"] = [{
            "apiVersion": "batch/v1", "kind": "Job", "name": "sweep", "uid": job["metadata"]["uid"],
            "controller": True,
        }]
        return kubeyaml.dump(obj)

    as_controller = project.user(JOB_CONTROLLER, "system:serviceaccounts",
                                 "system:serviceaccounts:kube-system")
    refusal = as_controller.fails("create", "-f", "-", input=pod(Submitter("pat").to_annotation()))
    assert (f"annotation {keys.SUBMITTER_ANNOTATION} names user pat, but the Job that owns this pod was "
            "created by user alice") in refusal
    admitted = json.loads(as_controller.run("create", "--dry-run=server", "-o", "json", "-f", "-",
                                            input=pod(stamp)))
    assert admitted["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert admitted["metadata"]["labels"][keys.QUEUE_LABEL] == train


# --- a broken Policy fails closed and is exported (item 4) ------------------------------------


POLICY_CRD = "policies.sluicegate.dev"
MAX_RUNNING_MINIMUM = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/maxRunning/minimum"


def _policy_broken(sluicegate: LocalSluicegate) -> dict[str, float]:
    """``sluicegate_policy_broken`` as each process's /metrics shows it."""
    values = {}
    for service in sluicegate.services:
        port = sluicegate.port(service.name, "metrics")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "sluicegate_policy_broken":
                    values[service.name] = sample.value
    return values


@contextlib.contextmanager
def policy_stored_unchecked(project: Project) -> Iterator[None]:
    """The Policy schema without its minimum for maxRunning, as an older release's CRD might be
    (objects stored under it stay as stored when the schema tightens again)."""
    cluster = project.admin.cluster
    cluster.kubectl("patch", "crd", POLICY_CRD, "--type=json",
                    "-p", json.dumps([{"op": "remove", "path": MAX_RUNNING_MINIMUM}]))
    try:
        yield
    finally:
        cluster.kubectl("patch", "crd", POLICY_CRD, "--type=json",
                        "-p", json.dumps([{"op": "add", "path": MAX_RUNNING_MINIMUM, "value": 0}]))


def test_a_broken_policy_is_alerted_on_and_the_last_valid_one_stays_in_force(
    project: Project, train: str, running: LocalSluicegate
) -> None:
    admin = project.admin.cluster
    def policy(**spec: Any) -> str:
        return kubeyaml.dump({"apiVersion": keys.API_VERSION, "kind": "Policy",
                               "metadata": {"name": keys.POLICY_NAME},
                               "spec": {"managedResources": [keys.GPU_RESOURCE, "amd.com/gpu"], **spec}})

    amd = gpu_pod("amd", project.namespace)
    amd["spec"]["containers"][0]["resources"] = {"limits": {"amd.com/gpu": "1"}}
    alice = project.user("alice", "vision-devs")

    def gated(pod: dict[str, Any]) -> bool:
        out = alice.cluster.kubectl(*alice.identity, "-n", project.namespace, "create", "--dry-run=server",
                                    "-o", "json", "-f", "-", input=kubeyaml.dump(pod)).stdout
        return bool(json.loads(out)["spec"].get("schedulingGates"))

    admin.kubectl("apply", "-f", "-", input=policy())
    try:
        eventually(lambda: gated(amd), "the webhook to manage amd.com/gpu as the Policy says")
        with policy_stored_unchecked(project):
            eventually(lambda: admin.kubectl("apply", "-f", "-", input=policy(maxRunning=-1),
                                             check=False).returncode == 0,
                       "the API server to store a Policy under the loosened schema")
        eventually(lambda: set(_policy_broken(running).values()) == {1.0},
                   "every process to export sluicegate_policy_broken 1")
        # Defaults would drop amd.com/gpu from management; the last valid Policy keeps it.
        alice.apply(amd)
        stored = project.pod("amd")
        assert stored["spec"]["schedulingGates"] == [{"name": keys.GATE}]
        assert stored["metadata"]["labels"][keys.QUEUE_LABEL] == train

        admin.kubectl("apply", "-f", "-", input=policy(maxRunning=5))
        eventually(lambda: set(_policy_broken(running).values()) == {0.0},
                   "every process to export sluicegate_policy_broken 0 once the Policy is fixed")
    finally:
        admin.kubectl("delete", "policies.sluicegate.dev", keys.POLICY_NAME, "--ignore-not-found")


# --- marks forged where admission used not to look (issue 7, second round) -------------------


def test_a_pod_forged_with_admissions_marks_before_its_namespace_opts_in_is_refused(project: Project) -> None:
    """The attack: a gated pod with a queue, a team and an admission stamp written by hand in a
    namespace not yet opted in, waiting for the opt-in to be released past the queue's checks."""
    pod = gpu_pod("pre", project.namespace, 4)
    pod["metadata"]["labels"].update({keys.QUEUE_LABEL: "urgent-retrain", keys.TEAM_LABEL: project.team})
    pod["metadata"]["annotations"][keys.ADMITTED_AT_ANNOTATION] = "2026-11-30T10:04:30.123456Z"
    pod["spec"]["schedulingGates"] = [{"name": keys.GATE}]
    forged = kubeyaml.dump(pod)
    alice = project.user("alice", "vision-devs")
    # The API server picks up a webhook configuration on its own time after `up`.
    eventually(lambda: "pods-elsewhere.validate.sluicegate.dev" in alice.cluster.kubectl(
        *alice.identity, "-n", project.namespace, "create", "--dry-run=server", "-f", "-", input=forged,
        check=False).stderr, "the API server to call the validating pod webhook for namespaces not opted in")
    refusal = alice.fails("create", "-f", "-", input=forged)
    assert f"label {keys.TEAM_LABEL} {WRITTEN_BY_SLUICEGATE}" in refusal
    assert project.admin.run("get", "pods", "-o", "name") == ""


def test_a_pod_with_only_a_queue_label_in_a_namespace_not_opted_in_is_admitted_unchanged(
    project: Project,
) -> None:
    pod = gpu_pod("plain", project.namespace)
    pod["metadata"]["labels"][keys.QUEUE_LABEL] = "somewhere"
    project.user("alice", "vision-devs").apply(pod)
    stored = project.pod("plain")
    assert "schedulingGates" not in stored["spec"]
    assert stored["metadata"]["labels"] == {keys.QUEUE_LABEL: "somewhere"}


def test_a_gated_pod_cannot_be_moved_to_another_queue_through_pods_status(
    project: Project, train: str
) -> None:
    project.user("alice", "vision-devs").apply(gpu_pod("st-gpu", project.namespace))
    move = json.dumps({"metadata": {"labels": {keys.QUEUE_LABEL: "notebooks"}}})
    refusal = project.admin.fails("patch", "pod", "st-gpu", "--subresource=status", "--type=merge",
                                  "-p", move)
    assert f"label {keys.QUEUE_LABEL} cannot be changed on a pod once it exists" in refusal
    assert project.pod("st-gpu")["metadata"]["labels"][keys.QUEUE_LABEL] == train


def test_a_workflow_limit_of_five_thousand_digits_is_refused_with_a_message(
    project: Project, train: str
) -> None:
    pod = gpu_pod("huge", project.namespace)
    pod["metadata"]["labels"][keys.WORKFLOW_LABEL] = "sweep"
    pod["metadata"]["annotations"][keys.WORKFLOW_MAX_RUNNING_ANNOTATION] = "9" * 5000
    refusal = project.user("alice", "vision-devs").fails("create", "-f", "-", input=kubeyaml.dump(pod))
    assert "pods.mutate.sluicegate.dev" in refusal and "denied the request" in refusal
    assert "must be a positive integer no larger than 2147483647" in refusal
    assert project.admin.run("get", "pods", "-o", "name") == ""


def test_another_users_stamped_cronjob_cannot_be_edited_to_run_as_them(project: Project, train: str) -> None:
    """olga's suspended CronJob; alice, who may edit it, changes its image and GPUs."""
    job = suspended_job("x", project.namespace)
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob",
               "metadata": {"name": "oncall-cj", "namespace": project.namespace},
               "spec": {"schedule": "0 3 * * *", "suspend": True, "jobTemplate": {"spec": job["spec"]}}}
    project.user("olga", "vision-devs").run("create", "-f", "-", input=kubeyaml.dump(cronjob))
    stored = project.admin.get("cronjob", "oncall-cj")["spec"]["jobTemplate"]["spec"]["template"]
    assert json.loads(stored["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION])["user"] == "olga"

    edit = json.dumps([
        {"op": "replace", "path": "/spec/jobTemplate/spec/template/spec/containers/0/image",
         "value": "registry.invalid/alice-mining:latest"},
        {"op": "replace", "path": "/spec/jobTemplate/spec/template/spec/containers/0/resources",
         "value": {"limits": {keys.GPU_RESOURCE: "8"}}},
    ])
    alice = project.user("alice", "vision-devs")
    refusal = alice.fails("patch", "cronjob", "oncall-cj", "--type=json", "-p", edit)
    assert "was submitted by user olga" in refusal and "only they may change what it runs" in refusal
    kept = project.admin.get("cronjob", "oncall-cj")["spec"]["jobTemplate"]["spec"]["template"]
    assert kept["spec"]["containers"][0]["image"] == stored["spec"]["containers"][0]["image"]

    project.user("olga", "vision-devs").run("patch", "cronjob", "oncall-cj", "--type=json", "-p", edit)


def test_another_users_cronjob_cannot_be_made_to_run_more_of_their_work_but_anyone_may_suspend_it(
    project: Project,
) -> None:
    """carol (on call) has a CronJob in the urgent queue; dmitri, who may edit it but may not use
    that queue, makes it run four 8-GPU pods every minute, which would run and count as carol's."""
    urgent = project.name("urgent-retrain")
    # It dispatches nothing.
    queue = MakeQueue(urgent).priority(100).access(groups=["ml-oncall"]).max_running(0).obj()
    project.create(MakeTeam(project.team).members(users=["carol", "dmitri"]).obj(), queue)
    project.opt_in()
    project.grant(users=("carol", "dmitri"), groups=())
    template = {"metadata": {"labels": {keys.QUEUE_LABEL: urgent}},
                "spec": gpu_pod("x", project.namespace, 8)["spec"]}
    cronjob = kubeyaml.dump({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly-retrain", "namespace": project.namespace},
        # Due on January 1st: nothing is started while the test runs.
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {
            "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template}}},
    })
    carol, dmitri = project.user("carol", "ml-oncall"), project.user("dmitri", "nlp-devs")
    eventually(lambda: carol.cluster.kubectl(*carol.identity, "-n", project.namespace, "create",
                                             "--dry-run=server", "-f", "-", input=cronjob,
                                             check=False).returncode == 0,
               f"the webhook to know queue {urgent}")
    carol.run("create", "-f", "-", input=cronjob)
    stored = project.admin.get("cronjob", "nightly-retrain")
    assert submitter(stored["spec"]["jobTemplate"]["spec"]["template"]["metadata"]) == "carol"

    attack = json.dumps({"spec": {"schedule": "* * * * *",
                                  "jobTemplate": {"spec": {"parallelism": 4, "completions": 4}}}})
    refusal = dmitri.fails("patch", "cronjob", "nightly-retrain", "--type=merge", "-p", attack)
    assert "cronjobs.validate.sluicegate.dev" in refusal and "denied the request" in refusal
    assert (
        f"CronJob nightly-retrain was submitted by user carol (annotation {keys.SUBMITTER_ANNOTATION} on "
        "its pod template) and only they may change what it runs or how much "
        "(spec.jobTemplate.spec.completions, spec.jobTemplate.spec.parallelism, spec.schedule): its "
        "pods run and count as user carol's; create a CronJob of your own instead. Anyone allowed to "
        "edit it may still suspend it (spec.suspend: true)"
    ) in refusal
    kept = project.admin.get("cronjob", "nightly-retrain")["spec"]
    assert (kept["schedule"], kept["jobTemplate"]["spec"]["parallelism"]) == ("0 0 1 1 *", 1)

    # The emergency brake is anyone's; resuming is carol's again.
    dmitri.run("patch", "cronjob", "nightly-retrain", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    assert project.admin.get("cronjob", "nightly-retrain")["spec"]["suspend"] is True
    refusal = dmitri.fails("patch", "cronjob", "nightly-retrain", "--type=merge", "-p",
                           '{"spec":{"suspend":false}}')
    assert "only they may change what it runs or how much (spec.suspend)" in refusal

    # carol changes her own CronJob as she likes.
    own = json.dumps({"spec": {"suspend": False, "schedule": "0 0 2 1 *",
                               "jobTemplate": {"spec": {"parallelism": 2, "completions": 2}}}})
    carol.run("patch", "cronjob", "nightly-retrain", "--type=merge", "-p", own)
    changed = project.admin.get("cronjob", "nightly-retrain")["spec"]
    assert (changed["suspend"], changed["schedule"], changed["jobTemplate"]["spec"]["parallelism"]) == (
        False, "0 0 2 1 *", 2)


def test_a_job_made_from_another_users_cronjob_is_refused_naming_whose_stamp_it_carries(
    project: Project, train: str
) -> None:
    """olga's suspended CronJob; alice, who may create Jobs here, runs it by hand."""
    job = suspended_job("x", project.namespace)
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob",
               "metadata": {"name": "nightly-retrain", "namespace": project.namespace},
               "spec": {"schedule": "0 3 * * *", "suspend": True, "jobTemplate": {"spec": job["spec"]}}}
    project.user("olga", "vision-devs").run("create", "-f", "-", input=kubeyaml.dump(cronjob))

    refusal = project.user("alice", "vision-devs").fails(
        "create", "job", "manual-run", "--from=cronjob/nightly-retrain")
    assert "jobs.mutate.sluicegate.dev" in refusal and "denied the request" in refusal
    assert (
        f"this Job's pod template carries the submitter stamp of user olga (annotation "
        f"{keys.SUBMITTER_ANNOTATION}), and the Job names CronJob nightly-retrain as its owner, as "
        "kubectl create job --from=cronjob/nightly-retrain makes it: its pods would be judged and "
        "counted as olga's, so only olga or the CronJob controller may create Jobs from that "
        "CronJob; create a Job of your own instead"
    ) in refusal
    assert WRITTEN_BY_SLUICEGATE not in refusal
    assert project.admin.run("get", "jobs", "-o", "name") == ""


def test_relabelling_a_namespace_does_not_let_a_queue_go_over_its_limit(project: Project) -> None:
    """A pod runs in a queue of one slot; its namespace is then relabelled to another team that
    may use the queue too. The running pod keeps its slot: the next pod waits for it."""
    queue, other = project.name("one-slot"), project.name("other-team")
    project.create(MakeTeam(project.team).members(users=["alice"]).obj(),
                   MakeTeam(other).members(users=["alice"]).obj(),
                   MakeQueue(queue).priority(10).access(teams=[project.team, other]).max_running(1).obj())
    project.opt_in(default_queue=queue)
    first = gpu_pod("first", project.namespace)
    first["metadata"]["annotations"][GPU_DELAY] = "600s"
    alice = project.user("alice", "vision-devs")
    alice.apply(first)
    project.admin.wait_for("pod", "first", lambda p: "schedulingGates" not in p["spec"],
                           "the first pod to be released")

    project.opt_in(team=other, default_queue=queue)

    def admitted_team() -> str:  # what admission would stamp on a pod now (a server dry run)
        out = alice.run("create", "--dry-run=server", "-o", "json", "-f", "-",
                        input=kubeyaml.dump(gpu_pod("probe", project.namespace)))
        return str(json.loads(out)["metadata"]["labels"].get(keys.TEAM_LABEL))

    # The webhook trusts its cache for a namespace it knows as opted in: wait until its watch
    # has delivered the new label, or the pod would be admitted for the old team.
    eventually(lambda: admitted_team() == other, f"the webhook to see {project.namespace} in team {other}")
    alice.apply(gpu_pod("second", project.namespace))
    held = project.admin.wait_for(
        "pod", "second", lambda p: (condition(p, keys.CONDITION) or {}).get("reason") == "QueueLimit",
        "the second pod to be held by the queue's limit")
    assert held["spec"]["schedulingGates"] == [{"name": keys.GATE}]
    assert held["metadata"]["labels"][keys.TEAM_LABEL] == other
    assert "schedulingGates" not in project.pod("first")["spec"]
