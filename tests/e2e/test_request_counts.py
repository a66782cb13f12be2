"""What a released pod costs the API server in the gate controller's requests, counted by the API
server itself: two for a pod that never waited (the gate patch, the ``True`` condition), three
for one held once (its ``False`` condition and ``held`` annotation in one request before those
two), and no events.

The controller's requests are classified by FlowSchemas of their own, one per kind of request
(``benchmarks.counting``), and read from the API server's
``apiserver_flowcontrol_dispatched_requests_total``. The counts are of the whole cluster, so
the test starts once the controller has written nothing for a while (pods of earlier tests
may still be going).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from audit.scraping import flow_totals
from benchmarks import counting
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from policy import keys
from tests.e2e.conftest import STANDBY, eventually
from tests.e2e.scenes import HELD_SECONDS, Scene

SYSTEM = "e2e-counts"
CONTROLLER = counting.service_account("sluicegate-system", "sluicegate-controller")
WRITES = ("pod writes", "pod status", "events")
QUIET_SECONDS = 3.0  # no write by the controller for this long: nothing of earlier tests is going on


def writes(cluster: LocalCluster) -> dict[str, float]:
    """The controller's pod, pod status and event writes so far, by kind."""
    flows = flow_totals(cluster.kubectl("get", "--raw", "/metrics").stdout)
    return {kind: flows.get(counting.schema_name(SYSTEM, kind), 0.0) for kind in WRITES}


@pytest.fixture
def counted(cluster: LocalCluster) -> Iterator[LocalCluster]:
    counting.install(cluster, SYSTEM, [CONTROLLER])
    try:
        yield cluster
    finally:
        counting.uninstall(cluster, SYSTEM)


def test_a_released_pod_costs_two_requests_and_one_that_waited_three(counted: LocalCluster,
                                                                      scene: Scene) -> None:
    team = scene.team("vision")
    open_queue = scene.queue("open")
    one = scene.queue("one", maxRunning=1)
    namespace = scene.namespace(team)

    def quiet() -> dict[str, float] | None:
        before = writes(counted)
        time.sleep(QUIET_SECONDS)
        after = writes(counted)
        return after if after == before else None

    before = eventually(quiet, "the controller to write nothing for a while")
    never = scene.pods(namespace, open_queue, 2, prefix="open", seconds=HELD_SECONDS)
    first, *waiting = scene.pods(namespace, one, 3, prefix="one", seconds=HELD_SECONDS)
    scene.wait_reason(namespace, waiting, keys.Reason.QUEUE_LIMIT.value)
    for pod in waiting:
        scene.finish(namespace, first)
        scene.wait_condition(namespace, pod, lambda c: c["status"] == "True", "dispatched")
        first = pod
    for pod in (*never, *waiting):
        scene.wait_condition(namespace, pod, lambda c: c["status"] == "True", "dispatched")
    after = eventually(quiet, "the controller to have written everything")

    grew = {kind: after[kind] - before[kind] for kind in WRITES}
    released = len(never) + 1 + len(waiting)
    # 2 a pod that never waited, 3 a pod held once: one more status write each.
    assert grew == {"pod writes": released, "pod status": released + len(waiting), "events": 0}
    assert 2 * (len(never) + 1) + 3 * len(waiting) == sum(grew.values())
    for pod in waiting:
        notes = scene.get("pod", pod, namespace)["metadata"]["annotations"]
        assert notes[keys.HELD_ANNOTATION] == f"QueueLimit: queue {one}: 1/1 running"


ANNOTATION_BYTES = 256 * 1024  # the API server's bound on a pod's annotations
RESYNC_SECONDS = 10.0  # the controller's default --resync-seconds: a cycle runs at least this often


def controller_sample(running: LocalSluicegate, name: str, **labels: str) -> float:
    """The sum of ``name`` with ``labels`` over both controller replicas (either may lead)."""
    total = 0.0
    for replica in ("controller", STANDBY.name):
        port = running.port(replica, "metrics")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        total += sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                     if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))
    return total


def test_a_release_the_api_server_refuses_is_tried_once_and_the_pod_waits_saying_why(
    counted: LocalCluster, scene: Scene, running: LocalSluicegate,
) -> None:
    """A user grows their gated pod's annotations after admission to within a few bytes of the
    API server's 256 KiB: the release stamp no longer fits, and the API server refuses the gate
    patch (422). The controller tries once, counts no release, says why on the pod, lets the pod
    behind it have the slot, and tries again only once the pod has changed."""
    team = scene.team("vision")
    one = scene.queue("one", maxRunning=1, paused=True)
    namespace = scene.namespace(team)
    scene.pods(namespace, one, 1, prefix="crowded", seconds=HELD_SECONDS)
    scene.pods(namespace, one, 1, prefix="next", seconds=HELD_SECONDS)
    scene.wait_reason(namespace, ["crowded00", "next00"], keys.Reason.QUEUE_PAUSED.value)
    notes = scene.get("pod", "crowded00", namespace)["metadata"]["annotations"]
    used = sum(len(k.encode()) + len(v.encode()) for k, v in notes.items())
    filler = {f"notes{i}": "x" * 100_000 for i in range(2)}
    filler["notes2"] = "x" * (ANNOTATION_BYTES - used - 200_000 - 3 * len("notes0") - 16)
    scene.kubectl("patch", "pod", "crowded00", "-n", namespace, "--type=merge", "--patch-file=/dev/stdin",
                  input=json.dumps({"metadata": {"annotations": filler}}))
    released_before = controller_sample(running, "sluicegate_releases_total", queue=one)

    def quiet() -> dict[str, float] | None:
        before = writes(counted)
        time.sleep(QUIET_SECONDS)
        after = writes(counted)
        return after if after == before else None

    before = eventually(quiet, "the controller to write nothing for a while")
    scene.patch("queues", one, {"paused": False})
    told = scene.wait_condition(namespace, "crowded00", lambda c: c["reason"] == "ReleaseRefused",
                                "ReleaseRefused")
    assert told["status"] == "False"
    assert told["message"].startswith("the API server refused to release it: "), told
    assert "metadata.annotations: Too long" in told["message"], told
    scene.wait_condition(namespace, "next00", lambda c: c["status"] == "True", "the pod behind it released")
    time.sleep(RESYNC_SECONDS + QUIET_SECONDS)  # cycles come and go: none tries it again
    after = eventually(quiet, "the controller to have written everything")
    grew = {kind: after[kind] - before[kind] for kind in WRITES}
    # One refused gate patch and one that passed, whatever the conditions cost.
    assert (grew["pod writes"], grew["events"]) == (2, 0), grew
    held = scene.get("pod", "crowded00", namespace)["metadata"]["annotations"][keys.HELD_ANNOTATION]
    assert held == f"QueuePaused: queue {one} is paused", "the words that fit stay"
    assert controller_sample(running, "sluicegate_releases_total", queue=one) == released_before + 1

    scene.finish(namespace, "next00")
    scene.kubectl("patch", "pod", "crowded00", "-n", namespace, "--type=json", "-p",
                  json.dumps([{"op": "remove", "path": "/metadata/annotations/notes2"}]))
    scene.wait_condition(namespace, "crowded00", lambda c: c["status"] == "True", "released once trimmed")
    assert controller_sample(running, "sluicegate_releases_total", queue=one) == released_before + 2
