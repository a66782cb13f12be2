"""Parsing Sluicegate's kinds: every field of DESIGN.md's shapes, and refusals that name the field."""

from __future__ import annotations

import pytest

from policy.fields import InvalidObject
from policy.model import DEFAULT_STARVATION_SECONDS, Ordering, Policy, Selector
from tests.builders import MakePolicy, MakeQueue, MakeTeam

GPU = "nvidia.com/gpu"


def test_a_queue_reads_every_field() -> None:
    queue = (
        MakeQueue("vision-train").priority(10).max_running(8).quota({GPU: "16", "cpu": "64"})
        .access(teams=["vision"], users=["alice"]).strict().paused().node_pool({"pool": "a100"})
        .model()
    )  # fmt: skip
    assert (queue.name, queue.priority, queue.max_running) == ("vision-train", 10, 8)
    assert dict(queue.quota) == {GPU: 16000, "cpu": 64000}
    assert (queue.access.teams, queue.access.users, queue.access.open) == ({"vision"}, {"alice"}, False)
    assert (queue.ordering, queue.paused) == (Ordering.STRICT_FIFO, True)
    assert queue.node_pool is not None and queue.node_pool.matches({"pool": "a100", "zone": "b"})


def test_a_bare_queue_is_open_unlimited_and_best_effort() -> None:
    queue = MakeQueue("q").model()
    assert (queue.priority, queue.max_running, dict(queue.quota), queue.access.open) == (0, None, {}, True)
    assert (queue.ordering, queue.paused, queue.node_pool) == (Ordering.BEST_EFFORT_FIFO, False, None)


REFUSED = [
    ("an unknown ordering", MakeQueue("q").set_spec(ordering="LIFO"), "Queue q: spec.ordering: 'LIFO'"),
    ("a negative maxRunning", MakeQueue("q").max_running(-1),
     "Queue q: spec.maxRunning: must not be negative"),
    ("a quota that is not a quantity", MakeQueue("q").quota(gpus="many"),
     "Queue q: spec.quota.nvidia.com/gpu"),
    ("paused as a string", MakeQueue("q").set_spec(paused="yes"),
     "Queue q: spec.paused: expected true or false"),
    ("a bad selector operator", MakeQueue("q").node_pool(matchExpressions=[{"key": "k", "operator": "Near"}]),
     "Queue q: spec.nodePool.matchExpressions[0].operator"),
    ("a team's maxRunning as text", MakeTeam("t").set_spec(maxRunning="4"),
     "Team t: spec.maxRunning: expected a whole number"),
]  # fmt: skip


@pytest.mark.parametrize(("builder", "message"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused(builder: MakeQueue | MakeTeam, message: str) -> None:
    with pytest.raises(InvalidObject) as refused:
        builder.model()
    assert str(refused.value).startswith(message)


def test_a_team_reads_limits_and_members() -> None:
    team = (
        MakeTeam("vision")
        .max_running(20)
        .quota(gpus=32)
        .members(users=["alice"], groups=["vision-devs"])
        .model()
    )
    assert (team.max_running, dict(team.quota), team.members.everyone) == (20, {GPU: 32000}, False)
    assert MakeTeam("open").model().members.everyone


def test_the_policy_defaults_and_its_one_name() -> None:
    policy = MakePolicy().model()
    assert policy == Policy()
    assert policy.starvation_seconds == DEFAULT_STARVATION_SECONDS
    assert MakePolicy().starvation_seconds(0).model().starvation_seconds == 0
    other = MakePolicy().obj()
    other["metadata"]["name"] = "mine"
    with pytest.raises(InvalidObject, match="only Policy that counts is named 'cluster'"):
        Policy.parse(other)


SELECTORS = [
    ("matchLabels must all hold", {"matchLabels": {"a": "1", "b": "2"}}, {"a": "1"}, False),
    ("In", {"matchExpressions": [{"key": "z", "operator": "In", "values": ["x", "y"]}]}, {"z": "y"}, True),
    ("NotIn passes when the label is missing", {"matchExpressions": [{"key": "z", "operator": "NotIn",
     "values": ["x"]}]}, {}, True),
    ("Exists", {"matchExpressions": [{"key": "z", "operator": "Exists"}]}, {"z": ""}, True),
    ("DoesNotExist", {"matchExpressions": [{"key": "z", "operator": "DoesNotExist"}]}, {"z": "1"}, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "labels", "matches"), [s[1:] for s in SELECTORS], ids=[s[0] for s in SELECTORS]
)
def test_selector(raw: dict[str, object], labels: dict[str, str], matches: bool) -> None:
    assert Selector.parse(raw, "sel").matches(labels) is matches
