"""Fault scenario 8, the soak: ``make soak`` (``pytest tests/e2e/soak.py``; the file name keeps
it out of ``make test``).

For ``SLUICEGATE_SOAK_SECONDS`` (600 by default) a steady stream of submissions flows over two
queues of one team under a global limit, pods completing as they go; every minute a queue's
limit is raised or lowered; once, early, the leading controller is SIGKILLed and the standby
takes over. At the end every pod must have finished, the auditor's verdict must hold against
the limits as they stood at each release, and the leading controller's resident memory is
reported 30 s after it took over and at the end (in docs/reliability.md). Memory is reported,
not asserted: timing and size figures live in the table, not in assertions.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from audit.checking import Cap, Limits
from audit.connection import Credentials
from audit.recording import recording
from audit.timelines import Timeline
from controlplane.deploying import LocalSluicegate
from tests.e2e.conftest import eventually
from tests.e2e.faults import DRAIN_SECONDS, Stream, judge, kill, leader, relists, rss_mib, scenario
from tests.e2e.scenes import Scene, now

SECONDS = float(os.environ.get("SLUICEGATE_SOAK_SECONDS", "600"))
CHANGE_EVERY = 60.0
KILL_AT = 60.0
SETTLE = 30.0  # after taking over, the new leader has listed everything and run its cycles


def test_a_ten_minute_stream_with_limit_changes_and_a_kill_finishes_every_pod_within_the_limits(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("soak", maxRunning=6)
    queues = (scene.queue("a", maxRunning=3), scene.queue("b", maxRunning=3))
    scene.policy(maxRunning=5)
    namespace = scene.namespace(team)
    chance = random.Random(time.time_ns())

    def limits(a: int) -> Limits:
        return Limits(cluster=Cap(running=5), teams={team: Cap(running=6)},
                      queues={queues[0]: Cap(running=a), queues[1]: Cap(running=3)})

    def pod(i: int) -> dict[str, Any]:
        return scene.pod(namespace, f"s{i:05d}", queues[i % 2], seconds=chance.choice((1, 2, 3)))

    before = relists(sluicegate)
    with scenario("soak: steady stream, limit changes, one controller kill", "make soak") as row, \
            recording(credentials, selector=scene.selector) as recorder, \
            Stream(credentials, pod, pause=0.6) as stream:
        timeline = Timeline(limits(3))
        started = time.monotonic()
        killed = False
        changes = 0
        while (elapsed := time.monotonic() - started) < SECONDS:
            if not killed and elapsed >= KILL_AT:
                first = eventually(lambda: leader(sluicegate), "one replica to lead")
                kill(sluicegate, first)
                row.add("kills")
                sluicegate.start(first)
                successor = eventually(lambda: leader(sluicegate), "a replica to lead after the kill")
                time.sleep(SETTLE)
                pid = sluicegate.pid(successor)
                row.counts["rss_start_mib"] = round(rss_mib(pid))
                killed = True
            if elapsed >= CHANGE_EVERY * (changes + 1):
                changes += 1
                a = 1 if changes % 2 else 4  # down, then up, and so on
                timeline = timeline.then(now(), limits(a))  # before: the controller may act first
                scene.patch("queues", queues[0], {"maxRunning": a})
            time.sleep(1.0)
        stream.stop()
        assert leader(sluicegate) == successor, "the leader changed again without a kill"
        row.counts["rss_end_mib"] = round(rss_mib(sluicegate.pid(successor)))
        recorder.wait(lambda t: t.finished >= len(stream.accepted), DRAIN_SECONDS)
        verdict = judge(recorder.snapshot(), timeline)
        row.verdict(verdict)
        row.add("expiries", relists(sluicegate) - before)

    verdict.check()
    assert stream.refused == []
    assert verdict.submitted == len(stream.accepted)
