"""``sluicegate simulate`` end to end: trace file and YAML directories in, figures out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.__main__ import main
from records.trace import format_time, write
from tests.builders import T0
from tests.traces import job

QUEUE = """\
apiVersion: sluicegate.dev/v1beta1
kind: Queue
metadata: {{name: train}}
spec: {{maxRunning: {limit}}}
---
apiVersion: sluicegate.dev/v1beta1
kind: Policy
metadata: {{name: cluster}}
spec: {{quota: {{nvidia.com/gpu: "4"}}}}
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """Four 1-GPU jobs of 100 s submitted at 0 to ``train``; current/ allows 1 at a time,
    proposed/ 2 (the hand-worked case of test_simulating)."""
    with (tmp_path / "trace.jsonl").open("w") as stream:
        write([job(f"j{k}", "train", team="vision", at=0, runs=100) for k in range(4)], stream)
    for name, limit in (("current", 1), ("proposed", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "objects.yaml").write_text(QUEUE.format(limit=limit))
    return tmp_path


def test_json_gives_the_hand_worked_waits_and_their_difference(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "simulate",
        "--trace",
        str(files / "trace.jsonl"),
        "--policy",
        str(files / "proposed"),
        "--baseline",
        str(files / "current"),
        "-o",
        "json",
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    train = data["proposed"]["queues"]["train"]
    assert train["wait"] == {
        "count": 4,
        "meanSeconds": 50,
        "p50Seconds": 0,
        "p95Seconds": 100,
        "maxSeconds": 100,
    }
    assert data["baseline"]["queues"]["train"]["wait"]["p95Seconds"] == 300
    assert data["difference"]["queues"]["train"]["waitP95Seconds"] == -200
    assert data["difference"]["teams"]["vision"]["waitMeanSeconds"] == -100
    assert data["capacity"] == {
        "resource": "nvidia.com/gpu",
        "gpus": 4,
        "from": f"Policy quota of nvidia.com/gpu in {files / 'proposed'}",
    }
    assert (train["utilisation"], train["makespanSeconds"], train["peakGpus"], train["gpuHours"]) == (
        0.5,
        200,
        2,
        400 / 3600,
    )
    assert data["trace"] == {
        "file": str(files / "trace.jsonl"),
        "start": format_time(T0),
        "end": format_time(T0 + 100),
        "workloads": 4,
        "replayed": 4,
        "skipped": 0,
        "censored": 0,
    }


def test_the_table_compares_with_the_trace_as_recorded_by_default(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace records every job released at once (4 GPUs busy for 100 s: 100 %), so under
    maxRunning 2 the waits grow and the same work takes twice as long (50 %)."""
    assert main(["simulate", "--trace", str(files / "trace.jsonl"), "--policy", str(files / "proposed")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"proposed: {files / 'proposed'} (2 dispatch cycles); baseline: recorded"
    header = out.index(next(line for line in out if line.startswith("queue")))
    assert out[header + 1].split() == [
        "train",
        "4",
        "0s",
        "+0s",
        "1m40s",
        "+1m40s",
        "1m40s",
        "+1m40s",
        "50.0%",
        "-50.0%",
        "3m20s",
        "+1m40s",
    ]


def test_the_header_gives_the_traces_own_range_whatever_the_policies(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace runs from 0 to 100 s; replayed under maxRunning 1 it ends at 400 s, under 2 at
    200 s. The header names the trace's range either way."""
    trace = str(files / "trace.jsonl")
    headers = []
    for policies in (["--policy", str(files / "current")],
                     ["--policy", str(files / "proposed"), "--baseline", str(files / "current")]):
        assert main(["simulate", "--trace", trace, *policies]) == 0
        headers.append(capsys.readouterr().out.splitlines()[0])
    expected = f"trace {trace}: 4 workloads, 4 replayed, {format_time(T0)} to {format_time(T0 + 100)}"
    assert headers == [expected, expected]


def test_png_and_errors(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = files / "what-if.png"
    args = [
        "simulate",
        "--trace",
        str(files / "trace.jsonl"),
        "--policy",
        str(files / "proposed"),
        "--png",
        str(png),
    ]
    assert main(args) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["simulate", "--trace", str(files / "trace.jsonl"), "--policy", str(files / "nowhere")]) == 1
    assert capsys.readouterr().err == f"sluicegate: {files / 'nowhere'}: no such file or directory\n"
