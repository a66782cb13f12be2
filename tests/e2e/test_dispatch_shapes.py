"""Pod groups and workflows on the real control plane, as users shape them by hand or through
a Job: a pod that names a running group joins it only up to the group's size and only through
every limit, and a workflow has one limit, the smallest any of its pods carries. Checked from
the auditor's record."""

from __future__ import annotations

from typing import Any

import pytest

from audit.checking import Cap, Limits, released_twice, violations
from audit.connection import Credentials
from audit.recording import recording
from audit.records import Kind, Record
from policy import keys
from tests.e2e.conftest import eventually
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
        assert said is not None and "group ex already has 2/2 pods live or joining" in said["message"], said
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


SWAPS = [
    # (where the 16-GPU cap is, the reason the swapped-in member waits with)
    ("queue", keys.Reason.QUEUE_QUOTA),
    ("team", keys.Reason.TEAM_QUOTA),
    ("cluster", keys.Reason.GLOBAL_QUOTA),
    ("paused", keys.Reason.QUEUE_PAUSED),
]


@pytest.mark.parametrize(("cap", "reason"), SWAPS, ids=[s[0] for s in SWAPS])
def test_a_member_swapped_into_a_running_group_waits_for_every_limit(
    scene: Scene, credentials: Credentials, cap: str, reason: keys.Reason
) -> None:
    """A released member of a running group is deleted and an 8-GPU member is created in its
    place with the same group label and size: it joins only when every limit has room for it
    beside the group's live pod and the other work (an 8-GPU pod that runs meanwhile)."""
    sixteen = {"quota": {GPU: "16"}}
    if cap == "cluster":
        scene.policy(**sixteen)
        # Nothing else holds GPUs as the controller sees it: the cap is this test's alone.
        eventually(lambda: scene.get("policy", keys.POLICY_NAME).get("status", {}).get("running") == 0,
                   "the Policy's status to show nothing running")
    team = scene.team("vision", **(sixteen if cap == "team" else {}))
    queue = scene.queue("train", **(sixteen if cap == "queue" else {}))
    namespace = scene.namespace(team)
    group: dict[str, Any] = {"labels": {keys.GROUP_LABEL: "gx"},
                             "annotations": {keys.GROUP_SIZE_ANNOTATION: "2"}}
    with recording(credentials, selector=scene.selector) as recorder:
        scene.pods(namespace, queue, 2, prefix="gx", gpus=1, seconds=600, **group)
        scene.pods(namespace, queue, 1, prefix="big", gpus=8, seconds=600)
        recorder.wait(lambda t: t.released >= 3, DRAIN_SECONDS)
        if cap == "paused":  # a pod submitted after the pause says so once the controller has seen it
            scene.patch("queues", queue, {"paused": True})
            scene.pods(namespace, queue, 1, prefix="probe", gpus=0)
            scene.wait_reason(namespace, ["probe00"], reason.value)
        scene.kubectl("delete", "pod", "-n", namespace, "gx01", "--wait=true")
        scene.pods(namespace, queue, 1, prefix="gx-big", gpus=8, seconds=1, **group)
        said = scene.wait_condition(namespace, "gx-big00", lambda c: c.get("reason") == reason.value,
                                    f"reason {reason.value}")
        assert said["status"] == "False", said
        if cap != "paused":
            assert said["message"].endswith("9/16 nvidia.com/gpu in use, needs 8"), said
        pod = scene.get("pod", "gx-big00", namespace)
        assert [g["name"] for g in pod["spec"].get("schedulingGates", [])] == [keys.GATE]
        # Once the other work ends (or the queue resumes), there is room: it joins its group.
        freed = now()
        if cap == "paused":
            scene.patch("queues", queue, {"paused": False})
        else:
            scene.finish(namespace, "big00")
        # Until the swapped-in member itself is released: counting releases would stop early
        # when the paused queue's probe (released on resume too) comes first.
        record = eventually(lambda: _released(recorder.snapshot(), namespace, "gx-big00"),
                            "gx-big00 to be released", DRAIN_SECONDS)

    joined = only(record, namespace, "gx-big00")
    assert first(record, joined, Kind.UNGATED).at > freed
    sixteen_gpus = Cap(gpus=16)
    caps = {"queue": Limits(queues={queue: sixteen_gpus}), "team": Limits(teams={team: sixteen_gpus}),
            "cluster": Limits(cluster=sixteen_gpus), "paused": Limits()}[cap]
    assert violations(record, caps) == []
    assert released_twice(record) == []


def test_a_member_admitted_after_its_namespace_changed_team_never_joins_the_old_teams_group(
    scene: Scene, credentials: Credentials
) -> None:
    """The namespace moves from team ``ta`` (2 GPUs) to ``tb`` (8) while a group of ``ta`` runs;
    members swapped in afterwards are admitted for ``tb``. The group counts toward ``ta``, so
    they wait, naming the disagreement, and run as a group of their own once ``ta``'s member
    has ended: ``ta`` never goes past its quota (it did, to 7/2, when the swap joined)."""
    old = scene.team("ta", quota={GPU: "2"})
    new = scene.team("tb", quota={GPU: "8"})
    queue = scene.queue("swap")
    namespace = scene.namespace(old)
    group: dict[str, Any] = {"labels": {keys.GROUP_LABEL: "gt"},
                             "annotations": {keys.GROUP_SIZE_ANNOTATION: "2"}}
    with recording(credentials, selector=scene.selector) as recorder:
        scene.pods(namespace, queue, 2, prefix="gt", gpus=1, seconds=600, **group)
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        scene.kubectl("label", "namespace", namespace, f"{keys.TEAM_LABEL}={new}", "--overwrite")
        scene.kubectl("delete", "pod", "-n", namespace, "gt01", "--wait=true")
        scene.pods(namespace, queue, 2, prefix="gt-new", gpus=3, seconds=1, **group)
        said = scene.wait_condition(
            namespace, "gt-new00", lambda c: c.get("reason") == keys.Reason.GROUP_INCOMPLETE.value,
            "the swapped-in member to wait on the disagreement")
        teams = ", ".join(sorted((old, new)))
        assert said["message"] == f"group gt: its pods name different teams: {teams}", said
        pod = scene.get("pod", "gt-new00", namespace)
        assert [g["name"] for g in pod["spec"].get("schedulingGates", [])] == [keys.GATE]
        ended = now()
        scene.finish(namespace, "gt00")
        record = eventually(lambda: _released(recorder.snapshot(), namespace, "gt-new01"),
                            "the new members to run as a group of their own", DRAIN_SECONDS)

    for name in ("gt-new00", "gt-new01"):
        assert first(record, only(record, namespace, name), Kind.UNGATED).at > ended
    caps = Limits(teams={old: Cap(gpus=2), new: Cap(gpus=8)})
    assert violations(record, caps) == []
    assert released_twice(record) == []


def _released(record: Record, namespace: str, name: str) -> Record | None:
    """The record, once it shows ``name`` released."""
    kinds = [kind for pod in record.find(namespace, name) for kind in record.kinds(pod.uid)]
    return record if Kind.UNGATED in kinds else None
