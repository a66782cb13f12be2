"""Invariants of the run records the recorder makes of a pod group, whatever happened to its
members: the record asks for what the group released, never for a pod deleted while it
waited; the report's GPU-seconds are the sum of its released pods' own, each from its binding
to its end (none for a pod never bound), and its quota-seconds the time each released pod held
quota unplaced (its release to its binding, or to its end when never bound); and the record
reads back from its trace line. For any run, the two add up to its hold."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import keys
from recorder.lives import Life, workloads
from records.accounting import account, held_in
from records.trace import Phase, PodRun, parse_record, record_json

GPU = keys.GPU_RESOURCE
T0 = 1_700_000_000.0
RELEASE = 50.0  # the group's pods that were released went at this instant
SETTINGS = settings(max_examples=200, deadline=None)


@dataclass(frozen=True)
class Member:
    submitted: float
    gpus: int
    deleted: float | None  # deleted while gated at this instant; else released at RELEASE
    bound: float | None = None
    finished: float = 0.0
    failed: bool = False

    def life(self, i: int) -> Life:
        asked = Life(f"u{i}", "ml", f"p{i}", "train", T0 + self.submitted, group="g", group_size=3,
                     requests={GPU: self.gpus * 1000})
        if self.deleted is not None:
            return replace(asked, finished=T0 + self.deleted, phase=Phase.DELETED)
        bound = None if self.bound is None else T0 + self.bound
        return replace(asked, released=T0 + RELEASE, bound=bound, node="" if bound is None else "n",
                       finished=T0 + self.finished, phase=Phase.FAILED if self.failed else Phase.SUCCEEDED)

    def gpu_seconds(self) -> float:
        if self.deleted is not None or self.bound is None:
            return 0.0
        return (self.finished - self.bound) * self.gpus

    def quota_seconds(self) -> float:
        if self.deleted is not None:
            return 0.0
        return ((self.bound if self.bound is not None else self.finished) - RELEASE) * self.gpus


def instants(low: float, high: float) -> st.SearchStrategy[float]:
    """Seconds after T0 to the millisecond (a trace keeps microseconds)."""
    return st.integers(round(low * 1000), round(high * 1000)).map(lambda ms: ms / 1000)


@st.composite
def members(draw: st.DrawFn, first: bool = False) -> Member:
    submitted = 0.0 if first else draw(instants(0, RELEASE - 1))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    if not first and draw(st.booleans()):
        return Member(submitted, gpus, deleted=draw(instants(submitted, RELEASE)))
    bound = draw(st.one_of(st.none(), instants(RELEASE, RELEASE + 20)))
    finished = draw(instants(bound if bound is not None else RELEASE, RELEASE + 200))
    return Member(submitted, gpus, None, bound, finished, draw(st.booleans()))


# The first pod was released, so it lived from 0 to past RELEASE: every member belongs to one run.
groups = st.tuples(members(first=True), st.lists(members(), max_size=6)).map(lambda t: [t[0], *t[1]])


@SETTINGS
@given(groups)
def test_a_group_record_asks_for_what_it_released_and_its_gpu_seconds_are_its_pods_own(
    group: list[Member],
) -> None:
    (record,) = workloads([m.life(i) for i, m in enumerate(group)])
    released = [m for m in group if m.deleted is None]
    assert record.amount() == sum(m.gpus for m in released)
    assert [p.name for p in record.pods] == sorted(f"p{i}" for i, m in enumerate(group) if m.deleted is None)
    report = account([record], since=T0, until=T0 + 1000)
    # Within a microsecond's worth: times near T0 are floats of about 1.7e9.
    assert report.total.gpu_hours * 3600 == pytest.approx(sum(m.gpu_seconds() for m in released), abs=1e-5)
    assert report.total.quota_hours * 3600 == pytest.approx(sum(m.quota_seconds() for m in released),
                                                            abs=1e-5)
    assert report.total.jobs == 1
    assert parse_record(record_json(record)) == record


@st.composite
def runs(draw: st.DrawFn) -> tuple[PodRun, float, float]:
    """A run released at 0..100, perhaps bound, perhaps ended, and a period over it."""
    released = draw(instants(0, 100))
    bound = draw(st.one_of(st.none(), instants(released, 200)))
    finished = draw(st.one_of(st.none(), instants(bound if bound is not None else released, 300)))
    since = draw(instants(0, 300))
    until = draw(instants(since, 400))
    gpus = draw(st.sampled_from([1, 2, 8]))
    run = PodRun("p", T0 + released, {GPU: gpus * 1000}, None if bound is None else T0 + bound, "",
                 None if finished is None else T0 + finished)
    return run, T0 + since, T0 + until


def overlap(start: float, end: float, since: float, until: float) -> float:
    return max(0.0, min(end, until) - max(start, since))


@SETTINGS
@given(runs())
def test_a_runs_hold_splits_at_its_binding_into_gpu_seconds_and_unplaced_quota_seconds(
    drawn: tuple[PodRun, float, float],
) -> None:
    run, since, until = drawn
    end = until if run.finished is None else run.finished
    placed = run.bound if run.bound is not None else end  # never bound: no time on a node
    held = held_in(run, since, until)
    assert held.used == pytest.approx(overlap(placed, end, since, until) * run.amount(), abs=1e-5)
    unplaced = overlap(run.released, placed, since, until) * run.amount()
    assert held.unplaced == pytest.approx(unplaced, abs=1e-5)
