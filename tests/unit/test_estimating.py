"""Expected start times (simulator.estimating) on small clusters whose answers are worked out by hand."""

from __future__ import annotations

from policy.dispatching import Turns
from records.durations import Durations
from simulator.estimating import BEYOND, NEVER, NO_QUEUE, NOTHING_RECORDED, PAUSED, Estimate, estimate
from tests.builders import T0, MakeNode, MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot


def holds(queue: str, *seconds: float, gpus: int = 1, workflow: str = "") -> Durations:
    d = Durations()
    for s in seconds:
        d.add((queue, workflow, gpus), s)
    return d


def pending(name: str, queue: str = "train", at: float = 0.0, gpus: int = 1) -> MakePod:
    return MakePod("ml", name).queue(queue).team("vision").gpus(gpus).gated().created(at)


def running(name: str, since: float, queue: str = "train", gpus: int = 1) -> MakePod:
    return MakePod("ml", name).queue(queue).team("vision").gpus(gpus).created(since).dispatched(since)


def starts(estimates: dict[str, Estimate]) -> dict[str, tuple[float | None, float | None, float | None]]:
    """Each estimate as (p10, p50, p90) in seconds after T0."""

    def rel(v: float | None) -> float | None:
        return None if v is None else round(v - T0, 6)

    return {k.split("/")[1]: (rel(e.p10), rel(e.p50), rel(e.p90)) for k, e in estimates.items()}


def test_a_queue_of_identical_fixed_length_jobs_gets_exact_estimates() -> None:
    """``maxRunning: 2``; two jobs released at 0, every job holds its slot 100 s; five wait.
    At 30 s: the first two waiting go when the running two end (100), the next two at 200,
    the last at 300, with no spread since every recorded hold is 100 s."""
    snap = snapshot(
        [running("r0", 0), running("r1", 0), *(pending(f"p{i}", at=10 + i) for i in range(5))],
        [MakeQueue("train").max_running(2)],
        now=T0 + 30,
    )
    out = starts(estimate(snap, Turns(), holds("train", 100, 100, 100, 100)))
    assert out == {
        "p0": (100, 100, 100),
        "p1": (100, 100, 100),
        "p2": (200, 200, 200),
        "p3": (200, 200, 200),
        "p4": (300, 300, 300),
    }


def test_drawn_holds_give_the_same_exact_estimates_when_every_hold_is_the_same() -> None:
    snap = snapshot(
        [running("r0", 0), *(pending(f"p{i}", at=10 + i) for i in range(3))],
        [MakeQueue("train").max_running(1)],
        now=T0 + 30,
    )
    out = starts(estimate(snap, Turns(), holds("train", 100, 100, 100), samples=25, seed=7))
    assert out == {"p0": (100, 100, 100), "p1": (200, 200, 200), "p2": (300, 300, 300)}


def test_the_band_is_the_holds_p10_mean_and_p90_after_what_runs_now() -> None:
    """One slot, taken by a job released just now; holds of 10, 20, ..., 100 s. The job behind
    it goes when that one ends: p10 at 10 s, p90 at 90 s (nearest rank), and the middle at the
    mean hold, 55 s (a chain of holds adds up to about their mean each, not their median)."""
    snap = snapshot([running("r0", 0), pending("p0")], [MakeQueue("train").max_running(1)], now=T0)
    out = starts(estimate(snap, Turns(), holds("train", *range(10, 101, 10))))
    assert out == {"p0": (10, 55, 90)}


def test_what_a_running_job_has_run_already_narrows_what_is_left() -> None:
    """Holds of 100, 200, 300 s. Released 150 s ago, the running job is one of the 200 or
    300 s ones: 50 or 150 s left (p10, nearest rank of two: the first; p90: the second; the
    mean 100 s)."""
    snap = snapshot([running("r0", 0), pending("p0")], [MakeQueue("train").max_running(1)], now=T0 + 150)
    out = starts(estimate(snap, Turns(), holds("train", 100, 200, 300)))
    assert out == {"p0": (200, 250, 300)}


def test_active_deadline_seconds_bounds_a_hold() -> None:
    """Recorded holds are 1,000 s, but the running pod declares activeDeadlineSeconds 120: it
    ends by 120. The one behind it declares 60: the one after that starts at 180."""
    snap = snapshot(
        [
            running("r0", 0).spec(activeDeadlineSeconds=120),
            pending("p0", at=1).spec(activeDeadlineSeconds=60),
            pending("p1", at=2),
        ],
        [MakeQueue("train").max_running(1)],
        now=T0 + 10,
    )
    out = starts(estimate(snap, Turns(), holds("train", 1000, 1000, 1000)))
    assert out == {"p0": (120, 120, 120), "p1": (180, 180, 180)}


def test_work_that_goes_at_once_is_estimated_to_start_now() -> None:
    snap = snapshot([pending("p0")], [MakeQueue("train").max_running(1)], now=T0 + 5)
    assert starts(estimate(snap, Turns(), holds("train", 60, 60, 60))) == {"p0": (5, 5, 5)}


