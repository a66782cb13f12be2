"""A pod group whose members were deleted and replaced while it waited, from the recorder's
lives to what ``records export``, ``report`` and ``simulate`` say about it: the group asked for
what it released, and used what its pods used, pod by pod."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cli.__main__ import main
from policy import keys
from recorder.lives import Life, workloads
from records.trace import Phase, PodRun, parse_record, record_json, write
from tests.builders import T0

GPU = keys.GPU_RESOURCE
EIGHT = {GPU: 8000}


def member(uid: str, submitted: float, *, deleted: float | None = None, released: float | None = None,
           bound: float | None = None, finished: float | None = None) -> Life:
    """One 8-GPU pod of group ``gy`` (3 pods) in queue vision-train: deleted while gated at
    ``deleted``, or released, bound and finished at the times given."""
    asked = Life(uid, "ml", f"gy-{uid}", "vision-train", T0 + submitted, team="vision", group="gy",
                 group_size=3, requests=EIGHT)
    if deleted is not None:
        return replace(asked, finished=T0 + deleted, phase=Phase.DELETED)
    assert released is not None and bound is not None and finished is not None
    return replace(asked, released=T0 + released, bound=T0 + bound, node=f"node-{uid}",
                   finished=T0 + finished, phase=Phase.SUCCEEDED)


def gy() -> list[Life]:
    """Six pods ever, at most three at a time (24 GPUs): b and c were deleted while gated at 5,
    d at 12; a, e and f were released together at 30 and bound at 31, 32 and 33; e ended at
    42, a at 91 and f at 93. Used: a 60 s, e 10 s, f 60 s, at 8 GPUs: 1,040 GPU-seconds."""
    return [
        member("a", 0, released=30, bound=31, finished=91),
        member("b", 0.1, deleted=5),
        member("c", 0.2, deleted=5),
        member("d", 6, deleted=12),
        member("e", 6.1, released=30, bound=32, finished=42),
        member("f", 20, released=30, bound=33, finished=93),
    ]


def test_a_group_asks_for_the_pods_it_released_and_lists_each_with_its_own_times() -> None:
    (record,) = workloads(gy())
    assert (record.key, record.phase, record.requests) == ("ml/group:gy", Phase.SUCCEEDED, {GPU: 24000})
    assert (record.submitted, record.released, record.bound, record.finished) == (
        T0, T0 + 30, T0 + 33, T0 + 93)
    assert record.pods == (
        PodRun("gy-a", T0 + 30, EIGHT, T0 + 31, "node-a", T0 + 91),
        PodRun("gy-e", T0 + 30, EIGHT, T0 + 32, "node-e", T0 + 42),
        PodRun("gy-f", T0 + 30, EIGHT, T0 + 33, "node-f", T0 + 93),
    )
    line = record_json(record)
    assert line["requests"] == {GPU: "24"}
    assert [(p["name"], p["bound"], p["finished"]) for p in line["pods"]] == [
        ("gy-a", "2023-11-14T22:13:51.000000Z", "2023-11-14T22:14:51.000000Z"),
        ("gy-e", "2023-11-14T22:13:52.000000Z", "2023-11-14T22:14:02.000000Z"),
        ("gy-f", "2023-11-14T22:13:53.000000Z", "2023-11-14T22:14:53.000000Z")]
    assert parse_record(json.loads(json.dumps(line))) == record


def test_a_pod_that_named_the_group_with_another_size_and_never_ran_leaves_its_size_alone() -> None:
    misfit = replace(member("g", 1, deleted=40), group_size=9)
    (record,) = workloads([*gy(), misfit])
    assert (record.group_size, record.requests) == (3, {GPU: 24000})


def test_a_group_deleted_before_it_was_released_asks_for_the_pods_it_had_at_its_fullest() -> None:
    """x0 was deleted while gated before x2 came; x1 and x2 were there at the end: 16 GPUs,
    never 24; the group waited and never ran."""
    lives = [member("x0", 0, deleted=4), member("x1", 1, deleted=30), member("x2", 5, deleted=30)]
    (record,) = workloads(lives)
    assert (record.phase, record.released, record.requests, record.pods) == (
        Phase.DELETED, None, {GPU: 16000}, ())
    (pending,) = workloads([lives[0], Life("x1", "ml", "gy-x1", "vision-train", T0 + 1, group="gy",
                                           group_size=3, requests=EIGHT)])
    assert (pending.phase, pending.requests) == (Phase.PENDING, EIGHT)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "gy.jsonl"
    with path.open("w") as stream:
        write(workloads(gy()), stream)
    return path


def test_report_counts_a_groups_gpu_seconds_pod_by_pod_from_binding(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--trace", str(trace), "--by", "queue", "-o", "json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)["lines"]
    assert (line["scope"], line["jobs"]) == ("vision-train", 1)
    assert line["gpuHours"] * 3600 == pytest.approx(1040)


def test_simulate_replays_a_recorded_group_that_ran_under_a_quota_it_fitted(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The queue's quota is 24 GPUs, what the group held: it ran, so the replay releases it."""
    setup = tmp_path / "current"
    setup.mkdir()
    (setup / "queue.yaml").write_text(
        "apiVersion: sluicegate.dev/v1beta1\nkind: Queue\nmetadata: {name: vision-train}\n"
        "spec: {quota: {nvidia.com/gpu: \"24\"}}\n")
    assert main(["simulate", "--trace", str(trace), "--policy", str(setup), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    queue = out["proposed"]["queues"]["vision-train"]
    assert (queue["workloads"], queue["unreleased"], queue["wait"]["count"]) == (1, 0, 1)
    assert out["notes"] == []
