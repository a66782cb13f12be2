"""Pods into workloads, what a pod asks of a node, and the usage tally that Queue status reports."""

from __future__ import annotations

import pytest

from policy.dispatching import dispatch
from policy.fields import InvalidObject
from policy.keys import Reason
from policy.model import State
from policy.pods import Pod
from policy.usage import QueueUsage, Usage, tally
from tests.builders import T0, MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot, workloads

GPU = "nvidia.com/gpu"


def test_a_pod_without_a_group_is_its_own_workload() -> None:
    (w,) = workloads(MakePod("ml", "p").queue("a").team("vision").workflow("sweep", 3).gpus(2).gated())
    assert (w.key, w.queue, w.team, w.workflow, w.workflow_max_running) == (
        "ml/p",
        "a",
        "vision",
        "ml/sweep",
        3,
    )
    assert (w.state, dict(w.requests), w.group_size, w.complete) == (State.PENDING, {GPU: 2000}, 1, True)


def test_pods_of_a_group_make_one_workload_with_summed_requests() -> None:
    pods = [
        MakePod("ml", f"w{i}").queue("a").group("g", 3).gpus(2).gated().created(i).priority(i)
        for i in range(2)
    ]
    (w,) = workloads(*pods)
    assert (w.key, len(w.pods), w.group_size, w.complete) == ("ml/group:g", 2, 3, False)
    assert (dict(w.requests), w.priority, w.created) == ({GPU: 4000}, 1, T0)


def test_a_group_label_without_a_size_is_complete_with_the_pods_it_has() -> None:
    (w,) = workloads(MakePod("ml", "w0").queue("a").label("sluicegate.dev/group", "g").gated())
    assert w.complete


def live(pod: MakePod, life: str) -> MakePod:
    if life == "gated":
        return pod.gated()
    if life == "running":
        return pod.running("n1")
    if life == "released":
        return pod.ungated()
    return pod.finished("Succeeded" if life == "succeeded" else "Failed")


STATES = [
    ("all gated: pending", ["gated", "gated"], State.PENDING),
    ("one released: running, holding its slot", ["gated", "running"], State.RUNNING),
    ("released but not yet placed: running", ["released"], State.RUNNING),
    ("all ended: finished", ["succeeded", "failed"], State.FINISHED),
    ("one ended and one still running: running", ["succeeded", "running"], State.RUNNING),
]


@pytest.mark.parametrize(("lives", "state"), [s[1:] for s in STATES], ids=[s[0] for s in STATES])
def test_state(lives: list[str], state: State) -> None:
    pods = [
        live(MakePod("ml", f"w{i}").queue("a").group("g", len(lives)), life) for i, life in enumerate(lives)
    ]
    assert {w.key: w for w in workloads(*pods)}["ml/group:g"].state is state


