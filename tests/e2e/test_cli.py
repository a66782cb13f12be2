"""``sluicegate`` (and ``kubectl sluicegate``) against the real cluster: what waits, in which
order and why, and each pod's story, told apart for a held, an unplaceable and a finished pod."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from controlplane.launching import LocalCluster
from policy import keys
from process import kubeyaml
from tests.doc_commands import run, shell_env
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene

SAMPLE_ACCESS = Path(__file__).parents[2] / "manifests" / "samples" / "access.yaml"
UNPLACEABLE = "dispatched, waiting for Kubernetes to place it: "


def cli(cluster: LocalCluster, command: str) -> str:
    result = run(command, shell_env(cluster))
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result.stdout


def rows(table: str) -> list[dict[str, str]]:
    """A table as dicts by header (the last column, a message, may hold spaces)."""
    header, *lines = table.splitlines()
    names = header.split()
    return [dict(zip(names, line.split(None, len(names) - 1), strict=True)) for line in lines]


def test_explain_tells_a_held_pod_an_unplaceable_pod_and_a_finished_pod_apart(
    scene: Scene, cluster: LocalCluster
) -> None:
    team = scene.team("vision")
    stopped = scene.queue("stopped", maxRunning=0)
    roomy = scene.queue("roomy")
    ns = scene.namespace(team)
    scene.pods(ns, stopped, 2, prefix="held")
    # A node could hold it, but the only one it selects is cordoned: released, then unplaceable.
    scene.node("cordoned", 8, cordoned=True)  # the one node of the scene's pool, cordoned
    scene.pods(ns, roomy, 1, prefix="stuck", gpus=8, node_selector=scene.pool()["matchLabels"])
    scene.pods(ns, roomy, 1, prefix="quick", seconds=1)
    try:
        scene.wait_reason(ns, ["held00", "held01"], keys.Reason.QUEUE_LIMIT.value)
        scene.wait_condition(ns, "stuck00", lambda c: c["message"].startswith(UNPLACEABLE), "unplaceable")
        eventually(lambda: scene.get("pod", "quick00", ns)["status"].get("phase") == "Succeeded",
                   "quick00 to finish")

        held = cli(cluster, f"sluicegate explain held01 -n {ns}")
        lines = held.splitlines()
        assert lines[0] == f"held by Sluicegate: QueueLimit: queue {stopped}: 0/0 running", held
        assert "position 2 of 2 in its queue; running 0/0, GPUs 0/-, pending 2" in held
        assert f"{ns}/held00 (QueueLimit)" in held  # what is ahead of it
        assert f"admitted to queue {stopped} (team {team}); no presets; gate {keys.GATE} added" in held
        assert "Submitter:  -" not in held
        assert "waiting for Kubernetes" not in held and "released by queue" not in held

        unplaceable = cli(cluster, f"sluicegate explain stuck00 -n {ns}")
        first = unplaceable.splitlines()[0]
        assert re.match(rf"{re.escape(UNPLACEABLE)}0/\d+ nodes are available", first), unplaceable
        assert "unschedulable" in first
        assert f"released by queue {roomy}" in unplaceable
        assert re.search(r"kube-scheduler cannot place it: 0/\d+ nodes are available", unplaceable)
        assert "Requests:   8 nvidia.com/gpu" in unplaceable
        assert "held by Sluicegate" not in unplaceable and "Waiting:" not in unplaceable
        assert all(f"held: {reason.value}" not in unplaceable for reason in keys.Reason)

        finished = cli(cluster, f"sluicegate explain quick00 -n {ns}")
        first = finished.splitlines()[0]
        assert first.startswith("finished: Succeeded at ") and ", ran on node gpu-node-" in first, finished
        assert f"released by queue {roomy}" in finished
        assert "scheduled on node gpu-node-" in finished
        assert "exit code 0" in finished
        assert "held by Sluicegate" not in finished and UNPLACEABLE not in finished

        story: dict[str, Any] = json.loads(cli(cluster, f"sluicegate explain held01 -n {ns} -o json"))
        assert story["state"] == "held"
        assert story["hold"]["position"] == 2 and story["hold"]["ahead"] == [f"{ns}/held00 (QueueLimit)"]
    finally:
        scene.kubectl("delete", "pod", "stuck00", "-n", ns, "--wait=false")


def test_a_pod_whose_namespace_left_its_team_is_listed_held_as_the_controller_holds_it(
    scene: Scene, cluster: LocalCluster
) -> None:
    """The namespace loses its team label: its waiting pod is held with NamespaceLeftTeam in
    ``pods`` and ``explain`` as on its condition, and its running pod still fills the queue."""
    team = scene.team("vision")
    one = scene.queue("one", maxRunning=1)
    ns = scene.namespace(team)
    scene.pods(ns, one, 2, prefix="p", seconds=HELD_SECONDS)  # p00 runs, p01 waits behind it
    try:
        scene.wait_reason(ns, ["p01"], keys.Reason.QUEUE_LIMIT.value)
        scene.kubectl("label", "namespace", ns, f"{keys.TEAM_LABEL}-")
        left = scene.wait_condition(ns, "p01", lambda c: c.get("reason") == "NamespaceLeftTeam", "left")

        pending = rows(cli(cluster, f"sluicegate pods -n {ns}"))
        assert [(r["NAME"], r["QUEUE"], r["POSITION"], r["REASON"]) for r in pending] == [
            ("p01", one, "-", "NamespaceLeftTeam")]
        assert pending[0]["MESSAGE"] == left["message"]
        assert left["message"].startswith(f"namespace {ns} is no longer opted in to team {team}")
        queues = {r["NAME"]: r for r in rows(cli(cluster, "sluicegate queues"))}
        assert (queues[one]["RUNNING"], queues[one]["PENDING"]) == ("1/1", "0")  # p00 counts still
        explained = cli(cluster, f"sluicegate explain p01 -n {ns}")
        headline = explained.splitlines()[0]
        assert headline == f"held by Sluicegate: NamespaceLeftTeam: {left['message']}", explained
    finally:
        scene.kubectl("delete", "pod", "p00", "-n", ns, "--wait=false")


def test_pods_lists_pending_pods_in_dispatch_order_and_queues_shows_each_queues_figures(
    scene: Scene, cluster: LocalCluster
) -> None:
    team = scene.team("vision")
    high = scene.queue("high", priority=10, maxRunning=0)
    low = scene.queue("low", maxRunning=1)
    ns = scene.namespace(team)
    scene.pods(ns, low, 2, prefix="low", seconds=HELD_SECONDS)  # low00 runs, low01 waits behind it
    scene.pods(ns, high, 2, prefix="high")
    try:
        scene.wait_reason(ns, ["low01", "high00", "high01"], keys.Reason.QUEUE_LIMIT.value)

        pending = rows(cli(cluster, f"sluicegate pods -n {ns}"))
        assert [(r["NAME"], r["QUEUE"], r["POSITION"], r["REASON"]) for r in pending] == [
            ("high00", high, "1", "QueueLimit"), ("high01", high, "2", "QueueLimit"),
            ("low01", low, "1", "QueueLimit")]
        assert pending[0]["MESSAGE"] == f"queue {high}: 0/0 running"
        assert pending[2]["MESSAGE"] == f"queue {low}: 1/1 running"

        listed = json.loads(cli(cluster, f"sluicegate pods -A -q {low} -o json"))["pods"]
        assert [(p["namespace"], p["name"], p["position"], p["state"]) for p in listed] == [
            (ns, "low01", 1, "held")]

        # Through the real kubectl: it finds kubectl-sluicegate on PATH (its plugin lookup).
        queues = {r["NAME"]: r for r in rows(cli(cluster, "kubectl sluicegate queues"))}
        shown = [(queues[q]["PRIORITY"], queues[q]["RUNNING"], queues[q]["PENDING"], queues[q]["GPUS"],
                  queues[q]["PAUSED"]) for q in (high, low)]
        assert shown == [("10", "0/0", "2", "0/-", "false"), ("0", "1/1", "1", "1/-", "false")]
        oldest = queues[high]["OLDEST-WAIT"]
        assert oldest != "-" and oldest[-1] == "s", oldest
        assert list(queues).index(high) < list(queues).index(low)  # higher priority first
    finally:
        scene.kubectl("delete", "pod", "low00", "-n", ns, "--wait=false")


def test_a_pod_that_does_not_exist_is_one_line_on_stderr(scene: Scene, cluster: LocalCluster) -> None:
    ns = scene.namespace(scene.team("vision"))
    result = run(f"kubectl sluicegate explain nothing-here -n {ns}", shell_env(cluster))
    assert result.returncode == 1
    assert result.stderr.strip() == f'sluicegate: pod "nothing-here" not found in namespace {ns}'
    nosuch = run(f"sluicegate pods -A -q nosuchq-{scene.id}", shell_env(cluster))
    assert nosuch.returncode == 1
    assert nosuch.stderr == f'sluicegate: queue "nosuchq-{scene.id}" does not exist\n'


def _namespace_reader(scene: Scene, ns: str, directory: Path) -> Path:
    """A kubeconfig for a service account that may read pods and events in ``ns`` only, with
    ``ns`` as its context's namespace."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "pod-reader", "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "pod-reader", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
               "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]}
    scene.create(role, binding)
    token = scene.kubectl("create", "token", "default", "-n", ns).strip()
    return _kubeconfig(scene, directory / "reader.kubeconfig", {"token": token}, ns)


