"""Dispatch order: inside a queue, between priorities, round-robin turns, StrictFIFO and positions."""

from __future__ import annotations

import pytest

from policy.dispatching import Turns, dispatch
from policy.keys import Reason
from policy.model import Snapshot, State, Workload
from tests.builders import T0, MakePod, MakePolicy, MakeQueue, MakeTeam, snapshot
from tests.unit.test_dispatching import Case, check, gated, running

R = Reason

ORDER = [
    Case(
        "inside a queue, higher pod priority goes first",
        [gated("low", at=0), gated("high", at=5).priority(100)],
        queues=[MakeQueue("a").max_running(1)],
        released=["high"],
        waiting={"low": (R.QUEUE_LIMIT, "queue a: 1/1 running")},
    ),
    Case(
        "inside a queue and a pod priority, the earlier pod goes first",
        [gated("late", at=9), gated("early", at=1)],
        queues=[MakeQueue("a").max_running(1)],
        released=["early"],
        waiting={"late": (R.QUEUE_LIMIT, "queue a: 1/1 running")},
    ),
    Case(
        "pods created in the same second go in name order",
        [gated("b"), gated("a")],
        queues=[MakeQueue("a").max_running(1)],
        released=["a"],
        waiting={"b": (R.QUEUE_LIMIT, "queue a: 1/1 running")},
    ),
    Case(
        "pods created in the same second go in the order admission stamped them, to the microsecond",
        [gated("a").admitted(0.000200), gated("b").admitted(0.000100)],
        queues=[MakeQueue("a").max_running(1)],
        released=["b"],
        waiting={"a": (R.QUEUE_LIMIT, "queue a: 1/1 running")},
    ),
    Case(
        "a pod without an admission stamp is placed by its creationTimestamp",
        [gated("stamped").admitted(0.5), gated("plain")],
        queues=[MakeQueue("a").max_running(1)],
        released=["plain"],
        waiting={"stamped": (R.QUEUE_LIMIT, "queue a: 1/1 running")},
    ),
    Case(
        "a higher-priority queue goes first, whatever the pods' ages",
        [gated("old", queue="low", at=0), gated("new", queue="high", at=50)],
        queues=[MakeQueue("low").priority(1), MakeQueue("high").priority(10)],
        policy=MakePolicy().max_running(1),
        released=["new"],
        waiting={"old": (R.GLOBAL_LIMIT, "cluster: 1/1 running")},
    ),
    Case(
        "queue priority beats pod priority",
        [gated("urgent", queue="low").priority(1000), gated("plain", queue="high")],
        queues=[MakeQueue("low").priority(1), MakeQueue("high").priority(10)],
        policy=MakePolicy().max_running(1),
        released=["plain"],
        waiting={"urgent": (R.GLOBAL_LIMIT, "cluster: 1/1 running")},
    ),
    Case(
        "equal queues take turns inside one decision, one release per turn",
        [gated(f"a{i}", queue="a", at=i) for i in range(3)]
        + [gated(f"b{i}", queue="b", at=i) for i in range(3)],
        queues=[MakeQueue("a"), MakeQueue("b")],
        policy=MakePolicy().max_running(4),
        released=["a0", "b0", "a1", "b1"],
        waiting={
            "a2": (R.GLOBAL_LIMIT, "cluster: 4/4 running"),
            "b2": (R.GLOBAL_LIMIT, "cluster: 4/4 running"),
        },
    ),
    Case(
        "BestEffortFIFO lets later work that fits go ahead of a head that does not",
        [running("r0").gpus(2), gated("big").gpus(4), gated("small", at=1).gpus(1)],
        queues=[MakeQueue("a").quota(gpus=4)],
        released=["small"],
        waiting={"big": (R.QUEUE_QUOTA, "queue a: 3/4 nvidia.com/gpu in use, needs 4")},
    ),
    Case(
        "StrictFIFO stops at a head that does not fit; work behind it that would fit waits its turn",
        [
            running("r0").gpus(2),
            gated("big").gpus(4),
            gated("small", at=1).gpus(1),
            gated("tiny", at=2).gpus(1),
        ],
        queues=[MakeQueue("a").strict().quota(gpus=4)],
        waiting={
            "big": (R.QUEUE_QUOTA, "queue a: 2/4 nvidia.com/gpu in use, needs 4"),
            "small": (R.WAITING_TURN, "behind ml/big at the head of StrictFIFO queue a"),
            "tiny": (R.WAITING_TURN, "behind ml/big at the head of StrictFIFO queue a"),
        },
    ),
    Case(
        "StrictFIFO: work behind a blocked head that a limit stops too is told that limit",
        [
            running("r0").workflow("sweep", 1).gpus(2),
            gated("big").gpus(4),
            gated("trial", at=1).workflow("sweep", 1),
        ],
        queues=[MakeQueue("a").strict().quota(gpus=4)],
        waiting={
            "big": (R.QUEUE_QUOTA, "queue a: 2/4 nvidia.com/gpu in use, needs 4"),
            "trial": (R.WORKFLOW_LIMIT, "workflow ml/sweep: 1/1 running"),
        },
    ),
    Case(
        "StrictFIFO releases from the front while the front fits",
        [
            gated("p0").gpus(2),
            gated("p1", at=1).gpus(2),
            gated("p2", at=2).gpus(2),
            gated("p3", at=3).gpus(1),
        ],
        queues=[MakeQueue("a").strict().quota(gpus=5)],
        released=["p0", "p1"],
        waiting={
            "p2": (R.QUEUE_QUOTA, "queue a: 4/5 nvidia.com/gpu in use, needs 2"),
            "p3": (R.WAITING_TURN, "behind ml/p2 at the head of StrictFIFO queue a"),
        },
    ),
    Case(
        "a StrictFIFO head stopped by a team's quota holds the queue; another queue still goes",
        [
            running("r0", queue="b").gpus(4),
            gated("big").gpus(8),
            gated("small", at=1).gpus(1),
            gated("other", queue="b", team="nlp").gpus(1),
        ],
        queues=[MakeQueue("a").strict(), MakeQueue("b")],
        teams=[MakeTeam("vision").quota(gpus=8)],
        released=["other"],
        waiting={
            "big": (R.TEAM_QUOTA, "team vision: 4/8 nvidia.com/gpu in use, needs 8"),
            "small": (R.WAITING_TURN, "behind ml/big at the head of StrictFIFO queue a"),
        },
    ),
]


