"""When will it start? Expected start times of waiting work, by replaying dispatch forward.

``estimate(snapshot, turns, durations)`` takes the controller's snapshot as it stands (what
runs, since when, what waits, the round-robin turns) and replays it forward in virtual time
through the replay's own event loop (``simulator.simulating.Events``, which calls
``policy.dispatching.dispatch``, the controller's decision): running work ends when its hold
does, each end makes a dispatch cycle, and a waiting workload's estimate is the instant the
replay releases it. Nothing new arrives in the replay: work submitted later with a higher
priority can only make a start later than estimated.

Holds come from the records (``records.durations``): each workload's shape (queue, workflow,
GPUs), its queue's or the cluster's when its shape has too few; what a running workload has run
already narrows what is left of it, and ``activeDeadlineSeconds`` bounds it. The estimate is
made of three replays: every hold at its p10 (``p10``), at its mean (``p50``: a chain of n holds
adds up to about n × the mean, not n × the median, and holds are skewed), and at its p90
(``p90``). Record ``docs/decisions/0048-expected-start-times.md`` says why these and not
replays with drawn holds, with the figures; ``samples=N`` does the latter (N replays with holds
drawn at random, each workload's p10, p50 and p90 start over the runs), for comparison.

An estimate is *unknown* (``Estimate.known`` false, ``reason`` says why) where none is honest:
nothing recorded at all; a pod group not complete yet (it waits for its own pods, which no
record predicts); gated pods joining a running group; work no node could hold
(``policy.inventory``) or that asks more than a quota by itself (``policy.limits.impossible``),
which never runs under the current limits; work of a paused or missing queue; anything else
the replay never releases (a ``maxRunning`` of 0); and work beyond the horizon (a day) or behind
more than ``MOST`` (1,000) releases of the middle replay.

It is pure and reads nothing but its arguments. It is not on the dispatch path: the caller
recomputes it at a bounded rate, off the cycle (its cost: benchmarks/README.md, "Expected start
times").
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from policy import keys
from policy.dispatching import Turns
from policy.limits import impossible
from policy.model import Snapshot, State, Workload
from records.durations import Durations, DurationShape, Holds, gpus_of
from records.figures import percentile
from records.trace import parse_time
from simulator.clusters import VirtualCluster
from simulator.setups import Setup
from simulator.simulating import Events, quota_resources, versions

HORIZON = 86400.0
"""Seconds ahead the replay looks (a day): work it has not released by then is unknown. What
arrives meanwhile, which no replay of the present sees, makes anything further out a guess, and
the replay's cost grows with how far it goes (benchmarks/README.md, "Expected start times")."""

MOST = 1000
"""Releases the middle replay makes at most: work it has not released by then is unknown ("more
than 1,000 workloads are expected to start before it"). A backlog that deep changes a great deal before its
tail starts, and the replays' cost grows with every release (benchmarks/README.md)."""

BAND = (10.0, 50.0, 90.0)  # the percentiles of an estimate: p10, p50, p90 (of drawn replays)
_INF = float("inf")


@dataclass(frozen=True, slots=True)
class Estimate:
    """When a waiting workload is expected to be released (epoch seconds), or why nobody can say.

    ``p10 <= p50 <= p90``, none before the snapshot's ``now``; all three are None when the
    estimate is unknown. ``p90`` alone is None when it lies beyond the horizon (the replays
    look a day ahead). A workload the replay releases at once has all three equal to ``now``.
    """

    key: str
    p10: float | None = None
    p50: float | None = None
    p90: float | None = None
    reason: str = ""  # why it is unknown; empty when known

    @property
    def known(self) -> bool:
        return self.p50 is not None


NOTHING_RECORDED = "nothing recorded yet: no run's length to go by"
INCOMPLETE = "its pod group is not complete yet"
JOINING = "it joins its running group"
PAUSED = "its queue is paused"
NO_QUEUE = "its queue does not exist"
NEVER = "it is never released under the current limits"
BEYOND = "not within the horizon: more than a day's work is ahead of it"


