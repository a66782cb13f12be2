"""What the gate controller says and counts beyond releasing: work that can never run under the
current limits (its condition and its gauge, as a quota is lowered and raised again), and the
release counter, which counts each pod whose gate this replica removed exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from policy.catalog import Catalog
from policy.inventory import Inventory
from policy.limits import NEVER
from tests.builders import MakeNode, MakePod, MakeQueue, MakeTeam
from tests.fake_api import ANNOTATION_BYTES
from tests.unit.test_gate_controller import NS, World, gated_pod, queue_of, until


def quota_of(gpus: int) -> Catalog:
    return Catalog(queues={"train": MakeQueue("train").quota(gpus=gpus).model()},
                   teams={"vision": MakeTeam("vision").model()})


@pytest.fixture
async def world() -> AsyncIterator[World]:
    made = World(quota_of(2))
    made.cache.listeners.append(made.controller.pod_changed)  # the watch tells the controller
    yield made
    await made.controller.stop()


async def cycle(world: World) -> None:
    world.cache.sync()
    world.controller.cycle()
    await world.settle()
    world.cache.sync()


def said(world: World, name: str) -> tuple[str, str]:
    condition = world.api.condition(NS, name)
    assert condition is not None
    return condition["reason"], condition["message"]


def gauge(world: World, name: str, **labels: str) -> float | None:
    return world.controller.metrics.registry.get_sample_value(name, labels)


def impossible(world: World) -> float | None:
    return gauge(world, "sluicegate_impossible_workloads", queue="train")


def releases(world: World) -> float | None:
    return gauge(world, "sluicegate_releases_total", queue="train")


async def test_a_pod_that_can_never_run_says_so_when_the_quota_drops_and_is_released_when_it_rises(
    world: World,
) -> None:
    """The quota's reason (``QueueQuota``) is the same whether the quota is full or the pod
    exceeds it by itself, so the condition must be rewritten on that change, not only when the
    reason changes."""
    world.submit(gated_pod("running").gpus(2), gated_pod("waiting", created=1).gpus(2))
    await cycle(world)
    await cycle(world)
    assert world.released() == {"running"}
    assert said(world, "waiting") == ("QueueQuota", "queue train: 2/2 nvidia.com/gpu in use, needs 2")
    assert impossible(world) == 0

    world.catalog = quota_of(1)  # lowered below what the waiting pod asks for by itself
    await cycle(world)
    assert said(world, "waiting") == (
        "QueueQuota", f"{NEVER}needs 2 nvidia.com/gpu; queue train quota is 1")
    assert impossible(world) == 1
    assert world.released() == {"running"}  # and the running pod was not evicted

    assert gauge(world, "sluicegate_impossible_workloads_by_cause",
                 queue="train", team="vision", reason="QueueQuota") == 1

    world.catalog = quota_of(2)  # possible again, but the running pod still takes the quota
    await cycle(world)
    reason, message = said(world, "waiting")
    assert reason == "QueueQuota" and not message.startswith(NEVER)
    assert impossible(world) == 0
    assert gauge(world, "sluicegate_impossible_workloads_by_cause",
                 queue="train", team="vision", reason="QueueQuota") is None

    world.catalog = quota_of(4)
    await cycle(world)
    assert world.released() == {"running", "waiting"}


async def test_a_team_quota_too_small_for_a_pod_counts_it_as_impossible_in_its_queue(world: World) -> None:
    world.catalog = replace(quota_of(8), teams={"vision": MakeTeam("vision").quota(gpus=1).model()})
    world.submit(gated_pod("big").gpus(2), gated_pod("small", created=1).gpus(1))
    await cycle(world)

    assert world.released() == {"small"}
    assert said(world, "big") == ("TeamQuota", f"{NEVER}needs 2 nvidia.com/gpu; team vision quota is 1")
    assert impossible(world) == 1
    # with its team and the quota it exceeds, so the alert names what an admin must change
    assert gauge(world, "sluicegate_impossible_workloads_by_cause",
                 queue="train", team="vision", reason="TeamQuota") == 1
    assert gauge(world, "sluicegate_impossible_workloads_by_cause",
                 queue="train", team="vision", reason="QueueQuota") is None


async def test_a_release_whose_answer_was_lost_is_counted_once(world: World) -> None:
    """The patch landed, the answer did not: the retry finds the gate gone with this release's
    own stamp on the pod, so the release is this replica's: explained, and counted once when
    the watch shows it."""
    world.api.lost = 1
    world.submit(gated_pod("p0"))
    await cycle(world)

    assert world.released() == {"p0"}
    assert releases(world) == 1
    assert world.api.writes[("status", "p0")] == 1
    assert world.api.events == []


def waits_observed(world: World) -> float | None:
    return gauge(world, "sluicegate_wait_seconds_count", queue="train")


async def test_a_release_decided_again_after_a_refusal_is_counted_once_and_its_wait_observed_once(
    world: World,
) -> None:
    world.api.failures = [403]
    world.submit(gated_pod("p0"))
    await cycle(world)
    assert world.released() == set() and not releases(world) and not waits_observed(world)

    await cycle(world)
    assert world.released() == {"p0"}
    assert releases(world) == 1 and waits_observed(world) == 1


async def test_a_pod_released_by_someone_else_is_not_counted_as_this_replicas_release(world: World) -> None:
    world.submit(gated_pod("p0"))
    del world.api.pod(NS, "p0")["spec"]["schedulingGates"]  # break glass, not yet in the cache
    world.controller.cycle()
    await world.settle()
    world.cache.sync()

    assert world.released() == {"p0"}
    assert not releases(world)


async def test_a_release_cut_short_by_a_lost_lead_is_counted_when_the_watch_shows_it(world: World) -> None:
    """The patch landed but its answer came after the lead was lost (the task was cancelled):
    the watch shows the pod released with this process's stamp, so it is counted, once."""
    world.api.slow = 3600.0  # the answer would come in an hour: the lead is lost long before
    world.submit(gated_pod("p0"))
    world.controller.cycle()
    await until(lambda: world.api.patches == 1)  # applied, not yet answered
    world.leader.leading = False
    world.controller.leadership_changed(False)
    world.api.slow = 0.0
    await cycle(world)

    assert world.released() == {"p0"}
    assert releases(world) == 1
    world.leader.leading = True
    world.controller.leadership_changed(True)
    await cycle(world)
    assert releases(world) == 1


