"""Work no node could ever hold is never released; work some node could hold is, even when no
node can take it now.

Each test owns its nodes: a queue whose node pool is the scene's own label, so the shared
8-GPU nodes of the control plane play no part and the numbers are the test's own."""

from __future__ import annotations

from policy import keys
from tests.e2e.conftest import eventually
from tests.e2e.scenes import Scene

UNPLACEABLE = keys.UNPLACEABLE


def gated(scene: Scene, namespace: str, pod: str) -> bool:
    gates = scene.get("pod", pod, namespace).get("spec", {}).get("schedulingGates") or []
    return any(g.get("name") == keys.GATE for g in gates)


def team_gpus(scene: Scene, team: str) -> str:
    """What ``kubectl get teams`` shows in its GPUS column (``used/quota``)."""
    status = scene.get("team", team).get("status") or {}
    return str((status.get("display") or {}).get("gpus") or "")


def test_a_16_gpu_pod_on_8_gpu_nodes_waits_with_no_node_fits_and_goes_once_a_16_gpu_node_comes(
    scene: Scene,
) -> None:
    scene.node("eight", 8)
    team = scene.team("nlp", quota={keys.GPU_RESOURCE: "16"})
    queue = scene.queue("train", nodePool=scene.pool())
    namespace = scene.namespace(team)
    scene.pods(namespace, queue, 1, prefix="huge", gpus=16, seconds=3600)

    waiting = scene.wait_condition(namespace, "huge00", lambda c: c["reason"] == "NoNodeFits", "NoNodeFits")
    assert waiting["status"] == "False"
    assert waiting["message"] == (
        f"needs 16 nvidia.com/gpu on one node; the largest node of queue {queue}'s node pool "
        f"(e2e.sluicegate.dev/pool={scene.id}) has 8")
    assert gated(scene, namespace, "huge00")
    # It holds nothing: the team's GPU figure counts none of it.
    eventually(lambda: team_gpus(scene, team) == "0/16" or None, f"team {team} to show 0/16 GPUs")
    assert gated(scene, namespace, "huge00")

    scene.node("sixteen", 16)
    released = scene.wait_condition(namespace, "huge00", lambda c: c["status"] == "True", "released")
    assert released["reason"] == keys.DISPATCHED_REASON
    assert not gated(scene, namespace, "huge00")
    eventually(lambda: team_gpus(scene, team) == "16/16" or None, f"team {team} to show 16/16 GPUs")


def test_a_pod_whose_pool_nodes_are_all_cordoned_is_released_and_waits_for_kubernetes(scene: Scene) -> None:
    scene.node("cordoned", 8, cordoned=True)
    team = scene.team("vision")
    queue = scene.queue("train", nodePool=scene.pool())
    namespace = scene.namespace(team)
    pool = scene.pool()["matchLabels"]
    scene.pods(namespace, queue, 1, prefix="p", gpus=8, seconds=3600, node_selector=pool)

    told = scene.wait_condition(namespace, "p00", lambda c: c["status"] == "True" and
                                c["message"].startswith(UNPLACEABLE), "dispatched, waiting for Kubernetes")
    assert "unschedulable" in told["message"], told
    assert not gated(scene, namespace, "p00")


def test_the_no_node_fits_words_follow_a_node_that_comes_and_the_queues_pool_as_it_is_edited(
    scene: Scene,
) -> None:
    scene.node("eight", 8)
    team = scene.team("nlp", quota={keys.GPU_RESOURCE: "16"})
    queue = scene.queue("train", nodePool=scene.pool())
    namespace = scene.namespace(team)
    scene.pods(namespace, queue, 1, prefix="huge", gpus=16, seconds=3600)
    where = f"queue {queue}'s node pool (e2e.sluicegate.dev/pool={scene.id})"
    scene.wait_condition(namespace, "huge00", lambda c: c["message"].endswith("has 8"), "NoNodeFits, has 8")

    scene.node("twelve", 12)  # bigger, and still too small: the reason stays, the numbers change
    told = scene.wait_condition(namespace, "huge00", lambda c: c["message"].endswith("has 12"),
                                "NoNodeFits, has 12")
    assert (told["reason"], told["message"]) == (
        "NoNodeFits", f"needs 16 nvidia.com/gpu on one node; the largest node of {where} has 12")

    elsewhere = {"matchLabels": {"e2e.sluicegate.dev/pool": f"{scene.id}-none"}}
    scene.patch("queues", queue, {"nodePool": elsewhere})
    told = scene.wait_condition(namespace, "huge00", lambda c: "-none" in c["message"],
                                "NoNodeFits, new pool")
    assert (told["reason"], told["message"]) == (
        "NoNodeFits", f"no node is in queue {queue}'s node pool (e2e.sluicegate.dev/pool={scene.id}-none)")
    assert gated(scene, namespace, "huge00")
