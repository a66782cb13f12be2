"""What the webhook configurations send to the webhook, judged by the real API server.

The configurations of manifests/admission are installed unchanged except for three things: a
unique name, a namespaceSelector narrowed to this test's namespace, and a clientConfig pointing
at a closed port. With failurePolicy Fail, every request they match is then refused naming the
webhook, and every request they skip goes through: the rules, the namespaceSelector and the
matchConditions are tested without a webhook server. Requests are server-side dry runs (the
webhooks have no side effects, so the API server calls them for dry runs too).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.launching import LocalCluster
from policy import keys, marks
from policy.pods import Submitter
from process import kubeyaml
from tests.e2e.conftest import Kubectl, eventually
from tests.e2e.manifests.conftest import install, rendered_objects
from tests.manifest_files import ACCOUNT_GROUPS, CONTROLLER_ACCOUNT

MUTATE_PODS = "pods.mutate.sluicegate.dev"
MUTATE_JOBS = "jobs.mutate.sluicegate.dev"
MUTATE_CRONJOBS = "cronjobs.mutate.sluicegate.dev"
VALIDATE_PODS = "pods.validate.sluicegate.dev"
VALIDATE_JOBS = "jobs.validate.sluicegate.dev"
VALIDATE_CRONJOBS = "cronjobs.validate.sluicegate.dev"
CLOSED = "https://127.0.0.1:1"  # nothing listens on port 1: every call fails at once

IMAGE = "registry.invalid/x:1"
GPU = {"limits": {"nvidia.com/gpu": "1"}}
HELD = {
    "metadata": {
        "labels": {keys.QUEUE_LABEL: "vision-train", keys.TEAM_LABEL: "vision"},
        "annotations": {keys.SUBMITTER_ANNOTATION: '{"user":"alice"}'},
    },
    "spec": {"schedulingGates": [{"name": keys.GATE}]},
}


STAMPED = {"metadata": {"annotations": {keys.SUBMITTER_ANNOTATION: '{"user":"alice"}'}}}


def stamped_by(cluster: LocalCluster) -> dict[str, Any]:
    """A template stamped with the admin's own identity: a running Sluicegate would admit that
    stamp on a CronJob the admin creates in any namespace."""
    user = json.loads(cluster.kubectl("auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
    stamp = Submitter(user["username"], frozenset(user.get("groups", ()))).to_annotation()
    return {"metadata": {"annotations": {keys.SUBMITTER_ANNOTATION: stamp}}}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merge(out[key], value) if nested else value
    return out


PREEMPTS, NEVER, BELOW = "preempts", "never", "below-zero"  # PriorityClasses, prefixed by the namespace


def priority_class(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return {"spec": {"priorityClassName": f"{kubectl.namespace}-{name}"}}


def labels(**pairs: str) -> dict[str, Any]:
    return {"metadata": {"labels": pairs}}


def annotations(**pairs: str) -> dict[str, Any]:
    return {"metadata": {"annotations": pairs}}


def gates(*names: str) -> dict[str, Any]:
    return {"spec": {"schedulingGates": [{"name": n} for n in names]}}


def pod_spec(resources: dict[str, Any] | None = None, *, init: bool = False) -> dict[str, Any]:
    """A pod spec whose main container (or, with ``init``, its init container) has ``resources``."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": IMAGE}]}
    if resources:
        target = {"name": "setup", "image": IMAGE, "resources": resources}
        if init:
            spec["initContainers"] = [target]
        else:
            spec["containers"] = [{**target, "name": "main"}]
    return spec


def pod(name: str, extra: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec(**spec)}
    return _merge(obj, extra or {})


def job(kind: str, name: str, template: dict[str, Any]) -> dict[str, Any]:
    """A suspended Job or CronJob (so nothing runs) with the given pod template."""
    body = {"template": _merge({"spec": {"restartPolicy": "Never", **pod_spec()}}, template)}
    meta = {"name": name}
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": meta, "spec": {**body, "suspend": True}}
    spec = {"schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": body}}
    return {"apiVersion": "batch/v1", "kind": kind, "metadata": meta, "spec": spec}


def gpu_template() -> dict[str, Any]:
    return {"spec": pod_spec(GPU)}


def reached(result: subprocess.CompletedProcess[str]) -> str | None:
    """The webhook that refused the request, or None when it went through."""
    if result.returncode == 0:
        return None
    match = re.search(r'failed calling webhook "([^"]+)"', result.stderr)
    assert match, f"refused for another reason: {result.stderr}"
    return match[1]


