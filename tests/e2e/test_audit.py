"""The auditor on the real control plane: the load driver submits gated GPU pods, the bare
ungater releases them, kwok runs them, and the recorder's record is checked.

No webhook exists yet, so the driver adds Sluicegate's gate itself at creation.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.background import Background
from audit.checking import Cap, Limits, lost, peaks, released_twice, violations
from audit.connection import Connection, Credentials
from audit.identities import Identity, provision, retire
from audit.loading import KWOK_DELAY_ANNOTATION, Load, Submitted, drive, names, remove
from audit.naming import AUDIT_GATE, UNMANAGED
from audit.recording import Recorder, recording
from audit.records import Kind
from audit.scraping import flow_totals, increase, scrape
from audit.ungating import ungate
from audit.watching import Watch
from controlplane.checkout import harness_environment
from controlplane.launching import LocalCluster
from tests.e2e.conftest import Kubectl, eventually
from tests.e2e.scenes import HELD_SECONDS

# Sluicegate runs in this session; these loads stay outside it (their namespaces are not opted in
# by the team label), so only the bare ungater releases them.
BARE = UNMANAGED

GATE = AUDIT_GATE
LIFECYCLE = [Kind.CREATED, Kind.UNGATED, Kind.BOUND, Kind.RUNNING, Kind.SUCCEEDED]
# Bounds for waiting on the whole drain, not performance targets.
DRAIN_SECONDS = 180.0


@pytest.fixture
def credentials(cluster: LocalCluster) -> Credentials:
    return Credentials.from_kubeconfig(cluster.kubeconfig)


@pytest.fixture
def loop() -> Iterator[Background]:
    with Background("e2e-audit") as background:
        yield background


@pytest.fixture
def identity(credentials: Credentials, loop: Background) -> Iterator[Identity]:
    """The ungater's own service account, so the API server counts its requests apart."""

    async def make() -> Identity:
        async with Connection(credentials) as connection:
            return await provision(connection, "e2e-ungater")

    made = loop.run(make())
    yield made

    async def unmake() -> None:
        async with Connection(credentials) as connection:
            await retire(connection, made)

    loop.run(unmake())


def submit(loop: Background, credentials: Credentials, load: Load) -> Submitted:
    submitted = loop.run(drive(credentials, load))
    assert submitted.refused == (), f"pods refused: {submitted.refused}"
    assert len(submitted.pods) == load.pods
    return submitted


def cleanup(loop: Background, credentials: Credentials, submitted: Submitted) -> None:
    async def run() -> None:
        async with Connection(credentials) as connection:
            await remove(connection, submitted.namespaces)

    loop.run(run())


def dispatched_by(loop: Background, credentials: Credentials) -> dict[str, float]:
    async def run() -> dict[str, float]:
        async with Connection(credentials) as connection:
            return flow_totals(await scrape(connection))

    return loop.run(run())


def finished(recorder: Recorder, count: int) -> Any:
    return eventually(lambda: recorder.tally().finished >= count or None,
                      f"{count} pods to finish ({recorder.tally()})", seconds=DRAIN_SECONDS)


def test_forty_pods_over_two_queues_and_teams_drain_four_at_a_time_and_the_record_shows_it(
    cluster: LocalCluster, credentials: Credentials, loop: Background, identity: Identity
) -> None:
    # Each pod runs until the test ends them, once four run at once: the cap is certainly
    # reached, however slowly the ungater's patches go.
    load = Load(pods=40, queues=names("q", 2), teams=names("team", 2), seconds=HELD_SECONDS, gated=True,
                concurrency=8, naming=BARE)
    before = dispatched_by(loop, credentials)
    with recording(credentials, naming=BARE, selector=load.selector) as recorder:
        submitted = submit(loop, credentials, load)
        ungater = loop.start(ungate(identity.credentials, gates=BARE.gates, cap=4, selector=load.selector))
        try:
            eventually(lambda: peaks(recorder.snapshot()).cluster.running >= 4, "four pods running at once")
            cluster.kubectl("annotate", "pods", "-A", "-l", load.selector, f"{KWOK_DELAY_ANNOTATION}=0s",
                            "--overwrite")  # each ends as soon as it runs
            finished(recorder, 40)
        finally:
            ungater.cancel()
        record = recorder.snapshot()
    requests = increase(dispatched_by(loop, credentials), before).get(identity.flow_schema, 0.0)
    cleanup(loop, credentials, submitted)

    # Every pod went created (gated) -> ungated -> bound -> Running -> Succeeded, in that order.
    assert len(record.pods) == 40
    for pod in record.pods.values():
        assert record.kinds(pod.uid) == LIFECYCLE, pod.key
        assert (pod.gates, pod.gpus) == ((GATE,), 1)
        (bound,) = [e for e in record.history(pod.uid) if e.kind is Kind.BOUND]
        assert bound.detail.startswith("gpu-node-")
    # Labels and namespaces give each pod its queue and team (the team from the namespace label).
    placed = {(p.queue, p.team) for p in record.pods.values()}
    assert placed == {("q0", "team0"), ("q1", "team0"), ("q0", "team1"), ("q1", "team1")}

    assert violations(record, Limits(cluster=Cap(running=4, gpus=4))) == []
    assert peaks(record).cluster.running == 4  # the cap was reached, and held
    assert lost(record, submitted.pods) == []
    assert released_twice(record) == []
    assert record.relists == 0
    # The API server attributes the ungater's requests to its own identity: one patch per pod at least.
    assert requests >= 40, f"{identity.flow_schema}: {requests} requests dispatched"