def _kubeconfig(scene: Scene, path: Path, user: dict[str, Any], ns: str | None) -> Path:
    """A kubeconfig for the session cluster with ``user`` as its user entry and ``ns`` as its
    context's namespace (None: the context names none)."""
    admin = yaml.safe_load(scene.cluster.kubeconfig.read_text())
    context = {"cluster": admin["clusters"][0]["name"], "user": "reader"}
    if ns is not None:
        context["namespace"] = ns
    config = {
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": "reader", "user": user}],
        "contexts": [{"name": "reader", "context": context}],
        "current-context": "reader",
    }
    path.write_text(kubeyaml.dump(config))
    return path


def test_a_user_who_may_read_only_their_namespace_gets_the_story_without_the_queue_view(
    scene: Scene, cluster: LocalCluster, tmp_path: Path
) -> None:
    team = scene.team("vision")
    stopped = scene.queue("stopped", maxRunning=0)
    ns = scene.namespace(team)
    scene.pods(ns, stopped, 1, prefix="held")
    scene.wait_reason(ns, ["held00"], keys.Reason.QUEUE_LIMIT.value)
    reader = _namespace_reader(scene, ns, tmp_path)
    env = shell_env(cluster)

    story = run(f"sluicegate explain held00 --kubeconfig {reader}", env)  # -n: the context's namespace
    assert story.returncode == 0, story.stderr
    first, *_ = story.stdout.splitlines()
    assert first == f"held by Sluicegate: QueueLimit: queue {stopped}: 0/0 running"
    note = "Note: position and what is ahead unknown: not allowed to read the cluster-wide view"
    assert note in story.stdout, story.stdout

    refused = run(f"sluicegate pods --kubeconfig {reader}", env)
    assert refused.returncode == 1
    assert refused.stderr.startswith("sluicegate: forbidden: ") and "cannot list resource" in refused.stderr


