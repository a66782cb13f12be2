"""The gate controller's cycle against an API server in memory (``tests.fake_api``): which pods
lose their gate, what their conditions and events say, and that a slow watch, failing patches
and a changed gate list never release more than the limits allow."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

import pytest

from controller.metrics import ControllerMetrics
from controller.serving import gate_controller
from controller.settings import Settings
from policy import keys
from policy.catalog import Catalog
from policy.inventory import Inventory
from tests.builders import MakePod, MakeQueue, MakeTeam
from tests.fake_api import FakeApi, Leader, PodCache

SETTINGS = Settings(explain_after_seconds=0.0, unplaceable_after_seconds=0.0, status_seconds=3600.0,
                    give_up_seconds=30.0, release_concurrency=4, write_concurrency=2)
NS = "vision"


def gated_pod(name: str, queue: str = "train", created: float = 0.0) -> MakePod:
    return (MakePod(NS, name).queue(queue).team("vision").gpus(1).gated().created(created).admitted(created)
            .annotation(keys.SUBMITTER_ANNOTATION, '{"user":"alice","groups":[]}'))


class World:
    def __init__(self, catalog: Catalog, settings: Settings = SETTINGS) -> None:
        self.api = FakeApi()
        self.cache = PodCache(self.api)
        self.catalog = catalog
        self.leader = Leader()
        self.nodes: Inventory | None = None  # not known: every pod fits some node
        self.controller = gate_controller(settings, self.api, self.cache, lambda: self.catalog,  # type: ignore[arg-type]
                                         self.leader, ControllerMetrics(), shown=self.api.shown,
                                         nodes=lambda: self.nodes)

    def submit(self, *pods: MakePod) -> None:
        for pod in pods:
            self.api.add(pod.obj())
        self.cache.sync()

    async def settle(self) -> None:
        """Let every write in flight finish (gate removals, then conditions and events)."""
        for _ in range(200):
            await asyncio.sleep(0.01)
            if not len(self.controller.releaser) and not len(self.controller.explainer):
                await asyncio.sleep(0.02)
                return
        raise AssertionError("writes still in flight")

    def released(self) -> set[str]:
        return {name for (_, name) in self.api.pods} - self.api.gated()

    def finish(self, name: str) -> None:
        self.api.pod(NS, name)["status"]["phase"] = "Succeeded"
        self.api.version += 1
        self.cache.sync()


def queue_of(max_running: int) -> Catalog:
    return Catalog(queues={"train": MakeQueue("train").max_running(max_running).model()},
                   teams={"vision": MakeTeam("vision").model()})


@pytest.fixture
async def world() -> AsyncIterator[World]:
    made = World(queue_of(2))
    yield made
    await made.controller.stop()


async def until(check: Callable[[], bool]) -> None:
    for _ in range(300):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


async def test_a_cycle_releases_what_the_queue_allows_in_order_and_explains_the_rest(world: World) -> None:
    world.submit(*(gated_pod(f"p{i}", created=i) for i in range(5)))
    world.controller.cycle()
    await world.settle()

    assert world.released() == {"p0", "p1"}
    for name in ("p0", "p1"):
        pod = world.api.pod(NS, name)
        assert keys.DISPATCHED_AT_ANNOTATION in pod["metadata"]["annotations"]
        assert world.api.condition(NS, name) is None or world.api.condition(NS, name)["status"] == "True"
    for name in ("p2", "p3", "p4"):
        condition = world.api.condition(NS, name)
        assert condition is not None
        assert (condition["status"], condition["reason"]) == ("False", "QueueLimit")
        assert condition["message"] == "queue train: 2/2 running"
        # kubectl describe shows annotations, not a condition's message: the held annotation
        # says it, written in the same request.
        notes = world.api.pod(NS, name)["metadata"]["annotations"]
        assert notes[keys.HELD_ANNOTATION] == "QueueLimit: queue train: 2/2 running"
    assert world.api.events == []  # neither holds nor releases are evented


async def test_a_released_pod_costs_two_requests_and_one_that_waited_three(world: World) -> None:
    async def cycle() -> None:
        world.cache.sync()
        world.controller.cycle()
        await world.settle()
        world.cache.sync()

    world.submit(*(gated_pod(f"p{i}", created=i) for i in range(3)))
    await cycle()
    await cycle()  # the watch shows the releases: nothing more is written
    world.finish("p0")
    await cycle()
    await cycle()

    assert world.released() == {"p0", "p1", "p2"}
    for name in ("p0", "p1", "p2"):
        condition = world.api.condition(NS, name)
        assert condition is not None and condition["status"] == "True"
    writes = world.api.writes
    never_waited = {k: n for k, n in writes.items() if k[1] in ("p0", "p1")}
    assert never_waited == {("gate", "p0"): 1, ("status", "p0"): 1, ("gate", "p1"): 1, ("status", "p1"): 1}
    waited = {k: n for k, n in writes.items() if k[1] == "p2"}
    assert waited == {("status", "p2"): 2, ("gate", "p2"): 1}
    held = world.api.pod(NS, "p2")["metadata"]["annotations"][keys.HELD_ANNOTATION]
    assert held == "QueueLimit: queue train: 2/2 running"  # why it waited, kept after the release


async def test_released_pods_are_dispatched_true_once_the_watch_shows_them(world: World) -> None:
    world.submit(gated_pod("p0"))
    world.controller.cycle()
    await world.settle()
    world.cache.sync()
    world.controller.cycle()
    await world.settle()

    condition = world.api.condition(NS, "p0")
    assert condition is not None
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True", "Dispatched", "dispatched by queue train")
    assert world.api.events == []
    assert world.api.writes[("status", "p0")] == 1  # one write, though the cycle ran again


async def test_a_slow_watch_never_lets_a_second_cycle_release_the_same_slots_again(world: World) -> None:
    world.submit(*(gated_pod(f"p{i}", created=i) for i in range(5)))
    world.controller.cycle()
    await world.settle()
    # The watch has not delivered the ungated pods: the cache still shows all five gated.
    for _ in range(3):
        world.controller.cycle()
        await world.settle()
    assert world.released() == {"p0", "p1"}
    assert world.api.patches == 2

    world.finish("p0")  # the watch catches up, and one slot frees
    world.controller.cycle()
    await world.settle()
    assert world.released() == {"p0", "p1", "p2"}


async def test_a_patch_that_fails_is_retried_and_its_slot_counted_once_meanwhile(world: World) -> None:
    world.api.failures = [500, 0, 503]  # a server error, a lost connection, throttling
    world.submit(*(gated_pod(f"p{i}", created=i) for i in range(4)))
    world.controller.cycle()
    for _ in range(3):  # cycles while the first release is still retrying
        world.controller.cycle()
        await asyncio.sleep(0.01)
    await world.settle()

    assert world.released() == {"p0", "p1"}
    assert world.api.patches == 5  # three failures, then the two releases


async def test_a_gate_list_that_changed_is_read_again_and_other_gates_stay(world: World) -> None:
    world.submit(gated_pod("p0"))
    # Someone adds a gate of their own after the controller's cache saw the pod.
    world.api.pod(NS, "p0")["spec"]["schedulingGates"].append({"name": "example.com/other"})
    world.controller.cycle()
    await world.settle()

    assert world.api.pod(NS, "p0")["spec"]["schedulingGates"] == [{"name": "example.com/other"}]


async def test_a_pod_released_by_someone_else_is_counted_and_not_released_again(world: World) -> None:
    world.submit(gated_pod("p0"), gated_pod("p1", created=1), gated_pod("p2", created=2))
    del world.api.pod(NS, "p0")["spec"]["schedulingGates"]  # break glass, not yet in the cache
    world.controller.cycle()
    await world.settle()
    assert world.released() == {"p0", "p1"}
    world.cache.sync()
    world.controller.cycle()
    await world.settle()

    assert world.released() == {"p0", "p1"}  # p0 holds a slot: p2 waits
    condition = world.api.condition(NS, "p0")
    assert condition is not None and condition["status"] == "True"
    assert "outside dispatch" in condition["message"]
    warned = [e for e in world.api.events if e["reason"] == "ReleasedOutsideDispatch"]
    assert [e["regarding"]["name"] for e in warned] == ["p0"]


async def test_a_refused_release_is_forgotten_and_decided_again_later(world: World) -> None:
    world.api.failures = [403]
    world.submit(gated_pod("p0"))
    world.controller.cycle()
    await world.settle()
    assert world.released() == set()
    assert len(world.controller.assumed) == 0

    world.controller.cycle()
    await world.settle()
    assert world.released() == {"p0"}


async def test_a_released_pod_the_scheduler_cannot_place_says_so_and_is_not_mistaken_for_a_held_one(
    world: World,
) -> None:
    message = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    world.submit(gated_pod("big").gpus(16))
    world.controller.cycle()
    await world.settle()
    pod = world.api.pod(NS, "big")
    pod["status"]["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "message": message})
    world.cache.sync()
    world.controller.cycle()
    await world.settle()

    condition = world.api.condition(NS, "big")
    assert condition is not None
    assert condition["status"] == "True"
    assert condition["message"] == f"dispatched, waiting for Kubernetes to place it: {message}"
    warnings = [e for e in world.api.events if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["WaitingForPlacement"]
    world.controller.cycle()  # the same message again: no new write, no new event
    await world.settle()
    assert len([e for e in world.api.events if e["type"] == "Warning"]) == 1


async def test_a_pending_pods_condition_is_rewritten_only_when_its_reason_changes(world: World) -> None:
    world.submit(*(gated_pod(f"p{i}", created=i) for i in range(4)))
    world.controller.cycle()
    await world.settle()
    world.cache.sync()
    first = len(world.api.events)
    for _ in range(3):  # the same state: nothing to write
        world.controller.cycle()
        await world.settle()
    assert len(world.api.events) == first

    paused = MakeQueue("train").max_running(2).paused().model()
    world.catalog = replace(world.catalog, queues={"train": paused})
    world.controller.cycle()
    await world.settle()
    for name in ("p2", "p3"):
        condition = world.api.condition(NS, name)
        assert condition is not None and condition["reason"] == "QueuePaused"


async def test_a_paused_queue_that_is_deleted_rewrites_its_pods_message(world: World) -> None:
    world.catalog = replace(world.catalog, queues={"train": MakeQueue("train").paused().model()})
    world.submit(gated_pod("p0"))
    world.controller.cycle()
    await world.settle()
    world.cache.sync()
    condition = world.api.condition(NS, "p0")
    assert condition is not None and condition["message"] == "queue train is paused"

    world.catalog = replace(world.catalog, queues={})  # the reason stays QueuePaused
    world.controller.cycle()
    await world.settle()
    condition = world.api.condition(NS, "p0")
    assert condition is not None and condition["reason"] == "QueuePaused"
    assert condition["message"] == 'queue "train" does not exist'


async def test_a_replica_that_does_not_lead_writes_nothing(world: World) -> None:
    world.leader.leading = False
    world.submit(gated_pod("p0"))
    world.controller.queue.kick()
    task = asyncio.create_task(world.controller.run())
    await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert world.api.patches == 0 and world.api.events == []


async def test_queue_and_team_status_show_running_pending_and_gpus(world: World) -> None:
    world.submit(*(gated_pod(f"p{i}", created=i) for i in range(3)))
    world.controller.cycle()
    await world.controller.reporter.write(world.controller.reporter._figures)  # type: ignore[arg-type]

    queue = world.api.statuses["/apis/sluicegate.dev/v1beta1/queues/train/status"]
    assert queue["running"] == 2 and queue["pending"] == 1
    assert queue["display"] == {"running": "2/2", "gpus": "2/-"}
    assert queue["usage"] == {keys.GPU_RESOURCE: "2"}
    assert queue["oldestPendingTime"].endswith("Z")
    team = world.api.statuses["/apis/sluicegate.dev/v1beta1/teams/vision/status"]
    assert (team["running"], team["pending"], team["display"]["running"]) == (2, 1, "2/-")
    await world.settle()


async def test_only_changes_that_can_alter_a_decision_or_an_explanation_wake_the_loop(world: World) -> None:
    from controller.managed import managed_pod
    from kube.reflecting import Change

    world.submit(gated_pod("p0"), gated_pod("p1", created=1))
    world.controller.cycle()  # p0 and p1 are released (assumed)
    await world.settle()
    base = gated_pod("p0")

    def change(old: MakePod, new: MakePod) -> int:
        before = world.controller.queue.kicks
        o, n = managed_pod(old.obj()), managed_pod(new.obj())
        world.controller.pod_changed(Change("MODIFIED", o.uid, o.key, o, n))
        return world.controller.queue.kicks - before

    stamped = gated_pod("p0").ungated().annotation(keys.DISPATCHED_AT_ANNOTATION, "2026-01-01T00:00:00Z")
    assert change(base, stamped) == 0  # the watch confirms the release the cycle assumed
    assert change(stamped, gated_pod("p0").ungated().annotation(keys.DISPATCHED_AT_ANNOTATION, "x")
                  .node("gpu-node-0").phase("Running")) == 0  # bound and running: nothing to decide
    assert change(stamped, gated_pod("p0").ungated().annotation(keys.DISPATCHED_AT_ANNOTATION, "x")
                  .unschedulable("0/4 nodes are available")) == 1  # to be explained
    assert change(gated_pod("p9"), gated_pod("p9").priority(5)) == 1  # a pending pod's order changed
    other = gated_pod("p9").ungated()
    assert change(gated_pod("p9"), other) == 1  # released by someone else: counted from now on


async def test_a_pod_whose_sluicegate_keys_admission_never_wrote_counts_for_nothing(world: World) -> None:
    """Labels and a team written by hand (on a pod that predates its namespace's opt-in) without
    admission's stamp: the pod is neither released nor counted against the queue's two slots."""
    forged = MakePod(NS, "forged").queue("train").team("vision").gpus(1).gated().created(0)
    world.submit(forged, *(gated_pod(f"p{i}", created=i + 1) for i in range(3)))
    world.controller.cycle()
    await world.settle()

    assert world.released() == {"p0", "p1"}
    assert "forged" in world.api.gated()


async def test_a_pod_deleted_while_it_waits_is_never_released_and_holds_no_slot(world: World) -> None:
    """A finalizer keeps a deleted gated pod: it has left its queue, so it is not released, and
    the two slots go to the pods still waiting behind it."""
    kept = gated_pod("kept", created=0).deleted()
    world.submit(kept, *(gated_pod(f"p{i}", created=i + 1) for i in range(3)))
    world.controller.cycle()
    await world.settle()

    assert world.released() == {"p0", "p1"}
    assert "kept" in world.api.gated()
    assert world.api.condition(NS, "kept") is None


async def test_a_pod_of_a_namespace_that_never_opted_in_counts_for_nothing(world: World) -> None:
    """Queue and team labels written by hand in a namespace without the team label (the webhook
    never saw the pod), even with an admission stamp: neither released nor taking a slot."""
    world.controller.team_of = {NS: "vision"}.get
    jumper = (MakePod("elsewhere", "jumper").queue("train").team("vision").gpus(1).gated()
              .created(0).admitted(0))
    world.submit(jumper, *(gated_pod(f"p{i}", created=i + 1) for i in range(3)))
    world.controller.cycle()
    await world.settle()

    assert world.released() == {"p0", "p1"}
    assert "jumper" in world.api.gated()


async def test_running_pods_keep_counting_for_their_team_after_their_namespace_is_relabelled(
    world: World,
) -> None:
    """The namespace of two running pods is relabelled to another team: they still take the
    queue's two slots, so the queue does not go over its limit."""
    running = [MakePod(NS, f"r{i}").queue("train").team("vision").gpus(1).created(i).admitted(i)
               .annotation(keys.SUBMITTER_ANNOTATION, '{"user":"alice","groups":[]}') for i in range(2)]
    world.submit(*running, MakePod("nlp", "waiting").queue("train").team("nlp").gpus(1).gated()
                 .created(5).admitted(5))
    world.controller.team_of = {NS: "nlp", "nlp": "nlp"}.get
    world.controller.cycle()
    await world.settle()

    assert "waiting" in world.api.gated()


async def test_a_gated_pod_whose_namespace_left_its_team_waits_and_says_why(world: World) -> None:
    world.controller.team_of = {NS: "nlp"}.get
    world.submit(gated_pod("p0"))
    world.controller.cycle()
    await world.settle()

    assert world.released() == set()
    condition = world.api.condition(NS, "p0")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "NamespaceLeftTeam")
    assert condition["message"].startswith(
        "namespace vision is no longer opted in to team vision, which admitted this pod to queue train")
    # and it is counted where an alert can see it
    waiting = world.controller.metrics.registry.get_sample_value(
        "sluicegate_queue_waiting_workloads", {"queue": "train", "reason": "NamespaceLeftTeam"})
    assert waiting == 1
    # with its age, which the gated-too-long alert reads: it is held until an admin acts
    age = world.controller.metrics.registry.get_sample_value(
        "sluicegate_queue_oldest_waiting_age_seconds", {"queue": "train", "reason": "NamespaceLeftTeam"})
    assert age is not None and age > 0


