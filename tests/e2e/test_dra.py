"""GPUs asked through DRA on the real control plane: the local cluster's nodes publish their
GPUs as devices of a fake driver (ResourceSlices, one DeviceClass), the Policy counts that class
as nvidia.com/gpu, and a pod whose ResourceClaimTemplate asks for 2 devices waits on a 2-GPU
quota held by a pod asking ``nvidia.com/gpu: 2``, then kube-scheduler allocates its devices and
kwok runs it. The recorder and ``sluicegate explain`` show 2 nvidia.com/gpu for it.

A claim deleted and made again asking for 8 devices while its pod waits (a named claim, and one
Kubernetes made from a template) never lets the pod go: it waits with ``ClaimsChanged``, saying
why. Admission of a pod naming 32 claims reads them from the webhook's cache: no API request per
claim, counted by the API server itself (``benchmarks.counting``); a pod naming 33 is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from audit.scraping import flow_totals
from benchmarks import counting
from controlplane.launching import LocalCluster
from controlplane.nodes import DEVICE_CLASS
from policy import keys
from policy.devices import MOST_CLAIMS
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene

GPU = keys.GPU_RESOURCE
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
"""The annotation Kubernetes puts on a claim it makes from a template: the pod's name for it."""


def sluicegate(cluster: LocalCluster, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    done = subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, f"sluicegate {' '.join(args)}: {done.stderr}"
    return done.stdout


def claim_template(namespace: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus", "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpus", "exactly": {"deviceClassName": DEVICE_CLASS, "count": count}}]}}},
    }


def dra_pod(scene: Scene, namespace: str, queue: str) -> dict[str, Any]:
    pod = scene.pod(namespace, "dra", queue, gpus=0, seconds=HELD_SECONDS)
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    return pod


def resource_claim(namespace: str, name: str, count: int, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": {"devices": {"requests": [
            {"name": "g", "exactly": {"deviceClassName": DEVICE_CLASS, "count": count}}]}},
    }


def claiming_pod(scene: Scene, namespace: str, name: str, queue: str, group: str = "",
                 **claims: dict[str, str]) -> dict[str, Any]:
    """A pod asking GPUs only through ``claims`` (its name for each -> the entry's source), in a
    pod group of 2 when ``group`` is given."""
    labels = {keys.GROUP_LABEL: group} if group else {}
    notes = {keys.GROUP_SIZE_ANNOTATION: "2"} if group else {}
    pod = scene.pod(namespace, name, queue, gpus=0, seconds=HELD_SECONDS, labels=labels, annotations=notes)
    pod["spec"]["resourceClaims"] = [{"name": n, **source} for n, source in claims.items()]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": n} for n in claims]}
    return pod


def wait_counted(scene: Scene, pod: dict[str, Any]) -> dict[str, Any]:
    """Wait until the webhook has the Policy that maps the class and the claims the pod names
    (a dry run carries what they count as); the dry run's pod."""

    def counted() -> dict[str, Any] | None:
        out = scene.cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                                    input=json.dumps(pod), check=False)
        made = json.loads(out.stdout or "{}")
        notes = made.get("metadata", {}).get("annotations", {})
        return made if out.returncode == 0 and keys.DEVICES_ANNOTATION in notes else None

    return eventually(counted, "the webhook to count the pod's claims")


def gated(scene: Scene, namespace: str, name: str) -> bool:
    gates = scene.get("pod", name, namespace)["spec"].get("schedulingGates") or []
    return keys.GATE in {g["name"] for g in gates}


def allocated(scene: Scene, namespace: str) -> list[str]:
    claims = json.loads(scene.kubectl("get", "resourceclaims", "-n", namespace, "-o", "json"))["items"]
    return [c["metadata"]["name"] for c in claims if (c.get("status") or {}).get("allocation")]


