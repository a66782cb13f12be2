"""The recorder's pure core: a pod's life as it is seen over time, and the workload records
(the trace lines) that pods' lives make."""

from __future__ import annotations

import json
from typing import Any

from policy import keys
from recorder.lives import Life, deleted, life_json, observe, parse_life, workloads
from recorder.recording import LAST_APPLIED, slim
from records.accounting import account
from records.trace import Phase, parse_record, record_json
from tests.builders import T0, MakePod, timestamp


def stamped(pod: MakePod, *, admitted: float, dispatched: float | None = None) -> dict[str, Any]:
    obj = pod.admitted(admitted).obj()
    if dispatched is not None:
        obj["metadata"]["annotations"][keys.DISPATCHED_AT_ANNOTATION] = (
            f"{timestamp(T0 + dispatched)[:-1]}.{round((dispatched % 1) * 1e6):06d}Z"
        )
    return obj


def scheduled(obj: dict[str, Any], at: float) -> dict[str, Any]:
    obj["status"].setdefault("conditions", []).append(
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": timestamp(T0 + at)}
    )
    return obj


def terminated(obj: dict[str, Any], at: float) -> dict[str, Any]:
    obj["status"]["containerStatuses"] = [
        {"name": "main", "state": {"terminated": {"exitCode": 0, "finishedAt": timestamp(T0 + at)}}}
    ]
    return obj


def being_deleted(obj: dict[str, Any], at: float, grace: int = 0) -> dict[str, Any]:
    """``obj`` with the deletion the API server records: a deletionTimestamp ``grace`` seconds
    after the request at ``at`` (0 for a pod no node runs), kept by a finalizer."""
    meta = obj["metadata"]
    meta["deletionTimestamp"] = timestamp(T0 + at + grace)
    meta["deletionGracePeriodSeconds"] = grace
    meta["finalizers"] = ["example.com/keep"]
    return obj


def pod(name: str = "p") -> MakePod:
    return MakePod("ml", name).queue("train").team("vision").gpus(2)


def test_a_pod_seen_live_is_dated_by_its_stamps_and_by_when_its_changes_were_seen() -> None:
    gated = stamped(pod().gated(), admitted=0.25)
    life = observe(gated, T0 + 0.3)
    assert (life.submitted, life.released, life.phase) == (T0 + 0.25, None, Phase.PENDING)
    assert (life.queue, life.team, life.requests) == ("train", "vision", {keys.GPU_RESOURCE: 2000})

    # The controller decided at 10.5 (its stamp); the recorder saw the pod at 10.6.
    released = stamped(pod().ungated(), admitted=0.25, dispatched=10.5)
    life = observe(released, T0 + 10.6, life)
    assert (life.released, life.phase) == (T0 + 10.5, Phase.RUNNING)

    # Bound at 10.7 (the condition says second 10), seen at 10.75: seen live, the moment it was seen.
    bound = scheduled(stamped(pod().running("gpu-1"), admitted=0.25, dispatched=10.5), at=10)
    life = observe(bound, T0 + 10.75, life)
    assert (life.bound, life.node) == (T0 + 10.75, "gpu-1")

    done = terminated(scheduled(stamped(pod().finished(), admitted=0.25, dispatched=10.5), at=10), at=70)
    done["spec"]["nodeName"] = "gpu-1"
    life = observe(done, T0 + 70.2, life)
    assert (life.finished, life.phase) == (T0 + 70.2, Phase.SUCCEEDED)
    # An ended life is never moved again.
    assert observe(done, T0 + 500, life) == life


def test_a_pod_that_finished_while_the_recorder_was_away_is_dated_by_its_own_times() -> None:
    """First seen at 900, long after: bound and finished are the end of the seconds the pod
    names (at most a second late), not the moment the recorder came back."""
    done = terminated(scheduled(stamped(pod().finished(), admitted=0.5, dispatched=3.25), at=4), at=64)
    done["spec"]["nodeName"] = "gpu-2"
    life = observe(done, T0 + 900)
    times = (life.submitted, life.released, life.bound, life.finished)
    assert times == (T0 + 0.5, T0 + 3.25, T0 + 5, T0 + 65)
    assert life.phase is Phase.SUCCEEDED


def test_a_release_by_hand_has_no_stamp_and_is_dated_when_seen() -> None:
    life = observe(stamped(pod().gated(), admitted=0), T0 + 1)
    life = observe(stamped(pod().ungated(), admitted=0), T0 + 7, life)
    assert life.released == T0 + 7


