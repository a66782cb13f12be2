"""Where records come from, behind one small interface.

A ``Source`` gives the records that touch a period and says where "now" is for it. Today the
one source is a trace file; the recorder, reached through the apiserver's service proxy, will
be another, and the report does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from records.trace import Record, last_time, load


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
