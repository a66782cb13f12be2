"""Reading pods into the record: which transitions lie between two observations, and what a pod is."""

from __future__ import annotations

import json

import pytest

from audit.naming import KUEUE, SLUICEGATE
from audit.records import Kind, PodState, Record, merge_teams, observe, pod_info, requested, transitions
from tests.audit_stories import Story
from tests.builders import MakePod

GATE = "sluicegate.dev/dispatch"
ADMISSION, TOPOLOGY = KUEUE.gates


def state(*gates: str, node: str = "", phase: str = "Pending", deleted: bool = False) -> PodState:
    return PodState(frozenset(gates), node, phase, deleted)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (None, state(GATE), [(Kind.CREATED, GATE)]),
        (None, state(), [(Kind.CREATED, ""), (Kind.UNGATED, "")]),
        (state(GATE), state(), [(Kind.UNGATED, GATE)]),
        (state(ADMISSION, TOPOLOGY), state(TOPOLOGY), []),
        (state(TOPOLOGY), state(), [(Kind.UNGATED, TOPOLOGY)]),
        (state(), state(GATE), [(Kind.GATED, GATE)]),
        (state(), state(node="n1"), [(Kind.BOUND, "n1")]),
        (state(), state(node="n1", phase="Running"), [(Kind.BOUND, "n1"), (Kind.RUNNING, "")]),
        (state(node="n1", phase="Running"), state(node="n1", phase="Succeeded"), [(Kind.SUCCEEDED, "")]),
        (state(node="n1", phase="Running"), state(node="n1", phase="Failed"), [(Kind.FAILED, "")]),
        (state(GATE), state(GATE, deleted=True), [(Kind.DELETED, "")]),
        (None, state(node="n1", phase="Succeeded"),
         [(Kind.CREATED, ""), (Kind.UNGATED, ""), (Kind.BOUND, "n1"), (Kind.SUCCEEDED, "")]),
        (state(node="n1", phase="Running"), state(node="n1", phase="Running"), []),
    ],
    ids=[
        "first-seen-gated", "first-seen-without-gates-is-released-at-creation", "gate-removed",
        "one-of-two-kueue-gates-removed-is-not-yet-a-release", "the-last-gate-removed",
        "gates-back-after-release", "bound", "bound-and-running-in-one-update", "succeeded", "failed",
        "deleted-while-gated", "first-seen-finished-was-never-seen-running", "nothing-changed",
    ],
)
def test_transitions_between_two_observations(
    before: PodState | None, after: PodState, expected: list[tuple[Kind, str]]
) -> None:
    assert transitions(before, after) == expected


def test_only_the_watched_gates_count() -> None:
    pod = MakePod("ns", "p").gated().obj()
    pod["spec"]["schedulingGates"].append({"name": "example.com/other"})
    assert observe(pod, SLUICEGATE).gates == {GATE}
    assert observe(pod, KUEUE).gates == frozenset()


def test_a_pod_is_read_with_the_systems_own_keys() -> None:
    pod = MakePod("ml", "p").queue("train").team("vision").workflow("sweep", 3).group("g", 2).gpus(2)
    pod = pod.gated()
    info = pod_info(pod.obj(), SLUICEGATE)
    assert (info.key, info.queue, info.team, info.workflow_key, info.workload, info.gpus, info.gates) == (
        "ml/p", "train", "vision", "ml/sweep", "ml/group:g", 2, (GATE,),
    )
    kueue = MakePod("ml", "k").label("kueue.x-k8s.io/queue-name", "lq").gpus(1).obj()
    kueue["spec"]["schedulingGates"] = [{"name": ADMISSION}, {"name": TOPOLOGY}]
    info = pod_info(kueue, KUEUE)
    assert (info.queue, info.team, info.workflow, info.gates) == ("lq", "", "", (ADMISSION, TOPOLOGY))


@pytest.mark.parametrize(
    ("spec", "gpus"),
    [
        ({"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}, 2),
        ({"containers": [{"resources": {"requests": {"nvidia.com/gpu": 1}}},
                         {"resources": {"requests": {"nvidia.com/gpu": "3"}}}]}, 4),
        ({"containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}],
          "initContainers": [{"resources": {"requests": {"nvidia.com/gpu": "4"}}}]}, 4),
        ({"containers": [{"resources": {"requests": {"cpu": "2"}}}]}, 0),
        ({"containers": [{}], "overhead": {"nvidia.com/gpu": "1"}}, 1),
        ({"containers": [{"resources": {"requests": {"nvidia.com/gpu": "many"}}}]}, 0),
    ],
    ids=["limits-only", "containers-add-up", "an-init-container-needs-its-own", "no-gpu", "overhead",
         "unreadable-counts-nothing"],
)
def test_gpus_a_pod_asks_for(spec: dict[str, object], gpus: int) -> None:
    assert requested(spec, "nvidia.com/gpu") == gpus


def test_pods_without_a_team_label_take_their_namespaces() -> None:
    pods = [pod_info(MakePod("ns-a", "p").obj(), SLUICEGATE),
            pod_info(MakePod("ns-b", "q").team("own").obj(), SLUICEGATE)]
    merged = merge_teams(pods, {"ns-a": "vision", "ns-b": "nlp"})
    assert sorted(p.team for p in merged.values()) == ["own", "vision"]


def test_a_record_survives_json_and_selects_pods() -> None:
    story = Story().pod("p1", namespace="x").pod("p2", namespace="y")
    story.lifecycle("p1", 1, 2, namespace="x").lifecycle("p2", 1, 3, namespace="y")
    record = story.record()
    again = Record.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record
    only_x = record.select(lambda p: p.namespace == "x")
    assert [p.key for p in only_x.pods.values()] == ["x/p1"]
    assert only_x.kinds("uid-x-p1") == [Kind.CREATED, Kind.UNGATED, Kind.BOUND, Kind.RUNNING, Kind.SUCCEEDED]
    assert {e.uid for e in only_x.events} == {"uid-x-p1"}