@pytest.mark.parametrize("case", ORDER, ids=lambda c: c.id)
def test_order(case: Case) -> None:
    check(case)


def saturated(*queues: str, per_queue: int = 6) -> Snapshot:
    return snapshot(
        [gated(f"{q}{i}", queue=q, at=i) for q in queues for i in range(per_queue)],
        [MakeQueue(q) for q in queues],
        policy=MakePolicy().max_running(1),
    )


def apply(snap: Snapshot, released: tuple[Workload, ...]) -> Snapshot:
    """The next snapshot: released work has run and finished, freeing its slot."""
    gone = {w.key for w in released}
    kept = [w for w in snap.workloads if w.key not in gone and w.state is not State.FINISHED]
    return Snapshot(snap.queues, snap.teams, snap.policy, kept, snap.now)


def test_equal_queues_alternate_across_decisions_when_each_releases_one() -> None:
    snap, turns, order = saturated("a", "b", "c"), Turns(), []
    for _ in range(7):
        decision = dispatch(snap, turns)
        order += [w.key for w in decision.release]
        snap, turns = apply(snap, decision.release), decision.turns
    assert order == ["ml/a0", "ml/b0", "ml/c0", "ml/a1", "ml/b1", "ml/c1", "ml/a2"]


def test_a_new_queue_joins_the_rotation_in_name_order() -> None:
    decision = dispatch(saturated("a", "c"), Turns({0: "a"}))
    assert [w.key for w in decision.release] == ["ml/c0"]
    decision = dispatch(saturated("a", "b", "c"), Turns({0: "a"}))
    assert [w.key for w in decision.release] == ["ml/b0"]


def test_turns_of_a_deleted_queue_pass_to_the_next_name() -> None:
    decision = dispatch(saturated("a", "c"), Turns({0: "b"}))
    assert [w.key for w in decision.release] == ["ml/c0"]
    assert decision.turns == Turns({0: "c"})


def test_turns_forget_priorities_no_queue_has_any_more() -> None:
    decision = dispatch(saturated("a"), Turns({7: "x", 0: "a"}))
    assert decision.turns == Turns({0: "a"})


