"""Two controller replicas on the real control plane: SIGKILL the leader in the middle of a
burst, the standby takes the Lease over, no limit is exceeded at any point of the record, and
every pod finishes."""

from __future__ import annotations

from audit.checking import Cap, Limits, lost, peaks, released_twice, violations
from audit.connection import Credentials
from audit.recording import recording
from controlplane.deploying import LocalSluicegate
from tests.e2e.conftest import eventually
from tests.e2e.faults import kill, leader
from tests.e2e.scenes import Scene, now, releases

DRAIN_SECONDS = 120.0


def test_the_standby_takes_over_when_the_leader_is_killed_mid_burst_and_no_limit_is_exceeded(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("vision", maxRunning=4)
    queue = scene.queue("train", maxRunning=3)
    namespace = scene.namespace(team)
    first = eventually(lambda: leader(sluicegate), "one controller replica to lead")
    try:
        with recording(credentials, selector=scene.selector) as recorder:
            # 3 s pods, 3 at a time: the burst lasts 24 s, longer than creating it takes on a
            # loaded machine, so the kill falls in its middle whatever the machine's speed.
            scene.pods(namespace, queue, 24, seconds=3)
            recorder.wait(lambda t: t.released >= 3, DRAIN_SECONDS)
            killed = now()
            kill(sluicegate, first)
            recorder.wait(lambda t: t.finished >= 24, DRAIN_SECONDS)
            record = recorder.snapshot()
        second = eventually(lambda: leader(sluicegate), "a replica to lead after the kill")
    finally:
        sluicegate.start(first)  # back to two replicas for the tests that follow

    assert second != first
    assert len(releases(record)) == 24
    after = len(releases(record, killed))  # released by the new leader
    assert after >= 6, f"the kill fell near the end of the burst ({24 - after} of 24 released before it)"
    assert violations(record, Limits(queues={queue: Cap(running=3)}, teams={team: Cap(running=4)})) == []
    assert peaks(record).queues[queue].running == 3
    assert lost(record) == [] and released_twice(record) == []
