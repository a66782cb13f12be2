"""Parsing Sluicegate's kinds: every field of the shapes in docs/concepts.md, refusals that name
the field, and when a pod was submitted."""

from __future__ import annotations

import pytest

from policy.fields import InvalidObject
from policy.keys import ADMITTED_AT_ANNOTATION
from policy.model import DEFAULT_STARVATION_SECONDS, Ordering, Policy, Selector
from policy.pods import format_admitted_at
from tests.builders import T0, MakePod, MakePolicy, MakeQueue, MakeTeam

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


ADMITTED = [
    ("a stamp to the microsecond is the submission time", "2023-11-14T22:13:19.654321Z", T0 - 0.345679),
    ("a stamp in the same second as creation", "2023-11-14T22:13:20.250000Z", T0 + 0.25),
    ("an offset other than Z", "2023-11-14T23:13:19.5+01:00", T0 - 0.5),
    ("garbage falls back to creationTimestamp", "yesterday", T0),
    ("a time without a zone is not RFC 3339", "2023-11-14T22:13:19.5", T0),
    ("a stamp from after creation is not believed", "2023-11-14T22:13:22Z", T0),
    ("a stamp more than a minute before creation is not believed", "2023-11-14T22:12:19Z", T0),
    ("no stamp: creationTimestamp", "", T0),
]


@pytest.mark.parametrize(("stamp", "seconds"), [a[1:] for a in ADMITTED], ids=[a[0] for a in ADMITTED])
def test_a_pod_is_submitted_when_admission_stamped_it(stamp: str, seconds: float) -> None:
    pod = MakePod("ml", "p")
    if stamp:
        pod.annotation(ADMITTED_AT_ANNOTATION, stamp)
    assert pod.model().created == pytest.approx(seconds, abs=1e-6)


def test_the_admission_stamp_is_rfc_3339_utc_with_microseconds() -> None:
    assert format_admitted_at(T0 + 0.123456) == "2023-11-14T22:13:20.123456Z"
    assert MakePod("ml", "p").admitted(0.123456).model().created == pytest.approx(T0 + 0.123456, abs=1e-6)
