"""Pod groups and workflows on the real control plane, as users shape them by hand or through
a Job: a pod that names a running group joins it only up to the group's size, and a workflow
has one limit, the smallest any of its pods carries. Checked from the auditor's record."""

from __future__ import annotations

from audit.checking import Cap, Limits, released_twice, violations
from audit.connection import Credentials
from audit.recording import recording
from audit.records import Kind
from policy import keys
from tests.e2e.scenes import HELD_SECONDS, Scene, first, now, only

DRAIN_SECONDS = 120.0
GPU = keys.GPU_RESOURCE


def test_pods_beyond_a_running_groups_size_wait_for_it_to_end_and_never_take_the_queue_past_its_quota(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", quota={GPU: "16"})
    namespace = scene.namespace(team)
    labels, annotations = {keys.GROUP_LABEL: "ex"}, {keys.GROUP_SIZE_ANNOTATION: "2"}
    with recording(credentials, selector=scene.selector) as recorder:
        # The first group runs until the test deletes it: the late members certainly wait for it.
        scene.pods(namespace, queue, 2, prefix="ex", seconds=HELD_SECONDS, labels=labels,
                   annotations=annotations)
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        scene.pods(namespace, queue, 2, prefix="ex", start=2, gpus=8, seconds=1, labels=labels,
                   annotations=annotations)
        scene.wait_reason(namespace, ["ex02", "ex03"], keys.Reason.WAITING_TURN.value)
        said = scene.condition(namespace, "ex02")
        assert said is not None and "group ex already has 2/2 pods released" in said["message"], said
        ending = now()
        scene.kubectl("delete", "pod", "-n", namespace, "ex00", "ex01", "--wait=false")
        recorder.wait(lambda t: t.finished >= 2 and t.released >= 4, DRAIN_SECONDS)
        record = recorder.snapshot()

    late = [only(record, namespace, f"ex{i:02d}") for i in (2, 3)]
    assert all(first(record, p, Kind.UNGATED).at > ending for p in late)  # then released whole
    assert violations(record, Limits(queues={queue: Cap(gpus=16)})) == []
    assert released_twice(record) == []


def test_a_workflow_has_the_smallest_limit_any_of_its_pods_carries_even_a_pending_one(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision")
    queue = scene.queue("sweeps")
    namespace = scene.namespace(team)
    sweep = {keys.WORKFLOW_LABEL: "bq"}
    with recording(credentials, selector=scene.selector) as recorder:
        scene.pods(namespace, queue, 2, prefix="wide", seconds=HELD_SECONDS, labels=sweep,  # deleted below
                   annotations={keys.WORKFLOW_MAX_RUNNING_ANNOTATION: "5"})
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        scene.pods(namespace, queue, 1, prefix="narrow", seconds=1, labels=sweep,
                   annotations={keys.WORKFLOW_MAX_RUNNING_ANNOTATION: "1"})
        scene.wait_reason(namespace, ["narrow00"], keys.Reason.WORKFLOW_LIMIT.value)
        scene.pods(namespace, queue, 2, prefix="plain", seconds=1, labels=sweep)  # no limit of their own
        scene.wait_reason(namespace, ["plain00", "plain01"], keys.Reason.WORKFLOW_LIMIT.value)
        said = scene.condition(namespace, "plain00")
        assert said is not None and said["message"].endswith("2/1 running"), said
        ending = now()
        scene.kubectl("delete", "pod", "-n", namespace, "wide00", "wide01", "--wait=false")
        recorder.wait(lambda t: t.finished >= 5, DRAIN_SECONDS)
        record = recorder.snapshot()

    # Once the wide trials were gone, the narrow trial ran first and alone: its limit of 1 held
    # the plain trials back until it ended (then no live pod carried a limit any more).
    narrow = only(record, namespace, "narrow00")
    assert first(record, narrow, Kind.UNGATED).at > ending
    done = first(record, narrow, Kind.SUCCEEDED).at
    plain = [only(record, namespace, f"plain{i:02d}") for i in range(2)]
    assert all(first(record, p, Kind.UNGATED).at > done for p in plain)
    assert released_twice(record) == []  # (the wide trials were deleted, as lost pods are)
