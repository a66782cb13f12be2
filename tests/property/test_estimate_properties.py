"""Invariants of expected start times (simulator.estimating).

* Its first cycle is the controller's decision: what it estimates to start now is exactly what
  ``dispatch`` releases from the same snapshot.
* Bands are ordered (p10 <= p50 <= p90), never before now, and unknown exactly when a reason
  is given.
* More free capacity never makes an estimate later: on a queue limited by its count alone,
  a higher ``maxRunning``, or one running workload fewer, moves no estimate later.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.dispatching import Turns, dispatch
from policy.model import Snapshot
from records.durations import Durations
from simulator.estimating import estimate
from tests.builders import T0, MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUEUES = ("a", "b", "c")
NOW = T0 + 1000


def holds() -> st.SearchStrategy[Durations]:
    """Recorded holds of 1 to 600 s for some shapes of the queues (1 or 2 GPUs)."""
    shape = st.tuples(st.sampled_from(QUEUES), st.just(""), st.sampled_from((1, 2)))
    pairs = st.lists(st.tuples(shape, st.integers(1, 600)), min_size=1, max_size=20)

    def build(items: list[tuple[tuple[str, str, int], int]]) -> Durations:
        d = Durations()
        for s, seconds in items:
            d.add(s, float(seconds))
        return d

    return st.builds(build, pairs)


@st.composite
def pods(draw: st.DrawFn, queues: tuple[str, ...] = QUEUES) -> list[MakePod]:
    out = []
    for i in range(draw(st.integers(0, 12))):
        pod = (
            MakePod("ml", f"p{i}")
            .queue(draw(st.sampled_from(queues)))
            .team(draw(st.sampled_from(("vision", "nlp"))))
            .gpus(draw(st.sampled_from((1, 2))))
            .created(draw(st.integers(0, 900)))
            .priority(draw(st.sampled_from((0, 0, 100))))
        )
        if draw(st.booleans()):
            out.append(pod.dispatched(draw(st.integers(0, 999))))
        else:
            out.append(pod.gated())
    return out


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    counts = st.one_of(st.none(), st.integers(0, 4))
    queues = [MakeQueue(name).priority(draw(st.sampled_from((0, 0, 5)))) for name in QUEUES]
    for q in queues:
        if (n := draw(counts)) is not None:
            q.max_running(n)
        if draw(st.booleans()):
            q.quota(**{"nvidia.com/gpu": draw(st.integers(0, 6))})
        if draw(st.integers(0, 5)) == 0:
            q.strict()
    teams = [MakeTeam("vision"), MakeTeam("nlp")]
    for t in teams:
        if (n := draw(counts)) is not None:
            t.max_running(n)
    policy = MakePolicy()
    if draw(st.booleans()):
        policy.quota(**{"nvidia.com/gpu": draw(st.integers(1, 8))})
    return snapshot(draw(pods()), queues, teams, policy, now=NOW)


@SETTINGS
@given(snapshots(), holds())
def test_what_it_estimates_to_start_now_is_what_dispatch_releases_now(
    snap: Snapshot, durations: Durations
) -> None:
    # Recorded holds are at least 1 s, so no running workload ends at the snapshot's instant.
    out = estimate(snap, Turns(), durations)
    now = {k for k, e in out.items() if e.p50 == NOW}
    assert now == {w.key for w in dispatch(snap, Turns()).release}


@SETTINGS
@given(snapshots(), holds(), st.sampled_from((0, 0, 7)))
def test_bands_are_ordered_never_before_now_and_unknown_only_with_a_reason(
    snap: Snapshot, durations: Durations, samples: int
) -> None:
    out = estimate(snap, Turns(), durations, samples=samples)
    assert set(out) == {w.key for w in snap.workloads if w.state.value == "pending"}
    for e in out.values():
        if e.known:
            assert e.p10 is not None and e.p90 is not None and e.p50 is not None
            assert NOW <= e.p10 <= e.p50 <= e.p90
            assert e.reason == ""
        else:
            assert e.p10 is None and e.p90 is None and e.reason


@SETTINGS
@given(pods(("a",)), holds(), st.integers(0, 3), st.integers(1, 3))
def test_more_free_capacity_never_makes_an_estimate_later(
    made: list[MakePod], durations: Durations, limit: int, more: int
) -> None:
    """With quantile holds (the default): each workload's hold is the same in both replays.
    (Drawn holds are drawn in snapshot order, so leaving a workload out changes who gets
    which draw: the property holds there run by run for the same draws only.)"""

    def starts(max_running: int, leave_out: str = "") -> dict[str, tuple[float | None, ...]]:
        snap = snapshot(
            [p for p in made if p.obj()["metadata"]["name"] != leave_out],
            [MakeQueue("a").max_running(max_running)],
            [MakeTeam("vision"), MakeTeam("nlp")],
            now=NOW,
        )
        out = estimate(snap, Turns(), durations)
        return {k: (e.p10, e.p50, e.p90) for k, e in out.items()}

    def no_later(
        roomier: dict[str, tuple[float | None, ...]], tighter: dict[str, tuple[float | None, ...]]
    ) -> None:
        for key, band in roomier.items():
            for mine, theirs in zip(band, tighter[key], strict=True):
                assert theirs is None or (mine is not None and mine <= theirs + 1e-9), (
                    key,
                    band,
                    tighter[key],
                )

    base = starts(limit)
    no_later(starts(limit + more), base)
    running = [p.obj()["metadata"]["name"] for p in made if "schedulingGates" not in p.obj()["spec"]]
    if running:
        no_later(starts(limit, leave_out=running[0]), base)
