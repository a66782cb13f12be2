"""GPU-hours are hours a pod held GPUs on a node: from its binding to its end. The time a
released pod held its quota before it was placed (or all of it, when it never was) is counted
apart, as quota-hours. From the recorder's observations of pods to ``report``, the records a
trace holds, and the simulator's figures."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cli.__main__ import main
from policy import keys
from recorder.lives import Life, deleted, observe, workloads
from records.accounting import account, held_in
from records.trace import Phase, PodRun, Record, parse_record, record_json, write
from simulator.outcomes import summarize
from simulator.simulating import recorded, simulate
from tests.builders import T0, MakePod, MakeQueue, timestamp
from tests.traces import job, setup

GPU = keys.GPU_RESOURCE


def seen(pod: MakePod, *, dispatched: float, bound: float | None = None) -> dict[str, Any]:
    """``pod`` as the API server shows it: admitted at 0, released by the controller at
    ``dispatched``, and scheduled in the second ``bound`` when given."""
    obj = pod.admitted(0.0).obj()
    obj["metadata"]["annotations"][keys.DISPATCHED_AT_ANNOTATION] = (
        f"{timestamp(T0 + dispatched)[:-1]}.{round((dispatched % 1) * 1e6):06d}Z"
    )
    if bound is not None:
        obj["status"].setdefault("conditions", []).append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": timestamp(T0 + bound)}
        )
    return obj


def two_gpus(name: str = "p") -> MakePod:
    return MakePod("ml", name).queue("train").team("vision").gpus(2)


def seconds(record: Record, since: float = T0, until: float = T0 + 1000) -> tuple[float, float]:
    """The report's GPU-seconds and quota-seconds of ``record`` over ``[since, until)``."""
    total = account([record], since=since, until=until).total
    return round(total.gpu_hours * 3600, 6), round(total.quota_hours * 3600, 6)


def test_a_pod_released_then_bound_counts_gpu_hours_from_its_binding_and_quota_hours_before() -> None:
    """Released at 10.5 (the controller's stamp), bound at 12.75 and finished at 70.2 (both seen
    live): 2 GPUs × 57.45 s used, 2 × 2.25 s of quota held before it was placed."""
    life = observe(seen(two_gpus().ungated(), dispatched=10.5), T0 + 10.6)
    life = observe(seen(two_gpus().running("gpu-1"), dispatched=10.5, bound=12), T0 + 12.75, life)
    done = seen(two_gpus().finished(), dispatched=10.5, bound=12)
    done["spec"]["nodeName"] = "gpu-1"
    life = observe(done, T0 + 70.2, life)
    (record,) = workloads([life])
    assert (record.released, record.bound, record.finished) == (T0 + 10.5, T0 + 12.75, T0 + 70.2)
    assert seconds(record) == (2 * 57.45, 2 * 2.25)


def test_a_released_pod_never_bound_and_deleted_counts_no_gpu_hours_and_its_released_time_as_quota() -> None:
    """Released at 10.5, never placed, deleted at 40: no GPU used, 2 × 29.5 s of quota held."""
    life = observe(seen(two_gpus().ungated(), dispatched=10.5), T0 + 10.6)
    (record,) = workloads([deleted(life, T0 + 40)])
    assert (record.phase, record.released, record.bound) == (Phase.DELETED, T0 + 10.5, None)
    assert seconds(record) == (0, 2 * 29.5)
    assert account([record], since=T0, until=T0 + 1000).total.jobs == 1  # it held quota: a job


def test_a_released_pod_still_pending_counts_its_quota_hours_to_the_end_of_the_period() -> None:
    """Released at 10.5 and still waiting for a node at 60: 2 × 49.5 s of quota, no GPU."""
    life = observe(seen(two_gpus().ungated(), dispatched=10.5), T0 + 60)
    (record,) = workloads([life])
    assert (record.phase, record.bound) == (Phase.RUNNING, None)
    assert seconds(record, until=T0 + 60) == (0, 2 * 49.5)


def test_only_the_part_inside_the_period_counts_on_each_side_of_the_binding() -> None:
    """Released at 0, bound at 100, finished at 200 (4 GPUs); the period 50..150 holds 50 s of
    each."""
    r = replace(job("p", "train", at=0, runs=200, gpus=4), bound=T0 + 100)
    assert seconds(r, since=T0 + 50, until=T0 + 150) == (4 * 50, 4 * 50)
    assert seconds(r, since=T0 + 150, until=T0 + 300) == (4 * 50, 0)
    assert seconds(r, since=T0, until=T0 + 60) == (0, 4 * 60)


