"""Rendering rows for people (aligned tables) and programs (CSV, JSON)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

FORMATS = ("table", "csv", "json")


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> str:
    """Columns padded to their widest cell; the first ``left`` columns left-aligned, the rest
    (numbers) right-aligned."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)]) + "\n"


def csv_text(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def json_text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def signed(text: str) -> str:
    """``text`` of a difference, with a ``+`` when it is not negative."""
    return text if text.startswith("-") else f"+{text}"


def age(seconds: float | None) -> str:
    """A length of time as ``kubectl get`` prints ages: ``45s``, ``4m05s``, ``3h12m``, ``2d04h``."""
    if seconds is None:
        return "-"
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"