async def test_a_replica_that_loses_the_lead_stops_exporting_the_queues_figures(world: World) -> None:
    world.catalog = quota_of(0)
    world.submit(gated_pod("p0").gpus(1))
    await cycle(world)
    assert gauge(world, "sluicegate_queue_pending_workloads", queue="train") == 1
    assert gauge(world, "sluicegate_cluster_pending_workloads") == 1

    world.leader.leading = False
    world.controller.leadership_changed(False)
    assert gauge(world, "sluicegate_queue_pending_workloads", queue="train") is None
    assert gauge(world, "sluicegate_team_pending_workloads", team="vision") is None
    assert gauge(world, "sluicegate_cluster_pending_workloads") == 0
    assert gauge(world, "sluicegate_leader") == 0


async def test_a_pod_no_node_could_hold_stays_gated_says_so_and_goes_once_a_node_could(world: World) -> None:
    """A 16-GPU pod on 8-GPU nodes is not released: its condition says ``NoNodeFits`` with the
    numbers, the impossible gauge counts it, and its queue's quota stays free for others. A
    node that could hold it lets it go at the next cycle."""
    world.catalog = quota_of(24)
    world.nodes = Inventory([MakeNode("gpu-1").gpus(8).model(), MakeNode("gpu-2").gpus(8).model()])
    world.submit(gated_pod("big").gpus(16), gated_pod("small", created=1).gpus(8))
    await cycle(world)
    await cycle(world)
    assert world.released() == {"small"}
    assert said(world, "big") == (
        "NoNodeFits", "needs 16 nvidia.com/gpu on one node; the largest node of the cluster has 8")
    assert impossible(world) == 1
    written = world.api.pod(NS, "big")["metadata"]["resourceVersion"]
    await cycle(world)  # the condition says what the controller would write: nothing is written
    assert world.api.pod(NS, "big")["metadata"]["resourceVersion"] == written

    world.nodes = Inventory([*world.nodes.nodes, MakeNode("gpu-16").gpus(16).model()])
    await cycle(world)
    assert world.released() == {"small", "big"}
    assert impossible(world) == 0


def pooled(pool: str) -> Catalog:
    return Catalog(queues={"train": MakeQueue("train").quota(gpus=64).node_pool({"pool": pool}).model()},
                   teams={"vision": MakeTeam("vision").model()})


