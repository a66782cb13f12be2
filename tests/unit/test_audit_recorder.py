"""The recorder's handling of what its watches deliver, fed by hand (no cluster): first list,
watch events, a relist after 410 Gone, namespaces' teams, and pods it cannot read."""

from __future__ import annotations

import os

from audit.connection import Credentials
from audit.recording import NamespaceTeams, Recorder, Tally
from audit.records import Kind
from audit.scraping import process_usage
from tests.builders import MakePod


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def recorder() -> tuple[Recorder, Clock]:
    clock = Clock()
    return Recorder(Credentials("https://127.0.0.1:1"), clock=clock, wall=lambda: clock.now + 1e9), clock


def test_pods_already_there_at_the_first_list_are_marked_preexisting() -> None:
    rec, _ = recorder()
    rec.listed([MakePod("ns", "waiting").queue("a").gated().obj(), MakePod("ns", "old").running("n1").obj()])
    record = rec.snapshot()
    by_name = {p.name: p for p in record.pods.values()}
    assert all(p.preexisting for p in by_name.values())
    assert record.kinds(by_name["waiting"].uid) == [Kind.CREATED]
    assert record.kinds(by_name["old"].uid) == [Kind.CREATED, Kind.UNGATED, Kind.BOUND, Kind.RUNNING]


def test_watch_events_become_transitions_with_the_time_they_were_seen() -> None:
    rec, clock = recorder()
    rec.listed([])
    pod = MakePod("ns", "p").queue("a").gpus(2).gated()
    rec.changed("ADDED", pod.obj())
    clock.now = 101.5
    rec.changed("MODIFIED", pod.ungated().obj())
    clock.now = 102.0
    rec.changed("MODIFIED", pod.running("gpu-node-3").obj())
    clock.now = 104.0
    rec.changed("MODIFIED", pod.finished().obj())
    clock.now = 105.0
    rec.changed("DELETED", pod.obj())
    record = rec.snapshot()
    (info,) = record.pods.values()
    assert (info.preexisting, info.gpus, info.queue) == (False, 2, "a")
    assert [(e.kind, e.at, e.detail) for e in record.events] == [
        (Kind.CREATED, 100.0, "sluicegate.dev/dispatch"), (Kind.UNGATED, 101.5, "sluicegate.dev/dispatch"),
        (Kind.BOUND, 102.0, "gpu-node-3"), (Kind.RUNNING, 102.0, ""), (Kind.SUCCEEDED, 104.0, ""),
        (Kind.DELETED, 105.0, ""),
    ]
    assert record.events[0].wall == 100.0 + 1e9
    assert rec.tally() == Tally(pods=1, released=1, finished=1)


def test_a_relist_records_pods_deleted_and_created_while_the_watch_was_away() -> None:
    rec, clock = recorder()
    stays, goes = MakePod("ns", "stays").gated(), MakePod("ns", "goes").gated()
    rec.listed([stays.obj(), goes.obj()])
    clock.now = 130.0
    rec.listed([stays.ungated().obj(), MakePod("ns", "new").gated().obj()])
    record = rec.snapshot()
    by_name = {p.name: p for p in record.pods.values()}
    assert record.kinds(by_name["goes"].uid) == [Kind.CREATED, Kind.DELETED]
    assert record.kinds(by_name["stays"].uid) == [Kind.CREATED, Kind.UNGATED]
    assert not by_name["new"].preexisting
    assert [e.at for e in record.history(by_name["goes"].uid)] == [100.0, 130.0]


def test_pods_take_their_namespaces_team_when_they_carry_none() -> None:
    rec, _ = recorder()
    teams = NamespaceTeams(rec)
    teams.listed([{"metadata": {"name": "ml", "labels": {"sluicegate.dev/team": "vision"}}},
                  {"metadata": {"name": "other"}}])
    rec.listed([MakePod("ml", "p").obj(), MakePod("other", "q").obj(),
                MakePod("ml", "own").team("nlp").obj()])
    assert sorted((p.name, p.team) for p in rec.snapshot().pods.values()) == [
        ("own", "nlp"), ("p", "vision"), ("q", ""),
    ]


def test_a_pod_the_recorder_cannot_read_is_skipped_and_the_record_goes_on() -> None:
    rec, _ = recorder()
    broken = MakePod("ns", "broken").obj()
    broken["spec"]["schedulingGates"] = "not-a-list"
    rec.listed([broken, MakePod("ns", "fine").obj()])
    assert [p.name for p in rec.snapshot().pods.values()] == ["fine"]


def test_a_live_process_reports_cpu_seconds_and_a_peak_rss_at_least_its_rss() -> None:
    usage = process_usage(os.getpid())
    assert usage.cpu_seconds > 0
    assert usage.peak_rss_bytes >= usage.rss_bytes > 0
