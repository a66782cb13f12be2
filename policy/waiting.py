"""Why each pending workload was not released, and its place in its queue.

A dispatch decision answers for every pending workload, but a deep queue's answer is usually
one sentence repeated ("queue a: 8/8 running"). ``Waiting`` is therefore a read-only mapping
that works each answer out when it is read, from the state the decision ended in: the usage
after every release, the holds, and where each queue stopped. Because usage only grows within
a decision and holds are only added, a workload that did not fit when it was tried still does
not fit in that final state, so the answer read is the one that applies now.

The reason is the first that applies, in this order: for work that can never run under the
current limits, the reason of the quota it exceeds by itself (``QueueQuota``, ``TeamQuota`` or
``GlobalQuota``) with a message that says so and by how much, since nothing else matters
while that holds (gated pods beyond the size of their running group come first of all, with
``WaitingTurn``: they wait for one of the group's pods to end); then ``NoNodeFits`` for work
that no node could hold (``policy.inventory``), the other kind of work that can never run
under what exists now; ``GroupIncomplete``; then the
four layers of limits (workflow, queue, team, cluster); then ``HeldForPriority``; and else
``WaitingTurn`` (the workload would fit, but stands behind a StrictFIFO queue's blocked head).
``impossible()`` counts the work that can never run (both kinds), per queue.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from dataclasses import dataclass

from policy.holds import Hold, Holds, named
from policy.keys import Reason
from policy.limits import (
    Ceilings,
    ceilings,
    describe,
    floor,
    impossible,
    queue_blocking,
    queue_full,
    shared_blocking,
    within,
    workflow_full,
)
from policy.model import Snapshot, Workload
from policy.ordering import Line
from policy.usage import Ledger


@dataclass(frozen=True, slots=True)
class Wait:
    """Why a pending workload stays gated: the condition's reason and message, and its place.

    ``position`` is 1-based among the workloads still waiting in the same queue, in queue
    order (released ones no longer count).
    """

    reason: Reason
    message: str
    position: int


class Waiting(Mapping[str, Wait]):
    """Workload key -> ``Wait``, for every pending workload a decision did not release."""

    def __init__(self, lines: Mapping[str, Line], snapshot: Snapshot, ledger: Ledger, holds: Holds) -> None:
        self._lines = lines
        self._snapshot = snapshot
        self._ledger = ledger
        self._holds = holds
        self._len = sum(len(line.order) - len(line.released) for line in lines.values())
        self._index: dict[str, Workload] | None = None
        self._positions: dict[str, dict[str, int]] = {}
        self._uniform: dict[str, tuple[Reason, str] | None] = {}
        self._floors: dict[str, Ceilings] = {}  # queue -> the smallest caps its work could face
        self._every: dict[str, bool] = {}  # queue -> all its work is within its floor
        self._ceilings: dict[tuple[str, str], Ceilings] = {}  # (queue, team) -> its caps
        self._impossible: dict[str, int] | None = None

    # --- Mapping ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        for line in self._lines.values():
            released = line.released
            for w in line.ensure_sorted():
                if w.key not in released:
                    yield w.key

    def __contains__(self, key: object) -> bool:
        return key in self._where()

    def __getitem__(self, key: str) -> Wait:
        w = self._where()[key]
        line = self._lines[w.queue]
        positions = self._positions.get(line.name)
        if positions is None:
            positions = self._positions[line.name] = {
                k: i for i, k in enumerate(self._keys_in_order(line), start=1)
            }
        reason, message = self.explain(w, line)
        return Wait(reason, message, positions[key])

    def items(self) -> ItemsView[str, Wait]:
        return _Items(self)

    def index(self) -> None:
        """Work out now what the first look-up by key needs (a pass over every waiting workload),
        for a caller that decides off its event loop and reads the answers on it."""
        self._where()

    # --- answers ---------------------------------------------------------------------------

    def answer(self, key: str) -> tuple[Reason, str]:
        """The reason and message alone: no position, so no queue's positions are worked out
        (the first position asked of a deep queue indexes the whole queue)."""
        w = self._where()[key]
        return self.explain(w, self._lines[w.queue])

    def reason(self, key: str) -> Reason:
        """The reason alone, without working out the message's position in the queue."""
        w = self._where()[key]
        return self._cause(w, self._lines[w.queue])[0]

    def reasons(self) -> Iterator[tuple[str, Reason]]:
        """``(key, reason)`` for every waiting workload, in no particular order."""
        for key, reason, _ in self.answers():
            yield key, reason

    def answers(self) -> Iterator[tuple[str, Reason, bool]]:
        """``(key, reason, never)`` for every waiting workload, in no particular order; ``never``
        says the workload can never run under the current limits (its message says so).

        What a controller compares with each pod's condition to find the few it must rewrite:
        the reason alone does not tell a quota that is full from a quota the workload exceeds
        by itself (both read ``QueueQuota``), so ``never`` comes with it: True exactly when the
        message begins with ``limits.NEVER`` (``NoNodeFits``, a reason of its own, needs no
        flag and has none). It needs neither messages nor positions, so no queue is sorted for
        it.
        """
        cause = self._cause
        for line in self._lines.values():
            released = line.released
            uniform = self._uniform_for(line)
            every = self._all_possible(line)
            possible = self._possible
            for w in line.order:
                key = w.key
                if key in released:
                    continue
                never = not every and not w.surplus and not possible(w, line)
                if uniform is not None and _queue_answers_for(w) and not never:
                    yield key, uniform[0], False
                else:
                    reason = cause(w, line)[0]
                    yield key, reason, never and reason not in _FLAGLESS

    def impossible(self) -> Mapping[str, int]:
        """Queue -> how many of its waiting workloads can never run under the current limits
        (only queues that have any): what an alert watches. Worked out on the first call."""
        if self._impossible is None:
            counts: dict[str, int] = {}
            possible = self._possible
            for line in self._lines.values():  # released work fits every quota: never counted
                if self._all_possible(line):
                    continue
                count = sum(1 for w in line.order if not w.surplus and not possible(w, line))
                if count:
                    counts[line.name] = count
            self._impossible = counts
        return self._impossible

    def explain(self, w: Workload, line: Line) -> tuple[Reason, str]:
        """The reason and message for ``w``, a pending workload of ``line`` that stays."""
        snapshot = self._snapshot
        if w.surplus:
            return Reason.WAITING_TURN, f"{w.surplus}: waits for one of them to end"
        refused = snapshot.refused(w)
        if refused is not None:
            return Reason.RELEASE_REFUSED, refused
        if not self._all_possible(line) and not self._possible(w, line):
            never = impossible(w, line.queue, snapshot)
            if never is not None:
                return never.reason, never.message
            return Reason.NO_NODE_FITS, self._refusal(w, line) or ""
        reason, hold = self._cause(w, line)
        if reason is Reason.GROUP_INCOMPLETE:
            group = w.pods[0].group
            if w.disagreement:
                return reason, f"group {group}: {w.disagreement}"
            return reason, f"group {group}: {len(w.pods)}/{w.group_size} pods"
        if hold is not None:
            return reason, hold.message(snapshot.now, snapshot.policy.starvation_seconds, w.namespace)
        if reason is not Reason.WAITING_TURN:
            uniform = self._uniform_for(line)
            if uniform is not None and uniform[0] is reason:
                return uniform
            return reason, describe(reason, w, line.name, snapshot, self._ledger)
        head = line.stop
        if head is not None and head is not w:
            return reason, f"behind {named(head, w.namespace)} at the head of StrictFIFO queue {line.name}"
        return reason, f"waiting for its turn in queue {line.name}"  # pragma: no cover

    def _cause(self, w: Workload, line: Line) -> tuple[Reason, Hold | None]:
        """The reason alone (and the hold, when one is the reason): no message is formatted."""
        ledger = self._ledger
        if w.surplus:
            return Reason.WAITING_TURN, None
        if self._snapshot.refused(w) is not None:
            return Reason.RELEASE_REFUSED, None
        if not self._all_possible(line) and not self._possible(w, line):
            never = impossible(w, line.queue, self._snapshot)
            return (never.reason if never is not None else Reason.NO_NODE_FITS), None
        if len(w.pods) < w.group_size or w.disagreement:
            return Reason.GROUP_INCOMPLETE, None
        if workflow_full(w, ledger):
            return Reason.WORKFLOW_LIMIT, None
        uniform = self._uniform_for(line)
        if uniform is not None and not w.joins:
            return uniform[0], None
        reason = queue_blocking(w, line.queue, ledger) or shared_blocking(w, self._snapshot, ledger)
        if reason is not None:
            return reason, None
        hold = self._holds.holding(w, line.level) if self._holds else None
        if hold is not None:
            return Reason.HELD_FOR_PRIORITY, hold
        return Reason.WAITING_TURN, None

    # --- internals -------------------------------------------------------------------------

    def _refusal(self, w: Workload, line: Line) -> str | None:
        """Why no node could hold ``w`` (``policy.inventory``); None when some could."""
        nodes = self._snapshot.nodes
        return nodes.refusal(w, line.queue) if nodes else None

    def _possible(self, w: Workload, line: Line) -> bool:
        """Whether ``w`` could ever run: some node could hold it, and it is within its queue's
        floor (one look-up per resource, the usual answer), else within the caps of its team."""
        if self._refusal(w, line) is not None or self._snapshot.refused(w) is not None:
            return False
        caps = self._floor(line)
        requests = w.requests
        for name, cap in caps:
            if requests.get(name, 0) > cap:
                break
        else:
            return True
        key = (line.name, w.team)
        exact = self._ceilings.get(key)
        if exact is None:
            snapshot = self._snapshot
            team = snapshot.teams.get(w.team) if w.team else None
            exact = self._ceilings[key] = ceilings(line.queue, team, snapshot.policy)
        return within(requests, exact)

    def _all_possible(self, line: Line) -> bool:
        """Whether every workload of ``line`` is within its floor and some node could hold each:
        then none is impossible. One pass over the queue's requests per resource of the floor,
        and one look-up per workload in the inventory, cached."""
        every = self._every.get(line.name)
        if every is None:
            order = line.order
            every = all(
                max([w.requests.get(name, 0) for w in order], default=0) <= cap
                for name, cap in self._floor(line)
            )
            nodes = self._snapshot.nodes
            if every and nodes:
                queue = line.queue
                every = not any(nodes.refusal(w, queue) for w in order)
            refused = self._snapshot.refused
            if every and self._snapshot.refusals:
                every = not any(refused(w) is not None for w in order)
            self._every[line.name] = every
        return every

    def _floor(self, line: Line) -> Ceilings:
        caps = self._floors.get(line.name)
        if caps is None:
            caps = self._floors[line.name] = floor(line.queue, self._snapshot)
        return caps

    def _uniform_for(self, line: Line) -> tuple[Reason, str] | None:
        """The queue layer's answer when it is the same for every workload of the queue.

        Only count limits and a paused or missing queue qualify, and their messages name no
        workload, so any of the queue's workloads stands in for all in ``describe``.
        """
        name = line.name
        if name in self._uniform:
            return self._uniform[name]
        reason = queue_full(line.queue, self._ledger)
        answer = None
        if reason is not None and line.order:
            answer = reason, describe(reason, line.order[0], name, self._snapshot, self._ledger)
        self._uniform[name] = answer
        return answer

    def _where(self) -> dict[str, Workload]:
        """Key -> waiting workload (its line is the one of its queue). No tuple per workload: on
        a deep backlog that would be 100k objects more for the garbage collector to scan."""
        if self._index is None:
            self._index = {
                w.key: w
                for line in self._lines.values()
                for w in line.order
                if w.key not in line.released
            }
        return self._index

    def _keys_in_order(self, line: Line) -> Iterator[str]:
        released = line.released
        return (w.key for w in line.ensure_sorted() if w.key not in released)

    def _items(self) -> Iterator[tuple[str, Wait]]:
        explain = self.explain
        for line in self._lines.values():
            released = line.released
            uniform = self._uniform_for(line)
            every = uniform is not None and self._all_possible(line)
            possible = self._possible
            position = 0
            for w in line.ensure_sorted():
                key = w.key
                if key in released:
                    continue
                position += 1
                if uniform is not None and _queue_answers_for(w) and (every or possible(w, line)):
                    yield key, Wait(uniform[0], uniform[1], position)
                else:
                    reason, message = explain(w, line)
                    yield key, Wait(reason, message, position)


_FLAGLESS = frozenset({Reason.NO_NODE_FITS, Reason.RELEASE_REFUSED})
"""Reasons of work that cannot run now that are reasons of their own: no never-flag needed."""


def _queue_answers_for(w: Workload) -> bool:
    """Whether a queue's uniform answer is ``w``'s too, if ``w`` could ever run: nothing of its
    own (an incomplete or disagreeing group, a workflow limit) comes before the queue's layer.
    A fast path for deep, full queues. Pods joining their running group take no slot, so a
    queue's count limit is not theirs."""
    return w.workflow_max_running is None and w.complete and not w.joins


class _Items(ItemsView[str, Wait]):
    """Items read queue by queue, working out positions as they go (no per-key look-up)."""

    _mapping: Waiting

    def __iter__(self) -> Iterator[tuple[str, Wait]]:
        return self._mapping._items()
