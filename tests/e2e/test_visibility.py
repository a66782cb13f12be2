"""The visibility API through the real API server: alice, with the sample rights of an ML
engineer of team vision (group vision-devs: edit in the team's namespaces, the sample readers
and sluicegate-ml-engineer there, nothing cluster-wide), sees her pods' places in their queue
with ``sluicegate pods``, ``sluicegate explain`` and ``kubectl get --raw``, and the API server's
own RBAC refuses her another team's namespace and a queue's whole line. Once work of her queue
has run to its end, she sees when her waiting pods are expected to start, from the holds the
controller learned; a paused queue's pods say that nobody can say, and why."""

from __future__ import annotations

import contextlib
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
from simulator.estimating import PAUSED
from tests.doc_commands import ROOT, run, shell_env
from tests.e2e.conftest import eventually
from tests.e2e.projects import GPU_DELAY

SAMPLES = ROOT / "manifests" / "samples"
SAMPLE_NAMESPACES = ("vision-research", "vision-notebooks", "nlp-research")
NS = "vision-research"
QUEUE = "vision-train"
ALICE = ("--as", "alice", "--as-group", "vision-devs")
PENDING = f"/apis/visibility.sluicegate.dev/v1alpha1/namespaces/{NS}/pendingpods"
TRIALS = ("train-1", "train-2", "train-3")
# What the controller learns holds from, and what then runs while alice's trials wait. The warm-up
# runs long enough that an estimate a few seconds old still lies ahead.
WARM_UP, LONG_RUN = "warm-up", "long-run"
WARM_UP_RUNS, LONG_RUN_RUNS = "15s", "600s"


def pod(name: str, runs_for: str = "") -> dict[str, Any]:
    notes = {keys.PRESETS_ANNOTATION: "single-gpu", **({GPU_DELAY: runs_for} if runs_for else {})}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {keys.QUEUE_LABEL: QUEUE},
                         "annotations": notes},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}


def as_alice(cluster: LocalCluster, *args: str, check: bool = True) -> Any:
    return cluster.kubectl(*args, *ALICE, check=check)


@pytest.fixture
def held(cluster: LocalCluster, running: LocalSluicegate) -> Iterator[None]:
    """The sample setup with vision-train paused and alice's three pods held there, in order;
    afterwards all of it is gone again (the sample Policy would bind every other test)."""
    with _samples(cluster):
        cluster.kubectl("patch", "queue", QUEUE, "--type=merge", "-p", '{"spec": {"paused": true}}')
        _submit(cluster, TRIALS)
        yield


@pytest.fixture
def behind_a_long_run(cluster: LocalCluster, running: LocalSluicegate) -> Iterator[None]:
    """The sample setup with vision-train running one workload at a time: a warm-up pod of alice's
    has run there to its end, a long one runs, and her three trials wait behind it, in order."""
    with _samples(cluster):
        cluster.kubectl("patch", "queue", QUEUE, "--type=merge", "-p", '{"spec": {"maxRunning": 1}}')
        _submit(cluster, (WARM_UP,), WARM_UP_RUNS)
        eventually(lambda: _phase(cluster, WARM_UP) == "Succeeded", f"{WARM_UP} to run to its end",
                   seconds=120)
        _submit(cluster, (LONG_RUN,), LONG_RUN_RUNS)
        eventually(lambda: _phase(cluster, LONG_RUN) == "Running", f"{LONG_RUN} to run")
        _submit(cluster, TRIALS)
        yield


@contextlib.contextmanager
def _samples(cluster: LocalCluster) -> Iterator[None]:
    cluster.kubectl("apply", "-k", str(SAMPLES))
    try:
        yield
    finally:
        cluster.kubectl("delete", "pod", *TRIALS, WARM_UP, LONG_RUN, "-n", NS, "--ignore-not-found",
                        "--wait=false", check=False)
        cluster.kubectl("delete", "-k", str(SAMPLES), "--ignore-not-found", "--wait=false", check=False)
        eventually(lambda: not cluster.kubectl("get", "namespace", *SAMPLE_NAMESPACES, check=False).stdout,
                   f"the sample namespaces {SAMPLE_NAMESPACES} to be deleted")


