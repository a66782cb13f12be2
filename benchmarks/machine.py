"""Facts about where a benchmark ran: the machine and the versions of everything measured."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

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