async def test_a_no_node_fits_message_follows_the_nodes_and_the_queues_pool_as_they_change(
    world: World,
) -> None:
    """``NoNodeFits`` stays the reason while its words change: a bigger node that is still too
    small, a queue moved to another pool. The settled pod is looked at again and told anew."""
    world.catalog = pooled("a100")
    world.nodes = Inventory([MakeNode("a-8").gpus(8).label("pool", "a100").model(),
                             MakeNode("h-12").gpus(12).label("pool", "h100").model()])
    world.submit(gated_pod("big").gpus(16))
    await cycle(world)
    await cycle(world)
    assert said(world, "big") == (
        "NoNodeFits", "needs 16 nvidia.com/gpu on one node; the largest node of queue train's node pool "
        "(pool=a100) has 8")
    await cycle(world)  # settled: nothing to say

    world.nodes = Inventory([*world.nodes.nodes, MakeNode("a-12").gpus(12).label("pool", "a100").model()])
    await cycle(world)
    assert said(world, "big") == (
        "NoNodeFits", "needs 16 nvidia.com/gpu on one node; the largest node of queue train's node pool "
        "(pool=a100) has 12")

    world.catalog = pooled("v100")
    await cycle(world)
    assert said(world, "big") == ("NoNodeFits", "no node is in queue train's node pool (pool=v100)")
    assert world.released() == set()


def crowded(name: str, room: int, created: float = 0.0, group: str = "") -> MakePod:
    """A gated pod (of pod group ``group`` of 2, if named) whose annotations leave ``room`` bytes
    under the API server's 256 KiB: too few for the release stamp when small (its user grew them
    after admission)."""
    pod = gated_pod(name, created=created)
    if group:
        pod = pod.group(group, 2)
    notes = pod.obj()["metadata"]["annotations"]
    used = sum(len(k.encode()) + len(v.encode()) for k, v in notes.items())
    return pod.annotation("notes", "x" * (ANNOTATION_BYTES - used - len("notes") - room))


async def test_a_group_with_a_member_whose_release_cannot_pass_is_not_released_in_part(world: World) -> None:
    """A group runs together or not at all: when one member's annotations have grown past the room
    for the release stamp, the controller releases neither (the other would hold its GPUs for a
    peer that never comes); both wait, the crowded one saying why; trimmed, both go."""
    world.catalog = queue_of(2)
    world.submit(crowded("gang-a", room=20, group="gang"), gated_pod("gang-b", created=1).group("gang", 2))
    for _ in range(3):
        await cycle(world)
    assert world.released() == set()
    assert world.api.writes["gate", "gang-a"] == 0 and world.api.writes["gate", "gang-b"] == 0
    reason, message = said(world, "gang-a")
    assert reason == "ReleaseRefused"
    assert message.startswith("pod gang-a: the API server would refuse to release it: metadata.annotations: ")
    assert message.endswith(f"over the {ANNOTATION_BYTES} Kubernetes allows: remove some annotations")

    world.api.pod(NS, "gang-a")["metadata"]["annotations"]["notes"] = "x"  # its user trims them
    world.api.version += 1
    await cycle(world)
    await cycle(world)
    assert world.released() == {"gang-a", "gang-b"}


async def test_a_pod_whose_release_the_api_server_refuses_waits_saying_why_and_blocks_nothing(
    world: World,
) -> None:
    """Its user grew its annotations after admission until the release stamp no longer fits. The
    API server refuses the release patch (422): the pod is not counted as released, waits with
    ``ReleaseRefused`` and the server's words, takes no slot, so the pod behind it goes, and is
    not tried again until it changes; once its annotations shrink it is released."""
    world.catalog = queue_of(1)
    world.submit(crowded("crowded", room=20), gated_pod("next", created=1))
    for _ in range(4):
        await cycle(world)
    assert world.released() == {"next"}
    reason, message = said(world, "crowded")
    assert reason == "ReleaseRefused"
    assert message == ('the API server refused to release it: Pod "crowded" is invalid: '
                       f"metadata.annotations: Too long: may not be more than {ANNOTATION_BYTES} bytes")
    assert world.api.writes["gate", "crowded"] == 1, "tried once, not every cycle"
    assert releases(world) == 1, "only the pod that was released is counted"
    assert gauge(world, "sluicegate_queue_waiting_workloads", queue="train", reason="ReleaseRefused") == 1
    assert gauge(world, "sluicegate_queue_running_workloads", queue="train") == 1

    world.finish("next")
    await cycle(world)
    assert world.released() == {"next"}  # the slot is free, and the pod as it is still cannot go
    assert world.api.writes["gate", "crowded"] == 1

    world.api.pod(NS, "crowded")["metadata"]["annotations"]["notes"] = "x"  # its user trims them
    world.api.version += 1
    await cycle(world)
    await cycle(world)
    assert world.released() == {"next", "crowded"}
    assert said(world, "crowded")[0] == "Dispatched"
    assert releases(world) == 2
