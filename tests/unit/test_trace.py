"""The trace file: what is written reads back the same, and every bad line is refused with its
line number and the field that is wrong."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from records.trace import (
    Phase,
    PodRun,
    Record,
    TraceError,
    format_time,
    load,
    parse_time,
    read,
    to_line,
    write,
)

T0 = parse_time("2026-11-30T10:00:00Z")


def full_record() -> Record:
    return Record(
        namespace="ml-vision",
        name="trial-0",
        queue="vision-train",
        submitted=T0 + 0.123456,
        phase=Phase.SUCCEEDED,
        team="vision",
        workflow="sweep-7",
        workflow_max_running=4,
        group="g1",
        group_size=2,
        submitter="alice",
        priority=100,
        requests=MappingProxyType({"nvidia.com/gpu": 2000, "cpu": 500, "memory": 16 * 2**30 * 1000}),
        released=T0 + 12.5,
        bound=T0 + 13.000001,
        node="gpu-node-1",
        finished=T0 + 3613.999999,
    )


def test_a_record_with_every_field_reads_back_equal_to_the_microsecond() -> None:
    record = full_record()
    out = io.StringIO()
    assert write([record], out) == 1
    assert load(io.StringIO(out.getvalue())) == [record]


def test_the_line_is_the_documented_json() -> None:
    line = json.loads(to_line(full_record()))
    assert line == {
        "namespace": "ml-vision",
        "name": "trial-0",
        "queue": "vision-train",
        "submitted": "2026-11-30T10:00:00.123456Z",
        "phase": "Succeeded",
        "team": "vision",
        "workflow": "sweep-7",
        "workflowMaxRunning": 4,
        "group": "g1",
        "groupSize": 2,
        "submitter": "alice",
        "priority": 100,
        "requests": {"cpu": "500m", "memory": "17179869184", "nvidia.com/gpu": "2"},
        "released": "2026-11-30T10:00:12.500000Z",
        "bound": "2026-11-30T10:00:13.000001Z",
        "finished": "2026-11-30T11:00:13.999999Z",
        "node": "gpu-node-1",
    }


def test_durations_are_derived_from_the_times() -> None:
    r = full_record()
    assert r.key == "ml-vision/group:g1"
    assert r.wait == pytest.approx(12.5 - 0.123456)
    assert r.duration == pytest.approx(3613.999999 - 13.000001)
    assert r.amount() == 2.0


def test_a_minimal_pending_line_reads_with_defaults() -> None:
    text = '{"namespace":"ns","name":"p","queue":"q","submitted":"2026-11-30T10:00:00Z","phase":"Pending"}\n'
    (r,) = load(io.StringIO(text))
    assert (r.key, r.team, r.group_size, r.priority, r.requests, r.released, r.wait) == (
        "ns/p",
        "",
        1,
        0,
        {},
        None,
        None,
    )


def test_times_with_offsets_and_nanoseconds_are_read_as_utc_microseconds() -> None:
    assert parse_time("2026-11-30T12:00:00.5+02:00") == T0 + 0.5
    assert parse_time("2026-11-30T10:00:00.123456789Z") == T0 + 0.123457
    assert format_time(T0 + 0.5) == "2026-11-30T10:00:00.500000Z"


def test_blank_lines_are_skipped_and_unknown_fields_ignored() -> None:
    good = json.loads(to_line(full_record()))
    good["recordedBy"] = "a newer recorder"
    records = list(read(["", json.dumps(good), "   "]))
    assert records == [full_record()]


def line(**changes: object) -> str:
    data: dict[str, object] = json.loads(to_line(full_record()))
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return json.dumps(data)


BAD = [
    ("not JSON", "{nope", 1, "", "not JSON"),
    ("a list, not an object", "[1, 2]", 1, "", "expected a JSON object, got list"),
    ("no namespace", line(namespace=None), 1, "namespace", "is missing"),
    ("a queue that is a number", line(queue=7), 1, "queue", "expected a string, got 7"),
    (
        "a time without a zone",
        line(submitted="2026-11-30T10:00:00"),
        1,
        "submitted",
        "is not an RFC 3339 time",
    ),
    ("a date alone", line(released="2026-11-30"), 1, "released", "is not an RFC 3339 time"),
    (
        "released before submitted",
        line(released="2026-11-30T09:00:00Z"),
        1,
        "released",
        "is before submitted",
    ),
    ("finished before bound", line(finished="2026-11-30T10:00:13Z"), 1, "finished", "is before bound"),
    ("an unknown phase", line(phase="Done"), 1, "phase", "'Done' is not one of Pending, Running"),
    (
        "Succeeded without finished",
        line(finished=None),
        1,
        "finished",
        "is missing, but the phase is Succeeded",
    ),
    (
        "Pending yet released",
        line(phase="Pending", finished=None),
        1,
        "released",
        "is set, but the phase is Pending",
    ),
    ("Running yet finished", line(phase="Running"), 1, "finished", "is set, but the phase is Running"),
    (
        "bound but never released",
        line(released=None),
        1,
        "released",
        "is missing, but the workload was bound",
    ),
    (
        "a bad quantity",
        line(requests={"nvidia.com/gpu": "two"}),
        1,
        "requests.nvidia.com/gpu",
        "is not a quantity",
    ),
    ("a negative quantity", line(requests={"cpu": "-1"}), 1, "requests.cpu", "is negative"),
    ("a group size without a group", line(group=None), 1, "groupSize", "names no group"),
    ("a group size of zero", line(groupSize=0), 1, "groupSize", "must be at least 1, got 0"),
    ("a limit without a workflow", line(workflow=None), 1, "workflowMaxRunning", "names no workflow"),
    ("a priority that is not whole", line(priority=1.5), 1, "priority", "expected a whole number, got 1.5"),
]


@pytest.mark.parametrize(
    ("text", "number", "field", "problem"), [c[1:] for c in BAD], ids=[c[0] for c in BAD]
)
def test_a_bad_line_is_refused_naming_its_line_and_field(
    text: str, number: int, field: str, problem: str
) -> None:
    good = to_line(Record(namespace="ns", name="first", queue="q", submitted=T0))
    with pytest.raises(TraceError) as caught:
        list(read([good, "", text], source="week.jsonl"))
    error = caught.value
    assert (error.line, error.field) == (number + 2, field)
    assert problem in error.problem
    assert str(error).startswith(f"week.jsonl line {number + 2}: {field + ': ' if field else ''}")


def test_a_workload_recorded_twice_is_refused_naming_both_lines() -> None:
    text = to_line(full_record())
    with pytest.raises(
        TraceError, match=r"line 3: workload ml-vision/group:g1 appears again \(first at line 1\)"
    ):
        list(read([text, "", text]))


def grouped(*pods: PodRun) -> Record:
    """``full_record`` (group g1, 2 GPUs, 500m cpu and 16Gi) with the pods it released."""
    return replace(full_record(), pods=pods)


HALF = MappingProxyType({"nvidia.com/gpu": 1000, "cpu": 250, "memory": 8 * 2**30 * 1000})
TRIAL_0 = PodRun("trial-0", T0 + 12.5, HALF, T0 + 12.9, "gpu-node-1", T0 + 3600)
TRIAL_1 = PodRun("trial-1", T0 + 12.5, HALF, T0 + 13.000001, "gpu-node-2", T0 + 3613.999999)


def test_a_groups_pods_read_back_and_are_its_runs_and_a_group_written_without_them_is_one_run() -> None:
    record = grouped(TRIAL_0, TRIAL_1)
    assert list(read([to_line(record)])) == [record]
    assert json.loads(to_line(record))["pods"][1] == {
        "name": "trial-1", "released": "2026-11-30T10:00:12.500000Z",
        "requests": {"cpu": "250m", "memory": "8589934592", "nvidia.com/gpu": "1"},
        "bound": "2026-11-30T10:00:13.000001Z", "node": "gpu-node-2",
        "finished": "2026-11-30T11:00:13.999999Z"}
    assert record.runs == (TRIAL_0, TRIAL_1)
    # As an older recorder wrote it: the workload is its one run.
    (older,) = read([to_line(full_record())])
    assert older.runs == (PodRun("trial-0", T0 + 12.5, full_record().requests, T0 + 13.000001, "gpu-node-1",
                                 T0 + 3613.999999),)


def pods_line(*pods: PodRun, unnamed: int | None = None, **changes: object) -> str:
    data: dict[str, Any] = json.loads(to_line(grouped(*pods)))
    if unnamed is not None:
        del data["pods"][unnamed]["name"]
    data.update(changes)
    return json.dumps(data)


BAD_PODS = [
    ("pods that do not add up to the requests", pods_line(TRIAL_0), "requests",
     "{cpu: 500m, memory: 17179869184, nvidia.com/gpu: 2}, but its pods ask for {cpu: 250m, "
     "memory: 8589934592, nvidia.com/gpu: 1} together"),
    ("a pod released before the workload", pods_line(TRIAL_0, replace(TRIAL_1, released=T0 + 12)),
     "pods[1].released", "is before the workload's released (2026-11-30T10:00:12.500000Z)"),
    ("a pod without an end in a workload that ended", pods_line(TRIAL_0, replace(TRIAL_1, finished=None)),
     "pods[1].finished", "is missing, but the workload ended (Succeeded)"),
    ("a pod bound before it was released", pods_line(replace(TRIAL_0, bound=T0 + 12), TRIAL_1),
     "pods[0].bound", "is before released"),
    ("a pod without a name", pods_line(TRIAL_0, TRIAL_1, unnamed=1),
     "pods[1].name", "is missing"),
    ("pods of a workload that is no group", pods_line(TRIAL_0, TRIAL_1, group=None, groupSize=None),
     "pods", "is set, but the workload names no group"),
    ("pods that are not a list", pods_line(TRIAL_0, TRIAL_1, pods={"a": 1}), "pods", "expected a list"),
]


@pytest.mark.parametrize(
    ("text", "field", "problem"), [c[1:] for c in BAD_PODS], ids=[c[0] for c in BAD_PODS]
)
def test_a_groups_pods_that_do_not_fit_its_record_are_refused_naming_the_pod_and_field(
    text: str, field: str, problem: str
) -> None:
    with pytest.raises(TraceError) as caught:
        list(read([text], source="week.jsonl"))
    assert (caught.value.line, caught.value.field) == (1, field)
    assert problem in caught.value.problem, caught.value.problem
