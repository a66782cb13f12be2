"""Fault scenarios 6 and 7: an administrator changes limits and deletes things while pods flow.

Limits are judged as they stood at each release (``audit.timelines``): a lowered limit never
evicts (every pod running when it was lowered still runs to Succeeded) and a raised one
releases at once (before any running pod has finished). Deleting pending and running pods
frees what they held; deleting a Queue that still has pods leaves its pending pods waiting on
a missing queue, never released, never lost, until the Queue is back; deleting and recreating
a Team or the Policy changes the limits in force and nothing else.
"""

from __future__ import annotations

from audit.checking import Cap, Limits
from audit.connection import Credentials
from audit.recording import recording
from audit.records import Kind, Record
from audit.timelines import Timeline
from controlplane.deploying import LocalSluicegate
from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.faults import DRAIN_SECONDS, judge, scale, scenario
from tests.e2e.scenes import HELD_SECONDS, Scene, now


def running(record: Record, queue: str) -> int:
    done = {e.uid for e in record.events if e.kind in (Kind.SUCCEEDED, Kind.FAILED, Kind.DELETED)}
    return len({e.uid for e in record.events
                if e.kind is Kind.UNGATED and record.pods[e.uid].queue == queue and e.uid not in done})


def test_lowering_a_limit_under_flow_never_evicts_and_raising_it_releases_at_once(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", maxRunning=2)
    namespace = scene.namespace(team)
    count = scale(16, 40)

    def cap(n: int) -> Limits:
        return Limits(queues={queue: Cap(running=n)})

    with scenario("limits raised and lowered under flow") as row, \
            recording(credentials, selector=scene.selector) as recorder:
        timeline = Timeline(cap(2))
        # The first two run until the test ends them: only the raise can release more. The three
        # it releases are held too, so no slot frees while the lowering travels to the controller.
        long = scene.pods(namespace, queue, 2, prefix="long", seconds=HELD_SECONDS)
        held = [*long, *scene.pods(namespace, queue, 3, seconds=HELD_SECONDS)]
        scene.pods(namespace, queue, count - 5, start=3, seconds=4)
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        raised = now()
        scene.patch("queues", queue, {"maxRunning": 5})
        timeline = timeline.then(raised, cap(5))
        eventually(lambda: running(recorder.snapshot(), queue) >= 5, "5 pods running after the raise")
        snapshot = recorder.snapshot()
        ended = [snapshot.pods[e.uid].name for e in snapshot.events if e.kind is Kind.SUCCEEDED]
        assert not set(long) & set(ended), "the raise waited for a running pod to finish before releasing"

        lowered = now()
        scene.patch("queues", queue, {"maxRunning": 1})
        timeline = timeline.then(lowered, cap(1))
        # Once the controller shows the new limit (the Queue's status), the held pods end: the
        # slots they free must not be filled beyond it.
        eventually(lambda: scene.queue_status(queue).get("display", {}).get("running") == "5/1",
                   "the queue's status to show the lowered limit")
        scene.finish(namespace, *held)
        eventually(lambda: running(recorder.snapshot(), queue) <= 1, "the queue down to 1 running",
                   DRAIN_SECONDS)
        timeline = timeline.then(now(), cap(3))  # the instant before the change: the controller
        scene.patch("queues", queue, {"maxRunning": 3})  # may act on it before kubectl returns
        recorder.wait(lambda t: t.finished >= count, DRAIN_SECONDS)
        record = recorder.snapshot()
        verdict = judge(record, timeline)
        row.verdict(verdict)

    verdict.check()
    # Never evicted: every pod ran to Succeeded, none was deleted or failed.
    assert all(Kind.SUCCEEDED in record.kinds(uid) for uid in record.pods)
    assert not any(e.kind in (Kind.DELETED, Kind.FAILED) for e in record.events)


def test_deleting_pods_a_queue_with_pods_a_team_and_the_policy_under_flow_loses_nothing(
    scene: Scene, credentials: Credentials, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("vision", maxRunning=3)
    kept = scene.queue("kept", maxRunning=2)
    doomed = scene.queue("doomed", maxRunning=1)
    namespace = scene.namespace(team)
    scene.policy(maxRunning=3)
    per_queue = scale(8, 16)

    def limits(team_cap: int | None, global_cap: int | None) -> Limits:
        return Limits(cluster=Cap(running=global_cap), teams={team: Cap(running=team_cap)},
                      queues={kept: Cap(running=2), doomed: Cap(running=1)})

    with scenario("deletes under flow: pods, a queue, a team, the policy") as row, \
            recording(credentials, selector=scene.selector) as recorder:
        timeline = Timeline(limits(3, 3))
        kept_pods = scene.pods(namespace, kept, per_queue, prefix="k", seconds=3)
        # d00 takes the doomed queue's one slot and runs until the test ends it, so which of
        # its pods are pending when the queue goes is decided here, not by the machine's speed.
        doomed_pods = [*scene.pods(namespace, doomed, 1, prefix="d", seconds=HELD_SECONDS),
                       *scene.pods(namespace, doomed, 3, prefix="d", start=1, seconds=3)]
        record = eventually(lambda: _with_release(recorder.snapshot(), doomed_pods[0]),
                            f"{doomed_pods[0]} released", DRAIN_SECONDS)

        # Pending and running pods deleted by their owner.
        released = {record.pods[e.uid].name for e in record.events if e.kind is Kind.UNGATED}
        running_one = next(n for n in kept_pods if n in released)
        pending = [n for n in reversed(kept_pods) if n not in released][:2]
        scene.kubectl("delete", "pod", "-n", namespace, "--wait=false", running_one, *pending)
        deleted = [f"{namespace}/{n}" for n in (running_one, *pending)]

        # The doomed queue deleted with pods pending: they wait on a missing queue.
        scene.kubectl("delete", "queue", doomed)
        waiting = [n for n in doomed_pods if n not in released]
        for name in waiting:
            scene.wait_condition(namespace, name, lambda c: "does not exist" in c.get("message", ""),
                                 f'waiting on the missing queue "{doomed}"')
        held = doomed_releases(recorder.snapshot(), doomed)
        scene.finish(namespace, doomed_pods[0])  # its slot frees while the queue is missing

        # The Team and the Policy deleted and created again while the kept queue flows.
        # Each change is put on the timeline the instant before it is made: the controller may
        # act on it before kubectl returns.
        timeline = timeline.then(now(), limits(None, 3))
        scene.kubectl("delete", "team", team)
        timeline = timeline.then(now(), limits(None, None))
        scene.kubectl("delete", "policy", keys.POLICY_NAME)
        recorder.wait(lambda t: t.finished >= 4, DRAIN_SECONDS)
        timeline = timeline.then(now(), limits(3, None))
        scene.team("vision", maxRunning=3)
        timeline = timeline.then(now(), limits(3, 3))
        scene.policy(maxRunning=3)
        assert doomed_releases(recorder.snapshot(), doomed) == held, "released while its queue was missing"

        scene.queue("doomed", maxRunning=1)  # back: its pods flow again
        total = per_queue + 4
        recorder.wait(lambda t: t.finished >= total, DRAIN_SECONDS)
        verdict = judge(recorder.snapshot(), timeline, deleted=deleted)
        row.verdict(verdict)

    verdict.check()


def _with_release(record: Record, name: str) -> Record | None:
    """The record, once it shows ``name`` released."""
    released = {record.pods[e.uid].name for e in record.events if e.kind is Kind.UNGATED}
    return record if name in released else None


def doomed_releases(record: Record, queue: str) -> int:
    return sum(1 for e in record.events if e.kind is Kind.UNGATED and record.pods[e.uid].queue == queue)
