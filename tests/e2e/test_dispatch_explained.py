"""What users and operators see: ``kubectl describe pod`` says why a pod waits, and tells a pod
held by Sluicegate from one dispatched that Kubernetes cannot place; ``kubectl get queues``
shows live figures; every series the shipped alerts read is really exposed."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from controlplane.deploying import LocalSluicegate
from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene
from tests.e2e.scraping import exported

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
RULES = MANIFESTS / "components" / "monitoring" / "prometheusrule.yaml"
UNPLACEABLE = "dispatched, waiting for Kubernetes to place it: "


def test_describe_names_the_limit_that_holds_a_pod_and_says_kubernetes_cannot_place_a_dispatched_one(
    scene: Scene,
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train", maxRunning=1)
    roomy = scene.queue("roomy")
    namespace = scene.namespace(team)
    scene.pods(namespace, queue, 3, seconds=HELD_SECONDS)  # p00 keeps its slot while the test reads
    # A node could hold it, but the only one it selects is cordoned: released, then unplaceable.
    scene.node("cordoned", 8, cordoned=True)  # the one node of the scene's pool, cordoned
    scene.pods(namespace, roomy, 1, prefix="stuck", gpus=8, node_selector=scene.pool()["matchLabels"])
    try:
        scene.wait_reason(namespace, ["p02"], keys.Reason.QUEUE_LIMIT.value)
        scene.wait_condition(namespace, "stuck00", lambda c: c["status"] == "True" and
                             c["message"].startswith(UNPLACEABLE), "dispatched, waiting for Kubernetes")

        held = scene.kubectl("describe", "pod", "p02", "-n", namespace)
        # Annotations are listed with their values; a condition only with its status.
        assert f"{keys.HELD_ANNOTATION}: QueueLimit: queue {queue}: 1/1 running" in held, held
        assert "waiting for Kubernetes" not in held

        unplaceable = scene.kubectl("describe", "pod", "stuck00", "-n", namespace)
        assert re.search(rf"{re.escape(UNPLACEABLE)}0/\d+ nodes are available", unplaceable), unplaceable
        assert "unschedulable" in unplaceable
        assert all(reason.value not in unplaceable for reason in keys.Reason), unplaceable

        def columns() -> list[str] | None:
            row = scene.kubectl("get", "queues", queue, "--no-headers").split()
            return row if row[2:4] == ["1/1", "2"] else None

        # NAME PRIORITY RUNNING PENDING GPUS PAUSED AGE
        row = eventually(columns, f"kubectl get queues {queue} to show 1/1 running and 2 pending")
        assert row[4] == "1/-" and row[5] == "false"
    finally:
        scene.kubectl("delete", "pod", "stuck00", "-n", namespace, "--wait=false")


def test_every_series_the_shipped_alerts_read_is_exposed_by_a_real_scrape(
    scene: Scene, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("vision")
    queue = scene.queue("train")
    namespace = scene.namespace(team)
    scene.pods(namespace, queue, 1, seconds=1)  # one admission and one cycle at least
    scene.wait_condition(namespace, "p00", lambda c: c["status"] == "True", "dispatched")
    stopped = scene.queue("stopped", maxRunning=0)
    scene.pods(namespace, stopped, 1, prefix="held")  # waiting, with a reason
    scene.wait_reason(namespace, ["held00"], keys.Reason.QUEUE_LIMIT.value)
    small = scene.queue("small", quota={keys.GPU_RESOURCE: "1"})
    scene.pods(namespace, small, 1, prefix="never", gpus=2)  # more than its quota by itself: never runs
    scene.wait_reason(namespace, ["never00"], keys.Reason.QUEUE_QUOTA.value)

    (rule,) = yaml.safe_load_all(RULES.read_text())
    expressions = [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]
    used = {name for expr in expressions for name in re.findall(r"\bsluicegate_[a-z0-9_]+", expr)}
    assert len(used) >= 6

    def exposed() -> set[str] | None:
        names = exported(sluicegate)
        return names if used <= names else None

    eventually(exposed, f"every series of {RULES.name} in the processes' /metrics: {sorted(used)}")