def test_with_the_cap_lifted_the_check_reports_every_release_over_the_limit(
    cluster: LocalCluster, credentials: Credentials, loop: Background, identity: Identity, tmp_path: Path
) -> None:
    load = Load(pods=12, queues=("solo",), teams=("team0",), seconds=5, gated=True, concurrency=12,
                naming=BARE)
    kubeconfig = identity.credentials.write_kubeconfig(tmp_path / "ungater.kubeconfig")
    with recording(credentials, naming=BARE, selector=load.selector) as recorder:
        submitted = submit(loop, credentials, load)
        # The bare ungater as its own process, as benchmarks run it, with no cap.
        ungater = subprocess.Popen(
            [sys.executable, "-m", "audit.ungating", "--kubeconfig", str(kubeconfig),
             "--selector", load.selector, "--gate", AUDIT_GATE],
            stdout=subprocess.PIPE, text=True, env=harness_environment(),
        )
        try:
            assert ungater.stdout is not None and ungater.stdout.readline().strip() == "ready"
            finished(recorder, 12)
        finally:
            ungater.send_signal(signal.SIGTERM)
            out, _ = ungater.communicate(timeout=30)
        record = recorder.snapshot()
    cleanup(loop, credentials, submitted)

    assert json.loads(out.splitlines()[-1])["released"] == 12
    assert peaks(record).cluster.running > 4
    found = violations(record, Limits(queues={"solo": Cap(running=4)}))
    assert [v.count for v in found] == list(range(5, peaks(record).queues["solo"].running + 1))
    assert all(v.name == "solo" and v.limit == 4 and len(v.running) == v.count for v in found)
    assert lost(record, submitted.pods) == []


def test_a_watch_resumed_from_a_resource_version_the_server_no_longer_keeps_relists_and_misses_nothing(
    cluster: LocalCluster, credentials: Credentials, loop: Background, kubectl: Kubectl
) -> None:
    # A fresh kind's watch cache starts at the current resourceVersion, so "1" is certainly
    # older than anything it keeps: the server answers 410 Gone. (Pods' cache, started with
    # the cluster, may still hold resourceVersion 1 on a young cluster.)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(PROBE_KIND))
    try:
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{PROBE_KIND['metadata']['name']}")
        for name in ("first", "second"):
            kubectl.apply({"apiVersion": f"{PROBES}/v1", "kind": "Probe", "metadata": {"name": name}})
        seen = Seen()

        async def follow() -> Watch:
            async with Connection(credentials) as connection:
                watch = Watch(connection, f"/apis/{PROBES}/v1/namespaces/{kubectl.namespace}/probes")
                task = asyncio.create_task(watch.run(seen, since="1"))
                try:
                    async with asyncio.timeout(60):
                        while not (watch.relists and seen.names == {"first", "second"}):
                            await asyncio.sleep(0.05)
                finally:
                    task.cancel()
                return watch

        watch = loop.run(follow())
        assert (watch.expired, watch.relists, seen.names) == (1, 1, {"first", "second"})
    finally:
        cluster.kubectl("delete", "crd", PROBE_KIND["metadata"]["name"], "--wait=false", check=False)


PROBES = "audit.sluicegate-test"
PROBE_KIND: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "probes.audit.sluicegate-test"},
    "spec": {
        "group": "audit.sluicegate-test",
        "scope": "Namespaced",
        "names": {"plural": "probes", "singular": "probe", "kind": "Probe", "listKind": "ProbeList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


class Seen:
    """A watch handler that keeps the names it has seen."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def listed(self, items: list[dict[str, Any]]) -> None:
        self.names = {i["metadata"]["name"] for i in items}

    def changed(self, kind: str, obj: dict[str, Any]) -> None:
        self.names.add(obj["metadata"]["name"])
