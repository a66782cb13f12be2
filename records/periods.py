"""Lengths of time as people write them (``90s``, ``30m``, ``1h30m``, ``7d``), both ways."""

from __future__ import annotations

import re

from records.trace import parse_time

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)", re.ASCII)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a plain number of seconds, or parts like ``1h30m``, ``7d``, ``250ms``."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if value < 0 or value != value or value == float("inf"):
            raise ValueError(f"{text!r} is not a length of time")
        return value
    if not text or _PART.sub("", text):
        raise ValueError(f"{text!r} is not a length of time (examples: 90, 45s, 30m, 1h30m, 7d)")
    return sum(float(n) * _SECONDS[unit] for n, unit in _PART.findall(text))


def start_of(text: str, end: float) -> float:
    """The start of a period that ends at ``end``: an RFC 3339 time, or a length back from
    ``end`` (``7d``); never before the epoch, so any length reaches back to the beginning."""
    if "T" in text:
        return parse_time(text)
    return max(0.0, end - parse_duration(text))


def format_duration(seconds: float) -> str:
    """A short human form: ``0s``, ``12.5s``, ``4m05s``, ``3h12m``, ``2d04h``; negative with ``-``."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 60:
        return f"{seconds:.1f}s".replace(".0s", "s")
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"
