"""Synthetic traces: seeded, the size asked for, sweeps labelled; and the little languages for
distributions and lengths of time."""

from __future__ import annotations

import io
import random
from collections import Counter
from pathlib import Path

import pytest

from cli.__main__ import main
from records.distributions import parse_counts, parse_durations
from records.periods import format_duration, parse_duration
from records.synthesizing import Plan, even_plan, synthesize
from records.trace import Phase, load

START = 1_767_571_200.0  # 2026-01-05T00:00:00Z


def plan(seed: int = 1, workloads: int = 2000, sweeps: float = 0.0) -> Plan:
    return even_plan(
        queues=4,
        teams=2,
        workloads=workloads,
        durations=parse_durations("exp(30m)"),
        gpus=parse_counts("1:3,8:1"),
        start=START,
        span=86400,
        skew=1.0,
        sweep_fraction=sweeps,
        sweep_trials=parse_counts("uniform(5, 10)"),
        sweep_max_running=3,
        priorities=(10, 0),
        seed=seed,
    )


def test_the_same_plan_and_seed_give_the_same_trace_and_another_seed_another() -> None:
    assert synthesize(plan(seed=1)) == synthesize(plan(seed=1))
    assert synthesize(plan(seed=1)) != synthesize(plan(seed=2))


def test_a_trace_has_the_workloads_asked_for_in_order_as_if_run_at_once() -> None:
    records = synthesize(plan())
    assert len(records) == 2000
    assert [r.submitted for r in records] == sorted(r.submitted for r in records)
    assert all(r.phase is Phase.SUCCEEDED and r.released == r.bound == r.submitted for r in records)
    assert {r.amount() for r in records} == {1.0, 8.0}
    # Queue i gets a share of 1/(i+1): queue-00 about twice queue-01, four times queue-03.
    per_queue = Counter(r.queue for r in records)
    assert per_queue["queue-00"] > 1.5 * per_queue["queue-01"] > 1.5 * per_queue["queue-03"]
    assert {r.queue: (r.team, r.priority) for r in records} == {
        "queue-00": ("team-00", 10),
        "queue-01": ("team-01", 0),
        "queue-02": ("team-00", 10),
        "queue-03": ("team-01", 0),
    }
    # The stream runs about the span: Poisson arrivals at the rate that brings 2,000 in a day.
    assert 0.8 * 86400 < records[-1].submitted - START < 1.2 * 86400


def test_sweeps_are_trials_under_one_workflow_with_its_limit() -> None:
    records = synthesize(plan(sweeps=0.2))
    sweeps = Counter(r.workflow for r in records if r.workflow)
    assert sweeps and all(5 <= n <= 10 for n in list(sweeps.values())[:-1])  # the last may be cut at 2,000
    assert {r.workflow_max_running for r in records if r.workflow} == {3}
    trials = [r for r in records if r.workflow == next(iter(sweeps))]
    assert len({r.submitted for r in trials}) == 1


def test_records_synth_writes_a_trace_that_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["records", "synth", "--queues", "3", "--workloads", "50", "--days", "2", "--seed", "9"]
    assert main(args) == 0
    first = capsys.readouterr().out
    records = load(io.StringIO(first))
    assert len(records) == 50
    assert main([*args, "--file", str(tmp_path / "t.jsonl")]) == 0
    assert (tmp_path / "t.jsonl").read_text() == first


def test_records_synth_refuses_a_bad_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["records", "synth", "--durations", "normal(3m)"]) == 1
    assert "--durations: 'normal(3m)': unknown distribution 'normal'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "mean"),
    [("fixed(30m)", 1800), ("exp(2h)", 7200), ("uniform(1m, 3m)", 120), ("lognormal(10m, 0)", 600)],
)
def test_duration_distributions_parse_with_their_means(text: str, mean: float) -> None:
    d = parse_durations(text)
    assert d.mean == pytest.approx(mean)
    rnd = random.Random(4)
    samples = [d.sample(rnd) for _ in range(4000)]
    assert sum(samples) / len(samples) == pytest.approx(mean, rel=0.1)


@pytest.mark.parametrize(
    ("text", "values", "mean"),
    [("4", {4}, 4), ("1,2", {1, 2}, 1.5), ("1:3,8:1", {1, 8}, 2.75), ("uniform(2, 4)", {2, 3, 4}, 3)],
)
def test_count_distributions_draw_only_their_values(text: str, values: set[int], mean: float) -> None:
    d = parse_counts(text)
    rnd = random.Random(4)
    assert {int(d.sample(rnd)) for _ in range(500)} == values
    assert d.mean == mean


@pytest.mark.parametrize("text", ["0", "1,-2", "uniform(3, 1)", "x", "exp(3)"])
def test_bad_counts_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=text.replace("(", r"\(").replace(")", r"\)")):
        parse_counts(text)


def test_lengths_of_time_read_and_print_as_people_write_them() -> None:
    assert [parse_duration(t) for t in ("90", "45s", "30m", "1h30m", "7d", "250ms", "1w")] == [
        90,
        45,
        1800,
        5400,
        604800,
        0.25,
        604800,
    ]
    assert [format_duration(s) for s in (0, 12.5, 245, 11520, 187200, -30)] == [
        "0s",
        "12.5s",
        "4m05s",
        "3h12m",
        "2d04h",
        "-30s",
    ]
    for bad in ("", "3x", "h", "-5", "1h 30m"):
        with pytest.raises(ValueError):
            parse_duration(bad)