def test_a_pod_deleted_before_its_end_is_recorded_as_deleted_when_seen_or_when_noticed() -> None:
    life = observe(stamped(pod().gated(), admitted=0), T0 + 1)
    gone = deleted(life, T0 + 30)
    assert (gone.phase, gone.finished, gone.lost) == (Phase.DELETED, T0 + 30, False)
    lost = deleted(life, T0 + 99, lost=True)
    assert (lost.phase, lost.finished, lost.lost) == (Phase.DELETED, T0 + 99, True)
    # A pod that had finished stays as it finished.
    done = observe(terminated(stamped(pod().finished(), admitted=0, dispatched=1), at=9), T0 + 9.5)
    assert deleted(done, T0 + 40) == done


def test_a_pod_deleted_while_gated_ends_deleted_even_if_its_gate_is_removed_and_it_runs_later() -> None:
    """A finalizer keeps a gated pod deleted at 10; something removes its gate a second later
    (the stamp says 11.2), it is bound and fails. Its life ended at the deletion: no release, no
    wait, no job."""
    life = observe(stamped(pod().gated(), admitted=0.5), T0 + 1)
    life = observe(being_deleted(stamped(pod().gated(), admitted=0.5), at=10), T0 + 10.3, life)
    assert (life.phase, life.released, life.finished) == (Phase.DELETED, None, T0 + 10.3)

    released = being_deleted(stamped(pod().ungated(), admitted=0.5, dispatched=11.2), at=10)
    bound = scheduled(being_deleted(stamped(pod().running("gpu-1"), admitted=0.5, dispatched=11.2), at=10),
                      at=12)
    failed = terminated(scheduled(being_deleted(stamped(pod().finished("Failed"), admitted=0.5,
                                                        dispatched=11.2), at=10), at=12), at=15)
    for now, later in ((11.3, released), (12.5, bound), (15.5, failed)):
        assert observe(later, T0 + now, life) == life
    assert deleted(life, T0 + 20) == life  # the finalizer goes, and with it the pod

    (record,) = workloads([life])
    assert (record.phase, record.released, record.bound, record.finished) == (
        Phase.DELETED, None, None, T0 + 10.3)
    report = account([record], since=T0, until=T0 + 60)
    assert (report.total.jobs, report.total.waits.count, report.total.waiting, report.total.gpu_hours) == (
        0, 0, 0, 0)


def test_a_deletion_seen_only_after_the_fact_counts_a_release_only_when_the_pod_shows_it_came_first() -> None:
    """First seen after a restart. Released at 11.2 after a deletion at 10: deleted while it
    waited. Released at 3.5 and bound at 4, then deleted gracefully at 40 (its deletionTimestamp
    30 s later): it ran."""
    late = terminated(scheduled(being_deleted(stamped(pod().finished("Failed"), admitted=0.5,
                                                      dispatched=11.2), at=10), at=12), at=15)
    life = observe(late, T0 + 900)
    assert (life.phase, life.released, life.bound, life.finished) == (Phase.DELETED, None, None, T0 + 11)

    ran = being_deleted(scheduled(stamped(pod().running("gpu-2"), admitted=0.5, dispatched=3.5), at=4),
                        at=40, grace=30)
    life = observe(ran, T0 + 900)
    assert (life.phase, life.released, life.bound) == (Phase.RUNNING, T0 + 3.5, T0 + 5)
    by_hand = being_deleted(scheduled(stamped(pod().running("gpu-2"), admitted=0.5), at=4), at=40, grace=30)
    assert observe(by_hand, T0 + 900).phase is Phase.RUNNING  # no stamp, but bound before the deletion


