"""``sluicegate report``: GPU-hours, jobs, waits and shares, checked against figures worked out
by hand from a small trace; and ``--png`` writes a real chart."""

from __future__ import annotations

import io
import json
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from cli.__main__ import main
from cli.charting import HEIGHT, WIDTH
from records.accounting import By, account
from records.trace import Phase, Record, write
from tests.builders import T0
from tests.traces import job


def week() -> list[Record]:
    """Five workloads between T0 and T0 + 4000 s (the trace's last instant):

    w1  team a, queue q1, 2 GPUs: submitted 0, released 60, bound 70, finished 3670
        -> waited 60 s, ran 3600 s from bound: 2 × 1 h = 2 GPU-hours
    w2  team a, queue q2, 1 GPU: released at once, ran 1800 s -> 0.5 GPU-hours, waited 0
    w3  team b, queue q1, 4 GPUs: submitted 100, released 400, finished 4000
        -> waited 300 s, ran 3600 s: 4 GPU-hours
    w4  team b, queue q1, 1 GPU: submitted 3000, still pending at the end -> waiting
    w5  team b, queue q2, 8 GPUs: submitted 3600, released 3640, still running at 4000
        -> waited 40 s, ran 360 s so far: 8 × 0.1 h = 0.8 GPU-hours
    Team a: 2 jobs, 2.5 GPU-hours, waits 60 and 0 (mean 30 s, p95 60 s).
    Team b: 2 jobs (w3, w5), 4.8 GPU-hours, waits 300 and 40 (mean 170 s, p95 300 s), 1 waiting.
    All: 7.3 GPU-hours; shares 2.5/7.3 and 4.8/7.3.
    """
    w1 = replace(
        job("w1", "q1", team="a", gpus=2, at=0, runs=3600, waited=60, submitter="alice"), bound=T0 + 70
    )
    w1 = replace(w1, finished=T0 + 3670)
    w2 = job("w2", "q2", team="a", gpus=1, at=0, runs=1800, submitter="alice")
    w3 = job("w3", "q1", team="b", gpus=4, at=100, runs=3600, waited=300, submitter="bob")
    w4 = Record("ml", "w4", "q1", T0 + 3000, Phase.PENDING, team="b", submitter="bob")
    w5 = replace(job("w5", "q2", team="b", gpus=8, at=3600, runs=0, waited=40, submitter="carol"))
    w5 = replace(w5, phase=Phase.RUNNING, finished=None)
    return [w1, w2, w3, w4, w5]


def test_figures_per_team_match_the_hand_worked_ones() -> None:
    report = account(week(), since=T0, until=T0 + 4000, by=By.TEAM, capacity=10)
    a, b = sorted(report.lines, key=lambda line: line.scope)
    assert (a.scope, a.jobs, a.gpu_hours, a.waits.mean, a.waits.p95, a.waiting) == ("a", 2, 2.5, 30, 60, 0)
    assert (b.scope, b.jobs, b.gpu_hours, b.waits.mean, b.waits.p95, b.waiting) == ("b", 2, 4.8, 170, 300, 1)
    assert (a.share, b.share) == (pytest.approx(2.5 / 7.3), pytest.approx(4.8 / 7.3))
    # Utilisation of 10 GPUs over 4000 s: a used 9,000 GPU-seconds of 40,000, b 17,280.
    assert (a.utilisation, b.utilisation) == (pytest.approx(0.225), pytest.approx(0.432))
    assert (report.total.jobs, report.total.gpu_hours) == (4, pytest.approx(7.3))
    assert [line.scope for line in report.lines] == ["b", "a"]  # most GPU-hours first


def test_a_period_counts_only_the_part_of_each_run_inside_it() -> None:
    """From 3000 to 4000: w1 runs 670 s of it (2 GPUs: 1,340 GPU-s), w3 1000 s (4 GPUs: 4,000),
    w5 360 s (8 GPUs: 2,880); w2 ended before. Only w5 was released inside, after 40 s."""
    report = account(week(), since=T0 + 3000, until=T0 + 4000, by=By.QUEUE)
    lines = {line.scope: line for line in report.lines}
    assert lines["q1"].gpu_hours == pytest.approx((1340 + 4000) / 3600)
    assert lines["q2"].gpu_hours == pytest.approx(2880 / 3600)
    assert (lines["q1"].jobs, lines["q2"].jobs, lines["q1"].waiting) == (2, 1, 1)
    assert (lines["q1"].waits.count, lines["q2"].waits.mean) == (0, 40)


