"""Queue, Team and Policy status: what changed is written, at most a budget a round, stalest first."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender import reporting
from extender.metrics import ControllerMetrics
from extender.reporting import Reporter, Written, stalest
from extender.statuses import Backlog, Figures
from kube.resources import QUEUES, TEAMS, Resource
from policy.usage import Tally, Usage


def _figures(queues: dict[str, int], teams: dict[str, int] | None = None) -> Figures:
    return Figures(
        tally=Tally(queues={}, teams={}, workflows={}, cluster=Usage()),
        teams={}, cluster=Backlog(),
        queue_status={q: {"pending": n} for q, n in queues.items()},
        team_status={t: {"pending": n} for t, n in (teams or {}).items()},
        cluster_status={"pending": 0},
    )


def _reporter(monkeypatch: pytest.MonkeyPatch, budget: int) -> tuple[Reporter, list[tuple[str, str, Any]]]:
    writes: list[tuple[str, str, Any]] = []

    async def apply(connection: object, resource: Resource, name: str, status: Any, *, manager: str) -> None:
        writes.append((resource.plural, name, status["pending"]))

    monkeypatch.setattr(reporting, "apply_status", apply)
    reporter = Reporter(connection=None, metrics=ControllerMetrics(), interval=2.0, budget=budget,  # type: ignore[arg-type]
                        leading=lambda: True, policy_exists=lambda: False)
    return reporter, writes


def test_a_round_writes_at_most_the_budget_and_the_rest_follow_in_the_next_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reporter, writes = _reporter(monkeypatch, budget=3)
    figures = _figures({f"q{i}": 1 for i in range(7)})
    assert [asyncio.run(reporter.write(figures)) for _ in range(4)] == [3, 3, 1, 0]
    assert sorted(name for _, name, _ in writes) == [f"q{i}" for i in range(7)]  # each once


def test_statuses_written_longest_ago_go_first_when_everything_keeps_changing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reporter, writes = _reporter(monkeypatch, budget=2)
    names = ["a", "b", "c", "d", "e"]
    rounds = []
    for n in range(1, 6):  # every queue's figure changes every round
        writes.clear()
        asyncio.run(reporter.write(_figures({q: n for q in names})))
        rounds.append([name for _, name, _ in writes])
    assert rounds == [["a", "b"], ["c", "d"], ["e", "a"], ["b", "c"], ["d", "a"]]
    # whatever the churn, no queue waits more than ceil(5 / 2) = 3 rounds for its status


def test_an_unchanged_status_is_not_written_again_and_a_new_term_writes_everything_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reporter, writes = _reporter(monkeypatch, budget=10)
    figures = _figures({"a": 1}, {"vision": 2})
    assert asyncio.run(reporter.write(figures)) == 2
    assert asyncio.run(reporter.write(figures)) == 0
    reporter.clear()
    assert asyncio.run(reporter.write(figures)) == 2
    assert writes == [("queues", "a", 1), ("teams", "vision", 2)] * 2


def test_a_queue_deleted_and_created_again_gets_its_status_written_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reporter, writes = _reporter(monkeypatch, budget=10)
    assert asyncio.run(reporter.write(_figures({"a": 1, "b": 1}))) == 2
    assert asyncio.run(reporter.write(_figures({"b": 1}))) == 0  # a deleted: forgotten
    assert asyncio.run(reporter.write(_figures({"a": 1, "b": 1}))) == 1  # the new a starts without status
    assert writes == [("queues", "a", 1), ("queues", "b", 1), ("queues", "a", 1)]


def test_stalest_puts_never_written_first_then_oldest_round_and_keeps_order_among_equals() -> None:
    changed = [(QUEUES, "old", {}), (QUEUES, "new", {}), (TEAMS, "never", {}), (QUEUES, "older", {})]
    written = {("queues", name): Written({}, n) for name, n in [("old", 5), ("new", 9), ("older", 2)]}
    assert [n for _, n, _ in stalest(changed, written, 3)] == ["never", "older", "old"]
    assert [n for _, n, _ in stalest(changed, written, 10)] == ["never", "older", "old", "new"]
