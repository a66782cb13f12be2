"""Limits that change during a run, and the check of a record against them.

An administrator raises and lowers limits while pods flow. A release is judged against the
limit in force when it happened; a change reaches the controller through its watch, so for
``grace`` seconds after a change a release may still have been decided under the limit before
it, and is judged against the looser of the two. Lowering a limit never evicts: the pods
already running above a new, lower limit are no violation (only releases are judged).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from audit.checking import Cap, Limits, ScopeKey, Violation, violations_under
from audit.records import Record

GRACE_SECONDS = 5.0
"""How long a change may take to reach the controller's cache (a watch event on an idle local
cluster arrives within a second; a loaded two-core machine is given five)."""


@dataclass(frozen=True, slots=True)
class Timeline:
    """``first`` from the start of the record, then each ``(at, limits)`` from its monotonic
    instant ``at`` (the recorder's clock), in order."""

    first: Limits
    changes: tuple[tuple[float, Limits], ...] = ()
    grace: float = GRACE_SECONDS

    def then(self, at: float, limits: Limits) -> Timeline:
        return Timeline(self.first, (*self.changes, (at, limits)), self.grace)

    def in_force(self, at: float) -> list[Limits]:
        """Every set of limits that held at some instant of ``[at - grace, at]``."""
        found = [self.first]
        for when, limits in self.changes:
            if when > at:
                break
            if when <= at - self.grace:
                found = [limits]
            else:
                found.append(limits)
        return found

    def cap(self, key: ScopeKey, at: float) -> Cap:
        """The loosest cap on ``key`` in force around ``at`` (None, unlimited, is loosest)."""
        return loosest([limits.cap(key) for limits in self.in_force(at)])


def loosest(caps: Sequence[Cap]) -> Cap:
    def most(values: list[int | None]) -> int | None:
        return None if any(v is None for v in values) else max(v for v in values if v is not None)

    return Cap(running=most([c.running for c in caps]), gpus=most([c.gpus for c in caps]))


def violations_over(record: Record, timeline: Timeline) -> list[Violation]:
    """Every release that took a scope over the limit in force at that moment."""
    return violations_under(record, timeline.cap)
