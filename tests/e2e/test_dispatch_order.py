"""The order of releases on the real control plane: queue priority, round-robin between equal
priorities, and pod groups released whole. Checked from the auditor's record."""

from __future__ import annotations

from audit.checking import Cap, Limits, alternation, lost, released_twice, violations
from audit.connection import Credentials
from audit.recording import recording
from audit.records import Kind
from policy import keys
from tests.e2e.scenes import HELD_SECONDS, Scene, first, now, only, releases

DRAIN_SECONDS = 120.0


def test_an_urgent_queue_goes_before_older_pods_of_a_lower_priority_and_nothing_is_evicted(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision", maxRunning=2)  # the shared capacity both queues compete for
    batch = scene.queue("batch", priority=0)
    urgent = scene.queue("urgent", priority=100)
    namespace = scene.namespace(team)
    with recording(credentials, selector=scene.selector) as recorder:
        # The first two hold the team's slots until the test ends them, so no slot frees before
        # the controller has shown (by each pod's condition) that it has seen every waiting pod:
        # the order then cannot depend on how fast its watch delivered each of them.
        scene.pods(namespace, batch, 2, prefix="batch", seconds=HELD_SECONDS)
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)  # the team is full now
        scene.pods(namespace, batch, 3, prefix="batch", start=2, seconds=1)
        scene.wait_reason(namespace, ["batch04"], keys.Reason.TEAM_LIMIT.value)
        scene.pods(namespace, urgent, 1, prefix="urgent", seconds=1)
        scene.wait_reason(namespace, ["urgent00"], keys.Reason.TEAM_LIMIT.value)
        opened = now()
        scene.finish(namespace, "batch00")  # one slot frees: it goes to the first in the order
        recorder.wait(lambda t: t.released >= 3, DRAIN_SECONDS)
        scene.finish(namespace, "batch01")
        recorder.wait(lambda t: t.finished >= 6, DRAIN_SECONDS)
        record = recorder.snapshot()

    retrain = only(record, namespace, "urgent00")
    after = releases(record, opened)
    # Older batch pods were waiting when it came; the next release was the urgent pod, and the
    # batch pods still waiting followed it.
    assert [p.key for _, p in after][:1] == [retrain.key], [p.key for _, p in after]
    assert sorted(p.name for _, p in after[1:]) == ["batch02", "batch03", "batch04"]
    assert violations(record, Limits(teams={team: Cap(running=2)})) == []
    # Every running pod ran to the end: priority orders dispatch, it never evicts.
    for pod in record.pods.values():
        kinds = record.kinds(pod.uid)
        assert kinds[-1] is Kind.SUCCEEDED and Kind.DELETED not in kinds and Kind.FAILED not in kinds, pod.key
    assert lost(record) == [] and released_twice(record) == []


def test_two_saturated_queues_of_equal_priority_take_turns(scene: Scene, credentials: Credentials) -> None:
    team = scene.team("vision", maxRunning=0)  # nothing runs until both queues have a backlog
    left, right = scene.queue("left", priority=5), scene.queue("right", priority=5)
    namespace = scene.namespace(team)
    with recording(credentials, selector=scene.selector) as recorder:
        scene.create(*(scene.pod(namespace, f"{side}{i:02d}", queue, seconds=1)
                       for i in range(6) for side, queue in (("l", left), ("r", right))))
        scene.wait_reason(namespace, ["l05", "r05"], keys.Reason.TEAM_LIMIT.value)
        scene.patch("teams", team, {"maxRunning": 2})
        recorder.wait(lambda t: t.finished >= 12, DRAIN_SECONDS)
        record = recorder.snapshot()

    turns = alternation(record, [left, right])
    assert turns.max_difference <= 1, turns
    assert sum(turns.releases.values()) >= 10  # both queues stayed saturated for most releases
    assert violations(record, Limits(teams={team: Cap(running=2)})) == []
    assert lost(record) == [] and released_twice(record) == []


def test_a_pod_group_of_4_is_released_only_once_all_4_exist_and_all_in_the_same_cycle(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train")
    namespace = scene.namespace(team)
    group = {"labels": {keys.GROUP_LABEL: "allreduce"}, "annotations": {keys.GROUP_SIZE_ANNOTATION: "4"}}
    with recording(credentials, selector=scene.selector) as recorder:
        scene.pods(namespace, queue, 3, prefix="worker", seconds=2, **group)
        scene.wait_reason(namespace, ["worker00", "worker01", "worker02"], keys.Reason.GROUP_INCOMPLETE.value)
        scene.pods(namespace, queue, 1, prefix="worker", start=3, seconds=2, **group)
        recorder.wait(lambda t: t.finished >= 4, DRAIN_SECONDS)
        record = recorder.snapshot()

    last = first(record, only(record, namespace, "worker03"), Kind.CREATED).at
    workers = [only(record, namespace, f"worker{i:02d}") for i in range(4)]
    assert all(first(record, w, Kind.UNGATED).at > last for w in workers)
    # One cycle released them: the controller stamps each release with its cycle's time.
    notes = [scene.get("pod", f"worker{i:02d}", namespace)["metadata"]["annotations"] for i in range(4)]
    stamps = {n[keys.DISPATCHED_AT_ANNOTATION] for n in notes}
    assert len(stamps) == 1, stamps
    assert lost(record) == [] and released_twice(record) == []
