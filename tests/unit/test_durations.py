"""Holds learned from records (records.durations): shapes, priors, what has run, deadlines."""

from __future__ import annotations

import random

from records.durations import Durations, shape_of_record
from tests.traces import job


def test_holds_are_learned_from_release_to_finish_by_queue_workflow_and_gpus() -> None:
    records = [
        job("a", "train", at=0, runs=100, waited=50),  # held 100 s from its release
        job("b", "train", at=0, runs=200, gpus=2),
        job("c", "train", at=0, runs=300, workflow="sweep", limit=2),
    ]
    d = Durations.learn(records, least=1)
    assert shape_of_record(records[2]) == ("train", "ml/sweep", 1)
    assert d.shapes == {("train", "", 1): [100], ("train", "", 2): [200], ("train", "ml/sweep", 1): [300]}
    assert d.queues == {"train": [100, 200, 300]}
    assert len(d) == 3


def test_a_shape_with_too_few_holds_takes_its_queues_then_the_clusters() -> None:
    d = Durations(least=3)
    for s in (10, 20, 30):
        d.add(("train", "", 1), s)
    d.add(("train", "", 8), 999)
    d.add(("tune", "", 1), 5)
    own = d.of(("train", "", 1))
    assert own is not None and (own.level, own.ordered) == ("shape", [10, 20, 30])
    queue = d.of(("train", "", 8))  # one hold of its own: train's four speak for it
    assert queue is not None and (queue.level, queue.ordered) == ("queue", [10, 20, 30, 999])
    cluster = d.of(("tune", "", 1))  # tune has one: the cluster's five
    assert cluster is not None and (cluster.level, cluster.ordered) == ("cluster", [5, 10, 20, 30, 999])
    assert Durations().of(("train", "", 1)) is None


def test_what_has_run_already_leaves_the_rest_of_the_longer_holds() -> None:
    d = Durations(least=1)
    for s in (100, 200, 300, 400):
        d.add(("q", "", 1), s)
    holds = d.of(("q", "", 1))
    assert holds is not None
    assert [holds.quantile(p) for p in (10, 50, 90)] == [100, 200, 400]
    assert [holds.quantile(p, elapsed=250) for p in (10, 50, 90)] == [50, 50, 150]  # of 300, 400
    # outlived them all: a fresh hold again
    assert [holds.quantile(p, elapsed=500) for p in (10, 50, 90)] == [100, 200, 400]
    assert (holds.mean(), holds.mean(elapsed=250)) == (250, 100)
    rnd = random.Random(3)
    assert {holds.draw(rnd, elapsed=250) for _ in range(200)} == {50, 150}


def test_active_deadline_seconds_bounds_every_hold() -> None:
    d = Durations(least=1)
    for s in (100, 200, 300):
        d.add(("q", "", 1), s)
    holds = d.of(("q", "", 1))
    assert holds is not None
    assert holds.quantile(90, deadline=150) == 150
    assert holds.quantile(90, elapsed=120, deadline=150) == 30
    assert holds.quantile(90, elapsed=200, deadline=150) == 0  # past its deadline: ends now
    assert holds.mean(deadline=150) == (100 + 150 + 150) / 3
    rnd = random.Random(1)
    assert max(holds.draw(rnd, deadline=150) for _ in range(100)) == 150


def test_the_naive_estimates_mean_is_the_queues_else_the_clusters() -> None:
    d = Durations(least=2)
    d.add(("a", "", 1), 10)
    d.add(("a", "", 2), 30)
    d.add(("b", "", 1), 80)
    assert d.mean("a") == 20
    assert d.mean("b") == 40  # one hold only: the cluster's (10 + 30 + 80) / 3
    assert Durations().mean("a") is None
