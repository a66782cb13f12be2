"""Work whose release the API server refused (``Snapshot.refusals``): it is never released as it
is, holds nothing, blocks nothing, and says why with ``ReleaseRefused`` and the server's words."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from policy.dispatching import dispatch
from policy.keys import Reason
from tests.builders import MakePod, MakeQueue, MakeTeam, snapshot
from tests.unit.test_dispatching import gated, running

R = Reason
WORDS = ('the API server refused to release it: Pod "a" is invalid: metadata.annotations: Too long: '
         "may not be more than 262144 bytes")


def uid(name: str) -> str:
    return f"uid-ml-{name}"


@dataclass
class Case:
    id: str
    pods: list[MakePod]
    refused: list[str]
    queues: list[MakeQueue] = field(default_factory=lambda: [MakeQueue("a").max_running(1)])
    teams: list[MakeTeam] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    waiting: dict[str, tuple[Reason, str]] = field(default_factory=dict)


CASES = [
    Case("a refused head takes no slot: the pod behind it goes",
         [gated("a"), gated("b", at=1)], ["a"],
         released=["b"], waiting={"a": (R.RELEASE_REFUSED, WORDS)}),
    Case("it blocks nothing: a StrictFIFO queue passes over it",
         [gated("a"), gated("b", at=1), gated("c", at=2)], ["a"],
         queues=[MakeQueue("a").max_running(1).strict()],
         released=["b"],
         waiting={"a": (R.RELEASE_REFUSED, WORDS), "c": (R.QUEUE_LIMIT, "queue a: 1/1 running")}),
    Case("it is told before a full queue: the queue's room would not release it",
         [running("r"), gated("a")], ["a"], waiting={"a": (R.RELEASE_REFUSED, WORDS)}),
    Case("it holds nothing: a higher-priority queue's refused head leaves the team's quota to lower work",
         [gated("a", queue="high").gpus(2), gated("b", queue="low", at=1).gpus(2)], ["a"],
         queues=[MakeQueue("high").priority(10), MakeQueue("low")],
         teams=[MakeTeam("vision").quota(gpus=2)],
         released=["b"], waiting={"a": (R.RELEASE_REFUSED, WORDS)}),
    Case("one refused pod of a group holds the group, and the message names it",
         [gated("g0").group("g", 2), gated("g1").group("g", 2)], ["g1"],
         queues=[MakeQueue("a")], waiting={"group:g": (R.RELEASE_REFUSED, f"pod g1: {WORDS}")}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_release_refused(case: Case) -> None:
    snap = snapshot(case.pods, case.queues, case.teams, refusals={uid(n): WORDS for n in case.refused})
    decision = dispatch(snap)
    assert [w.key for w in decision.release] == [f"ml/{k}" for k in case.released]
    told = {key: (wait.reason, wait.message) for key, wait in decision.waiting.items()}
    assert told == {f"ml/{k}": v for k, v in case.waiting.items()}


def test_it_counts_as_work_that_cannot_run() -> None:
    snap = snapshot([gated("a"), gated("b", at=1)], [MakeQueue("a").max_running(1)],
                    refusals={uid("a"): WORDS})
    assert dict(dispatch(snap).waiting.impossible()) == {"a": 1}
    assert [(k, r, never) for k, r, never in dispatch(snap).waiting.answers()] == [
        ("ml/a", R.RELEASE_REFUSED, False)]