def test_a_group_makes_one_workload_whose_times_are_its_pods() -> None:
    """Released with the first pod, bound with the last, finished with the last; requests summed."""
    a = Life("a", "ml", "g-0", "train", T0, team="vision", group="g", group_size=2,
             requests={"nvidia.com/gpu": 1000},
             released=T0 + 5, bound=T0 + 6, node="n1", finished=T0 + 60, phase=Phase.SUCCEEDED)
    b = Life("b", "ml", "g-1", "train", T0 + 0.1, team="vision", group="g", group_size=2,
             requests={"nvidia.com/gpu": 1000}, released=T0 + 5, bound=T0 + 7, node="n2", finished=T0 + 61,
             phase=Phase.SUCCEEDED, priority=5)
    solo = Life("c", "ml", "solo", "train", T0 + 1, workflow="sweep", workflow_max_running=3)
    group, single = workloads([b, solo, a])
    assert (group.key, group.name, group.submitted, group.released, group.bound, group.finished) == (
        "ml/group:g", "g-0", T0, T0 + 5, T0 + 7, T0 + 61)
    assert (group.requests, group.priority, group.group_size, group.node, group.phase) == (
        {"nvidia.com/gpu": 2000}, 5, 2, "n1", Phase.SUCCEEDED)
    assert (single.key, single.phase, single.workflow, single.workflow_max_running) == (
        "ml/solo", Phase.PENDING, "sweep", 3)
    # A group with one pod still running is running.
    still = workloads([a, Life("b", "ml", "g-1", "train", T0, group="g", released=T0 + 5)])[0]
    assert (still.phase, still.finished, still.bound) == (Phase.RUNNING, None, None)


def test_a_name_used_again_after_its_pod_was_deleted_is_another_workload() -> None:
    first = Life("u1", "ml", "dup", "train", T0, requests={"nvidia.com/gpu": 1000},
                 released=T0 + 1, bound=T0 + 2, node="n1", finished=T0 + 5, phase=Phase.SUCCEEDED)
    second = Life("u2", "ml", "dup", "train", T0 + 10, requests={"nvidia.com/gpu": 2000}, released=T0 + 11)
    older, newer = workloads([second, first])
    assert (older.key, newer.key) == ("ml/dup", "ml/dup#1")
    assert (older.submitted, older.requests, older.finished, older.node) == (
        T0, {"nvidia.com/gpu": 1000}, T0 + 5, "n1")
    assert (newer.submitted, newer.requests, newer.released, newer.bound, newer.phase) == (
        T0 + 10, {"nvidia.com/gpu": 2000}, T0 + 11, None, Phase.RUNNING)


def test_a_group_name_used_again_once_every_pod_of_its_run_had_ended_is_another_workload() -> None:
    def member(uid: str, submitted: float, finished: float | None) -> Life:
        return Life(uid, "ml", f"g-{uid}", "train", T0 + submitted, group="g", group_size=2,
                    released=T0 + submitted + 1, finished=None if finished is None else T0 + finished,
                    phase=Phase.PENDING if finished is None else Phase.SUCCEEDED)

    # a and b ran together; c joined while b still ran (a replacement); d and e came after all ended.
    runs = workloads([member("a", 0, 5), member("b", 0.5, 9), member("c", 6, 12),
                      member("d", 20, None), member("e", 20.5, None)])
    assert [(r.submitted - T0, r.phase) for r in runs] == [(0, Phase.SUCCEEDED), (20, Phase.RUNNING)]
    assert runs[0].finished == T0 + 12
    assert [r.key for r in runs] == ["ml/group:g", "ml/group:g#1"]
    assert [parse_record(record_json(r)) for r in runs] == runs


def test_every_workload_record_is_a_valid_trace_line_and_lives_survive_the_database() -> None:
    life = observe(terminated(scheduled(stamped(pod().finished(), admitted=0, dispatched=2), at=2), at=30),
                   T0 + 31)
    assert parse_life(life_json(life)) == life
    (record,) = workloads([life])
    assert parse_record(record_json(record)) == record


def test_the_slim_pod_the_recorder_keeps_records_the_same_life_as_the_whole_pod() -> None:
    whole = (pod("big").created(0).admitted(0.25).workflow("sweep", 3).group("g", 2).priority(7)
             .init_container("setup", resources={"requests": {"cpu": "2"}}, restartPolicy="Always")
             .container("sidecar", env=[{"name": "A", "value": "x" * 1000}],
                        resources={"requests": {"memory": "1Gi"}})
             .spec(volumes=[{"name": "data", "emptyDir": {}}], overhead={"cpu": "100m"})
             .annotation(LAST_APPLIED, json.dumps({"big": "y" * 5000}))
             .running("node-1"))
    obj = terminated(scheduled(whole.obj(), at=3), at=30)
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {"x": "y" * 5000}}}]
    kept = slim(obj)
    assert observe(kept, T0 + 31) == observe(obj, T0 + 31)
    assert len(json.dumps(kept)) < len(json.dumps(obj)) / 10
