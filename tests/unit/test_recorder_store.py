"""The recorder's database, its reconciliation after a restart, and its read-only API.

The reflector's list is played with the records of what the API server would answer (its
``_replace`` is what a list does), so no cluster is needed; the e2e tests kill the real process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from aiohttp.test_utils import TestClient, TestServer

from kube.connecting import Connection
from recorder.application import build_app
from recorder.metrics import RecorderMetrics
from recorder.recording import Recorder
from recorder.store import Store
from records.sources import RecordList
from records.trace import Phase
from tests.builders import T0, MakePod
from tests.unit.test_callers import READER, Answers
from tests.unit.test_recorder_lives import scheduled, stamped, terminated

Obj = dict[str, Any]


def pod(name: str) -> MakePod:
    return MakePod("ml", name).queue("train").team("vision").gpus(1)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def recorder(path: Path, clock: Clock) -> Recorder:
    # The reflector is never run here: the test plays its lists.
    return Recorder(cast(Connection, None), Store(path), RecorderMetrics(), clock=clock)


def lists(r: Recorder, *pods: Obj) -> None:
    for i, obj in enumerate(pods):
        obj["metadata"]["resourceVersion"] = f"{r.reflector.lists}-{i}"
    r.reflector._replace(list(pods))
    r.reflector.lists += 1


def test_a_restart_records_what_finished_meanwhile_and_counts_what_vanished(tmp_path: Path) -> None:
    clock = Clock(T0 + 10)
    first = recorder(tmp_path / "records.db", clock)
    lists(
        first,
        stamped(pod("waits").gated(), admitted=0),
        stamped(pod("goes").running("n1"), admitted=0, dispatched=2),
        stamped(pod("runs").running("n1"), admitted=0, dispatched=2),
    )
    assert first.reconcile() == 0
    assert first.store.flush() == 3
    # Killed here: nothing more is written. Meanwhile "waits" ran and finished, "goes" was
    # deleted, "runs" goes on, and "new" arrived.
    clock.now = T0 + 500
    second = recorder(tmp_path / "records.db", clock)
    done = terminated(scheduled(stamped(pod("waits").finished(), admitted=0, dispatched=40), at=41), at=100)
    done["spec"]["nodeName"] = "n2"
    lists(second, done, stamped(pod("runs").running("n1"), admitted=0, dispatched=2),
          stamped(pod("new").gated(), admitted=0.5))
    assert second.reconcile() == 1
    second.store.flush()

    lives = {life.name: life for life in second.store.lives()}
    assert set(lives) == {"waits", "goes", "runs", "new"}  # nothing dropped, nothing twice
    assert (lives["waits"].phase, lives["waits"].released, lives["waits"].finished) == (
        Phase.SUCCEEDED, T0 + 40, T0 + 101)
    gone = lives["goes"]
    assert (gone.phase, gone.lost, gone.finished) == (Phase.DELETED, True, T0 + 500)
    assert (lives["runs"].phase, lives["runs"].released) == (Phase.RUNNING, T0 + 2)
    assert lives["new"].phase is Phase.PENDING
    assert second.store.losses() == 1 and second.store.count() == 4


def test_a_watched_deletion_ends_the_life_and_retention_forgets_old_ends(tmp_path: Path) -> None:
    clock = Clock(T0 + 5)
    r = recorder(tmp_path / "records.db", clock)
    lists(r, stamped(pod("a").gated(), admitted=0), stamped(pod("b").gated(), admitted=0))
    clock.now = T0 + 20
    lists(r, stamped(pod("b").gated(), admitted=0))  # a is gone from the next list
    r.store.flush()
    lives = {life.name: life for life in r.store.lives()}
    assert (lives["a"].phase, lives["a"].finished, lives["a"].lost) == (Phase.DELETED, T0 + 20, False)
    assert r.store.forget_before(T0 + 21) == 1
    assert [life.name for life in r.store.lives()] == ["b"]


def test_the_database_and_its_journal_are_the_recorders_alone(tmp_path: Path) -> None:
    """Every team's pod names and submitters are in the file: other users of the host read nothing."""
    path = tmp_path / "records.db"
    path.touch(mode=0o644)  # left readable by an older recorder
    r = recorder(path, Clock(T0 + 5))
    lists(r, stamped(pod("a").gated(), admitted=0))
    r.store.flush()
    files = [f for f in tmp_path.iterdir() if f.name.startswith("records.db")]
    assert {f.name for f in files} >= {"records.db", "records.db-wal"}
    assert {f.name: oct(f.stat().st_mode & 0o777) for f in files} == {f.name: "0o600" for f in files}


async def test_the_api_answers_a_record_list_of_workloads_from_a_time(tmp_path: Path) -> None:
    store = Store(tmp_path / "records.db")
    r = Recorder(cast(Connection, None), store, RecorderMetrics(), clock=Clock(T0 + 200))
    done = terminated(stamped(pod("old").finished(), admitted=0, dispatched=1), at=50)
    lists(r, done, stamped(pod("now").gated(), admitted=0))
    store.flush()
    answers = Answers({"t": READER}, allowed=(READER.user,))
    app = build_app(store, RecorderMetrics(), answers, clock=lambda: T0 + 300)
    client: TestClient[Any, Any] = TestClient(TestServer(app))
    await client.start_server()
    try:
        token = {"Authorization": "Bearer t"}
        everything = RecordList.from_json(await (await client.get("/records", headers=token)).json())
        later = RecordList.from_json(await (await client.get(
            "/records", params={"since": "2023-11-14T22:16:00Z"}, headers=token)).json())  # T0 + 160
        bad = await client.get("/records", params={"since": "yesterday"}, headers=token)
        assert bad.status == 400 and "since" in (await bad.json())["error"]
    finally:
        await client.close()
    assert sorted(rec.name for rec in everything.records) == ["now", "old"]
    assert [rec.name for rec in later.records] == ["now"]  # "old" ended at T0 + 51
    assert (everything.now, everything.lost) == (T0 + 300, 0)
