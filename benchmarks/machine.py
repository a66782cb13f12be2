"""Facts about where a benchmark ran: the machine and the versions of everything measured."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from controlplane import building

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict[str, str]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
        total_kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                         if line.startswith("MemTotal:"))
        memory = f"{total_kib / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        memory = "unknown"
    return {
        "cpu": model or platform.processor() or "unknown",
        "cores": str(os.cpu_count()),
        "memory": memory,
        "kernel": platform.release(),
        "arch": platform.machine(),
    }


# What the matrix itself writes while it runs: not a change to the code measured.
WRITTEN = (":(exclude)benchmarks/results", ":(exclude)benchmarks/RESULTS.md")


def commit(root: Path = ROOT) -> str:
    """This repository's commit, with ``+changes`` when the work tree differs from it (outside
    the results the matrix writes, which would otherwise mark every run after the first)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *WRITTEN],
                               cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+changes" if dirty else head


def versions() -> dict[str, str]:
    v = building.versions()
    return {
        "kubernetes": v.kubernetes, "etcd": v.etcd, "kwok": v.kwok, "go": v.go,
        "kueue": building.kueue_version(), "python": platform.python_version(), "sluicegate": commit(),
    }


# --- a quiet machine --------------------------------------------------------------------------

QUIET_PER_CORE: Final = 1.0
"""A run starts only while the 1-minute load average is at most this per core: a loaded machine
inflates a CPU-hungry system's figures more than a frugal one's, so runs made under load cannot
be compared (benchmarks/README.md). ``--allow-load`` starts it anyway and marks its row."""
QUIET_POLL_SECONDS: Final = 10.0


def cores() -> int:
    """The cores the load average is shared by: every core of the machine (the load average is
    the machine's, whatever cgroup the matrix runs in)."""
    return os.cpu_count() or 1


def quiet_bound(cores: int, per_core: float = QUIET_PER_CORE) -> float:
    return per_core * cores


@dataclass(frozen=True, slots=True)
class Load:
    """The 1-minute load average when a run was about to start, and whether it was over the
    bound (``allowed``: started anyway, with ``--allow-load``)."""

    average: float
    bound: float
    allowed: bool = False

    @property
    def quiet(self) -> bool:
        return self.average <= self.bound


def await_quiet(
    cores: int,
    *,
    patience: float,
    allow: bool = False,
    read: Callable[[], float] = lambda: os.getloadavg()[0],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    say: Callable[[str], None] = lambda line: None,
) -> Load:
    """The load before a run. Over the bound, it waits up to ``patience`` seconds for the load to
    fall (the previous run's cluster has just stopped, and a 1-minute average takes a minute to
    forget it); still over, it is returned as it is, ``quiet`` False, for the caller to refuse the
    run, unless ``allow``, when the run may start at once and its row is marked."""
    bound = quiet_bound(cores)
    load = read()
    if load <= bound:
        return Load(load, bound)
    if allow:
        return Load(load, bound, allowed=True)
    deadline = clock() + patience
    say(f"load average {load:.2f} is over {bound:.1f} ({QUIET_PER_CORE:g} per core on {cores} cores): "
        f"waiting up to {patience:.0f}s for it to fall")
    while clock() < deadline:
        sleep(QUIET_POLL_SECONDS)
        load = read()
        if load <= bound:
            return Load(load, bound)
    return Load(load, bound)
