"""Fault scenario 1: the gate controller SIGKILLed again and again while pods flow.

Two replicas run (as the Deployment runs them). Each round submits a burst over two queues,
then kills whichever replica leads: on even rounds as soon as the round's first release is
seen (in the middle of a release burst), on odd rounds at a random moment. The killed replica
is started again at once and stands by. The auditor's record must show no limit exceeded at
any instant, every pod finished, none released twice, none lost.
"""

from __future__ import annotations

import random
import time

from audit.checking import Cap, Limits
from audit.connection import Credentials
from audit.recording import recording
from controlplane.deploying import LocalSluicegate
from tests.e2e.conftest import eventually
from tests.e2e.faults import DRAIN_SECONDS, REPLICAS, judge, kill, leader, relists, scale, scenario
from tests.e2e.scenes import Scene


def test_the_leading_controller_killed_ten_times_during_release_bursts_exceeds_no_limit_and_loses_no_pod(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    kills = scale(10, 30)
    per_queue = scale(6, 12)
    team = scene.team("vision", maxRunning=5)
    queues = (scene.queue("a", maxRunning=3), scene.queue("b", maxRunning=3))
    namespace = scene.namespace(team)
    limits = Limits(queues={q: Cap(running=3) for q in queues}, teams={team: Cap(running=5)})
    seed = time.time_ns()
    chance = random.Random(seed)
    relists_before = relists(sluicegate)
    with scenario("controller SIGKILL loop, two replicas") as row:
        try:
            with recording(credentials, selector=scene.selector) as recorder:
                for round in range(kills):
                    first = eventually(lambda: leader(sluicegate), f"one replica to lead (round {round})")
                    before = recorder.tally().released
                    for letter, queue in zip("ab", queues, strict=True):
                        scene.pods(namespace, queue, per_queue, prefix=f"r{round:02d}{letter}", seconds=1)
                    if round % 2 == 0:
                        recorder.wait(lambda t, seen=before: t.released > seen, DRAIN_SECONDS)
                    else:
                        time.sleep(chance.uniform(0.0, 3.0))
                    kill(sluicegate, first)
                    row.add("kills")
                    sluicegate.start(first)
                total = kills * per_queue * len(queues)
                recorder.wait(lambda t: t.finished >= total, DRAIN_SECONDS)
                record = recorder.snapshot()
        finally:
            for name in REPLICAS:  # back to two replicas for the tests that follow
                if any(name in problem for problem in sluicegate.dead()):
                    sluicegate.start(name)
            row.add("expiries", relists(sluicegate) - relists_before)
        verdict = judge(record, limits)
        row.verdict(verdict)

    verdict.check()
    assert verdict.submitted == total, f"seed {seed}"