def test_a_pod_asking_two_gpus_through_a_claim_template_waits_on_the_quota_and_runs_when_it_frees(
    scene: Scene, cluster: LocalCluster
) -> None:
    scene.policy(deviceClasses={DEVICE_CLASS: GPU})
    team = scene.team("vision")
    queue = scene.queue("train", quota={GPU: "2"})
    namespace = scene.namespace(team)
    slices = json.loads(scene.kubectl("get", "resourceslices", "-o", "json"))["items"]
    assert any(s["spec"]["driver"] == DEVICE_CLASS and len(s["spec"]["devices"]) == 8 for s in slices)
    scene.create(claim_template(namespace, 2))
    scene.create(scene.pod(namespace, "holder", queue, gpus=2, seconds=HELD_SECONDS))
    scene.wait_condition(namespace, "holder", lambda c: c.get("status") == "True", "released")

    pod = dra_pod(scene, namespace, queue)
    wait_counted(scene, pod)
    scene.create(pod)
    stored = scene.get("pod", "dra", namespace)
    assert json.loads(stored["metadata"]["annotations"][keys.DEVICES_ANNOTATION]) == {"pod": {GPU: "2"}}
    held = scene.wait_condition(namespace, "dra", lambda c: c.get("reason") == keys.Reason.QUEUE_QUOTA.value,
                                "held by the queue's quota")
    assert held["message"] == f"queue {queue}: 2/2 {GPU} in use, needs 2", held
    story = sluicegate(cluster, "explain", "dra", "-n", namespace)
    assert f"2 {GPU} (2 {GPU} through DRA claims)" in story, story

    scene.finish(namespace, "holder")
    eventually(lambda: scene.get("pod", "dra", namespace)["status"].get("phase") == "Running",
               "the DRA pod to run")
    running = scene.get("pod", "dra", namespace)
    assert running["spec"]["nodeName"]
    claims = json.loads(scene.kubectl("get", "resourceclaims", "-n", namespace, "-o", "json"))["items"]
    (claim,) = claims
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2 and {r["driver"] for r in results} == {DEVICE_CLASS}
    assert {r["pool"] for r in results} == {running["spec"]["nodeName"]}

    scene.finish(namespace, "dra")

    def recorded() -> dict[str, Any] | None:
        lines = [json.loads(line) for line in sluicegate(cluster, "records", "export", "--since", "1h")
                 .splitlines() if line.strip()]
        mine = [r for r in lines if r.get("namespace") == namespace and r.get("name") == "dra"]
        return mine[0] if mine and mine[0].get("finished") else None

    record = eventually(recorded, "the DRA pod's record, ended")
    assert record["requests"] == {GPU: "2"}, record


def claims_changed(scene: Scene, namespace: str, name: str, says: str) -> dict[str, Any]:
    """Wait for the pod to be held with ClaimsChanged, its message saying ``says``."""
    return scene.wait_condition(
        namespace, name,
        lambda c: c.get("reason") == keys.Reason.CLAIMS_CHANGED.value and says in c.get("message", ""),
        f"held with ClaimsChanged: {says}")


def test_a_named_claim_made_again_asking_for_8_while_its_pod_waits_never_lets_it_go(
    scene: Scene, cluster: LocalCluster
) -> None:
    scene.policy(deviceClasses={DEVICE_CLASS: GPU})
    queue = scene.queue("train")
    namespace = scene.namespace(scene.team("vision"))
    scene.create(resource_claim(namespace, "big-a", 1), resource_claim(namespace, "big-b", 8))
    first = claiming_pod(scene, namespace, "grp-a", queue, "g1", g={"resourceClaimName": "big-a"})
    wait_counted(scene, first)
    scene.create(first)
    scene.wait_reason(namespace, ["grp-a"], keys.Reason.GROUP_INCOMPLETE.value)
    stored = scene.get("pod", "grp-a", namespace)
    assert json.loads(stored["metadata"]["annotations"][keys.DEVICES_ANNOTATION]) == {
        "claims": {"big-a": {GPU: "1"}}}

    scene.kubectl("delete", "resourceclaim", "big-a", "-n", namespace, "--wait=true")
    scene.create(resource_claim(namespace, "big-a", 8))
    scene.create(claiming_pod(scene, namespace, "grp-b", queue, "g1", g={"resourceClaimName": "big-b"}))

    held = claims_changed(scene, namespace, "grp-a",
                          f"ResourceClaim big-a now asks for 8 {GPU}, 1 counted when the pod was admitted")
    assert "delete the pod and create it again" in held["message"], held
    # The group is whole, but one of its pods is held: neither goes, and no device is allocated.
    scene.wait_reason(namespace, ["grp-b"], keys.Reason.GROUP_INCOMPLETE.value)
    assert gated(scene, namespace, "grp-a") and gated(scene, namespace, "grp-b")
    assert allocated(scene, namespace) == []
    described = scene.kubectl("describe", "pod", "grp-a", "-n", namespace)
    assert keys.Reason.CLAIMS_CHANGED.value in described, described
    story = sluicegate(cluster, "explain", "grp-a", "-n", namespace)
    assert keys.Reason.CLAIMS_CHANGED.value in story, story


