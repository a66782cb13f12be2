"""Changes to a Queue take effect live: pausing stops dispatch and keeps running work, lowering
a limit never evicts, raising it releases at once. Checked from the auditor's record; the
instants of each change are taken on the recorder's own clock."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from audit.checking import lost, released_twice, running_at
from audit.connection import Credentials
from audit.recording import recording
from audit.records import Kind, Record
from controlplane.deploying import LocalSluicegate
from policy import keys
from policy.limits import NEVER
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene, first, now, only, releases

DRAIN_SECONDS = 120.0


def _never_evicted(record: Record) -> None:
    for pod in record.pods.values():
        kinds = record.kinds(pod.uid)
        assert kinds[-1] is Kind.SUCCEEDED and Kind.DELETED not in kinds, pod.key


def test_a_paused_queue_dispatches_nothing_until_unpaused_and_its_running_work_goes_on(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", maxRunning=2)
    namespace = scene.namespace(team)
    with recording(credentials, selector=scene.selector) as recorder:
        # p00 and p01 run until the test ends them: no slot frees before the pause is seen.
        scene.pods(namespace, queue, 2, seconds=HELD_SECONDS)
        scene.pods(namespace, queue, 2, start=2, seconds=3)
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        scene.patch("queues", queue, {"paused": True})
        scene.wait_reason(namespace, ["p02", "p03"], keys.Reason.QUEUE_PAUSED.value)
        paused = now()
        # The running pods finish while paused; the controller has seen their slots free up
        # (the Queue's status says nothing runs) and still releases nothing.
        scene.finish(namespace, "p00", "p01")
        recorder.wait(lambda t: t.finished >= 2, DRAIN_SECONDS)
        eventually(lambda: scene.queue_status(queue).get("running") == 0 and
                   scene.queue_status(queue).get("pending") == 2, "the queue's status: 0 running, 2 pending")
        unpaused = now()
        scene.patch("queues", queue, {"paused": False})
        recorder.wait(lambda t: t.finished >= 4, DRAIN_SECONDS)
        record = recorder.snapshot()

    released = releases(record)
    assert [p.name for at, p in released if paused < at < unpaused] == []
    assert sorted(p.name for at, p in released if at > unpaused) == ["p02", "p03"]
    _never_evicted(record)
    assert lost(record) == [] and released_twice(record) == []


def test_lowering_a_limit_never_evicts_and_raising_it_releases_at_once(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", maxRunning=3)
    namespace = scene.namespace(team)
    with recording(credentials, selector=scene.selector) as recorder:
        scene.pods(namespace, queue, 6, seconds=HELD_SECONDS)  # each runs until the test ends it
        recorder.wait(lambda t: t.released >= 3, DRAIN_SECONDS)
        lowered = now()
        scene.patch("queues", queue, {"maxRunning": 1})
        eventually(lambda: scene.queue_status(queue).get("display", {}).get("running") == "3/1",
                   "the queue's status: 3/1 running (the controller has the lowered limit)")
        # The three running pods finish; then one at a time runs.
        scene.finish(namespace, "p00", "p01", "p02")
        recorder.wait(lambda t: t.released >= 4, DRAIN_SECONDS)
        scene.wait_reason(namespace, ["p05"], keys.Reason.QUEUE_LIMIT.value)
        raised = now()  # before the change: the controller may act before kubectl returns
        scene.patch("queues", queue, {"maxRunning": 4})
        recorder.wait(lambda t: t.released >= 6, DRAIN_SECONDS)
        scene.finish(namespace, "p03", "p04", "p05")
        recorder.wait(lambda t: t.finished >= 6, DRAIN_SECONDS)
        record = recorder.snapshot()

    # Lowered to 1 with 3 running: all 3 ran to the end, and no release came while any ran.
    running_then = running_at(record, lowered)
    assert len(running_then) == 3
    for at, pod in releases(record, lowered):
        if at < raised:
            assert running_at(record, at) == {pod.uid}, f"{pod.key} was released while others ran"
    # Raised to 4 with one running: both waiting pods went without waiting for it to finish.
    after = [p for at, p in releases(record, raised)]
    assert len(after) == 2
    for pod in after:
        assert len(running_at(record, first(record, pod, Kind.UNGATED).at)) >= 2
    assert max(len(running_at(record, first(record, p, Kind.UNGATED).at)) for p in after) == 3
    _never_evicted(record)
    assert lost(record) == [] and released_twice(record) == []


def _impossible(sluicegate: LocalSluicegate, queue: str) -> float:
    """``sluicegate_impossible_workloads`` of ``queue`` as the leading controller exports it
    (a standby exports no per-queue series)."""
    found = 0.0
    for service in sluicegate.services:
        if service.module != "controller":
            continue
        port = sluicegate.port(service.name, "metrics")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "sluicegate_impossible_workloads" and sample.labels.get("queue") == queue:
                    found = max(found, sample.value)
    return found


def test_a_quota_lowered_below_a_pending_pod_says_it_can_never_run_and_raising_it_releases_it(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    """The reason stays ``QueueQuota`` throughout (full, then exceeded by the pod alone, then
    full again): the condition must still follow, and never lie that the pod can never run."""
    gpu = keys.GPU_RESOURCE
    team = scene.team("vision")
    queue = scene.queue("train", quota={gpu: "2"})
    namespace = scene.namespace(team)
    with recording(credentials, selector=scene.selector) as recorder:
        scene.pods(namespace, queue, 1, prefix="running", gpus=2, seconds=HELD_SECONDS)  # until the test ends
        recorder.wait(lambda t: t.released >= 1, DRAIN_SECONDS)
        scene.pods(namespace, queue, 1, prefix="waiting", gpus=2, seconds=1)
        full = f"queue {queue}: 2/2 {gpu} in use, needs 2"
        scene.wait_condition(namespace, "waiting00", lambda c: c["message"] == full, full)

        scene.patch("queues", queue, {"quota": {gpu: "1"}})
        never = f"{NEVER}needs 2 {gpu}; queue {queue} quota is 1"
        held = scene.wait_condition(namespace, "waiting00", lambda c: c["message"] == never, never)
        assert (held["status"], held["reason"]) == ("False", keys.Reason.QUEUE_QUOTA.value)
        described = scene.kubectl("describe", "pod", "waiting00", "-n", namespace)
        assert never in described, described
        eventually(lambda: _impossible(sluicegate, queue) == 1, f"{queue}'s impossible workloads: 1")

        scene.patch("queues", queue, {"quota": {gpu: "2"}})  # possible again, but full
        scene.wait_condition(namespace, "waiting00", lambda c: c["message"] == full, full)
        eventually(lambda: _impossible(sluicegate, queue) == 0, f"{queue}'s impossible workloads: 0")

        raised = now()  # before the change: the controller may act before kubectl returns
        scene.patch("queues", queue, {"quota": {gpu: "4"}})
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        record = recorder.snapshot()

    waiting, running = only(record, namespace, "waiting00"), only(record, namespace, "running00")
    released_at = first(record, waiting, Kind.UNGATED).at
    assert released_at > raised
    assert running.uid in running_at(record, released_at)  # released at once, beside the running pod
    assert Kind.DELETED not in record.kinds(running.uid)
    assert released_twice(record) == []
