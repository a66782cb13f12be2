"""Dispatch holds every limit on the real control plane: a queue's, a workflow's, the cluster's
maxRunning and a team's GPU quota. Pods are created through kubectl, the webhook gates them,
the gate controller releases them, kube-scheduler binds them and kwok runs them; every
assertion is checked from the auditor's independent record of every pod's transitions.
"""

from __future__ import annotations

from audit.checking import Cap, Limits, lost, peaks, released_twice, violations
from audit.connection import Credentials
from audit.recording import recording
from audit.records import Kind
from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene, first, only, wait_finished

GATE = keys.GATE
LIFECYCLE = [Kind.CREATED, Kind.UNGATED, Kind.BOUND, Kind.RUNNING, Kind.SUCCEEDED]
# Bounds for waiting on a whole scene, not performance targets.
DRAIN_SECONDS = 120.0


def test_a_queue_with_max_running_2_never_runs_more_than_2_of_6_pods_and_all_6_finish(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", maxRunning=2)
    namespace = scene.namespace(team)
    with recording(credentials, selector=scene.selector) as recorder:
        # Every pod runs until the test ends them, once two run: the limit is certainly reached
        # (two at once), however slowly the pods were created.
        pods = scene.pods(namespace, queue, 6, seconds=HELD_SECONDS)
        recorder.wait(lambda t: t.released >= 2, DRAIN_SECONDS)
        scene.finish(namespace, *pods)  # the waiting ones end as soon as they run
        recorder.wait(lambda t: t.finished >= 6, DRAIN_SECONDS)
        record = recorder.snapshot()

    assert violations(record, Limits(queues={queue: Cap(running=2)})) == []
    assert peaks(record).queues[queue].running == 2
    assert lost(record) == [] and released_twice(record) == []
    for pod in record.pods.values():  # gated by the webhook, released, placed, run, done
        assert pod.gates == (GATE,), pod.key
        assert record.kinds(pod.uid) == LIFECYCLE, pod.key


def test_a_sweep_limited_to_3_trials_never_runs_more_while_another_teams_pods_keep_flowing(
    scene: Scene, credentials: Credentials
) -> None:
    vision, nlp = scene.team("vision"), scene.team("nlp")
    sweeps, other = scene.queue("sweeps"), scene.queue("interactive")
    vision_ns, nlp_ns = scene.namespace(vision, "vision"), scene.namespace(nlp, "nlp")
    sweep = {keys.WORKFLOW_LABEL: "lr-sweep"}
    limit = {keys.WORKFLOW_MAX_RUNNING_ANNOTATION: "3"}
    with recording(credentials, selector=scene.selector) as recorder:
        # The first 3 trials fill the sweep's limit until the test ends them: the other team's
        # pods must go while the sweep's other trials wait, however fast the trials would run.
        trial = {"labels": sweep, "annotations": limit}
        scene.pods(vision_ns, sweeps, 3, prefix="trial", seconds=HELD_SECONDS, **trial)
        scene.pods(vision_ns, sweeps, 9, prefix="trial", start=3, seconds=1, **trial)
        scene.pods(nlp_ns, other, 4, prefix="nb", seconds=1)
        recorder.wait(lambda t: t.finished >= 4, DRAIN_SECONDS)  # only the other team's can finish
        scene.finish(vision_ns, "trial00", "trial01", "trial02")
        recorder.wait(lambda t: t.finished >= 16, DRAIN_SECONDS)
        record = recorder.snapshot()

    workflow = f"{vision_ns}/lr-sweep"
    assert violations(record, Limits(workflows={workflow: Cap(running=3)})) == []
    assert peaks(record).workflows[workflow].running == 3
    # The other team's pods went while the sweep still had trials waiting.
    trials = [p for p in record.pods.values() if p.namespace == vision_ns]
    last_trial = max(first(record, p, Kind.UNGATED).at for p in trials)
    for name in ("nb00", "nb01", "nb02", "nb03"):
        assert first(record, only(record, nlp_ns, name), Kind.UNGATED).at < last_trial, name
    assert lost(record) == [] and released_twice(record) == []


def test_the_global_max_running_holds_across_queues_teams_and_namespaces(
    scene: Scene, credentials: Credentials
) -> None:
    scene.policy(maxRunning=3)
    # Nothing else runs in the cluster, as the controller sees it: the cap is this test's alone.
    eventually(lambda: scene.get("policy", keys.POLICY_NAME).get("status", {}).get("running") == 0,
               "the Policy's status to show nothing running")
    teams = scene.team("vision"), scene.team("nlp")
    queues = scene.queue("train"), scene.queue("batch")
    namespaces = [scene.namespace(team, f"ns{i}") for i, team in enumerate(teams)]
    with recording(credentials) as recorder:  # every pod in the cluster: the limit is global
        # Held until three run (the cap, certainly reached), then ended as each runs.
        made = {namespace: [name for queue in queues
                            for name in scene.pods(namespace, queue, 2, prefix=f"{queue[:5]}-",
                                                   seconds=HELD_SECONDS)]
                for namespace in namespaces}
        eventually(lambda: peaks(recorder.snapshot().select(lambda p: p.namespace in namespaces))
                   .cluster.running >= 3, "three of the pods running at once")
        for namespace, names in made.items():
            scene.finish(namespace, *names)
        wait_finished(recorder, lambda p: p.namespace in namespaces, 8, DRAIN_SECONDS)
        record = recorder.snapshot()

    managed = record.select(lambda p: bool(p.queue) and not p.preexisting)
    assert violations(managed, Limits(cluster=Cap(running=3))) == []
    assert peaks(managed).cluster.running == 3
    mine = managed.select(lambda p: p.namespace in namespaces)
    assert len(mine.pods) == 8
    assert lost(mine) == [] and released_twice(mine) == []


def test_a_team_gpu_quota_holds_across_its_namespaces_and_queues(
    scene: Scene, credentials: Credentials
) -> None:
    team = scene.team("vision", quota={keys.GPU_RESOURCE: "4"})
    train, notebooks = scene.queue("train"), scene.queue("notebooks")
    first_ns, second_ns = scene.namespace(team, "research"), scene.namespace(team, "prod")
    with recording(credentials, selector=scene.selector) as recorder:
        # Held until the quota is used (3 or 4 of its GPUs: what fits of 2- and 1-GPU pods),
        # then ended as each runs: the quota is certainly reached, however slow the machine.
        big = scene.pods(first_ns, train, 3, prefix="big", gpus=2, seconds=HELD_SECONDS)
        small = scene.pods(second_ns, notebooks, 4, prefix="small", gpus=1, seconds=HELD_SECONDS)

        def most_gpus_in_use() -> int:
            peak = peaks(recorder.snapshot()).teams.get(team)
            return peak.gpus if peak is not None else 0

        eventually(lambda: most_gpus_in_use() >= 3, "3 of the team's 4 GPUs in use at once")
        scene.finish(first_ns, *big)
        scene.finish(second_ns, *small)
        recorder.wait(lambda t: t.finished >= 7, DRAIN_SECONDS)
        record = recorder.snapshot()

    assert violations(record, Limits(teams={team: Cap(gpus=4)})) == []
    assert peaks(record).teams[team].gpus >= 3  # the quota was used, not merely respected
    assert lost(record) == [] and released_twice(record) == []