async def test_the_oldest_age_is_kept_by_reason_so_a_sweep_at_its_own_limit_is_told_apart(
    world: World,
) -> None:
    """A sweep's trials waiting on their own workflow limit since long ago, a group not all
    present, and a pod held by the queue's limit since later: each reason has its own oldest
    age, so an alert can read the policy holds alone."""
    sweep = [gated_pod(f"t{i}", created=i).workflow("sweep", 1) for i in range(3)]
    group = [gated_pod("g0", created=5).group("pair", 2)]
    held = [gated_pod(f"q{i}", created=100 + i) for i in range(3)]
    world.submit(*sweep, *group, *held)
    world.controller.cycle()
    await world.settle()

    def age(reason: str) -> float:
        value = world.controller.metrics.registry.get_sample_value(
            "sluicegate_queue_oldest_waiting_age_seconds", {"queue": "train", "reason": reason})
        assert value is not None, reason
        return value

    assert world.released() == {"t0", "q0"}
    assert round(age("WorkflowLimit") - age("QueueLimit")) == 101 - 1  # t1 against q1
    assert round(age("GroupIncomplete") - age("QueueLimit")) == 101 - 5


async def test_a_pod_admission_never_marked_gets_no_break_glass_event(world: World) -> None:
    """A queue and a team on a pod never gated (a node's static pod, say) without admission's
    stamp: nothing was released outside dispatch, so nothing says so."""
    world.submit(MakePod(NS, "static").queue("train").team("vision").gpus(8).created(0))
    world.controller.cycle()
    await world.settle()

    assert world.api.condition(NS, "static") is None
    assert [e for e in world.api.events if e["reason"] == "ReleasedOutsideDispatch"] == []


