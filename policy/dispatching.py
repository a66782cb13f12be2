"""Which gated workloads to release now, and why every other pending workload waits.

``dispatch(snapshot, turns)`` is the whole decision; the controller applies ``release`` (removes
the gates, in that order), writes ``waiting`` as conditions (``reasons()`` finds the few whose
reason changed without formatting every message), stores ``turns`` for the next call and
reports ``usage``. The rules, as docs/concepts.md states them:

* Each candidate passes four layers in order: its workflow, its queue (exists, not paused,
  ``maxRunning``, ``quota``), its team, the cluster (``limits``). The first that fails is the
  reason it waits.
* Queues of higher priority go first. Queues of equal priority take turns, one release per
  turn, round-robin by name, starting after the queue that had the last release in turn at
  that priority (``Turns``); so two saturated queues alternate even when one release fits a
  call.
* Inside a queue: pod priority, submission time, key (``ordering``). A ``StrictFIFO`` queue
  stops at its first workload that does not fit; those behind it wait with their own reason
  when a limit stops them too, and with ``WaitingTurn`` (naming the head) when only the head
  does. Work whose own workflow is at its limit is passed over: it cannot go before one of
  its own workloads ends, so it does not stop the queue (FIFO holds among the rest); a head
  whose workflow fills later in the decision (another queue released into it) lets its queue
  go on (``resume``). A ``BestEffortFIFO`` queue lets later work that fits go ahead.
* A workload that can never run under the current limits (it asks for more than a quota by
  itself) is passed over: it holds nothing, blocks nothing, and says why (``limits``). So is
  one that no node could hold even if it were empty (``inventory``, ``NoNodeFits``): a
  release cannot be undone, and such a pod would hold its quota for nothing.
* Priority is strict over shared capacity: a queue's head that could run now but for shared
  capacity holds what it needs from lower-priority queues, and from its equal-priority peers
  too once it has waited longer than ``starvationSeconds`` (``holds``).
* Starving heads claim first: before the round-robin at their priority, each queue whose head
  is starving takes that head, in turn order. A claim moves the turn only when it was that
  queue's turn anyway, so the other queues keep their rotation. A starving head that does not
  fit holds what it needs; the rest of a BestEffortFIFO queue keeps flowing around it.
* A pod group is released whole, and waits with ``GroupIncomplete`` until all its pods exist
  and agree on their queue, workflow and size; such a group does not block a StrictFIFO queue.
* Gated pods that join a running group (up to its size: ``workloads``) pass every layer like
  any workload, their requests counted beside the group's live pods, but take no slot of a
  count limit: the group holds one already. They go at their queue's priority, after its
  starving claims and before its round-robin (the group had its turn when it was released), and
  leave the turn where it was. Nothing else releases a gated pod, so a member swapped into a
  running group never takes a scope over a limit.
* Each release is counted at once, so one decision never releases more than the limits allow.
  Running workloads count toward every limit; finished ones do not count at all.

Usage only grows within a decision and holds are only added, so a workload that does not fit
when tried never fits later in the same decision: each queue is walked once, front to back
(a StrictFIFO queue goes on from where it stopped only when its head's workflow fills).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

from policy.holds import Holds
from policy.limits import (
    Ceilings,
    blocking,
    ceilings,
    over,
    queue_blocking,
    queue_full,
    within,
    workflow_full,
)
from policy.model import Snapshot, State, Workload
from policy.ordering import Line, Turns, rotated, sort_in_queue_order
from policy.orders import Orders
from policy.usage import Ledger, Tally
from policy.waiting import Wait, Waiting

__all__ = ["Decision", "Orders", "Turns", "Wait", "Waiting", "dispatch"]

_CREATED = attrgetter("created")
_JOINS = attrgetter("joins")


@dataclass(frozen=True, slots=True)
class Decision:
    """What one dispatch decision releases, why the rest waits, and the state it leaves.

    ``usage`` counts the released workloads as running already (and no longer pending).
    """

    release: tuple[Workload, ...]
    waiting: Waiting  # a Mapping[str, Wait], worked out as it is read
    turns: Turns
    usage: Tally
    claimed: tuple[str, ...] = ()
    """Keys of the released workloads that went ahead of the round-robin because they had
    waited longer than ``starvationSeconds``."""
    orders: Orders | None = None
    """Each queue's pending work in queue order, this decision's releases included, for the
    next decision to start from (``policy.orders``); None when the call was given none."""


class _Cycle:
    """The working state of one decision."""

    __slots__ = ("caps", "claimed", "deadline", "holds", "ledger", "released", "snapshot", "stopped")

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.ledger = Ledger()
        self.holds = Holds(snapshot, self.ledger)
        self.released: list[Workload] = []
        self.claimed: list[str] = []
        self.deadline = snapshot.now - snapshot.policy.starvation_seconds  # created before: starving
        self.stopped = False  # the cluster's maxRunning is reached: nothing more can go
        self.caps: dict[tuple[str, str], Ceilings] = {}

    def never(self, w: Workload, line: Line) -> bool:
        """Whether ``w`` can never run under the current limits (``limits.impossible``)."""
        key = (line.name, w.team)
        caps = self.caps.get(key)
        if caps is None:
            snapshot = self.snapshot
            team = snapshot.teams.get(w.team) if w.team else None
            caps = self.caps[key] = ceilings(line.queue, team, snapshot.policy)
        return bool(caps) and not within(w.requests, caps)

    def cluster_full(self) -> bool:
        limit = self.snapshot.policy.max_running
        return limit is not None and self.ledger.cluster_running >= limit

    def fits(self, w: Workload, line: Line) -> bool:
        if blocking(w, line.queue, self.snapshot, self.ledger) is not None:
            return False
        return not (self.holds and self.holds.holding(w, line.level) is not None)

    def could_run(self, w: Workload, line: Line) -> bool:
        """Whether only shared capacity keeps ``w`` back: its workflow, its own queue and its
        team's count have room for it. Only such work holds anything."""
        ledger = self.ledger
        if workflow_full(w, ledger) or queue_blocking(w, line.queue, ledger) is not None:
            return False
        team = self.snapshot.teams.get(w.team) if w.team else None
        if team is None:
            return True
        return not over(ledger.team_running.get(w.team, 0), w.slots, team.max_running)

    def release(self, w: Workload, line: Line) -> None:
        """Release ``w``, which the cursor of ``line`` has just moved past."""
        self.ledger.run(w)
        line.released.add(w.key)
        line.taken.append(line.cursor - 1)
        self.released.append(w)
        if self.cluster_full():
            self.stopped = True

    def seek(self, line: Line, passes: Callable[[Workload], bool]) -> Workload | None:
        """Move ``line``'s cursor to its next whole workload that ``passes``; None when none can.

        Workloads passed over are noted as blocked, and a StrictFIFO queue stops at the first
        one, except work that can never run and work whose own workflow is at its limit, which
        are skipped as if they were not there.
        """
        if queue_full(line.queue, self.ledger) is not None:
            line.done = True
            return None
        order = line.order
        nodes = self.snapshot.nodes or None
        queue = line.queue
        for i in range(line.cursor, len(order)):
            w = order[i]
            if w.joins or not w.complete:  # joining pods go in their own step (``join``)
                continue
            if nodes is not None and nodes.refusal(w, queue) is not None:
                continue  # no node could ever hold it: passed over, like work over a quota
            if self.snapshot.refused(w) is not None:
                continue  # the API server refused its release: passed over until it changes
            if passes(w):
                line.cursor = i
                return w
            if self.never(w, line):
                continue
            if line.strict:
                if workflow_full(w, self.ledger):
                    continue
                line.stop_at(i)
                return None
            line.blocked.append(i)
        line.exhaust()
        return None

    def take_one(self, line: Line) -> bool:
        """Release the next workload of ``line`` that fits; False once nothing more of it can go."""
        w = self.seek(line, lambda w: self.fits(w, line))
        if w is None:
            return False
        line.cursor += 1
        self.release(w, line)
        return True

    def head(self, line: Line) -> Workload | None:
        """Move ``line``'s cursor to its head: the first whole workload that could run now."""
        return self.seek(line, lambda w: self.could_run(w, line) and not self.never(w, line))

    def join(self, lines: list[Line], joining: Mapping[str, list[Workload]]) -> None:
        """Release the pods joining running groups in ``lines`` (``joining``: by queue, in queue
        order) that pass every layer and every hold: each adds its requests, and takes no slot."""
        nodes = self.snapshot.nodes or None
        for line in lines:
            for w in joining.get(line.name, ()):
                if nodes is not None and nodes.refusal(w, line.queue) is not None:
                    continue
                if self.snapshot.refused(w) is not None:
                    continue
                if self.fits(w, line):
                    self.ledger.run(w)
                    line.released.add(w.key)
                    line.taken.append(line.order.index(w))
                    self.released.append(w)

    def serve_starving(self, ring: list[Line], names: Sequence[str], turn: str | None) -> str | None:
        """First claim for starving heads, in turn order, before the round-robin at their priority.

        A starving head that fits is released; the claim moves the turn (``turn``, the queue
        that released last in turn) only when it was that queue's turn anyway. One that does
        not fit holds what it needs from its peers and lower priorities. Returns the turn.
        """
        deadline = self.deadline
        for line in ring:
            if self.stopped:
                break
            w = self.head(line)
            if w is None or w.created >= deadline:
                continue
            if self.fits(w, line):
                line.cursor += 1
                self.release(w, line)
                self.claimed.append(w.key)
                if line.name == _next_after(names, turn):
                    turn = line.name
                continue
            self.holds.hold_for(w, line.name, line.level, True)
        return turn

    def take_turns(self, ring: list[Line]) -> str | None:
        """Round-robin over ``ring`` (one priority, in turn order); returns the queue released last."""
        queue = deque(line for line in ring if not line.done)
        last = None
        while queue and not self.stopped:
            line = queue.popleft()
            if self.take_one(line):
                last = line.name
                queue.append(line)
        return last

    def resume(self, lines: list[Line]) -> list[Line]:
        """The StrictFIFO queues of ``lines`` stopped at a workload whose workflow has filled
        since (another queue released into it), opened again at that workload (which ``seek``
        now passes over), so that a decision leaves no queue stopped where the next one would
        not stop."""
        out = []
        for line in lines:
            head = line.stop
            if head is not None and workflow_full(head, self.ledger):
                line.stop = None
                line.done = False
                out.append(line)
        return out

    def hold_for_heads(self, lines: list[Line]) -> None:
        """After a priority is done, each of its queues' heads holds what it needs."""
        deadline = self.deadline
        for line in lines:
            head = line.stop
            if head is None:
                for i in line.blocked:
                    if self.could_run(line.order[i], line):
                        head = line.order[i]
                        break
            elif not self.could_run(head, line):
                head = None
            if head is not None:
                self.holds.hold_for(head, line.name, line.level, head.created < deadline)


