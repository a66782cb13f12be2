"""Fault scenarios 2 and 3: kube-apiserver and etcd restarted in the middle of a burst, and
every watch forced to expire (410 Gone) by compacting etcd's history past it.

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
from tests.e2e.conftest import eventually
from tests.e2e.faults import DRAIN_SECONDS, MANAGED_PODS, Row, judge, relists, scale, scenario
from tests.e2e.scenes import HELD_SECONDS, Scene

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
    """Every watch of the cluster is made to expire (``LocalCluster.expire_watches``:
    kube-apiserver stopped, etcd's revision moved past every watcher's and compacted, the API
    server started again) while the team's slots are held and more pods wait. The controller's
    pod watch must meet 410 Gone and list again, each time; then the held pods end, and the
    controller, on its new watch, must release every waiting pod: none missed, none released
    twice, no limit exceeded."""
    scene = stage_scene
    rounds = scale(1, 3)
    before = relists(stage.sluicegate, CONTROLLER)
    team = scene.team("tx", maxRunning=5)
    queues = (scene.queue("xa", maxRunning=3), scene.queue("xb", maxRunning=3))
    namespace = scene.namespace(team, base="nsx")
    limits = Limits(queues={q: Cap(running=3) for q in queues}, teams={team: Cap(running=5)})
    waiting = scale(10, 30)
    with scenario("watch expiry (410 Gone) by etcd compaction") as row, \
            recording(stage.credentials, selector=scene.selector) as recorder:
        try:
            # The team's five slots, held until the test ends them: nothing frees by itself.
            held = {queues[0]: scene.pods(namespace, queues[0], 3, prefix="held-a", seconds=HELD_SECONDS),
                    queues[1]: scene.pods(namespace, queues[1], 2, prefix="held-b", seconds=HELD_SECONDS)}
            recorder.wait(lambda t: t.released >= 5, DRAIN_SECONDS)
            later = [scene.pods(namespace, q, waiting // 2, prefix=f"w{i}", seconds=1)
                     for i, q in enumerate(queues)]
            # The controller has seen them wait: queue xa is full, xb has room but the team not.
            scene.wait_reason(namespace, later[0][-1:], "QueueLimit")
            scene.wait_reason(namespace, later[1][-1:], "TeamLimit")
            for _ in range(rounds):
                seen = relists(stage.sluicegate, CONTROLLER, MANAGED_PODS)
                stage.cluster.expire_watches()
                row.add("restarts")
                relisted_since(stage, seen)
            for names in held.values():
                scene.finish(namespace, *names)
            finish(recorder, row, limits, 5 + waiting // 2 * 2)
        finally:
            row.add("expiries", relists(stage.sluicegate, CONTROLLER) - before)


def relisted_since(stage: Stage, seen: int) -> None:
    """Until the controller's reflector of managed pods has relisted after a 410 more than
    ``seen`` times (by its log)."""
    eventually(lambda: relists(stage.sluicegate, CONTROLLER, MANAGED_PODS) > seen,
               "the controller's pod watch to meet 410 Gone and list again", DRAIN_SECONDS)