def test_a_groups_pods_count_one_by_one_by_the_same_rule() -> None:
    """Two 4-GPU pods released at 10: a bound at 12 and ended at 50; b never placed and deleted
    at 30. Used: a's 38 s; quota held unplaced: a's 2 s and b's 20 s."""
    member = Life("u", "ml", "g-a", "train", T0, team="vision", group="g", group_size=2, requests={GPU: 4000})
    a = replace(member, released=T0 + 10, bound=T0 + 12, node="n1", finished=T0 + 50, phase=Phase.SUCCEEDED)
    b = replace(member, uid="v", name="g-b", released=T0 + 10, finished=T0 + 30, phase=Phase.DELETED)
    (record,) = workloads([a, b])
    assert [(p.name, p.bound) for p in record.pods] == [("g-a", T0 + 12), ("g-b", None)]
    assert seconds(record) == (4 * 38, 4 * 2 + 4 * 20)
    assert seconds(parse_record(record_json(record))) == seconds(record)  # as its trace line reads


def test_a_record_without_a_binding_reads_as_placed_at_release_only_when_it_ran() -> None:
    """A trace written without ``bound`` (by hand, or another tool): a record that Succeeded or
    Failed ran on a node, from its release as such traces always read; one Deleted, or still
    Running, was never placed."""
    ran = replace(job("ran", "train", at=0, runs=100, gpus=2, waited=10), bound=None)
    failed = replace(ran, phase=Phase.FAILED)
    gone = replace(ran, phase=Phase.DELETED)
    running = replace(ran, phase=Phase.RUNNING, finished=None)
    assert seconds(ran) == seconds(failed) == (2 * 100, 0)
    assert seconds(gone) == (0, 2 * 100)
    assert seconds(running, until=T0 + 60) == (0, 2 * 50)
    assert (ran.duration, gone.duration) == (100, None)


def test_held_in_splits_a_runs_hold_at_its_binding() -> None:
    run = PodRun("p", T0 + 10, {GPU: 3000}, bound=T0 + 25, finished=T0 + 40)
    held = held_in(run, T0, T0 + 100)
    assert (held.used, held.unplaced) == (3 * 15, 3 * 15)
    never = held_in(replace(run, bound=None), T0, T0 + 100)
    assert (never.used, never.unplaced) == (0, 3 * 30)


def test_report_shows_the_unplaced_quota_hours_beside_the_gpu_hours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Team vision ran 1 GPU for 3,600 s; its 4-GPU pod released at 0 was never placed and was
    deleted at 900 (1 quota-hour, no GPU-hour)."""
    ran = job("ran", "train", team="vision", at=0, runs=3600)
    stuck = replace(job("stuck", "train", team="vision", at=0, runs=900, gpus=4), bound=None,
                    phase=Phase.DELETED)
    path = tmp_path / "trace.jsonl"
    with path.open("w") as stream:
        write([ran, stuck], stream)
    assert main(["report", "--trace", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:5] == ["team", "jobs", "GPU-hours", "unplaced", "quota-hours"]
    assert out[2].split()[:4] == ["vision", "2", "1.0", "1.0"]
    assert main(["report", "--trace", str(path), "-o", "json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert (total["gpuHours"], total["quotaHours"]) == (1.0, 1.0)
    assert main(["report", "--trace", str(path), "-o", "csv"]) == 0
    header, vision, _ = capsys.readouterr().out.splitlines()
    assert dict(zip(header.split(","), vision.split(","), strict=True))["quota_hours"] == "1.0"


def test_the_simulator_counts_a_replayed_workload_by_the_same_rule_wherever_it_goes() -> None:
    """Recorded: "ran" released at 5, bound at 7, ended at 107 (2 GPUs); "stuck" released at 0,
    never placed, deleted at 50 (4 GPUs). Replayed, each holds its slot as long as in the trace,
    and that hold splits as it did: 2 × 100 s used, 2 × 2 s + 4 × 50 s of quota unplaced."""
    ran = replace(job("ran", "q", at=0, runs=100, gpus=2), released=T0 + 5, bound=T0 + 7, finished=T0 + 107)
    stuck = replace(job("stuck", "q", at=0, runs=50, gpus=4), bound=None, phase=Phase.DELETED)
    for run in (recorded([ran, stuck]), simulate([ran, stuck], setup(MakeQueue("q")))):
        cluster = summarize(run, capacity=None).cluster
        assert (round(cluster.gpu_hours * 3600, 6), round(cluster.quota_hours * 3600, 6)) == (200, 4 + 200)