def _next_after(names: Sequence[str], turn: str | None) -> str:
    """The queue whose turn it is, of ``names`` (sorted), after ``turn``."""
    if turn is None:
        return names[0]
    return names[bisect_right(names, turn) % len(names)]


def _lines(snapshot: Snapshot, ledger: Ledger) -> dict[str, Line]:
    """Tally running work and gather pending work by queue, in one pass."""
    by_queue: defaultdict[str, list[Workload]] = defaultdict(list)
    running: list[Workload] = []
    is_pending, is_running = State.PENDING, State.RUNNING
    for w in snapshot.workloads:
        state = w.state
        if state is is_pending:
            by_queue[w.queue].append(w)
        elif state is is_running:
            running.append(w)
    ledger.run_all(running)
    queues = snapshot.queues
    return {name: Line(name, queues.get(name), by_queue[name]) for name in sorted(by_queue)}


def _kept_lines(snapshot: Snapshot, ledger: Ledger, orders: Orders) -> tuple[dict[str, Line], Orders]:
    """``_lines``, starting from the orders the last decision kept: every queue comes in order."""
    (by_queue, _, counted), kept = orders.gather(snapshot.workloads)
    ledger.load(counted)
    queues = snapshot.queues
    lines = {}
    for name, order in by_queue.items():
        line = lines[name] = Line(name, queues.get(name), order)
        line.sorted = True
    return lines, kept


