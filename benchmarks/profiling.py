"""Where a system's Python processes spend their CPU during a run: py-spy, sampling from outside.

``Profiles(directory)`` starts ``py-spy record --format raw`` (collapsed stacks, one line per
distinct stack with its sample count) on each Python process of a system when the load starts
and stops it (SIGINT, on which py-spy writes its file) when the run ends. ``hottest`` reads a
collapsed file and ranks functions by the samples in which they were on the stack (inclusive)
and at its top (self), which is what the benchmark notes quote. Only ``--profile`` runs are
sampled, so the figures of ordinary runs carry no sampling cost. Only samples in which the
process holds the interpreter lock are kept (``--gil``): on a machine whose cores are all busy
a process spends much of its time runnable but waiting for a core, often in a system call
that woke another process (a socket write), and without ``--gil`` those waits would be
ranked as if they were work. py-spy is a development dependency (``pip install -e '.[dev]'``);
Go processes (Kueue) are not sampled.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

RATE = 100  # samples per second: py-spy's default
STOP_SECONDS = 30.0


def is_python(pid: int) -> bool:
    try:
        return "python" in Path(os.readlink(f"/proc/{pid}/exe")).name
    except OSError:
        return False


def _py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profiles:
    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory = directory
        self.prefix = prefix
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.files: dict[str, Path] = {}

    def start(self, pids: Mapping[str, int]) -> list[str]:
        """Sample every Python process among ``pids``; the problems met (py-spy missing)."""
        binary = _py_spy()
        if binary is None:
            return ["py-spy is not installed: no profile taken (pip install py-spy)"]
        self.directory.mkdir(parents=True, exist_ok=True)
        for role, pid in pids.items():
            if not is_python(pid):
                continue
            out = self.directory / f"{self.prefix}.{role}.folded"
            self.files[role] = out
            self._procs[role] = subprocess.Popen(
                [binary, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw", "--nonblocking",
                 "--gil", "--output", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        return []

    def stop(self) -> None:
        for proc in self._procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
        for proc in self._procs.values():
            try:
                proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()


@dataclass(frozen=True, slots=True)
class Hot:
    function: str
    inclusive: float
    """Share of the samples with the function anywhere on the stack."""
    own: float
    """Share of the samples with the function at the top of the stack."""


def hottest(folded: str, top: int = 15) -> list[Hot]:
    """The functions most often on the stack, from collapsed stacks (``frame;frame;... count``)."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n
    if not total:
        return []
    return [Hot(f, inclusive[f] / total, own[f] / total) for f, _ in inclusive.most_common(top)]


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.profiling FILE.folded [TOP]``: the hottest functions of a profile."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(main.__doc__, file=sys.stderr)
        return 2
    top = int(args[1]) if len(args) > 1 else 15
    print(f"{'on stack':>8} {'own':>6}  function")
    for hot in hottest(Path(args[0]).read_text(), top):
        print(f"{hot.inclusive:8.1%} {hot.own:6.1%}  {hot.function}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