async def test_a_second_cycle_with_nothing_changed_writes_nothing_to_a_pod_whose_namespace_left_its_team(
    world: World,
) -> None:
    world.controller.team_of = {NS: "nlp"}.get
    world.submit(gated_pod("p0"), gated_pod("p1"))
    world.controller.cycle()
    await world.settle()
    world.cache.sync()  # the watch shows the conditions written
    versions = {name: world.api.pod(NS, name)["metadata"]["resourceVersion"] for name in ("p0", "p1")}
    events = len(world.api.events)

    for _ in range(2):
        world.controller.cycle()
        await world.settle()
    assert {name: world.api.pod(NS, name)["metadata"]["resourceVersion"] for name in ("p0", "p1")} == versions
    assert len(world.api.events) == events
    condition = world.api.condition(NS, "p0")
    assert condition is not None and condition["reason"] == "NamespaceLeftTeam"


async def test_a_released_pod_no_scheduler_looks_at_counts_as_unplaceable_and_says_so() -> None:
    """spec.schedulerName names a scheduler that does not run: the pod is never bound and no
    scheduler reports it Unschedulable. Once no scheduler has looked at it for
    --unscheduled-after-seconds it is dispatched-but-unplaceable, like one the scheduler
    refuses, so the alert on those fires and the queue's running work is not taken as running."""
    world = World(queue_of(2), replace(SETTINGS, unscheduled_after_seconds=0.0))
    try:
        world.submit(gated_pod("lost").scheduler("no-such-scheduler").scheduling_gated(),
                     gated_pod("fine", created=1).scheduling_gated())
        world.controller.cycle()
        await world.settle()
        assert world.released() == {"lost", "fine"}
        world.api.pod(NS, "fine")["spec"]["nodeName"] = "gpu-node-1"  # kube-scheduler bound this one
        world.api.version += 1
        world.cache.sync()
        world.controller.cycle()
        await world.settle()

        condition = world.api.condition(NS, "lost")
        assert condition is not None and condition["status"] == "True"
        assert condition["message"].startswith(keys.UNPLACEABLE + "no scheduler has looked at it")
        assert "'no-such-scheduler'" in condition["message"]
        registry = world.controller.metrics.registry
        assert registry.get_sample_value("sluicegate_dispatched_unplaceable_pods", {"queue": "train"}) == 1
        workloads = {"queue": "train"}
        assert registry.get_sample_value("sluicegate_dispatched_unplaceable_workloads", workloads) == 1
        assert registry.get_sample_value("sluicegate_queue_running_workloads", {"queue": "train"}) == 2
    finally:
        await world.controller.stop()


