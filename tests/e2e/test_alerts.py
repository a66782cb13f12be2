"""The alerts, evaluated by a real Prometheus scraping Sluicegate on the real control plane.

One module, one cluster of its own and one Prometheus (``controlplane.monitoring``): an idle
cluster must be idle (nothing else's pods or objects), and the no-leader alert needs the only
controller killed (the session cluster runs a standby). The rules are the PrometheusRule's,
with every ``for:`` and every threshold in seconds divided by ``SHORTER``
(``controlplane.rulefiles.shortened``): an hour's wait becomes 15 s, ``for: 10m`` 2.5 s.
Every panel of the Grafana dashboard is queried on the same Prometheus while pods flow.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from certs.authority import Authority
from controlplane import rulefiles
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from controlplane.monitoring import LocalPrometheus
from controlplane.services import SERVICES
from policy import keys
from process import kubeyaml
from tests.dashboards import dashboard, panel_queries
from tests.e2e.conftest import eventually
from tests.e2e.faults import kill
from tests.e2e.scenes import HELD_SECONDS, Scene

SHORTER = 240
RULES = rulefiles.shortened(rulefiles.rule_file(rulefiles.read()), 1 / SHORTER)
ALERTS = rulefiles.alerts(RULES)
# Upper bound on waiting for an alert: its threshold and for:, plus the machine's slowness.
ALERT_SECONDS = 180.0


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalSluicegate, LocalPrometheus]]:
    """A cluster of its own with Sluicegate as ``make up`` runs it (one controller), the Policy
    an install has, and Prometheus scraping it with the shortened rules."""
    cluster = LocalCluster(tmp_path_factory.mktemp("alerts"), nodes=2, gpus_per_node=8)
    sluicegate = LocalSluicegate(cluster, services=SERVICES)
    cluster.extender = sluicegate.scheduler_extender()
    cluster.up()
    prometheus = LocalPrometheus(sluicegate, RULES)
    try:
        sluicegate.up()
        cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump(
            {"apiVersion": keys.API_VERSION, "kind": "Policy", "metadata": {"name": keys.POLICY_NAME},
             "spec": {}}))
        prometheus.up()
        yield sluicegate, prometheus
    finally:
        prometheus.down()
        sluicegate.down()
        cluster.down()


@pytest.fixture
def world(monitored: tuple[LocalSluicegate, LocalPrometheus]) -> Iterator[Scene]:
    scene = Scene(monitored[0].cluster)
    try:
        yield scene
    finally:
        scene.cleanup()
    problems = monitored[0].dead()
    assert not problems, "\n".join(problems)


def test_a_healthy_idle_cluster_fires_nothing(monitored: tuple[LocalSluicegate, LocalPrometheus]) -> None:
    _, prometheus = monitored
    assert len(ALERTS) == 14
    prometheus.evaluated_after(time.time() + 2)
    assert prometheus.query('count(up{job="sluicegate"} == 1)')[0]["value"][1] == str(len(SERVICES))
    # the API server too, read with a certificate that may get /metrics: its webhook counts are there
    assert prometheus.query('up{job="apiserver"} == 1'), "the API server is not scraped"
    assert prometheus.query('apiserver_admission_webhook_request_total{name=~".+\\\\.sluicegate\\\\.dev"}'), (
        "no API server call to Sluicegate's webhooks is counted")
    assert prometheus.alerts() == []  # neither firing nor pending: no expression is true


def test_a_pod_held_past_the_threshold_fires_gated_too_long_with_its_queue(
    monitored: tuple[LocalSluicegate, LocalPrometheus], world: Scene
) -> None:
    _, prometheus = monitored
    team = world.team("vision")
    paused = world.queue("paused", paused=True)
    namespace = world.namespace(team)
    world.pods(namespace, paused, 1, prefix="held")
    world.wait_reason(namespace, ["held00"], keys.Reason.QUEUE_PAUSED.value)

    alert = _firing(prometheus, "SluicegatePodsGatedTooLong", paused)
    assert alert["labels"]["severity"] == "warning"
    assert paused in alert["annotations"]["summary"]
    # A paused queue is not starved: one alert says its work waits, not two.
    assert _active(prometheus, "SluicegateQueueStarved", paused) == []


def test_a_dispatched_pod_no_node_can_take_fires_the_unplaceable_alert(
    monitored: tuple[LocalSluicegate, LocalPrometheus], world: Scene
) -> None:
    _, prometheus = monitored
    team = world.team("vision")
    roomy = world.queue("roomy")
    namespace = world.namespace(team)
    world.node("cordoned", 8, cordoned=True)  # the one node of the scene's pool
    world.pods(namespace, roomy, 1, prefix="stuck", gpus=8, node_selector=world.pool()["matchLabels"])
    world.wait_condition(namespace, "stuck00", lambda c: keys.UNPLACEABLE in c["message"], "unplaceable")

    alert = _firing(prometheus, "SluicegateDispatchedButUnplaceable", roomy)
    assert float(alert["value"]) == 1


def test_every_dashboard_panel_returns_data_while_pods_flow(
    monitored: tuple[LocalSluicegate, LocalPrometheus], world: Scene
) -> None:
    _, prometheus = monitored
    team = world.team("vision")
    stopped, roomy = world.queue("stopped", maxRunning=0), world.queue("roomy")
    namespace = world.namespace(team)
    world.pods(namespace, stopped, 1, prefix="held")  # pending, with a reason
    world.pods(namespace, roomy, 1, prefix="long", seconds=HELD_SECONDS)  # GPUs in use throughout
    world.node("cordoned", 8, cordoned=True)
    world.pods(namespace, roomy, 1, prefix="stuck", gpus=8, node_selector=world.pool()["matchLabels"])
    refused = world.cluster.kubectl("create", "-f", "-", check=False, input=kubeyaml.dump(
        world.pod(namespace, "refused", f"no-such-queue-{world.id}")))
    assert refused.returncode != 0, "a pod of a queue that does not exist was admitted"
    queries = panel_queries(dashboard())
    flowing = 0

    def empty_panels() -> list[str]:
        nonlocal flowing  # a few short pods a round: releases and waits in every rate window
        world.pods(namespace, roomy, 2, prefix="flow", start=flowing, seconds=1)
        flowing += 2
        return [f"{title}: {expr}" for title, expr in queries if not _finite(prometheus.query(expr))]

    left = empty_panels()
    deadline = time.monotonic() + ALERT_SECONDS
    while left and time.monotonic() < deadline:
        time.sleep(2)
        left = empty_panels()
    assert left == [], "panels without data:\n" + "\n".join(left)


def test_a_cabundle_the_api_server_cannot_verify_with_fires_the_webhook_calls_alert(
    monitored: tuple[LocalSluicegate, LocalPrometheus], world: Scene
) -> None:
    """The API server cannot call the webhook at all (its caBundle names another CA: TLS
    verification fails), so every managed pod is refused: the API server's own metrics, which
    Prometheus scrapes, fire the critical alert with the webhook's name; the webhook itself
    sees nothing."""
    _, prometheus = monitored
    hook = "pods.mutate.sluicegate.dev"
    configuration = json.loads(
        world.kubectl("get", "mutatingwebhookconfiguration", "sluicegate", "-o", "json"))
    index = next(i for i, w in enumerate(configuration["webhooks"]) if w["name"] == hook)
    path = f"/webhooks/{index}/clientConfig/caBundle"
    kept = configuration["webhooks"][index]["clientConfig"]["caBundle"]
    wrong = base64.b64encode(Authority.create("not-the-webhooks-ca").cert_pem).decode()
    team = world.team("vision")
    queue = world.queue("roomy")
    namespace = world.namespace(team)

    def patch(bundle: str) -> None:
        world.kubectl("patch", "mutatingwebhookconfiguration", "sluicegate", "--type=json",
                      "-p", json.dumps([{"op": "replace", "path": path, "value": bundle}]))

    submitted = 0

    def refused_for_tls() -> str | None:
        nonlocal submitted
        submitted += 1
        created = world.cluster.kubectl("create", "-f", "-", check=False, input=kubeyaml.dump(
            world.pod(namespace, f"refused{submitted:03d}", queue)))
        assert created.returncode != 0, "a managed pod was admitted while its webhook cannot be called"
        return created.stderr if "x509" in created.stderr else None

    patch(wrong)
    try:
        said = eventually(refused_for_tls, "a managed pod refused because the API server cannot verify "
                          "the webhook's certificate")
        assert f'failed calling webhook "{hook}"' in said, said

        def firing() -> dict[str, Any] | None:
            refused_for_tls()  # calls keep failing while the alert waits out its for:
            return next((a for a in _active(prometheus, "SluicegateWebhookCallsFailing")
                         if a["state"] == "firing" and a["labels"].get("name") == hook), None)

        alert = eventually(firing, f"SluicegateWebhookCallsFailing firing for {hook}", ALERT_SECONDS)
        assert alert["labels"]["severity"] == "critical"
        assert hook in alert["annotations"]["summary"]
        # The webhook was never reached: its own error alert has nothing to count.
        assert _active(prometheus, "SluicegateWebhookErrors") == []
    finally:
        patch(kept)
    def admitted() -> bool | None:
        pod = kubeyaml.dump(world.pod(namespace, "admitted", queue))
        dry = world.cluster.kubectl("create", "--dry-run=server", "-f", "-", check=False, input=pod)
        return dry.returncode == 0 or None

    eventually(admitted, "managed pods admitted again once the caBundle is put back")


def test_the_only_controller_killed_fires_no_leader_after_its_for(
    monitored: tuple[LocalSluicegate, LocalPrometheus],
) -> None:
    sluicegate, prometheus = monitored
    assert _active(prometheus, "SluicegateNoLeader") == []
    killed = time.time()
    kill(sluicegate, "controller")
    try:
        alert = _firing(prometheus, "SluicegateNoLeader")
        # Active since the kill (not a leftover), and firing only once true for its whole for:.
        active_at = datetime.fromisoformat(alert["activeAt"][:19] + "+00:00").timestamp()
        assert active_at >= killed - 1, (alert, killed)
        assert alert["labels"]["severity"] == "critical"
    finally:
        sluicegate.stop("controller")
        sluicegate.start("controller")
    eventually(lambda: _active(prometheus, "SluicegateNoLeader") == [] or None,
               "SluicegateNoLeader to end once the controller leads again", ALERT_SECONDS)


# --- reading Prometheus ---------------------------------------------------------------------


def _active(prometheus: LocalPrometheus, name: str, queue: str | None = None) -> list[dict[str, Any]]:
    return [a for a in prometheus.alerts() if a["labels"]["alertname"] == name
            and (queue is None or a["labels"].get("queue") == queue)]


def _firing(prometheus: LocalPrometheus, name: str, queue: str | None = None) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        return next((a for a in _active(prometheus, name, queue) if a["state"] == "firing"), None)

    return eventually(probe, f"{name} firing{f' for queue {queue}' if queue else ''}", ALERT_SECONDS)


def _finite(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(s["value"][1])) for s in result)

