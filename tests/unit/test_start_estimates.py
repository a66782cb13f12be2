"""Start estimates on the controller (controller.estimates, controller.holds): the estimator's
answers reach the visibility API's board, at most the share of a core they are given, from the
holds of the recorder's records and of the pods the controller sees end."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from controller.estimates import Estimator, Pace
from controller.holds import Learned, RecordReader
from controller.managed import ManagedPod
from controller.pending import NOT_ESTIMATED
from controller.pending import format_time as board_time
from controller.visibility import Viewer
from kube.connecting import ApiError
from kube.reflecting import Change
from policy.catalog import Catalog
from records.durations import Durations
from records.trace import Phase, Record, format_time, record_json
from simulator.estimating import NOTHING_RECORDED, PAUSED
from tests.builders import T0, MakePod, MakeQueue
from tests.unit.test_visibility import Pods

NOW = T0 + 60
SWEEPS = MakeQueue("sweeps").max_running(1)


# --- the pace: a bounded share of one core ---------------------------------------------------


def test_the_next_estimate_waits_nine_times_the_last_ones_cpu_at_a_tenth_of_a_core() -> None:
    pace = Pace(0.1)
    assert pace.due(0.0)
    pace.spent(ended=100.0, cpu=2.0)
    assert not pace.due(117.9)
    assert pace.due(118.0)


@pytest.mark.parametrize("share", [0.05, 0.1, 0.5, 1.0])
def test_estimates_as_often_as_allowed_take_at_most_their_share(share: float) -> None:
    # Each estimate starts as soon as it may and takes 3 s of CPU (wall = CPU: a core of its own).
    pace, now, spent = Pace(share), 0.0, 0.0
    for _ in range(50):
        assert not pace.due(now - 0.01) or now == 0.0  # not a moment earlier
        now = max(now, pace.next)
        assert pace.due(now)
        now += 3.0
        spent += 3.0
        pace.spent(now, 3.0)
    # Up to when the next may start, each estimate has had its CPU and k times as long idle.
    assert spent / pace.next == pytest.approx(share)


def test_a_share_outside_a_core_is_refused() -> None:
    for share in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            Pace(share)


# --- the holds the controller learns ---------------------------------------------------------


def change(old: MakePod | None, new: MakePod | None, uid: str = "") -> Change[ManagedPod]:
    o = ManagedPod(old.model()) if old is not None else None
    n = ManagedPod(new.model()) if new is not None else None
    pod = (n or o)
    assert pod is not None
    kind = "ADDED" if o is None else "DELETED" if n is None else "MODIFIED"
    return Change(kind, uid or pod.key, pod.key, o, n)


def trial(name: str) -> MakePod:
    return MakePod("vision-research", name).queue("sweeps").team("vision").gpus(1)


def test_a_released_pod_that_ends_teaches_its_hold_by_its_shape() -> None:
    wall = [T0 + 700]
    learned = Learned(wall=lambda: wall[0])
    running = trial("trial-1").dispatched(100)
    learned.pod_changed(change(None, trial("trial-1").gated()))
    learned.pod_changed(change(trial("trial-1").gated(), running))
    assert len(learned) == 0  # still running: nothing learned yet
    learned.pod_changed(change(running, None))  # it left the watch (Succeeded)
    holds = learned.durations().of(("sweeps", "", 1))
    assert holds is not None and holds.ordered == [600.0]


def test_a_pod_group_ends_when_its_last_released_pod_does() -> None:
    wall = [T0 + 500]
    learned = Learned(wall=lambda: wall[0])
    pods = [MakePod("ml", f"w{i}").queue("sweeps").team("vision").gpus(2).group("g", 2).dispatched(100 + i)
            for i in range(2)]
    for i, p in enumerate(pods):
        learned.pod_changed(change(None, p, uid=f"u{i}"))
    learned.pod_changed(change(pods[0], None, uid="u0"))
    assert len(learned) == 0
    wall[0] = T0 + 900
    learned.pod_changed(change(pods[1], None, uid="u1"))
    holds = learned.durations().of(("sweeps", "", 4))  # both pods' GPUs: the group's shape
    assert holds is not None and holds.ordered == [800.0]  # from its first release to its last pod's end


def test_a_pod_that_leaves_while_gated_teaches_nothing() -> None:
    learned = Learned(wall=lambda: NOW)
    learned.pod_changed(change(None, trial("trial-1").gated()))
    learned.pod_changed(change(trial("trial-1").gated(), None))
    assert len(learned) == 0 and len(learned.durations()) == 0


def record(name: str, released: float, finished: float | None) -> Record:
    return Record(namespace="vision-research", name=name, queue="sweeps", submitted=released, team="vision",
                  phase=Phase.SUCCEEDED if finished is not None else Phase.RUNNING,
                  requests={"nvidia.com/gpu": 1000}, released=released, finished=finished)


def test_records_and_the_watch_speak_once_for_one_workload_and_old_holds_drop_out() -> None:
    wall = [T0 + 10 * 86400]
    learned = Learned(window=86400, wall=lambda: wall[0])
    assert learned.recorded([record("a", T0, T0 + 100),  # ended nine days ago: out of the window
                             record("b", wall[0] - 900, wall[0] - 300),
                             record("c", wall[0] - 60, None)]) == 2  # c still runs
    running = trial("b").dispatched(wall[0] - 900 - T0)
    learned.pod_changed(change(None, running))
    learned.pod_changed(change(running, None))  # the watch saw b end too: still one hold of b
    assert learned.durations().cluster == [900.0]


class Recorder:
    """The API server in front of the recorder: answers each read from ``answers`` in turn."""

    def __init__(self, *answers: Mapping[str, Any] | Exception) -> None:
        self.answers = list(answers)
        self.asked: list[Mapping[str, str] | None] = []

    async def request(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
                      timeout: float = 0) -> Mapping[str, Any]:
        assert method == "GET"
        assert path == "/apis/records.sluicegate.dev/v1alpha1/namespaces/sluicegate-system/records"
        self.asked.append(query)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def listing(now: float, *records: Record) -> dict[str, Any]:
    return {"kind": "RecordList", "now": format_time(now), "items": [record_json(r) for r in records]}


async def test_the_recorder_is_read_for_a_window_then_for_what_is_new_and_failing_keeps_the_holds() -> None:
    learned = Learned(window=3600, wall=lambda: NOW)
    recorder = Recorder(listing(NOW, record("a", NOW - 500, NOW - 100)),
                        ApiError(503, "ServiceUnavailable", "the recorder is down"),
                        listing(NOW + 300, record("b", NOW - 50, NOW + 250)))
    reader = RecordReader(recorder, learned, "sluicegate-system")  # type: ignore[arg-type]
    assert await reader.read() == 1
    with pytest.raises(ApiError):
        await reader.read()
    assert len(learned) == 1  # what was learned stays
    assert await reader.read() == 1
    assert recorder.asked == [{"since": format_time(NOW - 3600)}, {"since": format_time(NOW - 60)},
                              {"since": format_time(NOW - 60)}]
    assert learned.durations().cluster == [300.0, 400.0]


async def test_a_recorder_that_is_down_never_stops_the_reader() -> None:
    learned = Learned(wall=lambda: NOW)
    recorder = Recorder(ApiError(404, "NotFound", "no records API"), listing(NOW, record("a", NOW - 90, NOW)))
    reader = RecordReader(recorder, learned, "sluicegate-system", seconds=0.0)  # type: ignore[arg-type]
    running = asyncio.create_task(reader.run())
    while len(learned) == 0:
        await asyncio.sleep(0)
    running.cancel()
    assert learned.durations().cluster == [90.0]


# --- the board carries the estimates --------------------------------------------------------


def pods() -> list[MakePod]:
    """trial-0 runs in sweeps (maxRunning 1) since 50 s after T0; two wait behind it."""
    return [trial("trial-0").dispatched(50),
            trial("trial-1").gated().created(1), trial("trial-2").gated().created(2)]


def viewer(made: list[MakePod], durations: Durations, clock: list[float], queue: MakeQueue = SWEEPS,
           cpu: list[float] | None = None) -> tuple[Viewer, Estimator]:
    spent = cpu if cpu is not None else [0.0]
    estimator = Estimator(lambda: durations, share=0.5, clock=lambda: clock[0], cpu=lambda: spent[0])
    shown = Viewer(Pods(made), lambda: Catalog(queues={"sweeps": queue.model()}), lambda ns: "vision",
                   estimator=estimator, seconds=2.0, clock=lambda: clock[0], wall=lambda: NOW)
    return shown, estimator


def holds(*seconds: float) -> Durations:
    return Durations.of_holds((("sweeps", "", 1), s) for s in seconds)


async def test_the_board_serves_the_last_estimate_made_from_an_earlier_board() -> None:
    clock = [0.0]
    shown, estimator = viewer(pods(), holds(100, 100, 100), clock)
    first = await shown.board()  # no estimate yet: it starts one from this board's snapshot
    unknown = {"unknown": NOT_ESTIMATED}
    assert [i["expectedStart"] for i in first.namespace("vision-research")] == [unknown, unknown]
    await estimator.wait()
    clock[0] = 2.0
    second = await shown.board()
    # trial-0 has run 10 s of its 100: trial-1 starts in 90 s, trial-2 100 s after it.
    assert [(i["metadata"]["name"], i["expectedStart"]) for i in second.namespace("vision-research")] == [
        ("trial-1", {"p10Seconds": 90, "p50Seconds": 90, "p90Seconds": 90, "p50Time": board_time(NOW + 90),
                     "p90Time": board_time(NOW + 90), "estimatedAt": board_time(NOW)}),
        ("trial-2", {"p10Seconds": 190, "p50Seconds": 190, "p90Seconds": 190,
                     "p50Time": board_time(NOW + 190), "p90Time": board_time(NOW + 190),
                     "estimatedAt": board_time(NOW)})]


async def test_a_paused_queue_and_nothing_recorded_are_unknown_with_their_reason() -> None:
    clock = [0.0]
    shown, estimator = viewer(pods(), holds(100), clock, queue=MakeQueue("sweeps").max_running(1).paused())
    await shown.board()
    await estimator.wait()
    clock[0] = 2.0
    paused = (await shown.board()).namespace("vision-research")
    assert [i["expectedStart"] for i in paused] == [{"unknown": PAUSED, "estimatedAt": board_time(NOW)}] * 2

    clock = [0.0]
    shown, estimator = viewer(pods(), Durations(), clock)
    await shown.board()
    await estimator.wait()
    clock[0] = 2.0
    assert {i["expectedStart"]["unknown"] for i in (await shown.board()).namespace("vision-research")} == {
        NOTHING_RECORDED}


async def test_boards_built_meanwhile_keep_the_last_estimates_until_the_pace_allows_the_next() -> None:
    clock, cpu = [0.0], [0.0]
    shown, estimator = viewer(pods(), holds(100, 100, 100), clock, cpu=cpu)
    await shown.board()
    await estimator.wait()
    assert estimator.made == 1
    first = estimator.latest
    # The estimate's CPU as the estimator measured it was 0 s here: make the pace's wait 5 s
    # (share 0.5: as long again as the last one's CPU).
    estimator.pace.spent(ended=0.0, cpu=5.0)
    for now in (2.0, 4.0):
        clock[0] = now
        board = await shown.board()
        await estimator.wait()
        assert estimator.made == 1 and estimator.latest is first
        assert board.namespace("vision-research")[0]["expectedStart"]["estimatedAt"] == board_time(NOW)
    clock[0] = 6.0
    await shown.board()
    await estimator.wait()
    assert estimator.made == 2
