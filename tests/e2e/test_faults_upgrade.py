"""Upgrading a running Sluicegate under load, and migrating its objects' storage.

The previous release (``tests.e2e.releases.PREVIOUS``, run from a git worktree) runs on a
control plane of its own, its Queues, Teams and a Preset created as ``v1alpha1``, the only
version its CRDs serve, while a user keeps submitting pods to three queues. Then, as
docs/admin-guide.md's upgrade does: this checkout's manifests are applied (the CRDs first:
``v1beta1`` stored, ``v1alpha1`` still served), and the webhook, the controller's two replicas
and the recorder are replaced by this checkout's, one at a time, as a rolling update of the
Deployments replaces them (the standby replica first, so the leader hands its Lease to a new
one); ``sluicegate migrate-storage`` then runs under the same stream. The auditor judges the
record: no limit exceeded, no pod lost, none released twice; every submission refused was
refused while the one local webhook was being replaced (a Deployment's two replicas roll one
at a time, so a cluster has no such window); and the objects of the previous release read back
unchanged through both versions, stored as ``v1beta1`` once migrated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from audit.checking import Cap, Limits
from audit.connection import Credentials
from audit.recording import recording
from controlplane.checkout import ROOT
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from controlplane.services import SERVICES
from policy import keys
from tests.e2e.conftest import STANDBY
from tests.e2e.faults import DRAIN_SECONDS, Row, Sent, Stream, judge, scale, scenario
from tests.e2e.releases import ALPHA, PLURALS, checked_out, kept, read, stored_as, stored_versions
from tests.e2e.scenes import Scene
from tests.e2e.test_faults_webhook import WEBHOOK_DOWN

# As a rolling update of the Deployments goes: the webhook, then the controller's standby
# replica and its leader, then the recorder's StatefulSet.
ROLLING: Final = ("webhook", STANDBY.name, "controller", "recorder")


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with checked_out(tmp_path_factory.mktemp("previous") / "tree") as tree:
        yield tree


@dataclass(frozen=True, slots=True)
class Stage:
    cluster: LocalCluster
    sluicegate: LocalSluicegate
    credentials: Credentials


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory, previous: Path) -> Iterator[Stage]:
    """A control plane of its own with the previous release installed and running."""
    cluster = LocalCluster(tmp_path_factory.mktemp("upgrade"), nodes=2, gpus_per_node=8)
    sluicegate = LocalSluicegate(cluster, services=(*SERVICES, STANDBY),
                                 manifests=previous / "manifests" / "local", tree=previous)
    cluster.extender = sluicegate.scheduler_extender()
    cluster.up()
    try:
        sluicegate.up()
        try:
            yield Stage(cluster, sluicegate, Credentials.from_kubeconfig(cluster.kubeconfig))
        finally:
            sluicegate.down()
    finally:
        cluster.down()


def resolved(stage: Stage, tree: Path) -> Path:
    """Where ``controller`` comes from for a process started from ``tree``, as ``start`` starts it."""
    done = subprocess.run([sys.executable, "-c", "import controller; print(controller.__file__)"],
                          env={**os.environ, "PYTHONPATH": str(tree)}, cwd=stage.cluster.layout.root,
                          capture_output=True, text=True, timeout=60, check=True)
    return Path(done.stdout.strip())


def created(status: int) -> bool:
    return status == 201


def migrating(cluster: LocalCluster) -> subprocess.CompletedProcess[str]:
    """``sluicegate migrate-storage`` as the cluster's admin."""
    return subprocess.run([str(Path(sys.executable).parent / "sluicegate"), "migrate-storage",
                           f"--kubeconfig={cluster.kubeconfig}"], capture_output=True, text=True, timeout=300)


def migrate(cluster: LocalCluster) -> str:
    """``sluicegate migrate-storage``, which must succeed; what it printed."""
    done = migrating(cluster)
    assert done.returncode == 0, done.stderr
    return done.stdout


def refusals(row: Row, stream: Stream) -> list[Sent]:
    """The submissions refused, counted in ``row`` with the seconds from the first to the last."""
    refused = stream.refused
    row.add("refused", len(refused))
    if refused:
        row.add("refused_seconds", round(max(s.answered for s in refused) - min(s.sent for s in refused), 1))
    return refused


def replace(sluicegate: LocalSluicegate, tree: Path) -> None:
    """Every process not running from ``tree`` replaced by one that does, one at a time."""
    for name in ROLLING:
        if sluicegate.trees.get(name) != tree:
            sluicegate.stop(name)
            sluicegate.start(name, tree=tree)


