"""Queue, Team and Policy status: what changed is written, at most a budget a round, stalest first."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller import reporting
from controller.metrics import ControllerMetrics
from controller.reporting import Reporter, stalest
from controller.statuses import Backlog, Figures
from kube.connecting import ApiError
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


class Server:
    """The API server's Queue, Team and Policy statuses, as the watch shows them: a write
    replaces an object's status; ``None`` is an object the watch does not show. With
    ``everything``, every object asked about exists (without status until written)."""

    def __init__(self, everything: bool = False) -> None:
        self.statuses: dict[tuple[str, str], Any] = {}
        self.failing: set[str] = set()  # names whose writes the server refuses
        self.everything = everything

    def create(self, plural: str, name: str) -> None:
        self.statuses[(plural, name)] = {}

    def shown(self, resource: Resource, name: str) -> Any:
        key = (resource.plural, name)
        return self.statuses.get(key, {}) if self.everything else self.statuses.get(key)


def _reporter(
    monkeypatch: pytest.MonkeyPatch, budget: int, server: Server | None = None
) -> tuple[Reporter, list[tuple[str, str, Any]]]:
    server = server if server is not None else Server(everything=True)
    writes: list[tuple[str, str, Any]] = []

    async def write(connection: object, resource: Resource, name: str, status: Any, *, manager: str) -> bool:
        writes.append((resource.plural, name, status["pending"]))
        if name in server.failing:
            raise ApiError(500, "InternalError", "etcd is unhappy")
        if (resource.plural, name) not in server.statuses and not server.everything:
            return False
        server.statuses[(resource.plural, name)] = dict(status)
        return True

    monkeypatch.setattr(reporting, "write_status", write)
    reporter = Reporter(connection=None, metrics=ControllerMetrics(), interval=2.0, budget=budget,  # type: ignore[arg-type]
                        leading=lambda: True, policy_exists=lambda: False, shown=server.shown)
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


def test_an_unchanged_status_is_not_written_again_not_even_by_a_new_term(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reporter, writes = _reporter(monkeypatch, budget=10)
    figures = _figures({"a": 1}, {"vision": 2})
    assert asyncio.run(reporter.write(figures)) == 2
    assert asyncio.run(reporter.write(figures)) == 0
    reporter.clear()
    assert asyncio.run(reporter.write(figures)) == 0  # the watch shows them true already
    assert writes == [("queues", "a", 1), ("teams", "vision", 2)]


def test_stalest_puts_never_tried_first_then_oldest_round_and_keeps_order_among_equals() -> None:
    changed = [(QUEUES, "old", {}), (QUEUES, "new", {}), (TEAMS, "never", {}), (QUEUES, "older", {})]
    tried = {("queues", "old"): 5, ("queues", "new"): 9, ("queues", "older"): 2}
    assert [n for _, n, _ in stalest(changed, tried, 3)] == ["never", "older", "old"]
    assert [n for _, n, _ in stalest(changed, tried, 10)] == ["never", "older", "old", "new"]


def test_a_status_someone_else_wrote_is_put_right_at_the_next_round(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server()
    server.create("queues", "a")
    reporter, _ = _reporter(monkeypatch, budget=10, server=server)
    figures = _figures({"a": 1})
    assert asyncio.run(reporter.write(figures)) == 1
    # kubectl patch queue a --subresource=status -p '{"status":{"pending":7,"conditions":[...]}}'
    server.statuses[("queues", "a")] = {"pending": 7, "conditions": [{"type": "Ready", "status": "False"}]}
    assert asyncio.run(reporter.write(figures)) == 1
    assert server.statuses[("queues", "a")] == {"pending": 1}
    assert asyncio.run(reporter.write(figures)) == 0  # quiet again: nothing more to write


def test_a_queue_deleted_and_created_again_between_two_rounds_gets_its_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server()
    server.create("queues", "a")
    reporter, _ = _reporter(monkeypatch, budget=10, server=server)
    figures = _figures({"a": 1})
    assert asyncio.run(reporter.write(figures)) == 1
    del server.statuses[("queues", "a")]
    server.create("queues", "a")  # the new object has no status, and the figures did not change
    asyncio.run(reporter.write(figures))
    assert server.statuses[("queues", "a")] == {"pending": 1}


def test_a_status_written_to_an_object_already_gone_is_written_to_the_one_that_follows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server()
    reporter, _ = _reporter(monkeypatch, budget=10, server=server)
    figures = _figures({"a": 1})
    asyncio.run(reporter.write(figures))  # a was deleted before the watch said so: 404
    server.create("queues", "a")
    asyncio.run(reporter.write(figures))
    assert server.statuses[("queues", "a")] == {"pending": 1}


def test_statuses_whose_writes_keep_failing_do_not_starve_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server()
    for name in ("bad", "good"):
        server.create("queues", name)
    server.failing.add("bad")
    reporter, _ = _reporter(monkeypatch, budget=1, server=server)
    figures = _figures({"bad": 1, "good": 1})
    for _ in range(3):
        asyncio.run(reporter.write(figures))
    assert server.statuses[("queues", "good")] == {"pending": 1}
    server.failing.clear()  # the failing one is tried again, and lands once the server lets it
    for _ in range(2):
        asyncio.run(reporter.write(figures))
    assert server.statuses[("queues", "bad")] == {"pending": 1}


def test_a_new_leader_writes_only_the_statuses_that_are_not_the_truth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server()
    for name in ("a", "b", "c"):
        server.create("queues", name)
    server.statuses[("queues", "a")] = {"pending": 1}  # the last leader wrote it; still true
    reporter, writes = _reporter(monkeypatch, budget=10, server=server)
    assert asyncio.run(reporter.write(_figures({"a": 1, "b": 1, "c": 1}))) == 2
    assert sorted(name for _, name, _ in writes) == ["b", "c"]


def test_a_quiet_queue_that_changes_once_is_not_starved_by_queues_that_change_every_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server()
    busy = [f"busy{i}" for i in range(10)]
    for name in (*busy, "quiet"):
        server.create("queues", name)
    reporter, writes = _reporter(monkeypatch, budget=2, server=server)
    quiet = 0
    for n in range(1, 40):
        if n == 20:
            quiet = 1  # its one change, in the middle of the churn
        writes.clear()
        asyncio.run(reporter.write(_figures({**{q: n for q in busy}, "quiet": quiet})))
        if n >= 20 and server.statuses[("queues", "quiet")] == {"pending": 1}:
            break
    assert n == 20  # written in the round its figure changed: it had waited longest
