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

import time
from collections.abc import Iterator

import pytest

from audit.scraping import flow_totals
from benchmarks import counting
from controlplane.launching import LocalCluster
from policy import keys
from tests.e2e.conftest import eventually
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
