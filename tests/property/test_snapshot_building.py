"""The controller's snapshot building (``controller.snapshots``), which keeps unchanged workloads
between cycles, gives exactly the workloads ``policy.workloads.build_workloads`` gives over the
same pods, cycle after cycle: pod groups with joining and surplus pods, and one limit per
workflow whichever pod carries it."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.assumptions import Assumptions
from controller.managed import ManagedPod
from controller.snapshots import SnapshotBuilder
from policy.model import Workload
from policy.pods import Pod
from policy.workloads import build_workloads
from tests.builders import MakePod

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.fixed_dictionaries({
    "queue": st.sampled_from(["a", "b"]),
    "group": st.sampled_from(["", "", "g1", "g2"]),
    "size": st.integers(1, 3),
    "workflow": st.sampled_from(["", "w1", "w2"]),
    "limit": st.sampled_from([None, 1, 2, 3]),
    "life": st.sampled_from(["gated", "gated", "running", "finished"]),
    "created": st.integers(0, 5),
})


def pod(name: str, shape: dict[str, Any]) -> Pod:
    made = MakePod("ns", name).queue(shape["queue"]).team("t").created(shape["created"]).gpus(1)
    if shape["group"]:
        made.group(shape["group"], shape["size"])
    if shape["workflow"]:
        made.workflow(shape["workflow"], shape["limit"])
    {"gated": made.gated, "running": made.running, "finished": made.finished}[shape["life"]]()
    return made.model()


def by_key(workloads: list[Workload]) -> dict[str, Workload]:
    out = {w.key: w for w in workloads}
    assert len(out) == len(workloads), "workload keys are unique in a snapshot"
    return out


@SETTINGS
@given(st.lists(st.lists(st.tuples(st.integers(0, 9), shapes), max_size=10), min_size=1, max_size=4))
def test_kept_workloads_are_the_workloads_built_from_scratch_in_every_cycle(
    cycles: list[list[tuple[int, dict[str, Any]]]],
) -> None:
    builder = SnapshotBuilder(Assumptions())
    pods: dict[str, Pod] = {}
    for changes in cycles:
        for number, shape in changes:  # a new pod, or a changed one: a new object either way
            name = f"p{number}"
            pods[name] = pod(name, shape)
        kept = builder.workloads([ManagedPod(p) for p in pods.values()])
        assert by_key(kept) == by_key(build_workloads(pods.values()))
