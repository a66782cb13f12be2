"""The figures a cycle leaves for Queue, Team and Policy status, and the release patch's shape."""

from __future__ import annotations

from controller.statuses import figures, quantity
from kube.writing import release_patch
from policy import keys
from policy.dispatching import dispatch
from tests.builders import T0, MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot


def test_quantities_are_written_as_kubernetes_writes_them() -> None:
    assert [quantity(m) for m in (0, 500, 1000, 16000, 1500)] == ["0", "500m", "1", "16", "1500m"]


def test_status_counts_releases_of_the_cycle_as_running_and_shows_limits_and_quota() -> None:
    pods = [MakePod("ns", f"p{i}").queue("train").team("vision").gpus(2).gated().created(i) for i in range(3)]
    snap = snapshot(pods, queues=[MakeQueue("train").max_running(2).quota(gpus=8)],
                    teams=[MakeTeam("vision").quota(gpus=16)], policy=MakePolicy().max_running(10),
                    now=T0 + 60)
    decision = dispatch(snap)
    out = figures(snap, decision.usage, [w.key for w in decision.release])

    queue = out.queue_status["train"]
    assert (queue["running"], queue["pending"]) == (2, 1)
    assert queue["display"] == {"running": "2/2", "gpus": "4/8"}
    assert queue["usage"] == {keys.GPU_RESOURCE: "4"}
    assert queue["oldestPendingTime"] == "2023-11-14T22:13:22Z"  # p2, created 2 s after T0
    team = out.team_status["vision"]
    assert (team["running"], team["pending"], team["display"]) == (2, 1, {"running": "2/-", "gpus": "4/16"})
    assert out.cluster_status["display"] == {"running": "2/10", "gpus": "4/-"}


def test_an_idle_queue_has_no_usage_and_no_oldest_pending_time() -> None:
    snap = snapshot([], queues=[MakeQueue("idle")])
    out = figures(snap, dispatch(snap).usage, [])
    idle = {"pending": 0, "running": 0, "display": {"running": "0/-", "gpus": "0/-"}}
    assert out.queue_status["idle"] == idle


def test_the_release_patch_tests_the_whole_gate_list_then_removes_only_sluicegates_gate() -> None:
    stamp = {keys.DISPATCHED_AT_ANNOTATION: "2026-01-01T00:00:00.000000Z"}
    assert release_patch([keys.GATE], stamp, has_annotations=True) == [
        {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]},
        {"op": "remove", "path": "/spec/schedulingGates"},
        {"op": "add", "path": "/metadata/annotations/sluicegate.dev~1dispatched-at",
         "value": "2026-01-01T00:00:00.000000Z"},
    ]
    other = release_patch(["a.io/x", keys.GATE], stamp, has_annotations=False)
    assert other[1] == {"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "a.io/x"}]}
    assert other[2] == {"op": "add", "path": "/metadata/annotations", "value": stamp}


def test_a_fractional_gpu_quota_is_shown_as_the_waiting_messages_write_it() -> None:
    pods = [MakePod("ns", "p0").queue("train").team("vision").gpus(1).gated()]
    snap = snapshot(pods, queues=[MakeQueue("train").quota(gpus="1.5")])
    out = figures(snap, dispatch(snap).usage, [])
    assert out.queue_status["train"]["display"]["gpus"] == "1/1500m"  # released: 1 of 1.5 in use