def too_deep(most: int) -> str:
    """Why work the middle replay did not reach before its ``most``-th release is unknown."""
    return f"more than {most:,} workloads are expected to start before it"


def shape_of(w: Workload) -> DurationShape:
    """A workload's duration shape (``records.durations``): queue, workflow, GPUs asked."""
    return (w.queue, w.workflow, gpus_of(w.requests))


def released_at(w: Workload) -> float | None:
    """When a running workload was released: the earliest ``sluicegate.dev/dispatched-at``
    stamp of its pods; None when none carries one (a break-glass release)."""
    stamps = []
    for pod in w.pods:
        raw = pod.annotations.get(keys.DISPATCHED_AT_ANNOTATION)
        if raw:
            try:
                stamps.append(parse_time(raw))
            except ValueError:
                continue
    return min(stamps) if stamps else None


def deadline_of(w: Workload) -> float | None:
    """The smallest ``activeDeadlineSeconds`` its pods declare; None when none does."""
    deadlines = [p.active_deadline for p in w.pods if p.active_deadline is not None]
    return min(deadlines) if deadlines else None


Hold = Callable[[Holds, float, float | None], float]  # holds, elapsed, deadline -> seconds left


def estimate(
    snapshot: Snapshot,
    turns: Turns,
    durations: Durations,
    *,
    released: Mapping[str, float] | None = None,
    samples: int = 0,
    seed: int = 0,
    horizon: float = HORIZON,
    most: int = MOST,
) -> dict[str, Estimate]:
    """An estimate for every pending workload of ``snapshot``, by key.

    ``snapshot`` is the controller's (``policy.model.Snapshot``: queues, teams, policy, nodes,
    every workload pending or running, ``now``); ``turns`` the round-robin state its last
    decision left. ``released`` gives when running workloads were released, by key, where the
    caller knows better than the pods' ``dispatched-at`` stamps; a running workload known to
    neither counts as released at ``now``. ``samples`` (0: the three replays of p10, mean and
    p90 holds) is how many replays with holds drawn at random make the band instead, seeded by
    ``seed``. Work the replays do not release within ``horizon`` seconds, or that more than
    ``most`` workloads go before in the middle replay, is unknown.

    Its cost grows with the work it replays, about one dispatch cycle per release to come in
    each replay; so the middle replay (mean holds) runs first, and the other two stop as soon
    as they have released every workload it released (benchmarks/README.md, "Expected start
    times", has the figure at 10,000 pending).
    """
    now = snapshot.now
    pending = [w for w in snapshot.workloads if w.state is State.PENDING]
    running = [w for w in snapshot.workloads if w.state is State.RUNNING]
    out: dict[str, Estimate] = {}
    if not durations:
        return {w.key: Estimate(w.key, reason=NOTHING_RECORDED) for w in pending}
    candidates: list[Workload] = []
    for w in pending:
        why = _never(w, snapshot)
        if why:
            out[w.key] = Estimate(w.key, reason=why)
        else:
            candidates.append(w)
    if not candidates:
        return out
    known = released or {}
    since = {w.key: _since(w, known, now) for w in running}
    holds = {w.key: durations.of(shape_of(w)) for w in (*running, *candidates)}
    deadlines = {w.key: deadline_of(w) for w in (*running, *candidates)}
    start = _Start(snapshot, running, candidates, since, holds, deadlines)

    def replay(hold: Hold, awaited: Collection[str] | None = None) -> _Replayed:
        return start.forward(turns, hold, now + horizon, most, awaited)

    if samples > 0:
        rnd = random.Random(seed)

        def drawn(h: Holds, elapsed: float, deadline: float | None) -> float:
            return h.draw(rnd, elapsed, deadline)

        runs = [replay(drawn) for _ in range(samples)]
        middle = runs[0]
    else:
        # The middle replay first: the other two need go no further than the work it released.
        middle = replay(_mean)
        runs = [replay(_at(10.0), middle.released), middle, replay(_at(90.0), middle.released)]
    cut = any(run.cut for run in runs)
    for w in candidates:
        starts = [run.released.get(w.key) for run in runs]
        if samples > 0:
            ordered = sorted(_INF if s is None else s for s in starts)
            band = [percentile(ordered, p) for p in BAND]
        else:  # the p10, mean and p90 replays
            done = [s for s in starts if s is not None]
            band = [min(done, default=None), starts[1], max(done) if len(done) == len(starts) else None]
        p10, p50, p90 = (None if v is None or v == _INF else v for v in band)
        if p10 is None or p50 is None:
            deep = middle.cut and len(middle.released) >= most
            out[w.key] = Estimate(w.key, reason=too_deep(most) if deep else BEYOND if cut else NEVER)
        else:
            out[w.key] = Estimate(w.key, p10, p50, p90)
    return out


