"""Where records come from, behind one small interface.

A ``Source`` gives the records that touch a period and says where "now" is for it: a trace
file (``TraceFile``), or the recorder in the cluster (``Recorded``), whose answers the CLI
fetches through the apiserver's service proxy and hands in as JSON (this package does no I/O
but reading files).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from records.trace import Record, TraceError, last_time, load, parse_record, parse_time


class Source(Protocol):
    def now(self) -> float:
        """The end of what the source knows: the present for a live source, the last event of a file."""
        ...

    def records(self, since: float | None = None) -> Sequence[Record]:
        """The records of workloads still waiting or running at ``since`` or submitted after it."""
        ...


def touches(r: Record, since: float | None) -> bool:
    """Whether ``r`` was waiting, running or submitted at or after ``since``."""
    return since is None or r.finished is None or r.finished >= since


class TraceFile:
    """A trace in a JSON Lines file (``sluicegate records export`` or ``records synth`` wrote it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._records: list[Record] | None = None

    def _all(self) -> list[Record]:
        if self._records is None:
            with self.path.open(encoding="utf-8") as stream:
                self._records = load(stream, source=str(self.path))
        return self._records

    def now(self) -> float:
        return last_time(self._all())

    def records(self, since: float | None = None) -> Sequence[Record]:
        return [r for r in self._all() if touches(r, since)]


@dataclass(frozen=True, slots=True)
class RecordList:
    """One answer of the recorder's ``GET /records``: the records, when it answered, and how
    many pods it found deleted while it was down (their records are among these, Deleted)."""

    records: tuple[Record, ...]
    now: float
    lost: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "recorder") -> RecordList:
        """The answer as the recorder sends it; ``TraceError`` when it is not a RecordList."""
        if data.get("kind") != "RecordList" or not isinstance(data.get("items"), list):
            raise TraceError(0, "kind", f"expected a RecordList, got {str(data)[:200]}", source)
        try:
            now = parse_time(str(data.get("now")))
        except ValueError as e:
            raise TraceError(0, "now", str(e), source) from e
        records = tuple(parse_record(item, n, source) for n, item in enumerate(data["items"], start=1))
        lost = data.get("lost")
        return cls(records, now, lost if isinstance(lost, int) else 0)


Fetch = Callable[[float | None], RecordList]
"""Asks the recorder for the records that touch the period from a time (all when None)."""


class Recorded:
    """The recorder's live records; ``now`` is the present (this machine's clock)."""

    def __init__(self, fetch: Fetch, clock: Callable[[], float] = time.time) -> None:
        self.fetch = fetch
        self.clock = clock
        self.lost = 0
        self._answers: dict[float | None, RecordList] = {}

    def now(self) -> float:
        return self.clock()

    def records(self, since: float | None = None) -> Sequence[Record]:
        if since not in self._answers:
            self._answers[since] = self.fetch(since)
        answer = self._answers[since]
        self.lost = answer.lost
        return [r for r in answer.records if touches(r, since)]
