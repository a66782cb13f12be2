"""A StrictFIFO queue with sweeps in it: work that its own workflow's limit holds never stops the
queue, FIFO order holds among the rest, and the decision is one the next would not change."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.dispatching import Turns, dispatch
from policy.model import Ordering, Policy, Queue, Snapshot, State
from policy.ordering import in_queue_order
from tests.property.oracle import eligible, usage_after
from tests.property.snapshots import NOW, QUEUES, TEAMS, applied, make_workload
from tests.property.test_dispatch_properties import reasons_are_true

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SWEEPS = {"ml/s0": 1, "ml/s1": 2, "ml/s2": 3}


@st.composite
def sweeps_in_a_strict_queue(draw: st.DrawFn) -> Snapshot:
    """Queue q0 is StrictFIFO, with sweeps (some of their trials running) and other work mixed
    in submission order; other queues may hold trials of the same sweeps and other work."""
    strict = QUEUES[0]
    queues = {
        name: Queue(
            name,
            priority=draw(st.integers(0, 1)),
            ordering=Ordering.STRICT_FIFO if name == strict else Ordering.BEST_EFFORT_FIFO,
            quota=draw(st.sampled_from([{}, {"nvidia.com/gpu": 3000}, {"nvidia.com/gpu": 6000}])),
        )
        for name in QUEUES[:2]
    }
    workloads = []
    for i in range(draw(st.integers(1, 12))):
        workflow = draw(st.sampled_from(["", "", *SWEEPS]))
        workloads.append(make_workload(
            i, draw(st.sampled_from([strict, strict, QUEUES[1]])), draw(st.sampled_from(TEAMS)),
            draw(st.sampled_from([State.PENDING, State.PENDING, State.RUNNING])), draw(st.integers(0, 3)),
            0, 0, draw(st.integers(0, 20)), workflow, SWEEPS.get(workflow), 0, 1,
        ))  # fmt: skip
    max_running = draw(st.one_of(st.none(), st.integers(1, 8)))
    return Snapshot(queues, {}, Policy(max_running=max_running, starvation_seconds=600), workloads, NOW)


@SETTINGS
@given(sweeps_in_a_strict_queue())
def test_a_strict_fifo_queue_never_stops_at_work_its_own_workflow_holds(snap: Snapshot) -> None:
    decision = dispatch(snap, Turns())
    reasons_are_true(snap, decision)  # what waits behind a StrictFIFO head waits behind eligible work
    after = usage_after(snap, decision.release)
    strict = QUEUES[0]
    order = in_queue_order(w for w in snap.workloads if w.state is State.PENDING and w.queue == strict)
    released = [i for i, w in enumerate(order) if w in decision.release]
    stays = [i for i, w in enumerate(order) if w not in decision.release and eligible(w, snap, after)]
    assert not released or not stays or max(released) < min(stays)
    assert dispatch(applied(snap, decision.release), decision.turns).release == ()
