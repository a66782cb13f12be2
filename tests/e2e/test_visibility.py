"""The visibility API through the real API server: alice, with the sample rights of an ML
engineer of team vision (group vision-devs: edit in the team's namespaces, the sample readers
and sluicegate-ml-engineer there, nothing cluster-wide), sees her pods' places in their queue
with ``sluicegate pods``, ``sluicegate explain`` and ``kubectl get --raw``, and the API server's
own RBAC refuses her another team's namespace and a queue's whole line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from policy import keys
from process import kubeyaml
from tests.doc_commands import ROOT, run, shell_env
from tests.e2e.conftest import eventually

SAMPLES = ROOT / "manifests" / "samples"
SAMPLE_NAMESPACES = ("vision-research", "vision-notebooks", "nlp-research")
NS = "vision-research"
QUEUE = "vision-train"
ALICE = ("--as", "alice", "--as-group", "vision-devs")
PENDING = f"/apis/visibility.sluicegate.dev/v1alpha1/namespaces/{NS}/pendingpods"
TRIALS = ("train-1", "train-2", "train-3")


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {keys.QUEUE_LABEL: QUEUE},
                         "annotations": {keys.PRESETS_ANNOTATION: "single-gpu"}},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}


def as_alice(cluster: LocalCluster, *args: str, check: bool = True) -> Any:
    return cluster.kubectl(*args, *ALICE, check=check)


@pytest.fixture
def held(cluster: LocalCluster, running: LocalSluicegate) -> Iterator[None]:
    """The sample setup with vision-train paused and alice's three pods held there, in order;
    afterwards all of it is gone again (the sample Policy would bind every other test)."""
    cluster.kubectl("apply", "-k", str(SAMPLES))
    cluster.kubectl("patch", "queue", QUEUE, "--type=merge", "-p", '{"spec": {"paused": true}}')
    try:
        for name in TRIALS:  # one at a time: their submission times order them
            eventually(lambda name=name: _create_as_alice(cluster, pod(name)), f"admission to admit {name}")
        yield
    finally:
        cluster.kubectl("delete", "pod", *TRIALS, "-n", NS, "--ignore-not-found", "--wait=false", check=False)
        cluster.kubectl("delete", "-k", str(SAMPLES), "--ignore-not-found", "--wait=false", check=False)
        eventually(lambda: not cluster.kubectl("get", "namespace", *SAMPLE_NAMESPACES, check=False).stdout,
                   f"the sample namespaces {SAMPLE_NAMESPACES} to be deleted")


def _create_as_alice(cluster: LocalCluster, obj: dict[str, Any]) -> bool:
    """Create ``obj`` as alice; False while admission does not know the sample Queues yet."""
    made = cluster.kubectl("create", "-f", "-", *ALICE, input=json.dumps(obj), check=False)
    return made.returncode == 0 or "AlreadyExists" in made.stderr


def _impersonating(cluster: LocalCluster, path: Path) -> Path:
    """A kubeconfig in which the admin impersonates alice of group vision-devs, in vision-research."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    user = {**admin["users"][0]["user"], "as": "alice", "as-groups": ["vision-devs"]}
    context = {"cluster": admin["clusters"][0]["name"], "user": "alice", "namespace": NS}
    path.write_text(kubeyaml.dump({
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": "alice", "user": user}], "contexts": [{"name": "alice", "context": context}],
        "current-context": "alice"}))
    return path


def _lined_up(cluster: LocalCluster) -> list[dict[str, Any]] | None:
    """alice's waiting pods through the API server, once the controller holds all three."""
    got = as_alice(cluster, "get", "--raw", PENDING, check=False)
    if got.returncode != 0:
        return None
    items: list[dict[str, Any]] = json.loads(got.stdout)["items"]
    if [i["metadata"]["name"] for i in items] != list(TRIALS) or any(
            i["reason"] != keys.Reason.QUEUE_PAUSED.value for i in items):
        return None
    return items


def test_alice_sees_her_pods_positions_and_is_refused_another_teams_namespace(
    cluster: LocalCluster, held: None, tmp_path: Path
) -> None:
    # She may not read every namespace's pods: positions can only come from the visibility API.
    may = as_alice(cluster, "auth", "can-i", "list", "pods", "--all-namespaces", check=False)
    assert may.stdout.strip() == "no"

    items = eventually(lambda: _lined_up(cluster), "alice's three pods held in the paused queue")
    assert [(i["queue"], i["position"], i["workloadsAhead"]) for i in items] == [
        (QUEUE, 1, 0), (QUEUE, 2, 1), (QUEUE, 3, 2)]
    assert all(i["message"] == f"queue {QUEUE} is paused" for i in items), items
    assert all("expectedStart" not in i for i in items)  # no estimates yet: unknown

    env = shell_env(cluster)
    config = _impersonating(cluster, tmp_path / "alice.kubeconfig")
    pods = run(f"sluicegate pods --kubeconfig {config}", env)
    assert pods.returncode == 0, pods.stderr
    assert "positions unknown" not in pods.stderr, pods.stderr
    header, *lines = pods.stdout.splitlines()
    assert header.split()[:6] == ["NAME", "QUEUE", "POSITION", "EXPECTED-START", "WAITED", "REASON"]
    assert [line.split()[:4] for line in lines] == [
        [name, QUEUE, str(place), "unknown"] for place, name in enumerate(TRIALS, 1)]

    story = run(f"sluicegate explain train-3 --kubeconfig {config}", env)
    assert story.returncode == 0, story.stderr
    assert story.stdout.splitlines()[0] == f"held by Sluicegate: QueuePaused: queue {QUEUE} is paused"
    assert f"  after 2 workloads ahead in queue {QUEUE}\n" in story.stdout, story.stdout
    assert "  position 3 in its queue\n" in story.stdout, story.stdout

    # Another team's namespace: the API server's RBAC refuses it before the controller is asked.
    other = as_alice(cluster, "get", "--raw", PENDING.replace(NS, "nlp-research"), check=False)
    assert other.returncode != 0
    assert "Error from server (Forbidden)" in other.stderr, other.stderr
    assert ('User "alice" cannot list resource "pendingpods" in API group "visibility.sluicegate.dev" in the '
            'namespace "nlp-research"') in other.stderr, other.stderr

    # A queue's whole line is for admins: refused to alice, served to the admin.
    line = f"/apis/visibility.sluicegate.dev/v1alpha1/queues/{QUEUE}/pendingpods"
    refused = as_alice(cluster, "get", "--raw", line, check=False)
    assert refused.returncode != 0 and "Forbidden" in refused.stderr, refused.stderr
    whole = json.loads(cluster.kubectl("get", "--raw", line).stdout)["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"], i["position"]) for i in whole] == [
        (NS, name, place) for place, name in enumerate(TRIALS, 1)]
