"""Queue, Team and Policy status under abuse: hand-written figures never steer dispatch and are
put back, shapes the schema does not allow are refused, and work that can never fit blocks
nothing."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from audit.checking import Cap, Limits
from audit.connection import Credentials
from audit.recording import recording
from controlplane.deploying import LocalSluicegate
from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.faults import DRAIN_SECONDS, judge, kill, leader
from tests.e2e.scenes import Scene


def _status(scene: Scene, kind: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = scene.get(kind, name).get("status") or {}
    return status


def test_a_queue_whose_status_says_idle_still_releases_no_more_than_its_limit(scene: Scene) -> None:
    team = scene.team("jump")
    queue = scene.queue("full", maxRunning=1)
    namespace = scene.namespace(team)
    scene.pods(namespace, queue, 3, seconds=600)
    eventually(lambda: _status(scene, "queue", queue).get("running") == 1
               and _status(scene, "queue", queue).get("pending") == 2, "1 running, 2 pending")
    # The user claims the queue is idle, and then some, on the Queue and on the Team.
    fake = {"pending": 0, "running": 0, "display": {"running": "0/1", "gpus": "0/-"}}
    for kind, name in (("queue", queue), ("team", team)):
        scene.kubectl("patch", kind, name, "--subresource=status", "--type=merge",
                      "-p", json.dumps({"status": fake}))
    eventually(lambda: _status(scene, "queue", queue).get("running") == 1
               and _status(scene, "team", team).get("running") == 1, "both statuses put back")
    pods = json.loads(scene.kubectl("get", "pods", "-n", namespace, "-o", "json"))["items"]
    released = [p for p in pods if not p["spec"].get("schedulingGates")]
    assert len(released) == 1


def test_status_shapes_the_schema_does_not_allow_are_refused_and_what_is_allowed_is_put_back(
    scene: Scene, tmp_path: Path,
) -> None:
    scene.policy()
    team = scene.team("shapes")
    queue = scene.queue("shapes", maxRunning=2)
    for kind, name in (("queue", queue), ("team", team), ("policy", keys.POLICY_NAME)):
        _abuse(scene, kind, name, tmp_path)


def _abuse(scene: Scene, kind: str, name: str, tmp_path: Path) -> None:
    truth = eventually(lambda: _status(scene, kind, name), f"the {kind}'s first status")
    for shape in ("idle", ["idle"], 7, {"running": "lots"}, {"pending": -1}):
        out = scene.cluster.kubectl("patch", kind, name, "--subresource=status", "--type=merge",
                                    "-p", json.dumps({"status": shape}), check=False)
        assert out.returncode != 0, (kind, shape, out.stdout)
    scene.kubectl("patch", kind, name, "--subresource=status", "--type=json",
                  "-p", json.dumps([{"op": "remove", "path": "/status"}]))
    eventually(lambda: _status(scene, kind, name) == truth, f"the {kind}'s status, written again")
    # Nearly a megabyte of conditions (each message within the schema's bound).
    big = {"pending": 0, "running": 0,
           "conditions": [{"type": f"T{i}", "status": "True", "message": "x" * 30000} for i in range(30)]}
    patch = tmp_path / f"{kind}.json"  # too long for a command line
    patch.write_text(json.dumps({"status": big}))
    scene.kubectl("patch", kind, name, "--subresource=status", "--type=merge", f"--patch-file={patch}")
    eventually(lambda: _status(scene, kind, name) == truth, f"the {kind}'s status after a big one")


def _gauge(sluicegate: LocalSluicegate, replica: str, name: str, queue: str) -> float | None:
    url = f"http://127.0.0.1:{sluicegate.port(replica, 'metrics')}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("queue") == queue:
                return float(sample.value)
    return None


def test_a_pod_that_can_never_fit_waits_alone_and_blocks_nothing(
    scene: Scene, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("huge")
    queue = scene.queue("capped", quota={"nvidia.com/gpu": "2"})
    namespace = scene.namespace(team)
    scene.create(scene.pod(namespace, "huge", queue, gpus=3, seconds=600))
    scene.pods(namespace, queue, 2, seconds=600)
    condition = scene.wait_condition(namespace, "huge", lambda c: c.get("status") == "False", "waiting")
    status = eventually(lambda: _status(scene, "queue", queue).get("running") == 2
                        and _status(scene, "queue", queue), "the two small pods running")
    assert status["pending"] == 1 and status["display"] == {"running": "2/-", "gpus": "2/2"}
    assert "can never run" in condition["message"] and condition["reason"] == "QueueQuota"
    first = eventually(lambda: leader(sluicegate), "one replica to lead")
    eventually(lambda: _gauge(sluicegate, first, "sluicegate_impossible_workloads", queue) == 1,
               "the impossible-work gauge: 1")
    assert _gauge(sluicegate, first, "sluicegate_queue_pending_workloads", queue) == 1
    assert _gauge(sluicegate, first, "sluicegate_queue_running_workloads", queue) == 2


def test_statuses_are_true_once_quiet_after_the_leader_is_killed_mid_burst_and_a_status_is_faked(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("burst", maxRunning=4)
    queue = scene.queue("burst", maxRunning=3)
    held = scene.queue("held", maxRunning=0)
    namespace = scene.namespace(team)
    scene.pods(namespace, held, 2, prefix="h", seconds=1)
    limits = Limits(queues={queue: Cap(running=3), held: Cap(running=0)}, teams={team: Cap(running=4)})
    first = eventually(lambda: leader(sluicegate), "one replica to lead")
    try:
        with recording(credentials, selector=scene.selector) as recorder:
            scene.pods(namespace, queue, 12, seconds=1)
            recorder.wait(lambda t: t.released > 0, DRAIN_SECONDS)
            kill(sluicegate, first)
            # While no one leads: the user's figures for the queue and the team.
            fake = {"pending": 0, "running": 0, "display": {"running": "0/3", "gpus": "0/-"}}
            for kind, name in (("queue", queue), ("team", team)):
                scene.kubectl("patch", kind, name, "--subresource=status", "--type=merge",
                              "-p", json.dumps({"status": fake}))
            recorder.wait(lambda t: t.finished >= 12, DRAIN_SECONDS)
            record = recorder.snapshot()
    finally:
        sluicegate.start(first)  # back to two replicas for the tests that follow
    verdict = judge(record, limits)
    assert verdict.violations == () and verdict.twice == (), verdict
    assert verdict.finished == 12  # the held queue's two wait, as they must
    idle = {"pending": 0, "running": 0, "display": {"running": "0/3", "gpus": "0/-"}}
    eventually(lambda: _status(scene, "queue", queue) == idle, "the burst queue's status: idle", seconds=60)
    waiting = eventually(lambda: _status(scene, "queue", held).get("pending") == 2
                         and _status(scene, "team", team).get("pending") == 2
                         and _status(scene, "team", team), "the team's status: the two held pods", seconds=60)
    assert waiting["running"] == 0 and waiting["display"] == {"running": "0/4", "gpus": "0/-"}
