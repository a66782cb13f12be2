"""How many CPUs a process may keep busy: its cgroup's CPU limit, else the CPUs it may run on.

A container's limit (``resources.limits.cpu``) reaches it as a CFS quota: ``cpu.max`` under
cgroup v2 (``"<quota> <period>"``, or ``"max <period>"`` for none), ``cpu.cfs_quota_us`` and
``cpu.cfs_period_us`` under v1 (-1 for none). A quota of 1.5 CPUs lets two processes run, each
part of the time: the count is rounded up, and never more than the CPUs the process may run on.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

CGROUP: Final = Path("/sys/fs/cgroup")


def available() -> int:
    """The CPUs this process may run on (its affinity), or the machine's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _quota(cgroup: Path) -> float | None:
    """The CPU quota in CPUs, or None when there is none (or none can be read)."""
    try:
        raw = (cgroup / "cpu.max").read_text().split()
        if raw and raw[0] != "max":
            return int(raw[0]) / int(raw[1])
        if raw:
            return None
    except (OSError, ValueError, IndexError, ZeroDivisionError):
        pass
    try:
        quota = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError, ZeroDivisionError):
        return None


def cpu_limit(cgroup: Path = CGROUP, cpus: Callable[[], int] = available) -> int:
    """At least 1: the cgroup's quota rounded up, at most ``cpus()``; ``cpus()`` without a quota."""
    quota = _quota(cgroup)
    most = cpus()
    if quota is None or quota <= 0:
        return most
    return max(1, min(most, math.ceil(quota)))
