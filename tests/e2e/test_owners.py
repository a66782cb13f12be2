"""Deployments and StatefulSets on the real control plane: notebooks run as the person who
applied them, a queue they may not use is refused at ``kubectl apply``, and a rolling update
under a full quota queues its new pods while the old ones keep running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from controlplane.launching import LocalCluster
from policy import keys
from tests.builders import MakePreset, MakeQueue, MakeTeam
from tests.e2e.conftest import eventually
from tests.e2e.projects import GPU_DELAY, Project, condition, submitter

HELD = "1h"  # kwok keeps such a pod running for the whole test


def sluicegate(cluster: LocalCluster, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    done = subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, f"sluicegate {' '.join(args)}: {done.stderr}"
    return done.stdout


def notebook_project(project: Project, *, gpus: int = 8) -> tuple[str, str]:
    """The project as vision-notebooks is: its default queue ``notebooks`` (a quota of ``gpus``
    GPUs, open to its team) and its default preset ``notebook`` (one GPU, the notebooks queue)."""
    notebooks, preset = project.name("notebooks"), project.name("notebook")
    project.create(
        MakeTeam(project.team).members(users=["alice", "bob"], groups=["vision-devs"]).obj(),
        MakeQueue(notebooks).priority(20).access(teams=[project.team]).quota(gpus=gpus).obj(),
        MakePreset(preset).strategy("isnull").queue(notebooks).gpus(1).obj(),
    )
    project.opt_in(default_queue=notebooks, allowed_queues=[notebooks], default_presets=[preset],
                   allowed_presets=[preset])
    return notebooks, preset


def deployment(
    name: str, preset: str, replicas: int = 2, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, **(labels or {})},
                             "annotations": {keys.PRESETS_ANNOTATION: preset, GPU_DELAY: HELD}},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "jupyter", "image": "registry.invalid/jupyter:1"}]},
            },
        },
    }


def pods_of(project: Project, app: str) -> list[dict[str, Any]]:
    return [p for p in project.admin.items("pods", "-l", f"app={app}")
            if not p["metadata"].get("deletionTimestamp")]


def running(
    project: Project, app: str, count: int, *, besides: set[str] | None = None
) -> list[dict[str, Any]]:
    """Once exactly ``count`` pods of ``app`` run (none of ``besides`` among them)."""

    def probe() -> list[dict[str, Any]] | None:
        pods = [p for p in pods_of(project, app) if p["status"].get("phase") == "Running"]
        if besides is not None and any(p["metadata"]["name"] in besides for p in pods):
            return None
        return pods if len(pods) == count else None

    return eventually(probe, f"{count} running pods of {app}")


def wait_until_the_webhook_knows(project: Project, user: str, obj: dict[str, Any], *groups: str) -> None:
    person = project.user(user, *groups)
    eventually(lambda: person.cluster.kubectl(*person.identity, "-n", project.namespace, "apply",
                                              "--dry-run=server", "-f", "-", input=json.dumps(obj),
                                              check=False).returncode == 0,
               "the webhook to know the project's queue and preset")


def test_bobs_notebook_deployment_runs_as_bob_in_explain_records_and_report(
    project: Project, cluster: LocalCluster
) -> None:
    notebooks, preset = notebook_project(project)
    nb2 = deployment("nb2", preset)
    wait_until_the_webhook_knows(project, "bob", nb2, "vision-devs")
    bob = project.user("bob", "vision-devs")
    out = bob.run("apply", "-f", "-", input=json.dumps(nb2))
    assert "deployment.apps/nb2 created" in out
    stored = project.admin.get("deployment", "nb2")
    assert submitter(stored["spec"]["template"]["metadata"]) == "bob"

    pods = running(project, "nb2", 2)
    for pod in pods:
        assert submitter(pod["metadata"]) == "bob"
        assert pod["metadata"]["labels"][keys.QUEUE_LABEL] == notebooks
        assert pod["spec"]["containers"][0]["resources"]["limits"][keys.GPU_RESOURCE] == "1"
        story = sluicegate(cluster, "explain", pod["metadata"]["name"], "-n", project.namespace)
        assert "submitted by bob in namespace" in story, story
        assert "Submitter" in story and "bob (groups: vision-devs)" in story, story

    # Its pods end when bob scales it to zero; the records and the report count them as his.
    bob.run("scale", "deployment", "nb2", "--replicas=0")
    names = {p["metadata"]["name"] for p in pods}

    def recorded() -> list[dict[str, Any]] | None:
        lines = [json.loads(line) for line in sluicegate(cluster, "records", "export", "--since", "1h")
                 .splitlines() if line.strip()]
        mine = [r for r in lines if r.get("namespace") == project.namespace and r.get("name") in names]
        return mine if len(mine) == 2 and all(r.get("finished") for r in mine) else None

    records = eventually(recorded, "both notebook pods recorded as ended")
    assert {r["submitter"] for r in records} == {"bob"}
    assert {r["requests"][keys.GPU_RESOURCE] for r in records} == {"1"}
    report = json.loads(sluicegate(cluster, "report", "--since", "1h", "--by", "user", "-o", "json"))
    scopes = {line["scope"]: line for line in report["lines"]}
    assert "bob" in scopes and scopes["bob"]["jobs"] >= 2, scopes
    assert "system:serviceaccount:kube-system:replicaset-controller" not in scopes


def test_dmitris_deployment_naming_a_queue_his_team_may_not_use_is_refused_at_apply(
    project: Project,
) -> None:
    notebooks, preset = notebook_project(project)
    project.grant(users=("alice", "bob", "dmitri"))
    nb = deployment("dmitri-nb", preset, labels={keys.QUEUE_LABEL: notebooks})
    wait_until_the_webhook_knows(project, "bob", nb, "vision-devs")
    refusal = project.user("dmitri", "nlp-devs").fails("apply", "-f", "-", input=json.dumps(nb))
    assert "apps.mutate.sluicegate.dev" in refusal and "denied the request" in refusal, refusal
    assert f'queue "{notebooks}" is not open to user dmitri' in refusal, refusal
    assert project.admin.run("get", "deployments", "-o", "name") == ""


def test_a_statefulsets_pods_run_as_the_person_who_applied_it(project: Project) -> None:
    _, preset = notebook_project(project)
    obj = deployment("svc", preset, replicas=1)
    obj["kind"] = "StatefulSet"
    obj["spec"]["serviceName"] = "svc"
    wait_until_the_webhook_knows(project, "alice", obj, "vision-devs")
    project.user("alice", "vision-devs").run("apply", "-f", "-", input=json.dumps(obj))
    (pod,) = running(project, "svc", 1)
    assert pod["metadata"]["name"] == "svc-0" and submitter(pod["metadata"]) == "alice"


def test_a_rolling_update_under_a_full_quota_queues_the_new_pods_while_the_old_ones_run(
    project: Project,
) -> None:
    """Two 1-GPU replicas fill a 2-GPU quota. A new template makes a new ReplicaSet, whose pod
    waits on the quota while both old pods keep running (maxUnavailable 0); once the strategy
    lets one old pod go, the rollout goes through, one pod at a time."""
    _, preset = notebook_project(project, gpus=2)
    nb = deployment("nb", preset)
    nb["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    wait_until_the_webhook_knows(project, "bob", nb, "vision-devs")
    bob = project.user("bob", "vision-devs")
    bob.run("apply", "-f", "-", input=json.dumps(nb))
    old = {p["metadata"]["name"] for p in running(project, "nb", 2)}

    bob.run("patch", "deployment", "nb", "--type=merge", "-p",
            json.dumps({"spec": {"template": {"metadata": {"annotations": {"example.com/version": "2"}}}}}))

    def held() -> dict[str, Any] | None:
        new = [p for p in pods_of(project, "nb") if p["metadata"]["name"] not in old]
        if len(new) != 1:
            return None
        found = condition(new[0], keys.CONDITION)
        return new[0] if found and found.get("reason") == keys.Reason.QUEUE_QUOTA.value else None

    waiting = eventually(held, "the new ReplicaSet's pod held by the queue's quota")
    assert submitter(waiting["metadata"]) == "bob"
    assert {p["metadata"]["name"] for p in running(project, "nb", 2)} == old

    bob.run("patch", "deployment", "nb", "--type=merge", "-p",
            json.dumps({"spec": {"strategy": {"rollingUpdate": {"maxUnavailable": 1}}}}))
    done = running(project, "nb", 2, besides=old)
    assert {submitter(p["metadata"]) for p in done} == {"bob"}
