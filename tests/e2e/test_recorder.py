"""The run recorder on the real control plane, read as a user reads it: ``sluicegate records
export`` and ``sluicegate report`` through the API server (the aggregated API
records.sluicegate.dev) with the admin's kubeconfig.

* Fidelity: a run with several queues and teams, a workflow limit, queue and pod priorities and
  a couple of hundred pods with set durations is recorded, exported and replayed under the same
  Queues and Teams; the simulator releases each queue's work in the observed order, and at
  least 95 % of workloads' simulated waits are within 1 s of the observed ones. ``report
  --png`` from the live records draws a real chart, and its table agrees with the records.
* A recorder killed in the middle of a run, while the controller's leader is killed too and
  pods are deleted: after its restart every pod the test submitted has exactly one record,
  the deleted ones as Deleted and counted, the rest complete and released once.
* A pod released by policy that Kubernetes never places is recorded released and never
  bound: ``report`` gives it no GPU-hour, and counts the time it held its quota apart, as
  quota-hours.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.connection import Connection, Credentials
from cli.charting import HEIGHT, WIDTH
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from policy.keys import UNPLACEABLE
from process import kubeyaml
from records.sources import RecordList
from records.trace import Phase, Record, format_time, load, parse_time
from simulator.setups import parse_setup
from simulator.simulating import simulate
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene
from tests.e2e.test_failover import kill, leader

RUN_SECONDS = 240.0  # an upper bound for the runs below to drain, not a performance target


def sluicegate_cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``sluicegate`` command, as a user runs it, with the cluster admin's kubeconfig."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env,
                          check=True, timeout=120)


def export(cluster: LocalCluster, tmp: Path, namespaces: Sequence[str]) -> tuple[list[Record], str]:
    """The scene's records, through ``sluicegate records export``, and what it said on stderr."""
    out = sluicegate_cli(cluster, "records", "export", "--since", "1h")
    path = tmp / "trace.jsonl"
    path.write_text(out.stdout)
    with path.open() as stream:
        return [r for r in load(stream, str(path)) if r.namespace in namespaces], out.stderr


def finished(scene: Scene, namespaces: Sequence[str], count: int) -> bool:
    done = 0
    for namespace in namespaces:
        pods = json.loads(scene.kubectl("get", "pods", "-n", namespace, "-o", "json"))["items"]
        done += sum(p["status"].get("phase") in ("Succeeded", "Failed") for p in pods)
    return done >= count


def recorded_all(cluster: LocalCluster, tmp: Path, namespaces: Sequence[str], count: int) -> list[Record]:
    """Once every workload of the scene is recorded as ended (the recorder commits in batches).
    A recorder just started again is reached only once the API server has seen it available
    again (the aggregated API's availability check): until then the export fails and is tried
    again, and a timeout names its last failure."""
    failures: list[str] = []

    def probe() -> list[Record] | None:
        try:
            records, _ = export(cluster, tmp, namespaces)
        except subprocess.CalledProcessError as failed:
            failures.append(failed.stderr.strip())
            return None
        return records if len(records) == count and all(r.phase.ended for r in records) else None

    try:
        return eventually(probe, f"{count} ended workloads in the recorder's export")
    except AssertionError as gave_up:
        raise AssertionError(f"{gave_up}; the export's last failure: {failures[-1:] or 'none'}") from gave_up


# --- fidelity -------------------------------------------------------------------------------

ORDER_SECONDS = 0.25
"""Releases of one queue closer together than this are not ordered by policy but by when the
controller heard of each event (its watch, its debounce, the length of its cycle: tens to a
few hundred milliseconds here), and the replay hears of each at its instant; two workloads
that arrive in one burst may go in one cycle or in two. Order is compared between releases
further apart than this."""

REACTION_SECONDS = 0.5
"""A bound on the controller's reaction time on this shared machine (it hears of a pod through
its watch, waits out its debounce, then decides; usually milliseconds, at worst about half a
second under load). When a slot frees and another workload arrives within this of it, which
one takes the slot depends on whether the controller had heard of the arrival when it
decided; the replay, which reacts at once, decides without it. Such a pair is a race, reported
apart from the order that policy decides."""