def _submit(cluster: LocalCluster, names: tuple[str, ...], runs_for: str = "") -> None:
    for name in names:  # one at a time: their submission times order them
        made = pod(name, runs_for)

        def admitted(made: dict[str, Any] = made) -> bool:
            return _create_as_alice(cluster, made)

        eventually(admitted, f"admission to admit {name}")


def _phase(cluster: LocalCluster, name: str) -> str:
    got = cluster.kubectl("get", "pod", name, "-n", NS, "-o", "jsonpath={.status.phase}", check=False)
    return got.stdout.strip()


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
    assert all("p50Seconds" not in i["expectedStart"] for i in items), items  # paused: unknown

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


def _expected(cluster: LocalCluster) -> list[dict[str, Any]] | None:
    """alice's waiting trials through the API server, once each has an expected start."""
    got = as_alice(cluster, "get", "--raw", PENDING, check=False)
    if got.returncode != 0:
        return None
    items: list[dict[str, Any]] = json.loads(got.stdout)["items"]
    if [i["metadata"]["name"] for i in items] != list(TRIALS) or any(
            "p50Seconds" not in i["expectedStart"] for i in items):
        return None
    return items


def _unknown(cluster: LocalCluster, reason: str) -> list[dict[str, Any]] | None:
    got = as_alice(cluster, "get", "--raw", PENDING, check=False)
    if got.returncode != 0:
        return None
    items: list[dict[str, Any]] = json.loads(got.stdout)["items"]
    if [i["metadata"]["name"] for i in items] != list(TRIALS) or any(
            i["expectedStart"].get("unknown") != reason for i in items):
        return None
    return items


def test_alice_sees_when_her_waiting_pods_are_expected_to_start_and_why_not_in_a_paused_queue(
    cluster: LocalCluster, behind_a_long_run: None, tmp_path: Path
) -> None:
    items = eventually(lambda: _expected(cluster), "expected starts for alice's three waiting trials")
    assert [(i["reason"], i["position"]) for i in items] == [
        (keys.Reason.QUEUE_LIMIT.value, place) for place in (1, 2, 3)], items
    for i in items:
        start = i["expectedStart"]
        assert start["p10Seconds"] <= start["p50Seconds"] <= start["p90Seconds"], start
        assert {"p50Time", "p90Time", "estimatedAt"} <= start.keys(), start
    # One at a time behind the long run: each starts after the one before it.
    p50s = [i["expectedStart"]["p50Seconds"] for i in items]
    assert p50s == sorted(p50s) and p50s[0] < p50s[2], items

    env = shell_env(cluster)
    config = _impersonating(cluster, tmp_path / "alice.kubeconfig")
    pods = run(f"sluicegate pods --kubeconfig {config}", env)
    assert pods.returncode == 0, pods.stderr
    header, *lines = pods.stdout.splitlines()
    assert header.split()[3] == "EXPECTED-START"
    assert [line.split()[:3] for line in lines] == [
        [name, QUEUE, str(place)] for place, name in enumerate(TRIALS, 1)], pods.stdout
    assert all(line.split()[3] != "unknown" for line in lines), pods.stdout

    story = run(f"sluicegate explain train-3 --kubeconfig {config}", env)
    assert story.returncode == 0, story.stderr
    assert "  expected to start in about " in story.stdout, story.stdout

    # Paused, the queue releases nothing: nobody can say when, and alice is told why.
    cluster.kubectl("patch", "queue", QUEUE, "--type=merge", "-p", '{"spec": {"paused": true}}')
    paused = eventually(lambda: _unknown(cluster, PAUSED), "the trials' start unknown: the queue is paused")
    assert all(i["reason"] == keys.Reason.QUEUE_PAUSED.value for i in paused), paused
    story = run(f"sluicegate explain train-3 --kubeconfig {config}", env)
    assert story.returncode == 0, story.stderr
    assert f"  start time unknown: {PAUSED}\n" in story.stdout, story.stdout
    pods = run(f"sluicegate pods --kubeconfig {config}", env)
    assert [line.split()[3] for line in pods.stdout.splitlines()[1:]] == ["unknown"] * 3, pods.stdout
