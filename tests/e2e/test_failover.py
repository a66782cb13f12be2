"""Two controller replicas on the real control plane: SIGKILL the leader while pods wait behind
a full queue, the standby takes the Lease over and releases them, no limit is exceeded at any
point of the record, and every pod finishes."""

from __future__ import annotations

from audit.checking import Cap, Limits, lost, peaks, released_twice, violations
from audit.connection import Credentials
from audit.recording import recording
from controlplane.deploying import LocalSluicegate
from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.faults import kill, leader
from tests.e2e.scenes import HELD_SECONDS, Scene, now, releases

DRAIN_SECONDS = 120.0


def test_the_standby_takes_over_when_the_leader_is_killed_and_releases_what_waits_within_the_limits(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("vision", maxRunning=4)
    queue = scene.queue("train", maxRunning=3)
    namespace = scene.namespace(team)
    first = eventually(lambda: leader(sluicegate), "one controller replica to lead")
    try:
        with recording(credentials, selector=scene.selector) as recorder:
            # The first 3 hold the queue's slots until the test ends them, after the kill: the
            # other 21 are certainly still waiting when the leader dies, whatever the machine's
            # speed, and only the new leader can release them.
            held = scene.pods(namespace, queue, 3, prefix="held", seconds=HELD_SECONDS)
            recorder.wait(lambda t: t.released >= 3, DRAIN_SECONDS)
            scene.pods(namespace, queue, 21, seconds=1)
            scene.wait_reason(namespace, ["p20"], keys.Reason.QUEUE_LIMIT.value)
            killed = now()
            kill(sluicegate, first)
            scene.finish(namespace, *held)
            recorder.wait(lambda t: t.finished >= 24, DRAIN_SECONDS)
            record = recorder.snapshot()
        second = eventually(lambda: leader(sluicegate), "a replica to lead after the kill")
    finally:
        sluicegate.start(first)  # back to two replicas for the tests that follow

    assert second != first
    assert len(releases(record)) == 24
    assert len(releases(record, killed)) == 21  # every waiting pod, by the new leader
    assert violations(record, Limits(queues={queue: Cap(running=3)}, teams={team: Cap(running=4)})) == []
    assert peaks(record).queues[queue].running == 3
    assert lost(record) == [] and released_twice(record) == []