def order(records: Sequence[Record], released: dict[str, float]) -> dict[str, list[str]]:
    """Each queue's workloads in the order they were released."""
    out: dict[str, list[str]] = {}
    for r in sorted(records, key=lambda r: (released[r.key], -r.priority, r.submitted, r.key)):
        out.setdefault(r.queue, []).append(r.name)
    return out


def inversions(
    records: Sequence[Record], replayed: dict[str, float], position: dict[str, int]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Pairs of one queue that the controller released more than ``ORDER_SECONDS`` apart and
    the replay released in the other order (``replayed``: the replay's release times,
    ``position``: its release order): those that policy decided, and the races (the later of
    the two arrived within ``REACTION_SECONDS`` of the first of the two releases)."""
    decided: list[tuple[str, str]] = []
    races: list[tuple[str, str]] = []
    for a in records:
        for b in records:
            if (a.queue == b.queue and (a.released or 0.0) + ORDER_SECONDS < (b.released or 0.0)
                    and position[a.key] > position[b.key]):
                first = min(a.released or 0.0, replayed[b.key])
                later = max(a.submitted, b.submitted)
                (races if abs(later - first) <= REACTION_SECONDS else decided).append((a.name, b.name))
    return decided, races


def priority_class(scene: Scene, base: str, value: int) -> str:
    name = scene.name(base)
    scene.kubectl("create", "-f", "-", input=kubeyaml.dump({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
        "value": value, "preemptionPolicy": "Never"}))
    return name


def duration(i: int) -> float:
    """Set durations from 1.5 s to 3.4 s, spread so that few pods end at the same instant."""
    return 1.5 + (i * 7 % 20) / 10


def drained(scene: Scene, namespaces: Sequence[str], count: int) -> None:
    """Until ``count`` pods have finished, looking every 2 s (kubectl's JSON of a few hundred
    pods costs CPU that the run itself needs on a small machine)."""
    deadline = time.monotonic() + RUN_SECONDS
    while not finished(scene, namespaces, count):
        assert time.monotonic() < deadline, f"{count} pods did not finish within {RUN_SECONDS:.0f}s"
        time.sleep(2)


async def submit(credentials: Credentials, pods: Sequence[dict[str, Any]], every: float) -> None:
    """Create ``pods`` one at a time, ``every`` seconds apart, over one keep-alive connection."""
    async with Connection(credentials) as connection:
        start = time.monotonic()
        for i, pod in enumerate(pods):
            await asyncio.sleep(max(0.0, start + i * every - time.monotonic()))
            await connection.create(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)


@pytest.fixture
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, LocalSluicegate]]:
    """A fresh control plane with Sluicegate, for this test alone. The fidelity run measures
    the controller's timing against the replay's: on the session cluster, the namespaces that
    earlier tests leave being torn down keep the controller, the recorder and the API server
    busy, and the controller's reaction time grew from milliseconds to a few hundred (seen in
    the full suite: 91 % of waits within 1 s against 99-100 % alone)."""
    cluster = LocalCluster(tmp_path_factory.mktemp("fidelity"), nodes=4, gpus_per_node=8)
    sluicegate = LocalSluicegate(cluster)
    cluster.extender = sluicegate.scheduler_extender()
    cluster.up()
    try:
        sluicegate.up()
        yield cluster, sluicegate
        problems = sluicegate.dead()
        assert not problems, "\n".join(problems)
    finally:
        sluicegate.down()
        cluster.down()


# Timing-sensitive on a 2-core machine (a fraction of a second of controller reaction decides
# some orders), so it runs with `make fidelity`, not in `make test`.
@pytest.mark.fidelity
def test_a_recorded_run_replays_in_the_observed_order_with_waits_within_a_second(
    quiet: tuple[LocalCluster, LocalSluicegate], tmp_path: Path
) -> None:
    cluster, _ = quiet
    scene = Scene(cluster)
    credentials = Credentials.from_kubeconfig(cluster.kubeconfig)
    # Each queue's work is one team's, and only the nlp team's own limit binds: queues share no
    # capacity, so how one queue's work happens to interleave with another's in time (tens of
    # milliseconds of the controller's reaction) cannot reorder either. Order inside a queue
    # still depends on pod priority and on the workflow limit.
    vision = scene.team("vision", maxRunning=10)
    nlp = scene.team("nlp", maxRunning=4)
    urgent = scene.queue("urgent", priority=10, maxRunning=3)
    train = scene.queue("train", maxRunning=5)
    tune = scene.queue("tune", maxRunning=5)
    vision_ns, nlp_ns = scene.namespace(vision, "vision"), scene.namespace(nlp, "nlp")
    high = priority_class(scene, "high", 1000)
    sweep = {"sluicegate.dev/workflow": "sweep"}
    limit = {"sluicegate.dev/workflow-max-running": "2"}
    spaces = [vision_ns, nlp_ns]
    try:
        # 200 pods, one every 0.2 s, at about the rate the limits let work go, so queues build
        # and drain (as in a working day) rather than one backlog being worked off in a single
        # long chain. One at a time, as users submit: a burst that reaches the controller
        # within one cycle is ordered by the cycle, not by its arrivals (see ORDER_SECONDS).
        pods: list[dict[str, Any]] = []
        for n in range(200):
            i = n % 10
            if i < 2:  # urgent
                pod = scene.pod(vision_ns, f"u{n:03d}", urgent, seconds=duration(n))
            elif i in (2, 3, 4, 9):  # training; one in four is a trial of the sweep
                pod = scene.pod(vision_ns, f"t{n:03d}", train, seconds=duration(n),
                                labels=sweep if i == 2 else None, annotations=limit if i == 2 else None)
            else:
                pod = scene.pod(nlp_ns, f"n{n:03d}", tune, seconds=duration(n))
            if n % 7 == 3:
                pod["spec"]["priorityClassName"] = high
            pods.append(pod)
        asyncio.run(submit(credentials, pods, every=0.2))
        submitted = len(pods)
        drained(scene, spaces, submitted)
        records = recorded_all(cluster, tmp_path, [vision_ns, nlp_ns], submitted)

        setup = parse_setup(
            [("cluster", yaml.safe_load(scene.kubectl("get", "queues,teams", "-l", scene.selector,
                                                      "-o", "yaml")))],
            "the scene's Queues and Teams",
        )
        # The replay's one parameter that is the machine's, not the policy's: the controller's
        # reaction time, measured from the run itself as the median observed wait of the
        # workloads that an instant replay releases on arrival (nothing held them back).
        instant = {r.record.key: r.wait for r in simulate(records, setup).replays}
        at_once = sorted(r.wait or 0.0 for r in records if instant[r.key] == 0)
        reaction = at_once[len(at_once) // 2]
        run = simulate(records, setup, reaction=reaction)
        replayed = {r.record.key: r for r in run.replays}

        observed = order(records, {r.key: r.released or 0.0 for r in records})
        position = {key: i for i, key in enumerate(run.order)}
        simulated = order(records, {r.key: float(position[r.key]) for r in records})
        swapped, races = inversions(records, {k: r.released or 0.0 for k, r in replayed.items()}, position)
        errors = sorted(abs((replayed[r.key].wait or 0.0) - (r.wait or 0.0)) for r in records)
        within = sum(e <= 1.0 for e in errors) / len(errors)
        waits = sorted(r.wait or 0.0 for r in records)
        print(f"\nfidelity: {len(records)} workloads over {len(observed)} queues; the controller's reaction "
              f"{reaction * 1000:.0f} ms (median of {len(at_once)} released on arrival); observed waits p50 "
              f"{waits[len(waits) // 2]:.2f}s max {waits[-1]:.2f}s; |simulated - observed| wait: p50 "
              f"{errors[len(errors) // 2]:.3f}s p95 {errors[int(len(errors) * 0.95)]:.3f}s max "
              f"{errors[-1]:.3f}s; within 1 s: {within:.1%}; queues released in exactly the observed order: "
              f"{sum(observed[q] == simulated[q] for q in observed)} of {len(observed)}; pairs the "
              f"controller released more than {ORDER_SECONDS}s apart that the replay released in the "
              f"other order: {swapped} decided by policy, {races} races within the controller's "
              f"reaction time")

        assert all(r.phase is Phase.SUCCEEDED and r.bound and r.node for r in records)
        assert sum(w > 1 for w in waits) >= 20  # the limits really held work back: the replay had work to do
        assert swapped == []
        assert within >= 0.95

        # The report from the live records: a real chart, and a table that agrees with them.
        chart = tmp_path / "report.png"
        since = min(r.submitted for r in records) - 1
        report = json.loads(sluicegate_cli(cluster, "report", "--since", format_time(since), "-o", "json",
                                           "--png", str(chart)).stdout)
        header = chart.read_bytes()[:24]
        assert header[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", header[16:24]) == (WIDTH, HEIGHT)
        lines = {line["scope"]: line for line in report["lines"]}
        for team in (vision, nlp):
            mine = [r for r in records if r.team == team]
            gpu_hours = sum(r.amount() * (r.duration or 0.0) for r in mine) / 3600
            assert lines[team]["jobs"] == len(mine)
            assert abs(lines[team]["gpuHours"] - gpu_hours) < 1e-6
            mine_waits = [r.wait or 0.0 for r in mine]
            assert abs(lines[team]["wait"]["meanSeconds"] - sum(mine_waits) / len(mine_waits)) < 1e-3
    finally:
        scene.kubectl("delete", "priorityclass", high, "--ignore-not-found")


# --- a recorder killed mid-run --------------------------------------------------------------


def test_a_recorder_killed_mid_run_loses_and_repeats_nothing_and_counts_what_was_deleted(
    scene: Scene, cluster: LocalCluster, sluicegate: LocalSluicegate, tmp_path: Path
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", maxRunning=3)
    namespace = scene.namespace(team)
    # p06..p08 take the queue's 3 slots once the first 6 have finished and hold them until the
    # test ends them: the pods deleted below are certainly still waiting when they go.
    names = [*scene.pods(namespace, queue, 6, seconds=1),
             *scene.pods(namespace, queue, 3, start=6, seconds=HELD_SECONDS),
             *scene.pods(namespace, queue, 21, start=9, seconds=1)]
    eventually(lambda: finished(scene, [namespace], 6), "a few pods to finish", RUN_SECONDS)

    state = json.loads((cluster.layout.root / "sluicegate.json").read_text())
    os.killpg(state["pids"]["recorder"], signal.SIGKILL)  # no drain, no last flush
    eventually(lambda: any("recorder" in p for p in sluicegate.dead()), "the recorder to be dead")
    first = eventually(lambda: leader(sluicegate), "one controller replica to lead")
    try:
        # While the recorder is away: two waiting pods are deleted, the leader is killed, the
        # standby takes over and releases more, and pods finish.
        deleted = [names[-1], names[-2]]
        scene.kubectl("delete", "pod", "-n", namespace, *deleted, "--wait=true")
        kill(sluicegate, first)
        scene.finish(namespace, *names[6:9])
        eventually(lambda: finished(scene, [namespace], 15), "the new leader to release more", RUN_SECONDS)
    finally:
        for name in (first, "recorder"):  # reap both dead processes, then start them again
            sluicegate.stop(name)
        sluicegate.start(first)
        sluicegate.start("recorder")
    eventually(lambda: finished(scene, [namespace], 28), "every remaining pod to finish", RUN_SECONDS)
    records = recorded_all(cluster, tmp_path, [namespace], 30)
    _, notes = export(cluster, tmp_path, [namespace])
    answer = _record_list(cluster)

    print(f"\nrecorder kill: {len(records)} records for 30 submitted pods; "
          f"{sum(r.phase is Phase.DELETED for r in records)} Deleted; the recorder reports {answer.lost} "
          f"pods lost while it was down; export said: {notes.strip()}")
    assert sorted(r.name for r in records) == sorted(names)  # each submitted pod once, no other
    gone = {r.name: r for r in records if r.phase is Phase.DELETED}
    assert set(gone) == set(deleted) and all(r.released is None for r in gone.values())
    assert answer.lost >= 2 and "deleted while the recorder was not running" in notes
    ran = [r for r in records if r.name not in deleted]
    assert all(r.phase is Phase.SUCCEEDED and r.released and r.bound and r.finished for r in ran)
    # Released by one leader or the other, each pod once, from the controller's own stamp.
    for r in ran:
        pod = scene.get("pod", r.name, namespace)
        assert r.released == parse_time(pod["metadata"]["annotations"]["sluicegate.dev/dispatched-at"])


# --- a released pod Kubernetes never places ---------------------------------------------------

def test_a_released_pod_never_placed_records_no_gpu_seconds_and_the_quota_seconds_it_held(
    scene: Scene, cluster: LocalCluster, sluicegate: LocalSluicegate, tmp_path: Path
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train")
    namespace = scene.namespace(team)
    # The only node it may go to is cordoned: some node could hold it, so it is released (no
    # NoNodeFits), and kube-scheduler cannot place it.
    cordoned = scene.node("cordoned", gpus=8, cordoned=True)
    nowhere = scene.pod(namespace, "nowhere", queue, gpus=2, seconds=HELD_SECONDS)
    nowhere["spec"]["nodeSelector"] = {"kubernetes.io/hostname": cordoned}
    scene.create(nowhere, scene.pod(namespace, "ran", queue, gpus=1, seconds=1))
    scene.wait_condition(namespace, "nowhere", lambda c: c["message"].startswith(UNPLACEABLE), "unplaceable")
    eventually(lambda: finished(scene, [namespace], 1), "the placeable pod to finish", RUN_SECONDS)
    scene.kubectl("delete", "pod", "-n", namespace, "nowhere", "--wait=true")

    records = {r.name: r for r in recorded_all(cluster, tmp_path, [namespace], 2)}
    never, ran = records["nowhere"], records["ran"]
    assert never.phase is Phase.DELETED and never.released is not None and never.bound is None
    assert ran.phase is Phase.SUCCEEDED and ran.released is not None and ran.bound is not None
    assert never.finished is not None and ran.finished is not None
    since, until = min(never.submitted, ran.submitted) - 1, max(never.finished, ran.finished) + 1
    report = json.loads(sluicegate_cli(cluster, "report", "--since", format_time(since), "--until",
                                       format_time(until), "-o", "json").stdout)
    line = {line["scope"]: line for line in report["lines"]}[team]
    # GPU-hours: the placeable pod's 1 GPU from its binding; none for the pod never placed.
    # Quota-hours: the time each held its quota released but not placed.
    gpu_seconds = ran.finished - ran.bound
    quota_seconds = 2 * (never.finished - never.released) + (ran.bound - ran.released)
    print(f"\nnever placed: held 2 GPUs of quota {never.finished - never.released:.3f}s unplaced; "
          f"report: {line['gpuHours'] * 3600:.3f} GPU-s, {line['quotaHours'] * 3600:.3f} quota-s")
    assert line["jobs"] == 2
    assert abs(line["gpuHours"] * 3600 - gpu_seconds) < 1e-3
    assert abs(line["quotaHours"] * 3600 - quota_seconds) < 1e-3
    assert never.finished - never.released > 0


def _record_list(cluster: LocalCluster) -> RecordList:
    """The recorder's own answer, read with kubectl through the API server, as the CLI reads it."""
    path = "/apis/records.sluicegate.dev/v1alpha1/namespaces/sluicegate-system/records"
    out = cluster.kubectl("get", "--raw", path)
    return RecordList.from_json(json.loads(out.stdout))
