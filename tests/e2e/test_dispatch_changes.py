"""Changes to a Queue take effect live: pausing stops dispatch and keeps running work, lowering
a limit never evicts, raising it releases at once. Checked from the auditor's record; the
instants of each change are taken on the recorder's own clock."""

from __future__ import annotations

from audit.checking import lost, released_twice, running_at
from audit.connection import Credentials
from audit.recording import recording
from audit.records import Kind, Record
from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.scenes import Scene, first, now, releases

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
        scene.pods(namespace, queue, 4, seconds=3)
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        scene.patch("queues", queue, {"paused": True})
        scene.wait_reason(namespace, ["p02", "p03"], keys.Reason.QUEUE_PAUSED.value)
        paused = now()
        # The running pods finish while paused; the controller has seen their slots free up
        # (the Queue's status says nothing runs) and still releases nothing.
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
        scene.pods(namespace, queue, 6, seconds=3)
        recorder.wait(lambda t: t.released >= 3, DRAIN_SECONDS)
        scene.patch("queues", queue, {"maxRunning": 1})
        lowered = now()
        # The three running pods finish; then one at a time runs.
        recorder.wait(lambda t: t.released >= 4, DRAIN_SECONDS)
        scene.wait_reason(namespace, ["p05"], keys.Reason.QUEUE_LIMIT.value)
        raised = now()  # before the change: the controller may act before kubectl returns
        scene.patch("queues", queue, {"maxRunning": 4})
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