def _joining(workloads: Sequence[Workload]) -> dict[str, list[Workload]]:
    """Queue -> the pending workloads of pods joining a running group there, in queue order. A
    pass at C speed: such work is rare, and the kept orders do not single it out."""
    by_queue: dict[str, list[Workload]] = {}
    for w in filter(_JOINS, workloads):
        if w.state is State.PENDING:
            by_queue.setdefault(w.queue, []).append(w)
    for order in by_queue.values():
        sort_in_queue_order(order)
    return by_queue


def dispatch(snapshot: Snapshot, turns: Turns | None = None, orders: Orders | None = None) -> Decision:
    """Decide which pending workloads to release now; see the module docstring for the rules.

    ``turns`` and ``orders`` are what the previous decision left (``decision.turns``,
    ``decision.orders``). ``orders`` changes only the cost, never the answer.
    """
    turns = turns if turns is not None else Turns()
    cycle = _Cycle(snapshot)
    ledger = cycle.ledger
    if orders is None:
        lines, kept = _lines(snapshot, ledger), None
    else:
        lines, kept = _kept_lines(snapshot, ledger, orders)
    joining = _joining(snapshot.workloads)
    levels: dict[int, list[Line]] = {}
    for line in lines.values():
        if line.queue is not None:
            levels.setdefault(line.level, []).append(line)
    moved: dict[int, str] = {}
    walked: list[Line] = []  # every queue walked, highest priority first
    cycle.stopped = cycle.cluster_full()
    for level in sorted(levels, reverse=True):
        if cycle.stopped:
            cycle.join(levels[level], joining)
            continue
        active = []
        for line in levels[level]:
            if queue_full(line.queue, ledger) is None:
                line.ensure_sorted()
                active.append(line)
            else:
                line.done = True
        by_name = {line.name: line for line in active}
        names = sorted(by_name)
        if not names:
            cycle.join(levels[level], joining)
            continue
        before = turns.last.get(level)
        turn = cycle.serve_starving([by_name[n] for n in turns.rotation(level, names)], names, before)
        cycle.join(levels[level], joining)
        last = cycle.take_turns([by_name[n] for n in rotated(names, turn)])
        while not cycle.stopped and (reopened := cycle.resume(active)):
            last = cycle.take_turns(reopened) or last
        after = last if last is not None else turn
        if after is not None and after != before:
            moved[level] = after
        cycle.hold_for_heads(active)
        walked.extend(active)
    _resume_higher(cycle, walked, moved, turns)
    _count_backlog(lines, ledger)
    return Decision(
        release=tuple(cycle.released),
        waiting=Waiting(lines, snapshot, ledger, cycle.holds),
        turns=turns.advanced(moved, (q.priority for q in snapshot.queues.values())),
        usage=ledger.tally(snapshot.queues),
        claimed=tuple(cycle.claimed),
        orders=kept,
    )