def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "week.jsonl"
    with path.open("w") as stream:
        write(week(), stream)
    return path


def test_the_table_shows_the_hand_worked_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--trace", str(trace_file(tmp_path)), "--gpus", "10"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0]
        == "nvidia.com/gpu per team, 2023-11-14T22:13:20.000000Z to 2023-11-14T23:20:00.000000Z (1h06m)"
    )
    assert out[1].split() == [
        "team",
        "jobs",
        "GPU-hours",
        "unplaced",
        "quota-hours",
        "share",
        "mean",
        "wait",
        "p95",
        "wait",
        "waiting",
        "utilisation",
    ]
    # w1's 10 s between its release and its binding, at 2 GPUs, are 0.0056 quota-hours.
    assert out[2].split() == ["b", "2", "4.8", "0.0", "65.8%", "2m50s", "5m00s", "1", "43.2%"]
    assert out[3].split() == ["a", "2", "2.5", "0.0", "34.2%", "30s", "1m00s", "0", "22.5%"]
    assert out[4].split() == ["total", "4", "7.3", "0.0", "100.0%", "1m40s", "5m00s", "1", "65.7%"]


def test_json_and_csv_carry_the_same_figures_unrounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(trace_file(tmp_path))
    assert main(["report", "--trace", path, "--by", "user", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    users = {line["scope"]: line for line in data["lines"]}
    assert users["alice"]["gpuHours"] == 2.5
    assert users["alice"]["quotaHours"] == pytest.approx(20 / 3600)  # w1: 2 GPUs released 10 s unplaced
    assert users["bob"]["wait"] == {
        "count": 1,
        "meanSeconds": 300,
        "p50Seconds": 300,
        "p95Seconds": 300,
        "maxSeconds": 300,
    }
    assert (users["carol"]["gpuHours"], data["total"]["jobs"]) == (pytest.approx(0.8), 4)
    assert main(["report", "--trace", path, "--by", "queue", "-o", "csv", "--since", "1000s"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == (
        "scope,jobs,gpu_hours,share,wait_mean_seconds,wait_p95_seconds,waiting,utilisation,quota_hours"
    )
    assert rows[1].startswith("q1,2,1.48333")  # (1,340 + 4,000) GPU-s / 3,600


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_png_writes_a_png_of_the_documented_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "report.png"
    assert main(["report", "--trace", str(trace_file(tmp_path)), "--png", str(png)]) == 0
    assert png_size(png) == (WIDTH, HEIGHT) == (1200, 900)
    assert capsys.readouterr().out.splitlines()[-1].split()[:3] == ["total", "4", "7.3"]


def test_a_bad_trace_fails_with_the_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    out = io.StringIO()
    write(week()[:1], out)
    path.write_text(
        out.getvalue()
        + '{"namespace":"ml","name":"x","queue":"q","submitted":"yesterday","phase":"Pending"}\n'
    )
    assert main(["report", "--trace", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"sluicegate: {path} line 2: submitted: 'yesterday' is not an RFC 3339 time with a zone "
        "(e.g. 2026-11-30T10:00:00.000000Z)\n"
    )


def test_a_missing_trace_is_one_line_of_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--trace", str(tmp_path / "none.jsonl")]) == 1
    assert capsys.readouterr().err == f"sluicegate: {tmp_path / 'none.jsonl'}: No such file or directory\n"


@pytest.mark.parametrize("since", ["99999999d", "1000000000000000d"])
def test_a_since_longer_than_all_time_reports_everything(
    since: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(trace_file(tmp_path))
    assert main(["report", "--trace", path, "-o", "json"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert main(["report", "--trace", path, "-o", "json", "--since", since]) == 0
    longer = json.loads(capsys.readouterr().out)
    assert longer["lines"] == everything["lines"]


def test_an_empty_trace_says_there_is_nothing_to_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["report", "--trace", str(empty)]) == 1
    assert capsys.readouterr().err.strip() == (
        "sluicegate: nothing to report: no workload was submitted before the end of the period, "
        "1970-01-01T00:00:00.000000Z")
