"""The recorder's answers as the CLI reads them: ``RecordList``, the live ``Recorded`` source,
and ``sluicegate records export`` writing them as a trace. (The real path, through the API
server's aggregation layer, is in tests/e2e/test_recorder.py and tests/e2e/test_listeners.py.)"""

from __future__ import annotations

import argparse
import io
import json

import pytest

from cli import recorder
from cli.__main__ import main
from records.sources import Recorded, RecordList
from records.trace import TraceError, format_time, load, record_json
from tests.builders import T0
from tests.traces import job


def answer(lost: int = 0) -> dict[str, object]:
    return {
        "kind": "RecordList",
        "now": format_time(T0 + 100),
        "lost": lost,
        "items": [record_json(job("a", "q", at=0, runs=10)), record_json(job("b", "q", at=50, runs=10))],
    }


def test_a_record_list_is_read_and_anything_else_is_refused_naming_the_recorder() -> None:
    listed = RecordList.from_json(answer(lost=2))
    assert [r.name for r in listed.records] == ["a", "b"]
    assert (listed.now, listed.lost) == (T0 + 100, 2)
    with pytest.raises(TraceError, match=r"recorder.*expected a RecordList"):
        RecordList.from_json({"kind": "Status", "message": "no endpoints available"})


def test_the_live_source_asks_once_per_period_and_keeps_what_touches_it() -> None:
    asked: list[float | None] = []

    def fetch(since: float | None) -> RecordList:
        asked.append(since)
        return RecordList.from_json(answer())

    source = Recorded(fetch, clock=lambda: T0 + 500)
    assert source.now() == T0 + 500
    assert [r.name for r in source.records(T0 + 55)] == ["b"]  # a ended at T0 + 10
    assert [r.name for r in source.records(T0 + 55)] == ["b"]
    assert asked == [T0 + 55]


def test_export_writes_the_trace_and_says_how_many_pods_were_lost(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[float | None] = []

    def fetch(args: argparse.Namespace, since: float | None) -> RecordList:
        seen.append(since)
        assert recorder.path(args) == (
            "/apis/records.sluicegate.dev/v1alpha1/namespaces/sluicegate-system/records")
        return RecordList.from_json(answer(lost=3))

    monkeypatch.setattr(recorder, "fetch", fetch)
    assert main(["records", "export", "--since", "2h"]) == 0
    out, err = capsys.readouterr()
    assert [r.name for r in load(io.StringIO(out))] == ["a", "b"]
    assert all(json.loads(line)["queue"] == "q" for line in out.splitlines())
    assert "exported 2 workloads" in err and "3 pods were deleted while the recorder was not running" in err
    assert seen[0] is not None


def test_export_refuses_a_since_it_cannot_read() -> None:
    assert main(["records", "export", "--since", "last tuesday"]) == 1


def test_a_since_longer_than_all_time_asks_for_every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float | None] = []

    def fetch(args: argparse.Namespace, since: float | None) -> RecordList:
        seen.append(since)
        return RecordList.from_json(answer(lost=0))

    monkeypatch.setattr(recorder, "fetch", fetch)
    assert main(["records", "export", "--since", "99999999d", "-o", "/dev/null"]) == 0
    assert seen == [0.0]