def _resume_higher(cycle: _Cycle, walked: list[Line], moved: dict[int, str], turns: Turns) -> None:
    """Go on with StrictFIFO queues whose head's workflow a lower priority filled after their
    priority was done (a head holds its workflow's last slot only when it could run, so this
    is a head another limit kept back too), highest priority first, until none is left."""
    while not cycle.stopped and (reopened := cycle.resume(walked)):
        by_level: dict[int, list[Line]] = {}
        for line in reopened:
            by_level.setdefault(line.level, []).append(line)
        for level in sorted(by_level, reverse=True):
            last = cycle.take_turns(by_level[level])
            if last is not None and last != turns.last.get(level):
                moved[level] = last
            elif last is not None:
                moved.pop(level, None)
            cycle.hold_for_heads(by_level[level])


def _count_backlog(lines: Mapping[str, Line], ledger: Ledger) -> None:
    """What stays pending per queue, and its oldest creation time, after the releases."""
    for name, line in lines.items():
        left = len(line.order) - len(line.released)
        if left:
            ledger.pending[name] = left
            ledger.oldest[name] = _oldest(line)


def _oldest(line: Line) -> float:
    """The earliest creation time among ``line``'s workloads that were not released.

    In queue order, creation times ascend within each pod priority, so the first workload of
    each priority that was not released is a candidate: a few look-ups, not a pass.
    """
    order = line.order
    if not line.sorted:
        created: list[float] = list(map(_CREATED, order))
        for i in line.taken:
            created[i] = math.inf
        return min(created)
    taken = set(line.taken)
    if order[0].priority == order[-1].priority:  # one band: its first workload not released
        return next((order[i].created for i in range(len(order)) if i not in taken), math.inf)
    oldest, start, end = math.inf, 0, len(order)
    while start < end:
        band = bisect_right(order, -order[start].priority, lo=start, key=_lower_priority)
        i = start
        while i < band and i in taken:
            i += 1
        if i < band:
            oldest = min(oldest, order[i].created)
        start = band
    return oldest


def _lower_priority(w: Workload) -> int:
    return -w.priority


