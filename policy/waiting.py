"""Why each pending workload was not released, and its place in its queue.

A dispatch decision answers for every pending workload, but a deep queue's answer is usually
one sentence repeated ("queue a: 8/8 running"). ``Waiting`` is therefore a read-only mapping
that works each answer out when it is read, from the state the decision ended in: the usage
after every release, the holds, and where each queue stopped. Because usage only grows within
a decision and holds are only added, a workload that did not fit when it was tried still does
not fit in that final state, so the answer read is the one that applies now.

The reason is the first that applies, in this order: ``GroupIncomplete``; then the four
layers of limits (workflow, queue, team, cluster); then ``HeldForPriority``; and else
``WaitingTurn`` (the workload would fit, but stands behind a StrictFIFO queue's blocked head,
or behind a head that is starving).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from dataclasses import dataclass

from policy.holds import Holds
from policy.keys import Reason
from policy.limits import describe, queue_blocking, queue_full, shared_blocking, workflow_full
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
        self._index: dict[str, tuple[Line, Workload]] | None = None
        self._positions: dict[str, dict[str, int]] = {}
        self._uniform: dict[str, tuple[Reason, str] | None] = {}

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
        line, w = self._where()[key]
        positions = self._positions.get(line.name)
        if positions is None:
            positions = self._positions[line.name] = {
                k: i for i, k in enumerate(self._keys_in_order(line), start=1)
            }
        reason, message = self.explain(w, line)
        return Wait(reason, message, positions[key])

    def items(self) -> ItemsView[str, Wait]:
        return _Items(self)

    # --- answers ---------------------------------------------------------------------------

    def reason(self, key: str) -> Reason:
        """The reason alone, without working out the message's position in the queue."""
        line, w = self._where()[key]
        return self.explain(w, line)[0]

    def explain(self, w: Workload, line: Line) -> tuple[Reason, str]:
        """The reason and message for ``w``, a pending workload of ``line`` that stays."""
        ledger = self._ledger
        if not w.complete:
            return Reason.GROUP_INCOMPLETE, f"group {w.pods[0].group}: {len(w.pods)}/{w.group_size} pods"
        snapshot = self._snapshot
        if w.workflow_max_running is not None and workflow_full(w, ledger):
            return Reason.WORKFLOW_LIMIT, describe(Reason.WORKFLOW_LIMIT, w, line.name, snapshot, ledger)
        uniform = self._uniform_for(line, w)
        if uniform is not None:
            return uniform
        reason = queue_blocking(w, line.queue, ledger) or shared_blocking(w, snapshot, ledger)
        if reason is not None:
            return reason, describe(reason, w, line.name, snapshot, ledger)
        hold = self._holds.holding(w, line.level) if self._holds else None
        if hold is not None:
            message = hold.message(snapshot.now, snapshot.policy.starvation_seconds)
            return Reason.HELD_FOR_PRIORITY, message
        head = line.stop
        if head is not None and head is not w:
            if line.starving_stop:
                return Reason.WAITING_TURN, (
                    f"behind {head.key} in queue {line.name}, which has waited over starvationSeconds"
                )
            return Reason.WAITING_TURN, f"behind {head.key} at the head of StrictFIFO queue {line.name}"
        return Reason.WAITING_TURN, f"waiting for its turn in queue {line.name}"  # pragma: no cover

    # --- internals -------------------------------------------------------------------------

    def _uniform_for(self, line: Line, w: Workload) -> tuple[Reason, str] | None:
        """The queue layer's answer when it is the same for every workload of the queue."""
        name = line.name
        if name in self._uniform:
            return self._uniform[name]
        reason = queue_full(line.queue, self._ledger)
        answer = None
        if reason is not None:
            answer = reason, describe(reason, w, name, self._snapshot, self._ledger)
        self._uniform[name] = answer
        return answer

    def _where(self) -> dict[str, tuple[Line, Workload]]:
        if self._index is None:
            self._index = {
                w.key: (line, w)
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
            position = 0
            for w in line.ensure_sorted():
                if w.key in released:
                    continue
                position += 1
                reason, message = explain(w, line)
                yield w.key, Wait(reason, message, position)


class _Items(ItemsView[str, Wait]):
    """Items read queue by queue, working out positions as they go (no per-key look-up)."""

    _mapping: Waiting

    def __iter__(self) -> Iterator[tuple[str, Wait]]:
        return self._mapping._items()