def test_a_rolling_upgrade_under_load_loses_nothing_and_refuses_only_while_the_webhook_is_replaced(
    stage: Stage, previous: Path
) -> None:
    assert resolved(stage, previous).is_relative_to(previous), "the previous release runs its own code"
    assert resolved(stage, ROOT).is_relative_to(ROOT)
    cluster, sluicegate = stage.cluster, stage.sluicegate
    scene = Scene(cluster, api_version=ALPHA)
    team = scene.team("vision", maxRunning=6)
    queues = [scene.queue(f"q{i}", maxRunning=3, priority=i) for i in range(3)]
    preset = scene.preset("one-gpu", container={"resources": {"limits": {keys.GPU_RESOURCE: "1"}}})
    namespace = scene.namespace(team)
    limits = Limits(queues={q: Cap(running=3) for q in queues}, teams={team: Cap(running=6)})
    objects = [("teams", team), ("presets", preset), *(("queues", q) for q in queues)]
    before = {(plural, name): kept(read(cluster, plural, name, "v1alpha1")) for plural, name in objects}
    assert set(stored_as(cluster, "presets", preset).values()) == {ALPHA}
    windows: dict[str, tuple[float, float]] = {}

    def pod(i: int) -> dict[str, Any]:
        return scene.pod(namespace, f"u{i:04d}", queues[i % 3], seconds=1)

    try:
        with scenario("rolling upgrade from the previous release under a stream") as row, \
                recording(stage.credentials, selector=scene.selector) as recorder, \
                Stream(stage.credentials, pod, pause=0.3) as stream:
            stream.more(scale(10, 40), created, "submissions to flow through the previous release")
            early = migrating(cluster)
            assert early.returncode == 1 and "apply this release's CRDs first" in early.stderr, early.stderr
            sluicegate.upgrade(ROOT / "manifests" / "local")
            for name in ROLLING:
                began = time.monotonic()
                sluicegate.stop(name)
                sluicegate.start(name, tree=ROOT)
                windows[name] = (began, time.monotonic())
                row.add("restarts")
                stream.more(scale(5, 20), created, f"submissions to flow once the {name} is this checkout's")
            for (plural, name), was in before.items():
                assert kept(read(cluster, plural, name, "v1alpha1")) == was, f"{plural}/{name} as v1alpha1"
                assert kept(read(cluster, plural, name, "v1beta1")) == was, f"{plural}/{name} as v1beta1"
            assert set(stored_as(cluster, "presets", preset).values()) == {ALPHA}, "nothing wrote it since"
            migrated = migrate(cluster)
            assert set(stored_as(cluster, "presets", preset).values()) == {keys.API_VERSION}
            stream.more(scale(5, 20), created, "submissions to flow after the storage migration")
            stream.stop()
            accepted = len(stream.accepted)
            recorder.wait(lambda t: t.finished >= accepted, DRAIN_SECONDS)
            verdict = judge(recorder.snapshot(), limits)
            row.verdict(verdict)
            refused = refusals(row, stream)
            verdict.check()
            assert verdict.submitted == accepted
    finally:
        scene.cleanup()

    began, ended = windows["webhook"]
    outside = [s for s in refused if s.answered < began or s.sent > ended]
    assert outside == [], f"refused outside the webhook's replacement: {outside[:3]}"
    assert [s for s in refused if WEBHOOK_DOWN not in s.message] == []
    for plural in PLURALS:
        assert stored_versions(cluster, plural) == ["v1beta1"]
    assert "storedVersions [v1alpha1, v1beta1] -> [v1beta1]" in migrated


def test_rolled_back_after_the_migration_the_previous_release_works_through_v1alpha1_and_keeps_the_crds(
    stage: Stage, previous: Path
) -> None:
    """The guide's rollback: the processes go back to the previous release, the CRDs stay (the
    API server refuses the previous release's, since v1beta1 is stored), and the previous
    release, which knows only v1alpha1, dispatches and writes its status through it."""
    cluster, sluicegate = stage.cluster, stage.sluicegate
    sluicegate.upgrade(ROOT / "manifests" / "local")  # where the test above left it, if it ran
    replace(sluicegate, ROOT)
    migrate(cluster)
    scene = Scene(cluster)
    team = scene.team("nlp", maxRunning=4)
    queue = scene.queue("back", maxRunning=2)
    namespace = scene.namespace(team)
    limits = Limits(queues={queue: Cap(running=2)}, teams={team: Cap(running=4)})
    try:
        with scenario("rollback to the previous release after the storage migration") as row, \
                recording(stage.credentials, selector=scene.selector) as recorder, \
                Stream(stage.credentials, lambda i: scene.pod(namespace, f"r{i:04d}", queue, seconds=1),
                       pause=0.3) as stream:
            stream.more(scale(5, 20), created, "submissions to flow through this checkout")
            for name in ROLLING:
                sluicegate.stop(name)
                sluicegate.start(name, tree=previous)
                row.add("restarts")
            stream.more(scale(5, 40), created, "submissions to flow through the previous release again")
            stream.stop()
            accepted = len(stream.accepted)
            recorder.wait(lambda t: t.finished >= accepted, DRAIN_SECONDS)
            verdict = judge(recorder.snapshot(), limits)
            row.verdict(verdict)
            refusals(row, stream)
            verdict.check()
        shown = cluster.kubectl("get", f"queues.v1beta1.{keys.GROUP}", queue, "--show-managed-fields",
                                "-o", "json")
        fields = json.loads(shown.stdout)["metadata"]["managedFields"]
        assert any(f["apiVersion"] == ALPHA and f.get("subresource") == "status" for f in fields), \
            "the previous controller wrote the Queue's status as v1alpha1"
    finally:
        scene.cleanup()
    assert [s for s in stream.refused if WEBHOOK_DOWN not in s.message] == []
    back = cluster.kubectl("apply", "-k", str(previous / "manifests" / "crds"), check=False)
    assert back.returncode != 0 and "storedVersions" in back.stderr, back.stderr
    assert stored_versions(cluster, "queues") == ["v1beta1"]