def test_a_higher_priority_queue_goes_first_as_dispatch_orders_it() -> None:
    """The cluster runs one workload at a time. ``urgent`` (priority 10) goes before
    ``train``, although train's job was submitted first."""
    snap = snapshot(
        [running("r0", 0), pending("t0", at=1), pending("u0", queue="urgent", at=2)],
        [MakeQueue("train"), MakeQueue("urgent").priority(10)],
        policy=MakePolicy().max_running(1),
        now=T0 + 10,
    )
    durations = holds("train", 100, 100, 100)
    for _ in range(3):
        durations.add(("urgent", "", 1), 50)
    assert starts(estimate(snap, Turns(), durations)) == {"u0": (100, 100, 100), "t0": (150, 150, 150)}


def test_a_shape_never_seen_takes_its_queues_holds_then_the_clusters() -> None:
    """Nothing with 4 GPUs was recorded in ``train``: the queue's 1-GPU holds (100 s) speak
    for it; ``tune`` has nothing recorded: the cluster's (100 s and 400 s...) do."""
    snap = snapshot(
        [
            running("r0", 0, gpus=4),
            pending("p0", gpus=4),
            running("s0", 0, queue="tune"),
            pending("q0", queue="tune"),
        ],
        [MakeQueue("train").max_running(1), MakeQueue("tune").max_running(1)],
        now=T0,
    )
    out = starts(estimate(snap, Turns(), holds("train", 100, 100, 100)))
    assert out == {"p0": (100, 100, 100), "q0": (100, 100, 100)}


def test_paused_queues_missing_queues_and_work_that_can_never_run_are_unknown() -> None:
    snap = snapshot(
        [
            pending("paused", queue="held"),
            pending("nowhere", queue="gone"),
            pending("toobig", gpus=8),  # train's quota is 4 GPUs
            pending("zero", queue="closed"),  # maxRunning 0
            pending("fine"),
        ],
        [
            MakeQueue("held").paused(),
            MakeQueue("train").quota(**{"nvidia.com/gpu": 4}),
            MakeQueue("closed").max_running(0),
        ],
        now=T0,
    )
    out = estimate(snap, Turns(), holds("train", 60, 60, 60))
    assert {k.split("/")[1]: (e.known, e.reason.split(":")[0]) for k, e in out.items()} == {
        "paused": (False, PAUSED),
        "nowhere": (False, NO_QUEUE),
        "toobig": (False, NEVER),
        "zero": (False, NEVER),
        "fine": (True, ""),
    }
    assert "asks more than a quota" in out["ml/toobig"].reason


def test_work_no_node_could_hold_is_unknown() -> None:
    snap = snapshot(
        [pending("big", gpus=8), pending("small", gpus=2)],
        [MakeQueue("train")],
        nodes=[MakeNode("gpu-1").gpus(4)],
        now=T0,
    )
    out = estimate(snap, Turns(), holds("train", 60, 60, 60, gpus=2))
    assert not out["ml/big"].known and out["ml/big"].reason.startswith(NEVER)
    assert out["ml/small"] == Estimate("ml/small", T0, T0, T0)


def test_nothing_recorded_gives_unknown_for_everything() -> None:
    snap = snapshot([running("r0", 0), pending("p0")], [MakeQueue("train").max_running(1)], now=T0)
    assert estimate(snap, Turns(), Durations()) == {"ml/p0": Estimate("ml/p0", reason=NOTHING_RECORDED)}


def test_a_team_limit_across_two_queues_is_respected() -> None:
    """Team vision runs one at a time across train and tune; holds are 100 s; round-robin
    between the two equal queues: tune's job (its turn, train went last) at 100, train's at 200."""
    snap = snapshot(
        [running("r0", 0), pending("t1", at=1), pending("n1", queue="tune", at=2)],
        [MakeQueue("train"), MakeQueue("tune")],
        teams=[MakeTeam("vision").max_running(1)],
        now=T0 + 10,
    )
    durations = holds("train", 100, 100, 100)
    out = starts(estimate(snap, Turns().advanced({0: "train"}, [0]), durations))
    assert out == {"n1": (100, 100, 100), "t1": (200, 200, 200)}


def test_work_further_out_than_a_day_is_unknown() -> None:
    """Holds of 40,000 s, one slot: the jobs behind the running one start at 40,000 and
    80,000 s; the third would start at 120,000 s, beyond the day the replays look ahead."""
    snap = snapshot(
        [running("r0", 0), *(pending(f"p{i}", at=i) for i in range(3))],
        [MakeQueue("train").max_running(1)],
        now=T0,
    )
    out = estimate(snap, Turns(), holds("train", 40_000, 40_000, 40_000))
    assert starts(out) == {
        "p0": (40_000, 40_000, 40_000),
        "p1": (80_000, 80_000, 80_000),
        "p2": (None, None, None),
    }
    assert out["ml/p2"].reason == BEYOND
