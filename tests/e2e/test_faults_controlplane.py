"""Fault scenarios 2 and 3: kube-apiserver and etcd restarted in the middle of a burst, and
watches forced to expire (410 Gone) by compacting etcd's history under them.

These break the control plane, so they run on a cluster of their own (one for the module),
with Sluicegate's webhook and one controller on it. Each scenario judges the auditor's record:
no limit exceeded, every pod finished, none released twice, none lost.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from audit.checking import Cap, Limits
from audit.connection import Credentials
from audit.recording import Recorder, recording
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from process import kubeyaml
from tests.e2e.faults import DRAIN_SECONDS, Row, judge, relists, scale, scenario
from tests.e2e.scenes import Scene

CONTROLLER = ("controller",)


@dataclass(frozen=True, slots=True)
class Stage:
    cluster: LocalCluster
    sluicegate: LocalSluicegate
    credentials: Credentials


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    cluster = LocalCluster(tmp_path_factory.mktemp("faults-cluster"), nodes=2, gpus_per_node=8)
    sluicegate = LocalSluicegate(cluster)
    cluster.extender = sluicegate.scheduler_extender()
    cluster.up()
    try:
        sluicegate.up()
        yield Stage(cluster, sluicegate, Credentials.from_kubeconfig(cluster.kubeconfig))
    finally:
        sluicegate.down()
        cluster.down()


@pytest.fixture
def stage_scene(stage: Stage) -> Iterator[Scene]:
    made = Scene(stage.cluster)
    try:
        yield made
    finally:
        made.cleanup()
    problems = stage.sluicegate.dead()
    assert not problems, "\n".join(problems)


def burst(scene: Scene, recorder: Recorder, count: int, prefix: str) -> tuple[Limits, int]:
    """``count`` one-second pods over two queues of one team; waits for the first releases."""
    team = scene.team(f"t{prefix}", maxRunning=5)
    queues = (scene.queue(f"{prefix}a", maxRunning=3), scene.queue(f"{prefix}b", maxRunning=3))
    namespace = scene.namespace(team, base=f"ns{prefix}")
    for letter, queue in zip("ab", queues, strict=True):
        scene.pods(namespace, queue, count // 2, prefix=f"{prefix}{letter}", seconds=1)
    recorder.wait(lambda t: t.released >= 3, DRAIN_SECONDS)
    return Limits(queues={q: Cap(running=3) for q in queues}, teams={team: Cap(running=5)}), count // 2 * 2


def finish(recorder: Recorder, row: Row, limits: Limits, total: int) -> None:
    recorder.wait(lambda t: t.finished >= total, DRAIN_SECONDS)
    verdict = judge(recorder.snapshot(), limits)
    row.verdict(verdict)
    verdict.check()


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_a_control_plane_component_restarted_mid_burst_exceeds_no_limit_and_loses_no_pod(
    stage: Stage, stage_scene: Scene, component: str
) -> None:
    restarts = scale(1, 3)
    before = relists(stage.sluicegate, CONTROLLER)
    with scenario(f"{component} restarted mid-burst") as row, \
            recording(stage.credentials, selector=stage_scene.selector) as recorder:
        try:
            limits, total = burst(stage_scene, recorder, scale(30, 60), "r")
            for _ in range(restarts):
                stage.cluster.restart(component)
                row.add("restarts")
            finish(recorder, row, limits, total)
        finally:
            row.add("expiries", relists(stage.sluicegate, CONTROLLER) - before)


def test_watches_expired_by_compaction_are_relisted_and_no_pod_is_missed(
    stage: Stage, stage_scene: Scene
) -> None:
    """etcd's history is compacted past every watcher's resourceVersion (writes the controller
    does not watch move etcd's revision on), then kube-apiserver restarts: every watch resumes
    from a version that is gone, gets 410 Gone and must list again."""
    rounds = scale(1, 3)
    before = relists(stage.sluicegate, CONTROLLER)
    with scenario("watch expiry (410 Gone) by etcd compaction") as row, \
            recording(stage.credentials, selector=stage_scene.selector) as recorder:
        try:
            limits, total = burst(stage_scene, recorder, scale(30, 60), "x")
            for round in range(rounds):
                advance(stage.cluster, f"x{round}-{stage_scene.id}")
                stage.cluster.compact()
                stage.cluster.restart("kube-apiserver")
                row.add("restarts")
            finish(recorder, row, limits, total)
        finally:
            expired = relists(stage.sluicegate, CONTROLLER) - before
            row.add("expiries", expired)
    assert expired >= rounds, "the controller never met 410 Gone: the scenario did not force expiry"
    assert recorder.relists >= 1  # the auditor's own watch expired too, and relisted


def advance(cluster: LocalCluster, name: str) -> None:
    """Write objects no Sluicegate process watches, so etcd's revision moves past theirs."""
    maps = [{"apiVersion": "v1", "kind": "ConfigMap", "data": {"n": str(i)},
             "metadata": {"name": f"{name}-{i}", "namespace": "default"}} for i in range(5)]
    cluster.kubectl("create", "-f", "-", input=kubeyaml.dump_all(maps))
    cluster.kubectl("delete", "configmaps", *(m["metadata"]["name"] for m in maps), "-n", "default")
