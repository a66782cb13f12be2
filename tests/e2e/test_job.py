"""The Job of the webhook issue, end to end: submitted with kubectl, its pods gated by admission,
released by policy two at a time, placed by kube-scheduler, run by kwok, and the Job complete."""

from __future__ import annotations

import json

from audit.checking import Cap, Limits, lost, peaks, released_twice, violations
from audit.connection import Credentials
from audit.loading import IMAGE, KWOK_DELAY_ANNOTATION
from audit.naming import RUN_LABEL
from audit.recording import recording
from audit.records import Kind
from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene

DRAIN_SECONDS = 120.0
LIFECYCLE = [Kind.CREATED, Kind.UNGATED, Kind.BOUND, Kind.RUNNING, Kind.SUCCEEDED]


def test_a_job_is_queued_released_by_policy_placed_run_and_completed(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", maxRunning=2)
    namespace = scene.namespace(team)
    gpu = {keys.GPU_RESOURCE: "1"}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "resnet", "namespace": namespace},
        "spec": {
            "completions": 4, "parallelism": 4, "backoffLimit": 0,
            "template": {
                # Each pod runs until the test ends them (once two run: the limit is certainly
                # reached, however slowly the Job controller creates them).
                "metadata": {"labels": {RUN_LABEL: scene.id, keys.QUEUE_LABEL: queue},
                             "annotations": {KWOK_DELAY_ANNOTATION: f"{HELD_SECONDS:g}s"}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "train", "image": IMAGE,
                                         "resources": {"requests": gpu, "limits": gpu}}]},
            },
        },
    }
    with recording(credentials, selector=scene.selector) as recorder:
        scene.kubectl("apply", "-f", "-", input=json.dumps(job))
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        recorder.wait(lambda t: t.pods >= 4, DRAIN_SECONDS)  # the Job has made all four
        pods = [p["metadata"]["name"] for p in json.loads(scene.kubectl(
            "get", "pods", "-n", namespace, "-l", f"{RUN_LABEL}={scene.id}", "-o", "json"))["items"]]
        scene.finish(namespace, *pods)  # the waiting ones end as soon as they run
        recorder.wait(lambda t: t.finished >= 4, DRAIN_SECONDS)
        record = recorder.snapshot()

    done = eventually(lambda: scene.get("job", "resnet", namespace).get("status", {}).get("succeeded") == 4,
                      "the Job to count 4 succeeded pods")
    assert done
    assert len(record.pods) == 4
    for pod in record.pods.values():
        assert pod.gates == (keys.GATE,) and pod.queue == queue, pod.key
        assert record.kinds(pod.uid) == LIFECYCLE, pod.key
    assert violations(record, Limits(queues={queue: Cap(running=2)})) == []
    assert peaks(record).queues[queue].running == 2
    assert lost(record) == [] and released_twice(record) == []
    # The pods carry the user who applied the Job, not the Job controller's account.
    pods = json.loads(scene.kubectl("get", "pods", "-n", namespace, "-o", "json"))["items"]
    submitters = {json.loads(p["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION])["user"] for p in pods}
    assert submitters == {"kubernetes-admin"}