def test_a_claim_made_from_a_template_made_again_asking_for_8_never_lets_its_pod_go(
    scene: Scene, cluster: LocalCluster
) -> None:
    scene.policy(deviceClasses={DEVICE_CLASS: GPU})
    queue = scene.queue("train")
    namespace = scene.namespace(scene.team("vision"))
    template = claim_template(namespace, 1)
    scene.create(template, resource_claim(namespace, "big-b", 1))
    first = claiming_pod(scene, namespace, "grp-t", queue, "g2",
                         g={"resourceClaimTemplateName": template["metadata"]["name"]})
    wait_counted(scene, first)
    scene.create(first)
    scene.wait_reason(namespace, ["grp-t"], keys.Reason.GROUP_INCOMPLETE.value)

    def made() -> str | None:
        statuses = scene.get("pod", "grp-t", namespace)["status"].get("resourceClaimStatuses") or []
        return next((s.get("resourceClaimName") for s in statuses if s.get("name") == "g"), None)

    eventually(made, "Kubernetes to make the pod's claim from its template")
    pod = scene.get("pod", "grp-t", namespace)
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "grp-t", "uid": pod["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}

    def swapped() -> bool:
        """The claim the pod's status names is one made by hand asking for 8. Kubernetes makes
        a deleted claim again (under a new name it writes in the pod's status): delete and make
        it again until the hand-made one comes first, as a user racing it would."""
        name = made()
        if name is None:
            return False
        found = scene.cluster.kubectl("get", "resourceclaim", name, "-n", namespace, "-o", "json",
                                      check=False)
        if found.returncode == 0:
            requests = json.loads(found.stdout)["spec"]["devices"]["requests"]
            if requests[0]["exactly"].get("count") == 8:
                return True
            scene.kubectl("delete", "resourceclaim", name, "-n", namespace, "--wait=true")
        forged = resource_claim(namespace, name, 8, annotations={POD_CLAIM_NAME: "g"},
                                ownerReferences=[owner])
        scene.cluster.kubectl("create", "-f", "-", input=json.dumps(forged), check=False)
        return False

    eventually(swapped, "the pod's claim to be one made by hand asking for 8")
    scene.create(claiming_pod(scene, namespace, "grp-u", queue, "g2", g={"resourceClaimName": "big-b"}))

    claims_changed(scene, namespace, "grp-t",
                   f"the ResourceClaims made from its templates now ask for 8 {GPU}, 1 counted when the "
                   "pod was admitted")
    scene.wait_reason(namespace, ["grp-u"], keys.Reason.GROUP_INCOMPLETE.value)
    assert gated(scene, namespace, "grp-t") and gated(scene, namespace, "grp-u")
    assert allocated(scene, namespace) == []


WEBHOOK = counting.service_account("sluicegate-system", "sluicegate-webhook")
SYSTEM = "e2e-claims"


@pytest.fixture
def counted(cluster: LocalCluster) -> Iterator[LocalCluster]:
    counting.install(cluster, SYSTEM, [WEBHOOK])
    try:
        yield cluster
    finally:
        counting.uninstall(cluster, SYSTEM)


def webhook_reads(cluster: LocalCluster) -> float:
    flows = flow_totals(cluster.kubectl("get", "--raw", "/metrics").stdout)
    return flows.get(counting.schema_name(SYSTEM, "reads"), 0.0)


def test_admitting_a_pod_that_names_many_claims_costs_no_api_request_per_claim(
    scene: Scene, counted: LocalCluster
) -> None:
    scene.policy(deviceClasses={DEVICE_CLASS: GPU})
    queue = scene.queue("train")
    namespace = scene.namespace(scene.team("vision"))
    names = [f"c{i:02d}" for i in range(MOST_CLAIMS + 1)]
    scene.create(*(resource_claim(namespace, n, 1) for n in names))
    many = claiming_pod(scene, namespace, "many", queue, **{n: {"resourceClaimName": n} for n in names[:-1]})
    counted_pod = wait_counted(scene, many)
    assert len(json.loads(counted_pod["metadata"]["annotations"][keys.DEVICES_ANNOTATION])["claims"]) == 32

    before = webhook_reads(counted)
    calls = 4
    for _ in range(calls):
        scene.cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(many))
    grew = webhook_reads(counted) - before
    # A GET per claim would be 32 per call; the cache answers them all (a watch the webhook
    # resumes meanwhile is one read, and a claim its cache lacks one at most per call).
    assert grew < MOST_CLAIMS, f"the webhook read {grew:g} times for {calls} reviews of 32 claims"

    too_many = claiming_pod(scene, namespace, "too-many", queue,
                            **{n: {"resourceClaimName": n} for n in names})
    refused = scene.cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(too_many),
                                    check=False)
    assert refused.returncode != 0
    assert f"spec.resourceClaims names 33 claims; a pod may name at most {MOST_CLAIMS}" in refused.stderr