def _sample_reader_rules() -> list[dict[str, Any]]:
    """The rules of the shipped sample ClusterRole ``sluicegate-reader``."""
    for doc in yaml.safe_load_all(SAMPLE_ACCESS.read_text()):
        if doc and doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "sluicegate-reader":
            rules: list[dict[str, Any]] = doc["rules"]
            return rules
    raise AssertionError(f"{SAMPLE_ACCESS} has no ClusterRole sluicegate-reader")


def test_an_engineer_with_the_sample_reader_rights_sees_queues_and_their_namespaces_pods(
    scene: Scene, cluster: LocalCluster, tmp_path: Path
) -> None:
    team = scene.team("vision")
    stopped = scene.queue("stopped", maxRunning=0)
    ns = scene.namespace(team)
    scene.pods(ns, stopped, 2, prefix="held")
    scene.wait_reason(ns, ["held00", "held01"], keys.Reason.QUEUE_LIMIT.value)
    # alice's sample rights: edit in her team's namespace, and the sample sluicegate-reader role.
    reader, account = scene.name("reader"), {"kind": "ServiceAccount", "name": "default", "namespace": ns}
    scene.create(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": reader},
         "rules": _sample_reader_rules()},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": reader},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
         "subjects": [account]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "edit", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
         "subjects": [account]})
    try:
        token = scene.kubectl("create", "token", "default", "-n", ns).strip()
        config = _kubeconfig(scene, tmp_path / "alice.kubeconfig", {"token": token}, ns)
        env = shell_env(cluster)

        def status_shows_both() -> dict[str, str] | None:
            shown = run(f"sluicegate queues --kubeconfig {config}", env)
            assert shown.returncode == 0, shown.stderr
            assert shown.stderr.startswith("Note: from the Queue status the controller writes"), shown.stderr
            row = {r["NAME"]: r for r in rows(shown.stdout)}.get(stopped)
            return row if row is not None and row["PENDING"] == "2" else None

        row = eventually(status_shows_both, f"queue {stopped} with 2 pending in sluicegate queues")
        assert (row["RUNNING"], row["GPUS"], row["PAUSED"]) == ("0/0", "0/-", "false")
        assert row["OLDEST-WAIT"] != "-"

        pods = run(f"sluicegate pods --kubeconfig {config}", env)  # the context's namespace
        assert pods.returncode == 0, pods.stderr
        assert pods.stderr.startswith("Note: from the pods' Dispatched conditions: positions unknown")
        listed = [(r["NAME"], r["QUEUE"], r["POSITION"], r["REASON"], r["MESSAGE"])
                  for r in rows(pods.stdout)]
        assert listed == [
            (n, stopped, "-", "QueueLimit", f"queue {stopped}: 0/0 running") for n in ("held00", "held01")]

        everywhere = run(f"sluicegate pods -A --kubeconfig {config}", env)
        assert everywhere.returncode == 1 and everywhere.stderr.count("\n") == 1
        assert everywhere.stderr.startswith("sluicegate: forbidden: "), everywhere.stderr

        # A kubeconfig that names no namespace (so "default", where alice may read no pods), and
        # the global flag before the command: still the Queue status, no pod read.
        bare = _kubeconfig(scene, tmp_path / "alice-bare.kubeconfig", {"token": token}, None)
        for command in (f"sluicegate queues --kubeconfig {bare}", f"sluicegate --kubeconfig {bare} queues"):
            shown = run(command, env)
            assert shown.returncode == 0, f"{command}: {shown.stderr}"
            assert shown.stderr.startswith("Note: from the Queue status the controller writes"), shown.stderr
            assert "forbidden" not in shown.stderr, shown.stderr
            again = {r["NAME"]: r for r in rows(shown.stdout)}[stopped]
            assert (again["PENDING"], again["RUNNING"], again["GPUS"]) == ("2", "0/0", "0/-"), shown.stdout
    finally:
        for kind in ("clusterrolebinding", "clusterrole"):
            scene.kubectl("delete", kind, reader, "--ignore-not-found", check=False)


def test_a_kubeconfig_that_impersonates_reads_as_the_impersonated_user(
    scene: Scene, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = scene.namespace(scene.team("vision"))
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    user = {**admin["users"][0]["user"], "as": "nobody", "as-groups": ["nogroup"]}
    config = _kubeconfig(scene, tmp_path / "nobody.kubeconfig", user, ns)
    for command in ("queues", "pods -A", f"explain anything -n {ns}"):
        refused = run(f"sluicegate {command} --kubeconfig {config}", shell_env(cluster))
        assert refused.returncode == 1, (command, refused.stdout)
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.startswith("sluicegate: forbidden: "), refused.stderr
        assert '"nobody"' in refused.stderr, refused.stderr
    records = run(f"sluicegate records export --kubeconfig {config}", shell_env(cluster))
    assert records.returncode == 1 and records.stdout == "", records.stdout[:200]
    assert records.stderr.startswith("sluicegate: you may not read the run records: "), records.stderr
    assert '"nobody"' in records.stderr, records.stderr