def create(kubectl: Kubectl, obj: dict[str, Any]) -> str | None:
    return reached(kubectl.cluster.kubectl(
        "-n", kubectl.namespace, "create", "--dry-run=server", "-f", "-",
        input=json.dumps(obj), check=False,
    ))


def patch(
    kubectl: Kubectl, target: str, body: Any, *, kind: str = "merge", as_controller: bool = False
) -> str | None:
    who = [f"--as={CONTROLLER_ACCOUNT}", *(f"--as-group={g}" for g in ACCOUNT_GROUPS)]
    return reached(kubectl.cluster.kubectl(
        "-n", kubectl.namespace, "patch", target, "--dry-run=server", f"--type={kind}",
        "-p", json.dumps(body), *(who if as_controller else []), check=False,
    ))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster of this module's own: on the session's, a Sluicegate another test started would
    answer these requests before the unreachable copies do."""
    local = LocalCluster(tmp_path_factory.mktemp("admission-rules"), nodes=1, gpus_per_node=8)
    local.up(progress=lambda line: None)
    try:
        yield local
    finally:
        local.down()


@pytest.fixture(scope="module")
def installed(cluster: LocalCluster) -> LocalCluster:
    return install(cluster)


@pytest.fixture
def webhooks(installed: LocalCluster, kubectl: Kubectl) -> Iterator[Kubectl]:
    """This test's namespace, opted in, with unreachable copies of Sluicegate's webhooks."""
    ns = kubectl.namespace
    # Objects stored before the webhooks exist, for the UPDATE cases. A Sluicegate running on
    # the cluster would refuse Sluicegate's marks on pods in every namespace; its webhooks
    # skip only the gate controller's account, so the pods are stored as that account (with
    # the rights of system:masters, since the controller itself may not create pods).
    installed.kubectl(
        "-n", ns, f"--as={CONTROLLER_ACCOUNT}", "--as-group=system:masters", "apply", "-f", "-",
        input=kubeyaml.dump_all([pod("held", HELD), pod("plain", gates("example.com/hold"))]))
    live = job("CronJob", "stamped-live", stamped_by(installed))
    live["spec"]["suspend"] = False  # scheduled for January 1st: it runs nothing meanwhile
    kubectl.apply(
        job("Job", "gpu-job", gpu_template()), job("CronJob", "gpu-cron", gpu_template()),
        job("CronJob", "cpu-cron", {}), job("CronJob", "stamped-cron", stamped_by(installed)),
        job("Job", "stamped-job", stamped_by(installed)), live,
    )
    for name, value, preemption in ((PREEMPTS, 1000, "PreemptLowerPriority"), (NEVER, 1000, "Never"),
                                    (BELOW, -5, "Never")):
        installed.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": f"{ns}-{name}"}, "value": value, "preemptionPolicy": preemption}))
    installed.kubectl("label", "namespace", ns, f"{keys.TEAM_LABEL}=vision")
    configs = rendered_objects(installed, "admission")
    for config in configs:
        config["metadata"]["name"] = f"sluicegate-{ns}"
        for hook in config["webhooks"]:
            hook["namespaceSelector"]["matchLabels"] = {"kubernetes.io/metadata.name": ns}
            hook["clientConfig"] = {"url": CLOSED + hook["clientConfig"]["service"]["path"]}
    installed.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(configs))
    try:
        # The API server watches mutating and validating configurations apart: wait for both.
        eventually(lambda: create(kubectl, pod("probe", resources=GPU)) == MUTATE_PODS,
                   "the API server to call the new mutating webhooks")
        relabel = labels(**{keys.QUEUE_LABEL: "probe"})
        eventually(lambda: patch(kubectl, "pod/held", relabel) == VALIDATE_PODS,
                   "the API server to call the new validating webhook")
        yield kubectl
    finally:
        installed.kubectl("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
                          f"sluicegate-{ns}", "--ignore-not-found")
        installed.kubectl("delete", "priorityclass", *(f"{ns}-{c}" for c in (PREEMPTS, NEVER, BELOW)),
                          "--ignore-not-found")


def _mismatches(cases: list[tuple[str, str | None, str | None]]) -> str:
    return "; ".join(f"{what}: expected {want or 'no webhook'}, got {got or 'no webhook'}"
                     for what, want, got in cases if want != got)


def test_pod_creations_reach_the_webhook_exactly_when_sluicegate_may_manage_or_refuse_them(
    webhooks: Kubectl,
) -> None:
    amd = {"requests": {"amd.com/gpu": "1"}, "limits": {"amd.com/gpu": "1"}}
    plain = {"limits": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi"}}
    cases = [
        ("a CPU pod that names nothing", None, pod("cpu")),
        ("cpu, memory and hugepages", None, pod("plain-resources", resources=plain)),
        ("someone else's scheduling gate", None, pod("other-gate", gates("example.com/hold"))),
        ("ordinary labels", None, pod("labelled", labels(app="x"))),
        ("a GPU limit", MUTATE_PODS, pod("gpu", resources=GPU)),
        ("another vendor's GPU", MUTATE_PODS, pod("amd", resources=amd)),
        ("a GPU in an init container", MUTATE_PODS, pod("init-gpu", resources=GPU, init=True)),
        ("a queue label on a CPU pod", MUTATE_PODS, pod("queued", labels(**{keys.QUEUE_LABEL: "cpu-batch"}))),
        ("presets on a CPU pod", MUTATE_PODS, pod("preset", annotations(**{keys.PRESETS_ANNOTATION: "x"}))),
        ("a forged submitter on an unmanaged pod", MUTATE_PODS,
         pod("forged", annotations(**{keys.SUBMITTER_ANNOTATION: '{"user":"root"}'}))),
        ("a forged team label", MUTATE_PODS, pod("forged-team", labels(**{keys.TEAM_LABEL: "nlp"}))),
        ("Sluicegate's gate written by the user", MUTATE_PODS, pod("self-gated", gates(keys.GATE))),
        # No pod of a team's namespace may preempt, managed or not: the Priority plugin has set
        # the class's priority and preemptionPolicy on the pod before the webhooks are called.
        ("a CPU pod of a class that preempts", MUTATE_PODS, pod("bully", priority_class(webhooks, PREEMPTS))),
        ("a CPU pod of a class below 0", MUTATE_PODS, pod("below", priority_class(webhooks, BELOW))),
        ("a CPU pod of a class that never preempts", None, pod("polite", priority_class(webhooks, NEVER))),
    ]
    assert not _mismatches([(what, want, create(webhooks, obj)) for what, want, obj in cases])
    # A namespace that has not opted in is never sent anything.
    webhooks.cluster.kubectl("label", "namespace", webhooks.namespace, f"{keys.TEAM_LABEL}-")
    eventually(lambda: create(webhooks, pod("gpu", resources=GPU)) is None,
               "a GPU pod to pass once the namespace has left Sluicegate")


def test_pod_updates_reach_the_webhook_only_when_they_touch_sluicegates_keys_or_gates(
    webhooks: Kubectl,
) -> None:
    remove_gates = [{"op": "remove", "path": "/spec/schedulingGates"}]

    def held(body: Any, **how: Any) -> str | None:
        return patch(webhooks, "pod/held", body, **how)

    def plain(body: Any, **how: Any) -> str | None:
        return patch(webhooks, "pod/plain", body, **how)

    cases = [
        ("an ordinary label on a held pod", None, held(labels(x="y"))),
        ("its queue changed", VALIDATE_PODS, held(labels(**{keys.QUEUE_LABEL: "urgent-retrain"}))),
        ("its team label removed", VALIDATE_PODS, held({"metadata": {"labels": {keys.TEAM_LABEL: None}}})),
        ("its submitter rewritten", VALIDATE_PODS, held(annotations(**{keys.SUBMITTER_ANNOTATION: "{}"}))),
        ("a workflow limit added", VALIDATE_PODS,
         held(annotations(**{keys.WORKFLOW_MAX_RUNNING_ANNOTATION: "2"}))),
        ("the gate removed by a user", VALIDATE_PODS, held(remove_gates, kind="json")),
        ("the gate removed by the gate controller", None,
         held(remove_gates, kind="json", as_controller=True)),
        ("a Sluicegate key on an unmanaged pod", VALIDATE_PODS,
         plain(annotations(**{keys.APPLIED_PRESETS_ANNOTATION: "x"}))),
        ("an ordinary annotation on an unmanaged pod", None, plain(annotations(note="x"))),
        ("someone else's gate removed", VALIDATE_PODS, plain(remove_gates, kind="json")),
    ]
    assert not _mismatches(cases)


def sealed(name: str, extra: dict[str, Any] | None = None, *, queue: str = "vision-train",
           groups: tuple[str, ...] = ("vision-devs",), **spec: Any) -> dict[str, Any]:
    """A GPU pod as the mutating webhook leaves it: Sluicegate's keys, its gate, and their seal
    as policy writes it (``policy.marks.seal``), with ``extra`` merged in before sealing."""
    submitter = Submitter("alice", frozenset(groups)).to_annotation()
    obj = pod(name, _merge({
        "metadata": {"labels": {keys.QUEUE_LABEL: queue, keys.TEAM_LABEL: "vision", "app": "x"},
                     "annotations": {keys.SUBMITTER_ANNOTATION: submitter,
                                     keys.ADMITTED_AT_ANNOTATION: "2026-12-02T09:00:00.000001Z",
                                     "note": "not ours"}},
        "spec": {"schedulingGates": [{"name": "example.com/hold"}, {"name": keys.GATE}]},
    }, extra or {}), resources=GPU, **spec)
    meta = obj["metadata"]
    names = [g["name"] for g in obj["spec"]["schedulingGates"]]
    meta["annotations"][keys.SEAL_ANNOTATION] = marks.seal(meta["labels"], meta["annotations"], names)
    return obj


def test_a_pod_still_sealed_as_admitted_skips_the_final_check_and_any_change_reaches_it(
    webhooks: Kubectl,
) -> None:
    """The CEL condition ``not-sealed-as-admitted`` rebuilds policy's seal: equal, the final
    check is skipped; any change to a Sluicegate key or gate after the seal, or a priority that
    preempts, is sent to it."""
    cluster = webhooks.cluster
    cluster.kubectl("delete", "mutatingwebhookconfiguration", f"sluicegate-{webhooks.namespace}")
    eventually(lambda: create(webhooks, pod("gpu", resources=GPU)) == VALIDATE_PODS,
               "the API server to stop calling the mutating copies")

    def tampered(name: str, change: Any) -> dict[str, Any]:
        obj = sealed(name)
        change(obj)
        return obj

    def drop_gate(obj: dict[str, Any]) -> None:
        obj["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]

    def requeue(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"][keys.QUEUE_LABEL] = "vision-interactive"

    def restamp(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION] = '{"user":"root"}'

    def new_key(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][keys.DISPATCHED_AT_ANNOTATION] = "x"

    def unseal(obj: dict[str, Any]) -> None:
        del obj["metadata"]["annotations"][keys.SEAL_ANNOTATION]

    cases = [
        ("a pod sealed as admitted", None, sealed("intact")),
        ("non-ASCII, quotes and commas in the sealed values", None,
         sealed("odd", groups=("équipe-ü", 'q"uote,d', "vision-devs"))),
        ("a workflow, a limit and a pod group", None, sealed("swept", {
            "metadata": {"labels": {keys.WORKFLOW_LABEL: "sweep", keys.GROUP_LABEL: "ring"},
                         "annotations": {keys.WORKFLOW_MAX_RUNNING_ANNOTATION: "3",
                                         keys.GROUP_SIZE_ANNOTATION: "2"}}})),
        ("of a class that never preempts", None, sealed("polite", priority_class(webhooks, NEVER))),
        ("its gate removed after the seal", VALIDATE_PODS, tampered("ungated", drop_gate)),
        ("its queue changed after the seal", VALIDATE_PODS, tampered("requeued", requeue)),
        ("its submitter changed after the seal", VALIDATE_PODS, tampered("restamped", restamp)),
        ("a Sluicegate key added after the seal", VALIDATE_PODS, tampered("added", new_key)),
        ("no seal", VALIDATE_PODS, tampered("unsealed", unseal)),
        ("sealed, of a class that preempts", VALIDATE_PODS,
         sealed("bully", priority_class(webhooks, PREEMPTS))),
    ]
    assert not _mismatches([(what, want, create(webhooks, obj)) for what, want, obj in cases])


def test_jobs_and_cronjobs_reach_the_webhook_when_their_pod_template_may_be_managed(
    webhooks: Kubectl,
) -> None:
    queued = labels(**{keys.QUEUE_LABEL: "vision-train"})
    forged = annotations(**{keys.SUBMITTER_ANNOTATION: "{}"})
    new_image = [{"op": "replace", "path": "/spec/jobTemplate/spec/template/spec/containers/0/image",
                  "value": "registry.invalid/x:2"}]

    def template(change: dict[str, Any]) -> dict[str, Any]:
        return {"spec": {"jobTemplate": {"spec": {"template": change}}}}

    cases = [
        ("a CPU Job", None, create(webhooks, job("Job", "cpu", {}))),
        ("a GPU Job", MUTATE_JOBS, create(webhooks, job("Job", "gpu", gpu_template()))),
        ("a Job whose template names a queue", MUTATE_JOBS, create(webhooks, job("Job", "queued", queued))),
        ("a Job whose template forges a submitter", MUTATE_JOBS,
         create(webhooks, job("Job", "forged", forged))),
        ("a CPU CronJob", None, create(webhooks, job("CronJob", "cpu", {}))),
        ("a GPU CronJob", MUTATE_CRONJOBS, create(webhooks, job("CronJob", "gpu", gpu_template()))),
        ("a GPU Job's deadline changed", None,
         patch(webhooks, "job/gpu-job", {"spec": {"activeDeadlineSeconds": 60}})),
        ("a GPU CronJob's schedule changed", None,
         patch(webhooks, "cronjob/gpu-cron", {"spec": {"schedule": "0 0 2 1 *"}})),
        ("a GPU CronJob's image changed", MUTATE_CRONJOBS,
         patch(webhooks, "cronjob/gpu-cron", new_image, kind="json")),
        ("an ordinary label on a CPU CronJob's template", None,
         patch(webhooks, "cronjob/cpu-cron", template(labels(x="y")))),
        ("a queue added to a CPU CronJob's template", MUTATE_CRONJOBS,
         patch(webhooks, "cronjob/cpu-cron", template(queued))),
        # A template carries only the class's name: one that names any is judged.
        ("a CPU Job that names a PriorityClass", MUTATE_JOBS,
         create(webhooks, job("Job", "classed", priority_class(webhooks, NEVER)))),
        ("a CPU CronJob's template given a PriorityClass", MUTATE_CRONJOBS,
         patch(webhooks, "cronjob/cpu-cron", template(priority_class(webhooks, PREEMPTS)))),
    ]
    assert not _mismatches(cases)


def test_stamps_on_jobs_and_cronjobs_reach_the_webhook_in_a_namespace_that_has_not_opted_in(
    webhooks: Kubectl,
) -> None:
    webhooks.cluster.kubectl("label", "namespace", webhooks.namespace, f"{keys.TEAM_LABEL}-")
    eventually(lambda: create(webhooks, pod("gpu", resources=GPU)) is None,
               "a GPU pod to pass once the namespace has left Sluicegate")
    new_image = [{"op": "replace", "path": "/spec/jobTemplate/spec/template/spec/containers/0/image",
                  "value": "registry.invalid/x:2"}]

    def template(change: dict[str, Any]) -> dict[str, Any]:
        return {"spec": {"jobTemplate": {"spec": {"template": change}}}}

    unstamped = {"metadata": {"annotations": {keys.SUBMITTER_ANNOTATION: None}}}
    cases = [
        ("a GPU Job without a stamp", None, create(webhooks, job("Job", "gpu", gpu_template()))),
        ("a stamped Job", VALIDATE_JOBS, create(webhooks, job("Job", "stamped", STAMPED))),
        ("a stamped CronJob", VALIDATE_CRONJOBS, create(webhooks, job("CronJob", "stamped", STAMPED))),
        ("a GPU Job's deadline changed", None,
         patch(webhooks, "job/gpu-job", {"spec": {"activeDeadlineSeconds": 60}})),
        ("a stamp added to a CronJob's template", VALIDATE_CRONJOBS,
         patch(webhooks, "cronjob/cpu-cron", template(STAMPED))),
        # A stamped template belongs to the user it names: any change to it is checked.
        ("a stamped CronJob's image changed", VALIDATE_CRONJOBS,
         patch(webhooks, "cronjob/stamped-cron", new_image, kind="json")),
        ("a stamped CronJob's stamp removed", VALIDATE_CRONJOBS,
         patch(webhooks, "cronjob/stamped-cron", template(unstamped))),
        # A stamped Job or CronJob runs as its submitter: only they change its spec; anyone may
        # suspend it, even while the webhook is down.
        ("a stamped CronJob's schedule changed", VALIDATE_CRONJOBS,
         patch(webhooks, "cronjob/stamped-live", {"spec": {"schedule": "* * * * *"}})),
        ("a stamped CronJob's Jobs made wider", VALIDATE_CRONJOBS,
         patch(webhooks, "cronjob/stamped-live", {"spec": {"jobTemplate": {"spec": {"parallelism": 4}}}})),
        ("a stamped CronJob suspended", None,
         patch(webhooks, "cronjob/stamped-live", {"spec": {"suspend": True}})),
        ("a stamped CronJob resumed", VALIDATE_CRONJOBS,
         patch(webhooks, "cronjob/stamped-cron", {"spec": {"suspend": False}})),
        ("a stamped Job's parallelism changed", VALIDATE_JOBS,
         patch(webhooks, "job/stamped-job", {"spec": {"parallelism": 4}})),
        ("a stamped Job's own label", None, patch(webhooks, "job/stamped-job", labels(x="y"))),
    ]
    assert not _mismatches(cases)