def test_positions_count_the_work_still_waiting_in_queue_order() -> None:
    snap = snapshot(
        [
            gated("p0", at=0).gpus(8),
            gated("p1", at=1).gpus(1),
            gated("p2", at=2).gpus(8),
            gated("p3", at=3).gpus(8),
            gated("q0", queue="b", at=0),
        ],
        [MakeQueue("a").quota(gpus=4), MakeQueue("b").paused()],
    )
    decision = dispatch(snap)
    assert [w.key for w in decision.release] == ["ml/p1"]
    assert {k: w.position for k, w in decision.waiting.items()} == {
        "ml/p0": 1,
        "ml/p2": 2,
        "ml/p3": 3,
        "ml/q0": 1,
    }
    assert decision.waiting["ml/p3"].position == 3
    assert len(decision.waiting) == 4
    assert "ml/p1" not in decision.waiting
    assert list(decision.waiting) == ["ml/p0", "ml/p2", "ml/p3", "ml/q0"]


def test_reason_alone_is_the_same_as_the_full_answer() -> None:
    snap = snapshot([gated("p0"), gated("p1", at=1)], [MakeQueue("a").max_running(1)], now=T0)
    waiting = dispatch(snap).waiting
    assert waiting.reason("ml/p1") is waiting["ml/p1"].reason is Reason.QUEUE_LIMIT


def test_nothing_pending_means_nothing_to_say() -> None:
    decision = dispatch(snapshot([running("r0")], [MakeQueue("a")]))
    assert decision.release == () and len(decision.waiting) == 0


def test_the_same_snapshot_and_turns_give_the_same_decision() -> None:
    pods = [gated(f"p{i}", queue="ab"[i % 2], at=i % 3).gpus(i % 3) for i in range(12)]
    snap = snapshot(pods, [MakeQueue("a"), MakeQueue("b").strict()], policy=MakePolicy().quota(gpus=5))
    shuffled = Snapshot(snap.queues, snap.teams, snap.policy, list(reversed(snap.workloads)), snap.now)
    first, second = dispatch(snap, Turns({0: "a"})), dispatch(shuffled, Turns({0: "a"}))
    assert first == second


def test_gated_pods_of_a_pod_in_another_namespace_do_not_mix() -> None:
    pods = [
        MakePod("x", "w0").queue("a").gated().group("g", 2),
        MakePod("y", "w1").queue("a").gated().group("g", 2),
    ]
    waiting = dispatch(snapshot(pods, [MakeQueue("a")])).waiting
    assert {k: w.reason for k, w in waiting.items()} == {
        "x/group:g": Reason.GROUP_INCOMPLETE,
        "y/group:g": Reason.GROUP_INCOMPLETE,
    }


def test_a_starving_backlog_does_not_steal_the_other_queues_turns() -> None:
    """Queue a has an old backlog past starvationSeconds; b and c get one fresh workload per
    cycle; two run at a time and everything finishes each cycle. a claims one slot per cycle
    for its starving head, and b and c keep alternating for the other."""
    backlog = [gated(f"a{i}", queue="a", at=-1000 + i) for i in range(40)]
    queues = [MakeQueue("a"), MakeQueue("b"), MakeQueue("c")]
    policy = MakePolicy().max_running(2).starvation_seconds(600)
    pending = backlog[:]
    turns, released = Turns(), []
    for cycle in range(30):
        fresh = [gated(f"{q}{cycle}", queue=q, at=cycle) for q in "bc"]
        pending += fresh
        decision = dispatch(snapshot(pending, queues, policy=policy, now=T0 + cycle), turns)
        gone = {w.key for w in decision.release}
        pending = [p for p in pending if f"ml/{p.obj()['metadata']['name']}" not in gone]
        released.append([w.queue for w in decision.release])
        turns = decision.turns
    assert all(cycle[0] == "a" and len(cycle) == 2 for cycle in released)
    others = [cycle[1] for cycle in released]
    assert others == ["b", "c"] * 15


def test_a_starving_claim_out_of_turn_leaves_the_turn_where_it_was() -> None:
    snap = snapshot(
        [gated("a0", queue="a", at=-1000), gated("b0", queue="b"), gated("c0", queue="c")],
        [MakeQueue("a"), MakeQueue("b"), MakeQueue("c")],
        policy=MakePolicy().max_running(2).starvation_seconds(600),
    )
    decision = dispatch(snap, Turns({0: "b"}))
    assert [w.key for w in decision.release] == ["ml/a0", "ml/c0"]
    assert decision.claimed == ("ml/a0",)
    assert decision.turns == Turns({0: "c"})  # c took its turn; a's claim moved nothing
    in_turn = dispatch(snap, Turns({0: "c"}))  # a's turn anyway: the claim is the turn
    assert [w.key for w in in_turn.release] == ["ml/a0", "ml/b0"]
    assert in_turn.turns == Turns({0: "b"})
