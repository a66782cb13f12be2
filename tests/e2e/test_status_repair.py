"""Queue status as the gate controller keeps it: once the cluster is quiet it is the truth, whoever
else wrote the status subresource, however quickly a queue was deleted and created again, and
whichever replica leads."""

from __future__ import annotations

import json

from controlplane.deploying import LocalSluicegate
from tests.e2e.conftest import eventually
from tests.e2e.faults import kill, leader
from tests.e2e.scenes import Scene


def test_a_status_someone_else_wrote_is_put_back_to_the_truth_whole(scene: Scene) -> None:
    queue = scene.queue("idle", maxRunning=4)
    truth = eventually(lambda: scene.queue_status(queue), "the idle queue's first status")
    assert truth == {"pending": 0, "running": 0, "display": {"running": "0/4", "gpus": "0/-"}}
    # An admin's hand edit: figures the controller writes, and fields it leaves out on an idle
    # queue (no usage, no oldest pending time), which server-side apply could not remove.
    wrong = {"pending": 42, "running": 7, "usage": {"example.com/fpga": "3"},
             "oldestPendingTime": "2020-01-01T00:00:00Z", "display": {"running": "7/4", "gpus": "9/9"},
             "conditions": [{"type": "Stale", "status": "True", "reason": "HandEdited"}]}
    scene.kubectl("patch", "queue", queue, "--subresource=status", "--type=merge",
                  "-p", json.dumps({"status": wrong}))
    eventually(lambda: scene.queue_status(queue) == truth, "the queue's status, back to the truth",
               seconds=60)


def test_a_queue_deleted_and_created_again_at_once_gets_its_status(scene: Scene) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", maxRunning=0)
    namespace = scene.namespace(team)
    scene.pods(namespace, queue, 2, seconds=5)
    eventually(lambda: scene.queue_status(queue).get("pending") == 2, "the queue's status: 2 pending")
    created = scene.get("queue", queue)
    again = {"apiVersion": created["apiVersion"], "kind": "Queue",
             "metadata": {"name": queue, "labels": created["metadata"]["labels"]}, "spec": created["spec"]}
    # In one kubectl call each, well within a status round: the controller's figures for the
    # name never change.
    scene.kubectl("delete", "queue", queue)
    scene.create(again)
    recreated = scene.get("queue", queue)
    assert recreated["metadata"]["uid"] != created["metadata"]["uid"]
    status = eventually(lambda: scene.queue_status(queue).get("pending") == 2 and scene.queue_status(queue),
                        "the new queue's status: 2 pending", seconds=60)
    assert (status["running"], status["display"]) == (0, {"running": "0/0", "gpus": "0/-"})


def test_a_status_written_while_the_leader_was_killed_is_put_right_by_the_next_leader(
    scene: Scene, sluicegate: LocalSluicegate
) -> None:
    queue = scene.queue("idle", maxRunning=2)
    truth = eventually(lambda: scene.queue_status(queue), "the idle queue's first status")
    first = eventually(lambda: leader(sluicegate), "one controller replica to lead")
    try:
        kill(sluicegate, first)
        wrong = {"pending": 3, "oldestPendingTime": "2020-01-01T00:00:00Z"}
        scene.kubectl("patch", "queue", queue, "--subresource=status", "--type=merge",
                      "-p", json.dumps({"status": wrong}))
        second = eventually(lambda: leader(sluicegate), "a replica to lead after the kill")
        eventually(lambda: scene.queue_status(queue) == truth,
                   "the queue's status, put right by the new leader", seconds=60)
    finally:
        sluicegate.start(first)  # back to two replicas for the tests that follow
    assert second != first
