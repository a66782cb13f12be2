"""Every series the shipped Grafana dashboard queries is exported by the live processes."""

from __future__ import annotations

from controlplane.deploying import LocalSluicegate
from policy import keys
from process import kubeyaml
from tests.dashboards import DASHBOARD, dashboard, series
from tests.e2e.conftest import eventually
from tests.e2e.scenes import HELD_SECONDS, Scene
from tests.e2e.scraping import exported


def test_every_series_the_dashboard_queries_is_exported_by_a_real_scrape(
    scene: Scene, sluicegate: LocalSluicegate
) -> None:
    team = scene.team("vision")
    stopped = scene.queue("stopped", maxRunning=0)
    roomy = scene.queue("roomy")
    ns = scene.namespace(team)
    scene.pods(ns, stopped, 1, prefix="held")  # pending, with a reason
    scene.pods(ns, roomy, 1, prefix="run", seconds=HELD_SECONDS)  # released: a wait observed, GPUs in use
    # released, and no node can take it now: the one it selects is cordoned
    scene.node("cordoned", 8, cordoned=True)  # the one node of the scene's pool, cordoned
    scene.pods(ns, roomy, 1, prefix="stuck", gpus=8, node_selector=scene.pool()["matchLabels"])
    refused = scene.cluster.kubectl("create", "-f", "-", check=False, input=_pod_yaml(scene, ns, "refused"))
    assert refused.returncode != 0 and "is not open to" in refused.stderr, refused.stderr  # a denial
    try:
        scene.wait_reason(ns, ["held00"], keys.Reason.QUEUE_LIMIT.value)
        scene.wait_condition(ns, "stuck00", lambda c: "waiting for Kubernetes" in c["message"], "unplaceable")
        used = series(dashboard())

        def all_exported() -> set[str] | None:
            names = exported(sluicegate)
            return names if used <= names else None

        eventually(all_exported, f"every series of {DASHBOARD.name} in /metrics: {sorted(used)}")
    finally:
        scene.kubectl("delete", "pod", "run00", "stuck00", "-n", ns, "--wait=false")


def _pod_yaml(scene: Scene, namespace: str, name: str) -> str:
    return kubeyaml.dump(scene.pod(namespace, name, f"no-such-queue-{scene.id}"))