def _since(w: Workload, known: Mapping[str, float], now: float) -> float:
    at = known.get(w.key)
    if at is None:
        at = released_at(w)
    return now if at is None else at


def _mean(h: Holds, elapsed: float, deadline: float | None) -> float:
    return h.mean(elapsed, deadline)


def _at(p: float) -> Hold:
    def hold(h: Holds, elapsed: float, deadline: float | None) -> float:
        return h.quantile(p, elapsed, deadline)

    return hold


def _never(w: Workload, snapshot: Snapshot) -> str:
    """Why ``w`` cannot be estimated whatever the holds; empty when it can."""
    if w.joins:
        return JOINING
    if not w.complete:
        return INCOMPLETE
    queue = snapshot.queues.get(w.queue)
    if queue is None:
        return NO_QUEUE
    if queue.paused:
        return PAUSED
    if snapshot.nodes is not None and len(snapshot.nodes) and (refusal := snapshot.nodes.refusal(w, queue)):
        return f"{NEVER}: {refusal}"
    if impossible(w, queue, snapshot) is not None:
        return f"{NEVER}: it asks more than a quota by itself"
    return ""


@dataclass(frozen=True, slots=True)
class _Replayed:
    released: dict[str, float]  # when each pending workload was released, by key
    cut: bool  # stopped at the horizon or after ``most`` releases, with events still to come


class _Start:
    """What every replay of one estimate starts from, worked out once: the replay's setup, each
    workload's pending and running versions, how long each running one has run."""

    def __init__(
        self,
        snapshot: Snapshot,
        running: list[Workload],
        pending: list[Workload],
        since: Mapping[str, float],
        holds: Mapping[str, Holds | None],
        deadlines: Mapping[str, float | None],
    ) -> None:
        self.now = now = snapshot.now
        self.setup = Setup(snapshot.queues, snapshot.teams, snapshot.policy)
        keep = quota_resources(self.setup)
        self.forms = {w.key: versions(w, keep) for w in pending}
        self.arrivals = sorted((min(w.created, now), w.key) for w in pending)
        self.running = [(versions(w, keep)[1], max(0.0, now - since[w.key])) for w in running]
        self.holds = holds
        self.deadlines = deadlines

    def forward(
        self, turns: Turns, hold: Hold, until: float, most: int | None, awaited: Collection[str] | None
    ) -> _Replayed:
        """One replay with each workload's hold given by ``hold``, up to ``until``, at most
        ``most`` releases, or until every key of ``awaited`` is released."""
        holds, deadlines = self.holds, self.deadlines
        lengths: dict[str, float] = {}
        for key in self.forms:
            h = holds[key]
            lengths[key] = 0.0 if h is None else hold(h, 0.0, deadlines[key])
        events = Events(VirtualCluster(self.setup), self.forms, lengths, list(self.arrivals))
        for w, elapsed in self.running:
            h = holds[w.key]
            left = 0.0 if h is None else hold(h, elapsed, deadlines[w.key])
            events.running(w, self.now + left)
        events.run(turns, start=self.now, until=until, most=None if awaited is not None else most,
                   awaited=awaited)
        return _Replayed(events.released_at, events.cut)
