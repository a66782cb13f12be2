"""The fault suite's figures: one row per scenario, kept in a JSON file, rendered as the table of
``docs/reliability.md``.

Each scenario of the suite (and the soak) writes its row when it ends; a row of the same
scenario replaces the older one, so the file holds the latest run of each. ``render`` puts the
table between two marker lines of the document and leaves the prose around it alone::

    python -m audit.reliability --figures docs/reliability.json --doc docs/reliability.md
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

BEGIN = "<!-- figures: begin (written by python -m audit.reliability) -->"
END = "<!-- figures: end -->"


class FiguresError(Exception):
    """The figures file or the document cannot be read or has no place for the table."""


@dataclass(frozen=True, slots=True)
class Figures:
    """What one scenario did and what the auditor's record showed."""

    scenario: str
    suite: str = ""
    """The command (or variant) that ran it: ``make test``, ``make faults``, ``make soak``."""
    kills: int = 0
    """SIGKILLs of a Sluicegate process."""
    restarts: int = 0
    """Restarts of a control plane component or of a Sluicegate process other than kills."""
    expiries: int = 0
    """410 Gone answers the controller relisted after (from its own log)."""
    submitted: int = 0
    finished: int = 0
    violations: int = 0
    lost: int = 0
    twice: int = 0
    """Pods released twice."""
    abuse_tried: int = 0
    abuse_refused: int = 0
    refused: int = 0
    """Honest submissions refused (an upgrade's webhook swap), and the seconds from the first
    to the last of them (``refused_seconds``)."""
    refused_seconds: float = 0.0
    rss_start_mib: float = 0.0
    rss_end_mib: float = 0.0
    seconds: float = 0.0
    when: str = ""
    """UTC time the scenario ended."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figures:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def refusals(self) -> str:
        if not self.refused and not self.refused_seconds:
            return ""
        return f"{self.refused:,} ({self.refused_seconds:.1f} s)"


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def load(path: Path) -> list[Figures]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except ValueError as e:
        raise FiguresError(f"{path}: not JSON: {e}") from e
    return [Figures.from_json(row) for row in data]


def save(path: Path, row: Figures) -> None:
    """Add ``row`` to the file, replacing an older row of the same scenario."""
    rows = [r for r in load(path) if r.scenario != row.scenario] + [row]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.to_json() for r in rows], indent=2) + "\n")


def _count(value: int) -> str:
    return f"{value:,}"


def _rss(row: Figures) -> str:
    if not row.rss_start_mib and not row.rss_end_mib:
        return ""
    return f"{row.rss_start_mib:.0f} → {row.rss_end_mib:.0f}"


HEADER = ("| Scenario | Run by | Kills | Restarts | 410s relisted | Pods submitted | Finished "
          "| Limit violations | Lost | Released twice | Abuse tried / refused "
          "| Submissions refused (seconds) | Controller RSS MiB | Seconds | When |")


def table(rows: Iterable[Figures]) -> str:
    """The markdown table, one line per scenario and a line of totals."""
    rows = list(rows)
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]

    def line(name: str, suite: str, r: Figures, rss: str, seconds: str, when: str) -> str:
        abuse = f"{r.abuse_tried} / {r.abuse_refused}" if r.abuse_tried else ""
        cells = [name, suite, _count(r.kills), _count(r.restarts), _count(r.expiries), _count(r.submitted),
                 _count(r.finished), _count(r.violations), _count(r.lost), _count(r.twice), abuse,
                 r.refusals, rss, seconds, when]
        return "| " + " | ".join(cells) + " |"

    for r in rows:
        lines.append(line(r.scenario, r.suite, r, _rss(r), f"{r.seconds:.0f}", r.when))
    total = Figures("**total**", **{
        f.name: sum(getattr(r, f.name) for r in rows)
        for f in fields(Figures) if f.type in ("int", "float") and f.name != "seconds"
    })
    lines.append(line("**total**", "", total, "", f"{sum(r.seconds for r in rows):.0f}", ""))
    return "\n".join(lines)


def render(document: str, rows: Sequence[Figures]) -> str:
    """``document`` with the text between the markers replaced by the table."""
    try:
        head, rest = document.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
    except ValueError as e:
        raise FiguresError(f"the document has no lines {BEGIN!r} and {END!r}") from e
    return f"{head}{BEGIN}\n{table(rows)}\n{END}{tail}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m audit.reliability", description=__doc__.split("\n")[0])
    parser.add_argument("--figures", type=Path, default=Path("docs/reliability.json"))
    parser.add_argument("--doc", type=Path, default=Path("docs/reliability.md"))
    args = parser.parse_args(argv)
    args.doc.write_text(render(args.doc.read_text(), load(args.figures)))


if __name__ == "__main__":
    main()