async def test_usage_is_reported_only_for_resources_quotas_name_or_sluicegate_manages() -> None:
    """A user asking for made-up extended resources (at zero, or not) adds no series: usage is
    reported for the managed resources and those a quota names (here the queue's cpu)."""
    catalog = Catalog(queues={"train": MakeQueue("train").quota(cpu="64").model()},
                      teams={"vision": MakeTeam("vision").model()})
    world = World(catalog)
    try:
        junk = gated_pod("junk")
        for n in range(20):
            junk.request(f"example.com/made-up-{n}", 0 if n % 2 else 1)
        world.submit(junk.requests(cpu="2", memory="1Gi"))
        world.controller.cycle()
        await world.settle()
        assert world.released() == {"junk"}

        reported = {(s.labels["queue"], s.labels["resource"]): s.value
                    for family in world.controller.metrics.registry.collect()
                    if family.name in ("sluicegate_queue_usage",) for s in family.samples}
        assert reported == {("train", keys.GPU_RESOURCE): 1, ("train", "cpu"): 2}
        teams = {s.labels["resource"] for family in world.controller.metrics.registry.collect()
                 if family.name == "sluicegate_team_usage" for s in family.samples}
        assert teams == {keys.GPU_RESOURCE, "cpu"}
    finally:
        await world.controller.stop()


def test_a_wait_of_days_keeps_its_bucket_instead_of_falling_into_the_last() -> None:
    """A paused queue or a long sweep waits days: the histogram tells two days from four hours."""
    metrics = ControllerMetrics()
    metrics.released("train", 2 * 86400)
    metrics.released("train", 5 * 3600)

    def below(le: str) -> float | None:
        labels = {"queue": "train", "le": le}
        return metrics.registry.get_sample_value("sluicegate_wait_seconds_bucket", labels)

    assert below("14400.0") == 0
    assert below("28800.0") == 1
    assert below("86400.0") == 1
    assert below("172800.0") == 2
