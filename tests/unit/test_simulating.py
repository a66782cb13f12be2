"""The what-if simulator on small traces whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from records.trace import Record
from simulator.outcomes import compare, summarize
from simulator.setups import SetupError, parse_setup
from simulator.simulating import recorded, simulate
from tests.builders import T0, MakeNode, MakePolicy, MakeQueue, MakeTeam
from tests.traces import job, setup


def waits(run: object, prefix: str = "") -> dict[str, float | None]:
    from simulator.simulating import Run

    assert isinstance(run, Run)
    return {r.record.name: r.wait for r in run.replays if r.record.name.startswith(prefix)}


def test_raising_a_queues_max_running_cuts_its_waits_as_worked_out_by_hand() -> None:
    """Four 1-GPU jobs, each 100 s, all submitted at 0 to queue ``train``.

    With ``maxRunning: 1`` they run one after another: job k (0-based) is released at 100·k,
    so the waits are 0, 100, 200, 300 s: p50 (nearest rank, the 2nd of 4) 100 s, p95 (the 4th)
    300 s, mean 150 s; the last finishes at 400 s.
    With ``maxRunning: 2`` two run at a time: job k waits 100·⌊k/2⌋ = 0, 0, 100, 100 s: p50 0,
    p95 100 s, mean 50 s, makespan 200 s. So raising the limit moves p50 by −100 s, p95 and
    max by −200 s, the mean by −100 s and the makespan by −200 s.
    """
    trace = [job(f"j{k}", "train", at=0, runs=100) for k in range(4)]
    current = simulate(trace, setup(MakeQueue("train").max_running(1), name="current"))
    proposed = simulate(trace, setup(MakeQueue("train").max_running(2), name="proposed"))

    assert waits(current) == {"j0": 0, "j1": 100, "j2": 200, "j3": 300}
    assert waits(proposed) == {"j0": 0, "j1": 0, "j2": 100, "j3": 100}
    c = compare(summarize(proposed, capacity=4), summarize(current, capacity=4))
    train = c.queues["train"]
    assert (train.wait_p50, train.wait_p95, train.wait_max, train.wait_mean) == (-100, -200, -200, -100)
    assert (c.proposed.queues["train"].makespan, c.baseline.queues["train"].makespan) == (200, 400)
    assert train.makespan == -200
    # The same 400 GPU-seconds over half the window: utilisation of 4 GPUs doubles, 25 % -> 50 %.
    assert (c.baseline.cluster.utilisation, c.proposed.cluster.utilisation) == (0.25, 0.5)


def test_a_team_quota_lets_another_teams_work_through_as_worked_out_by_hand() -> None:
    """The cluster has 2 GPUs (Policy quota). Three queues of one priority take turns by name:
    ``qa1`` and ``qa2`` of team alpha, ``qb`` of team beta; each holds two 1-GPU jobs of 100 s,
    all submitted at 0 (waits stay under starvationSeconds, so no queue claims ahead).

    Today alpha's two queues take two turns in three: at 0 qa1 and qa2 run (a1-0, a2-0); at 100
    qb then qa1 (b0, a1-1); at 200 qa2 then qb (a2-1, b1). Beta waits 100 and 200 s.
    With a quota of 1 GPU for team alpha, alpha runs one job at a time and its other queue
    passes its turn: at 0 a1-0 and b0; at 100 a1-1 and b1; a2-0 at 200, a2-1 at 300. Beta's
    waits become 0 and 100 s (mean −100 s, p95 −100 s); alpha's go from 0, 0, 100, 200 to 0,
    100, 200, 300 (mean +75 s, max +100 s), and the last job ends at 400 instead of 300.
    """
    trace = [job(f"a{q}-{k}", f"qa{q}", team="alpha", at=0, runs=100) for q in (1, 2) for k in range(2)]
    trace += [job(f"b{k}", "qb", team="beta", at=0, runs=100) for k in range(2)]
    queues = (MakeQueue("qa1"), MakeQueue("qa2"), MakeQueue("qb"))
    cluster = MakePolicy().quota(gpus=2)
    current = simulate(trace, setup(*queues, policy=cluster, name="current"))
    proposed = simulate(
        trace, setup(*queues, teams=(MakeTeam("alpha").quota(gpus=1),), policy=cluster, name="proposed")
    )

    assert waits(current, "b") == {"b0": 100, "b1": 200}
    assert waits(current, "a") == {"a1-0": 0, "a2-0": 0, "a1-1": 100, "a2-1": 200}
    assert waits(proposed, "b") == {"b0": 0, "b1": 100}
    assert waits(proposed, "a") == {"a1-0": 0, "a1-1": 100, "a2-0": 200, "a2-1": 300}
    c = compare(summarize(proposed, capacity=None), summarize(current, capacity=None))
    beta, alpha = c.teams["beta"], c.teams["alpha"]
    assert (beta.wait_mean, beta.wait_p95, beta.wait_max) == (-100, -100, -100)
    assert (alpha.wait_mean, alpha.wait_max) == (75, 100)
    assert (c.baseline.cluster.makespan, c.proposed.cluster.makespan) == (300, 400)


def test_release_order_follows_priority_workflow_limit_round_robin_and_pod_priority() -> None:
    """Cluster ``maxRunning: 4``; queue ``hi`` (priority 10) and queues ``x`` and ``y``
    (priority 0, taking turns). Every job runs 10 s.

    At 0: h1 in hi; x1, x2 (sweep ``s``, workflowMaxRunning 1) and x3 in x; y1, y3 in y.
    At 1: h2 in hi, and y2 in y with pod priority 100.

    Cycle at 0: hi first: h1. Then x and y take turns, x first (no turn yet): x1; y1; x again:
    x2 waits for its sweep (x1 runs), so x3 goes ahead (BestEffortFIFO); 4 run: stop.
    At 1 the cluster is full: nothing can go, and no decision is needed.
    Cycle at 10 (h1, x1, y1, x3 finish): hi: h2. The last turn went to x, so y is next: y2
    (pod priority 100 goes before y3, submitted earlier); x: x2 (its sweep has room now);
    y: y3. Order: h1 x1 y1 x3 | h2 y2 x2 y3.
    """
    trace = [
        job("h1", "hi", at=0, runs=10),
        job("x1", "x", at=0, runs=10, workflow="s", limit=1),
        job("x2", "x", at=0, runs=10, workflow="s", limit=1),
        job("x3", "x", at=0, runs=10),
        job("y1", "y", at=0, runs=10),
        job("y3", "y", at=0, runs=10),
        job("h2", "hi", at=1, runs=10),
        job("y2", "y", at=1, runs=10, priority=100),
    ]
    run = simulate(
        trace,
        setup(
            MakeQueue("hi").priority(10), MakeQueue("x"), MakeQueue("y"), policy=MakePolicy().max_running(4)
        ),
    )

    assert [key.removeprefix("ml/") for key in run.order] == ["h1", "x1", "y1", "x3", "h2", "y2", "x2", "y3"]
    released = {r.record.name: (r.released or 0) - T0 for r in run.replays}
    assert released == {"h1": 0, "x1": 0, "y1": 0, "x3": 0, "h2": 10, "y2": 10, "x2": 10, "y3": 10}
    assert run.cycles == 2


@pytest.mark.parametrize(
    ("own", "fifo", "teams", "first"),
    [
        pytest.param(
            "its team's maxRunning is 0",
            MakeQueue("fifo").strict(),
            (MakeTeam("frozen").max_running(0),),
            [],
            id="a-team-at-its-count-limit",
        ),
        pytest.param(
            "its queue's quota is in use",
            MakeQueue("fifo").strict().quota(gpus=1),
            (),
            [job("r0", "fifo", at=0, runs=100)],
            id="a-queue-quota-in-use",
        ),
    ],
)
def test_a_strict_fifo_queue_goes_on_when_another_queue_fills_the_workflow_of_the_work_it_stopped_at(
    own: str, fifo: MakeQueue, teams: tuple[MakeTeam, ...], first: list[Record]
) -> None:
    """Queue ``fifo`` (StrictFIFO) is first in turn; its first workload ``f1``, of sweep ``s``
    (workflowMaxRunning 1), waits because {own}; ``n1`` (no GPU, no team) is behind it.
    Queue ``sweeps`` holds ``o1`` of the same sweep. At 1: ``fifo`` stops at ``f1``; ``sweeps``
    releases ``o1``, which fills the sweep; ``f1`` is now held by its own workflow's limit, so
    ``fifo`` goes on past it (record 0036) and ``n1`` goes, in the same cycle. The compact
    snapshot must not take ``fifo`` for idle because its own limits stop ``f1``."""
    trace = [
        *first,
        job("f1", "fifo", at=1, runs=10, team="frozen" if teams else "", workflow="s", limit=1),
        job("n1", "fifo", at=1, runs=10, gpus=0),
        job("o1", "sweeps", at=1, runs=10, workflow="s", limit=1),
    ]
    cluster = setup(fifo, MakeQueue("sweeps"), teams=teams)
    run = simulate(trace, cluster)

    released = {r.record.name: (r.released or 0) - T0 for r in run.replays if r.released is not None}
    assert {name: at for name, at in released.items() if at == 1} == {"o1": 1, "n1": 1}
    assert [key for key in run.order if key in ("ml/o1", "ml/n1")] == ["ml/o1", "ml/n1"]
    assert run.order == simulate(trace, cluster, exact=True).order


def test_a_workload_holds_its_slot_from_release_to_finish_and_the_trace_says_what_it_cannot_replay() -> (
    None
):
    """Recorded: released at 5, bound at 7, finished at 107: it held its slot 102 s (finished −
    released; dispatch counts it running from its release, placed or not).
    Replayed under an open queue it is released on arrival (0) and finishes at 102.
    A workload still running at the trace's end (released at 50, the last time the trace
    knows is 107) is replayed for 57 s; one that never ran has no duration and is left out."""
    from dataclasses import replace

    from records.trace import Phase

    ran = replace(job("ran", "q", at=0, runs=100), released=T0 + 5, bound=T0 + 7, finished=T0 + 107)
    running = replace(job("running", "q", at=50, runs=0), phase=Phase.RUNNING, finished=None)
    never = replace(
        job("never", "q", at=60, runs=0), phase=Phase.PENDING, released=None, bound=None, finished=None
    )
    run = simulate([ran, running, never], setup(MakeQueue("q")))

    by_name = {r.record.name: r for r in run.replays}
    assert (by_name["ran"].released, by_name["ran"].finished) == (T0, T0 + 102)
    assert (by_name["running"].duration, by_name["running"].finished) == (57, T0 + 107)
    assert [r.name for r in run.skipped] == ["never"]
    assert run.censored == 1
    as_recorded = recorded([ran, running, never])
    assert {r.record.name: r.wait for r in as_recorded.replays} == {"ran": 5, "running": 0}


def test_work_of_a_queue_the_setup_lacks_is_never_released_and_counted() -> None:
    run = simulate([job("a", "gone", at=0, runs=10), job("b", "q", at=0, runs=10)], setup(MakeQueue("q")))
    summary = summarize(run, capacity=None)
    assert summary.queues["gone"].unreleased == 1
    assert summary.queues["gone"].makespan is None
    assert summary.cluster.unreleased == 1
    assert run.order == ("ml/b",)


def test_a_setup_with_nodes_never_releases_work_no_node_could_hold_and_it_holds_nothing() -> None:
    """Nodes of 8 GPUs: the 16-GPU job (submitted first) is never released and blocks nothing,
    so the 8-GPU job behind it in a StrictFIFO queue goes at once.
    Without the Nodes the same trace lets the 16-GPU job go (nothing is known of the nodes)."""
    trace = [job("huge", "train", at=0, runs=100, gpus=16), job("next", "train", at=1, runs=100, gpus=8)]
    queue = MakeQueue("train").strict()
    nodes = [(f"node-{i}", MakeNode(f"node-{i}").gpus(8).obj()) for i in range(2)]
    with_nodes = parse_setup([("setup", queue.obj()), *nodes], "with nodes")
    run = simulate(trace, with_nodes)
    assert waits(run) == {"huge": None, "next": 0}
    assert run.no_node == ("ml/huge",)
    blind = simulate(trace, setup(queue))
    assert waits(blind) == {"huge": 0, "next": 0}
    assert blind.no_node == ()


def test_a_node_in_a_setup_that_does_not_parse_is_an_error_naming_it() -> None:
    broken = MakeNode("n1").allocatable("cpu", "lots").obj()
    with pytest.raises(SetupError, match="Node n1"):
        parse_setup([("nodes.yaml", MakeQueue("q").obj()), ("nodes.yaml", broken)], "broken")