REQUESTS = [
    ("containers add up",
     MakePod("ml", "p").requests(cpu="1").container("b", resources={"requests": {"cpu": "2"}}),
     {"cpu": 3000}),
    ("a limit without a request is the request", MakePod("ml", "p").gpus(2), {GPU: 2000}),
    ("an init container runs alone: the larger need counts",
     MakePod("ml", "p").requests(cpu="1").init_container("init", resources={"requests": {"cpu": "4"}}),
     {"cpu": 4000}),
    ("a sidecar runs beside the containers",
     MakePod("ml", "p").requests(cpu="1")
     .init_container("proxy", restartPolicy="Always", resources={"requests": {"cpu": "1"}}),
     {"cpu": 2000}),
    ("an init container after a sidecar runs beside it",
     MakePod("ml", "p").requests(cpu="1")
     .init_container("proxy", restartPolicy="Always", resources={"requests": {"cpu": "1"}})
     .init_container("init", resources={"requests": {"cpu": "3"}}),
     {"cpu": 4000}),
    ("overhead comes on top",
     MakePod("ml", "p").requests(cpu="1").spec(overhead={"cpu": "250m"}), {"cpu": 1250}),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "expected"), [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
def test_pod_requests(pod: MakePod, expected: dict[str, int]) -> None:
    assert dict(pod.model().requests) == expected


def test_a_bad_request_names_the_pod_and_the_container() -> None:
    with pytest.raises(InvalidObject, match=r"Pod ml/p: containers\[0\]\.resources\.requests\.cpu"):
        Pod.parse(MakePod("ml", "p").requests(cpu="lots").obj())


def test_tally_counts_running_work_everywhere_and_waiting_work_in_its_queue() -> None:
    pods = [
        MakePod("ml", "r0").queue("a").team("vision").workflow("sweep").gpus(2).running("n1"),
        MakePod("ml", "r1").queue("b").team("vision").gpus(1).running("n1"),
        MakePod("ml", "r2").queue("b").gpus(4).running("n2"),
        MakePod("ml", "done").queue("a").team("vision").gpus(8).finished(),
        MakePod("ml", "p0").queue("a").gated().created(30),
        MakePod("ml", "p1").queue("a").gated().created(10),
    ]
    usage = tally(workloads(*pods), ["a", "b", "idle"])
    assert usage.queue("a") == QueueUsage(1, {GPU: 2000}, pending=2, oldest_pending=T0 + 10)
    assert usage.queue("b") == QueueUsage(2, {GPU: 5000})
    assert usage.queue("idle") == QueueUsage() == usage.queue("never-heard-of")
    assert list(usage.queues) == ["a", "b", "idle"]
    assert usage.team("vision") == Usage(2, {GPU: 3000})
    assert dict(usage.teams) == {"vision": Usage(2, {GPU: 3000})}  # no team: counted nowhere by team
    assert usage.workflow("ml/sweep") == 1
    assert usage.cluster == Usage(3, {GPU: 7000})


def test_a_decision_reports_usage_with_its_releases_running() -> None:
    pods = [MakePod("ml", f"p{i}").queue("a").team("vision").gpus(1).gated().created(i) for i in range(3)]
    decision = dispatch(snapshot(pods, [MakeQueue("a").max_running(2)], [MakeTeam("vision")]))
    assert decision.usage.queue("a") == QueueUsage(2, {GPU: 2000}, pending=1, oldest_pending=T0 + 2)
    assert decision.usage.team("vision") == Usage(2, {GPU: 2000})


def test_gated_pods_of_a_running_group_join_it_when_every_limit_has_room() -> None:
    pods = [
        MakePod("ml", "w0").queue("a").group("g", 3).running("n1"),
        MakePod("ml", "w1").queue("a").group("g", 3).gated(),
        MakePod("ml", "w2").queue("a").group("g", 3).gated(),
        MakePod("ml", "alone").queue("a").gated(),
    ]
    decision = dispatch(snapshot(pods, [MakeQueue("a")]))
    assert {w.key: [p.name for p in w.pods] for w in decision.release} == {
        "ml/group:g/joining": ["w1", "w2"], "ml/alone": ["alone"]}


def test_pods_joining_a_running_group_take_no_slot_of_a_full_count_limit() -> None:
    pods = [MakePod("ml", "w0").queue("a").team("vision").group("g", 2).gpus(1).running("n1"),
            MakePod("ml", "w1").queue("a").team("vision").group("g", 2).gpus(1).gated(),
            MakePod("ml", "solo").queue("a").team("vision").gpus(1).gated()]  # fmt: skip
    queue = MakeQueue("a").max_running(1)
    decision = dispatch(snapshot(pods, [queue], [MakeTeam("vision").max_running(1)],
                                 MakePolicy().max_running(1)))
    assert [w.key for w in decision.release] == ["ml/group:g/joining"]
    assert decision.usage.queue("a").running == 1 and decision.usage.cluster == Usage(1, {GPU: 2000})
    assert decision.waiting.reason("ml/solo") is Reason.QUEUE_LIMIT


SWAPS = [
    ("queue quota", MakeQueue("a").quota(gpus=16), MakeTeam("vision"), MakePolicy(), Reason.QUEUE_QUOTA,
     "queue a: 9/16 nvidia.com/gpu in use, needs 8"),
    ("team quota", MakeQueue("a"), MakeTeam("vision").quota(gpus=16), MakePolicy(), Reason.TEAM_QUOTA,
     "team vision: 9/16 nvidia.com/gpu in use, needs 8"),
    ("cluster quota", MakeQueue("a"), MakeTeam("vision"), MakePolicy().quota(gpus=16), Reason.GLOBAL_QUOTA,
     "cluster: 9/16 nvidia.com/gpu in use, needs 8"),
    ("paused queue", MakeQueue("a").paused(), MakeTeam("vision"), MakePolicy(), Reason.QUEUE_PAUSED,
     "queue a is paused"),
    ("queue lowered below its running work", MakeQueue("a").max_running(0), MakeTeam("vision"), MakePolicy(),
     Reason.QUEUE_LIMIT, "queue a: 2/0 running"),
]  # fmt: skip


@pytest.mark.parametrize(("queue", "team", "policy", "reason", "says"), [s[1:] for s in SWAPS],
                         ids=[s[0] for s in SWAPS])
def test_a_member_swapped_into_a_running_group_passes_every_limit(
    queue: MakeQueue, team: MakeTeam, policy: MakePolicy, reason: Reason, says: str
) -> None:
    """A group of two released, one member deleted and an 8-GPU member created in its place:
    it joins only where its requests fit beside the group's live pod and the other work."""
    pods = [MakePod("ml", "gx-0").queue("a").team("vision").group("gx", 2).gpus(1).running("n1"),
            MakePod("ml", "big").queue("a").team("vision").gpus(8).running("n2"),
            MakePod("ml", "gx-big").queue("a").team("vision").group("gx", 2).gpus(8).gated()]  # fmt: skip
    decision = dispatch(snapshot(pods, [queue], [team], policy))
    assert decision.release == ()
    wait = decision.waiting["ml/group:gx/joining"]
    assert (wait.reason, wait.message) == (reason, says)


def test_pods_joining_a_running_group_leave_what_a_higher_priority_head_holds() -> None:
    pods = [MakePod("ml", "g0").queue("low").team("vision").group("g", 2).gpus(1).running("n1"),
            MakePod("ml", "g1").queue("low").team("vision").group("g", 2).gpus(2).gated(),
            MakePod("ml", "busy").queue("high").team("vision").gpus(4).running("n2"),
            MakePod("ml", "urgent").queue("high").team("vision").gpus(4).gated()]  # fmt: skip
    team = MakeTeam("vision").quota(gpus=8)
    decision = dispatch(snapshot(pods, [MakeQueue("low").priority(1), MakeQueue("high").priority(9)], [team]))
    assert decision.release == ()
    assert decision.waiting.reason("ml/urgent") is Reason.TEAM_QUOTA
    assert decision.waiting.reason("ml/group:g/joining") is Reason.HELD_FOR_PRIORITY
    paused = dispatch(snapshot(pods, [MakeQueue("low").priority(1), MakeQueue("high").priority(9).paused()],
                               [team]))
    assert [w.key for w in paused.release] == ["ml/group:g/joining"]  # a paused head holds nothing


def test_a_running_group_counts_the_requests_of_its_live_pods_only() -> None:
    pods = [MakePod("ml", "w0").queue("a").group("g", 4).gpus(2).running("n1")]
    pods += [MakePod("ml", f"w{i}").queue("a").group("g", 4).gpus(2).finished() for i in range(1, 4)]
    (w,) = workloads(*pods)
    assert (w.state, dict(w.requests)) == (State.RUNNING, {GPU: 2000})
    assert tally([w]).cluster == Usage(1, {GPU: 2000})


def test_a_group_is_bound_by_the_smallest_workflow_limit_its_live_pods_carry() -> None:
    pods = [
        MakePod("ml", "w0").queue("a").group("g", 3).workflow("sweep", 4).gated(),
        MakePod("ml", "w1").queue("a").group("g", 3).workflow("sweep", 2).gated(),
        MakePod("ml", "w2").queue("a").group("g", 3).workflow("sweep").gated(),
    ]
    assert workloads(*pods)[0].workflow_max_running == 2


def test_every_workload_of_a_workflow_gets_the_smallest_limit_of_its_pending_or_running_pods() -> None:
    built = workloads(
        MakePod("ml", "done").queue("a").workflow("sweep", 1).finished(),
        MakePod("ml", "r0").queue("a").workflow("sweep", 3).running("n1"),
        MakePod("ml", "p0").queue("a").workflow("sweep").gated(),
        MakePod("ml", "p1").queue("a").workflow("sweep", 5).gated(),
        MakePod("other", "p2").queue("a").workflow("sweep", 9).gated(),  # another namespace's sweep
        MakePod("ml", "solo").queue("a").gated(),
    )
    assert {w.key: w.workflow_max_running for w in built if w.state is not State.FINISHED} == {
        "ml/r0": 3,
        "ml/p0": 3,
        "ml/p1": 3,
        "other/p2": 9,
        "ml/solo": None,
    }


DISAGREEING = [
    ("queues", [MakePod("ml", "w0").queue("a"), MakePod("ml", "w1").queue("b")],
     "its pods name different queues: a, b"),
    ("teams", [MakePod("ml", "w0").queue("a").team("ta"), MakePod("ml", "w1").queue("a").team("tb")],
     "its pods name different teams: ta, tb"),
    ("workflows", [MakePod("ml", "w0").queue("a").workflow("x"), MakePod("ml", "w1").queue("a")],
     "its pods name different workflows: (none), x"),
    ("nothing: different limits make one limit, the smallest",
     [MakePod("ml", "w0").queue("a").workflow("x", 1), MakePod("ml", "w1").queue("a").workflow("x", 2)], ""),
]  # fmt: skip


@pytest.mark.parametrize(("pods", "says"), [d[1:] for d in DISAGREEING], ids=[d[0] for d in DISAGREEING])
def test_a_group_whose_pods_disagree_is_never_complete(pods: list[MakePod], says: str) -> None:
    (w,) = workloads(*(p.group("g", 2).gated() for p in pods))
    assert (w.disagreement, w.complete) == (says, not says)


def test_a_group_whose_pods_all_ended_does_not_let_new_pods_of_that_name_skip_the_limits() -> None:
    pods = [
        MakePod("ml", "old").queue("a").group("g", 2).gpus(1).finished(),
        MakePod("ml", "new0").queue("a").group("g", 2).gpus(8).gated(),
        MakePod("ml", "new1").queue("a").group("g", 2).gpus(8).gated(),
    ]
    queue = MakeQueue("a").paused().max_running(0).quota(gpus=1)
    decision = dispatch(snapshot(pods, [queue], policy=MakePolicy().quota(gpus=1).max_running(0)))
    assert decision.release == ()
    assert decision.waiting.reason("ml/group:g") is Reason.QUEUE_QUOTA  # can never fit: says so
    fits = dispatch(snapshot(pods, [MakeQueue("a")]))
    assert [w.key for w in fits.release] == ["ml/group:g"]


def test_pods_beyond_the_size_of_a_running_group_wait_for_their_turn() -> None:
    pods = [MakePod("ml", "g0").queue("a").group("g", 1).gpus(1).running()]
    pods += [MakePod("ml", f"x{i}").queue("a").group("g", 1).gpus(8).gated().created(i) for i in range(5)]
    decision = dispatch(snapshot(pods, [MakeQueue("a")]))
    assert decision.release == ()
    wait = decision.waiting["ml/group:g/surplus"]
    assert (wait.reason, wait.message) == (
        Reason.WAITING_TURN, "group g already has 1/1 pods live or joining: waits for one of them to end")


def test_a_running_group_takes_joining_pods_only_up_to_its_size_oldest_first() -> None:
    pods = [MakePod("ml", "g0").queue("a").group("g", 3).running(),
            MakePod("ml", "g1").queue("a").group("g", 3).finished()]  # fmt: skip
    pods += [MakePod("ml", f"x{i}").queue("a").group("g", 3).gated().created(i) for i in range(4)]
    decision = dispatch(snapshot(pods, [MakeQueue("a")]))
    assert [[p.name for p in w.pods] for w in decision.release] == [["x0", "x1"]]
    assert decision.waiting.reason("ml/group:g/surplus") is Reason.WAITING_TURN


def test_a_straggler_naming_another_queue_stays_gated_and_says_why() -> None:
    pods = [MakePod("ml", "g0").queue("a").group("g", 2).gpus(1).running(),
            MakePod("ml", "g1").queue("b").group("g", 2).gpus(1).gated()]  # fmt: skip
    decision = dispatch(snapshot(pods, [MakeQueue("a"), MakeQueue("b").paused()]))
    assert decision.release == ()
    wait = decision.waiting["ml/group:g/disagreeing"]
    says = "group g: its pods name different queues: a, b"
    assert (wait.reason, wait.message) == (Reason.GROUP_INCOMPLETE, says)


def test_a_pod_that_misnames_a_running_group_never_holds_back_the_pods_that_belong_to_it() -> None:
    """A colleague's pod carries the group's name with another size or queue: the rightful pod
    joins, and only the misfit waits, naming the disagreement (not a quota it never asked for)."""
    pods = [MakePod("ml", "g2-a").queue("a").group("g2", 2).gpus(1).running("n1"),
            MakePod("ml", "g2-d").queue("a").group("g2", 2).gpus(2).gated().created(5),
            MakePod("ml", "g2-dis").queue("a").group("g2", 3).gpus(8).gated().created(1),
            MakePod("ml", "g2-cpu").queue("b").group("g2", 2).gpus(8).gated().created(2)]  # fmt: skip
    decision = dispatch(snapshot(pods, [MakeQueue("a").quota(gpus=16), MakeQueue("b")]))
    assert [[p.name for p in w.pods] for w in decision.release] == [["g2-d"]]
    wait = decision.waiting["ml/group:g2/disagreeing"]
    assert (wait.reason, wait.message) == (
        Reason.GROUP_INCOMPLETE, "group g2: its pods name different queues: a, b")


def test_a_member_admitted_for_another_team_never_joins_a_running_group_charged_to_the_first() -> None:
    """The namespace moved from team ta to tb between the group's admission and a member swap:
    the group counts toward ta, so the new member (stamped tb, checked against tb) would charge
    ta past its quota. It waits, naming the disagreement, until the ta members have ended."""
    pods = [MakePod("ml", "g0").queue("a").team("ta").group("g", 2).gpus(1).running("n1"),
            MakePod("ml", "g3").queue("a").team("tb").group("g", 2).gpus(6).gated().created(5)]  # fmt: skip
    teams = [MakeTeam("ta").quota(gpus=2), MakeTeam("tb").quota(gpus=8)]
    decision = dispatch(snapshot(pods, [MakeQueue("a")], teams=teams))
    assert decision.release == ()
    wait = decision.waiting["ml/group:g/disagreeing"]
    assert (wait.reason, wait.message) == (
        Reason.GROUP_INCOMPLETE, "group g: its pods name different teams: ta, tb")


def test_pods_of_one_group_that_disagree_on_its_size_are_not_released() -> None:
    pods = [MakePod("ml", "g0").queue("a").group("g", 2).gpus(1).gated(),
            MakePod("ml", "g1").queue("a").group("g", 3).gpus(1).gated()]  # fmt: skip
    decision = dispatch(snapshot(pods, [MakeQueue("a")]))
    assert decision.release == ()
    wait = decision.waiting["ml/group:g"]
    says = "group g: its pods name different group sizes: 2, 3"
    assert (wait.reason, wait.message) == (Reason.GROUP_INCOMPLETE, says)
