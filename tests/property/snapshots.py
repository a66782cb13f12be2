"""Hypothesis strategies for dispatch snapshots: a few queues, teams and workflows, many workloads.

Names are drawn from small pools so that workloads collide on queues, teams and workflows and
limits bind often. Workloads are built directly (not from pod dicts) to keep examples fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

from hypothesis import strategies as st

from policy import keys
from policy.inventory import Inventory
from policy.model import Ordering, Policy, Queue, Snapshot, State, Team, Workload
from policy.placing import Node
from policy.pods import Pod
from policy.quantities import EMPTY

QUEUES = ("q0", "q1", "q2", "q3")
TEAMS = ("t0", "t1", "t2")  # t2 never has a Team object: no team limit
WORKFLOWS = ("ml/w0", "ml/w1")
GPU = keys.GPU_RESOURCE
NOW = 10_000.0
STARVATION = 600

limits = st.one_of(st.none(), st.none(), st.integers(0, 5))
quotas = st.one_of(
    st.just(MappingProxyType({})),
    st.builds(lambda g: MappingProxyType({GPU: g * 1000}), st.integers(0, 12)),
    st.builds(
        lambda g, c: MappingProxyType({GPU: g * 1000, "cpu": c * 500}), st.integers(0, 12), st.integers(0, 16)
    ),
)


@st.composite
def queues(draw: st.DrawFn) -> dict[str, Queue]:
    names = QUEUES[: draw(st.sampled_from([2, 3, 4, 4, 4]))]
    out = {}
    for name in names:
        out[name] = Queue(
            name=name,
            priority=draw(st.integers(0, 2)),
            max_running=draw(limits),
            quota=draw(quotas),
            ordering=draw(st.sampled_from(list(Ordering))),
            paused=draw(st.integers(0, 5)) == 0,
        )
    return out


@st.composite
def teams(draw: st.DrawFn) -> dict[str, Team]:
    out = {}
    for name in ("t0", "t1"):
        if draw(st.booleans()):
            out[name] = Team(name=name, max_running=draw(limits), quota=draw(quotas))
    return out


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    return Policy(
        max_running=draw(st.one_of(st.none(), st.none(), st.integers(0, 10))),
        quota=draw(quotas),
        starvation_seconds=draw(st.sampled_from([STARVATION, 5, 10**6])),
    )


def make_workload(
    i: int,
    queue: str,
    team: str,
    state: State,
    gpus: int,
    cpu: int,
    priority: int,
    age: int,
    workflow: str,
    workflow_max: int | None,
    group: int,
    present: int,
) -> Workload:
    """Workload ``i``; ``group`` > 0 makes it a pod group of that size with ``present`` pods."""
    labels = {keys.GROUP_LABEL: f"g{i}"} if group else {}
    requests = {}
    if gpus:
        requests[GPU] = gpus * 1000
    if cpu:
        requests["cpu"] = cpu * 500
    asks = MappingProxyType(requests)
    pods = tuple(  # a stand-in group's requests all on its first pod, as a node sees them
        Pod("ml", f"w{i}-{j}", labels=MappingProxyType(labels), gated=state is State.PENDING,
            requests=asks if j == 0 else EMPTY)
        for j in range(max(present if group else 1, 1))
    )  # fmt: skip
    return Workload(
        key=f"ml/group:g{i}" if group else f"ml/w{i}",
        namespace="ml",
        queue=queue,
        team=team,
        pods=pods,
        state=state,
        requests=asks,
        priority=priority,
        created=NOW - age,
        workflow=workflow,
        workflow_max_running=workflow_max if workflow else None,
        group_size=group if group else 1,
    )


def make_node(i: int, gpus: int) -> Node:
    """Node ``i`` with ``gpus`` GPUs and CPU to spare for any workload drawn here."""
    return Node(f"node-{i}", allocatable=MappingProxyType({GPU: gpus * 1000, "cpu": 64_000}))


def make_inventory(gpus: Sequence[int]) -> Inventory:
    return Inventory(make_node(i, g) for i, g in enumerate(gpus))


node_gpus = st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=3)
"""The GPUs of each node of a cluster: ordinary work (up to 4 GPUs) fits some of them or none,
work too big for any quota (11 or 16) fits none until a bigger node comes."""

WORKFLOW_MAX = {"ml/w0": 1, "ml/w1": 2}  # one limit per workflow, as one sweep's pods share it


@st.composite
def workload_lists(draw: st.DrawFn, max_size: int = 24) -> list[Workload]:
    count = draw(st.integers(0, max_size))
    out = []
    for i in range(count):
        group = draw(st.sampled_from([0, 0, 0, 0, 0, 0, 2, 3]))
        workflow = draw(st.sampled_from(["", "", "", "", "", *WORKFLOWS]))
        out.append(
            make_workload(
                i,
                queue=draw(st.sampled_from([*QUEUES, *QUEUES, "missing"])),
                team=draw(st.sampled_from([*TEAMS, ""])),
                state=draw(st.sampled_from([State.PENDING, State.PENDING, State.RUNNING, State.FINISHED])),
                gpus=draw(st.integers(0, 4)),
                cpu=draw(st.integers(0, 3)),
                priority=draw(st.sampled_from([0, 0, 100])),
                age=draw(st.integers(0, 2000)),
                workflow=workflow,
                workflow_max=WORKFLOW_MAX.get(workflow),
                group=group,
                present=draw(st.integers(1, group)) if group else 1,
            )
        )
    return out


@st.composite
def snapshots(draw: st.DrawFn, max_workloads: int = 24) -> Snapshot:
    return Snapshot(
        queues=draw(queues()),
        teams=draw(teams()),
        policy=draw(policies()),
        workloads=draw(workload_lists(max_workloads)),
        now=NOW,
    )


def applied(snap: Snapshot, released: Sequence[Workload]) -> Snapshot:
    """``snap`` after the controller removed the gates of ``released``: they are running."""
    keys_ = {w.key for w in released}
    workloads = [replace(w, state=State.RUNNING) if w.key in keys_ else w for w in snap.workloads]
    return replace(snap, workloads=workloads)


@st.composite
def contended_snapshots(draw: st.DrawFn) -> Snapshot:
    """Open queues of two priorities fighting over team and cluster GPU quota, near full."""
    queues = {
        name: Queue(name, priority=i % 2, ordering=draw(st.sampled_from(list(Ordering))))
        for i, name in enumerate(QUEUES)
    }
    gpu_caps = st.builds(lambda g: MappingProxyType({GPU: g * 1000}), st.integers(4, 20))
    teams = {name: Team(name, quota=draw(gpu_caps)) for name in ("t0", "t1") if draw(st.booleans())}
    policy = Policy(quota=draw(gpu_caps), starvation_seconds=draw(st.sampled_from([STARVATION, 10**6])))
    count = draw(st.integers(3, 16))
    workloads = [
        make_workload(
            i,
            queue=draw(st.sampled_from(QUEUES)),
            team=draw(st.sampled_from(TEAMS[:2])),
            state=draw(st.sampled_from([State.PENDING, State.PENDING, State.RUNNING])),
            gpus=draw(st.sampled_from([1, 1, 2, 3, 4, 6])),
            cpu=0,
            priority=0,
            age=draw(st.integers(0, 1000)),
            workflow="",
            workflow_max=None,
            group=0,
            present=1,
        )
        for i in range(count)
    ]
    return Snapshot(queues, teams, policy, workloads, NOW)


def any_snapshots() -> st.SearchStrategy[Snapshot]:
    return st.one_of(snapshots(), contended_snapshots())
