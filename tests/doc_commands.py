"""The commands a document shows, extracted so that a test runs them exactly as written.

Convention for docs/: a command a reader should type goes in a fenced block whose info string
is ``console``, one command per line after a ``$ `` prompt (a line ending in ``\\`` goes on on
the next line); lines without the prompt are the output the reader should expect and are not
run. Blocks with any other info string (``yaml``, ``text``) are never run. So every command of
a guide is in one place, the document, and ``commands_in`` lists them in order::

    for command in commands_in(DOCS / "cli.md"):
        result = run(command, shell_env(cluster))
        assert result.returncode == 0, result.stderr

``shell_env`` gives the environment a reader has after ``make up`` (``export KUBECONFIG=...``):
the control plane's own kubectl first on ``PATH``, then the virtualenv's ``sluicegate`` and
``kubectl-sluicegate``, so ``kubectl sluicegate`` goes through kubectl's plugin lookup.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from controlplane.launching import LocalCluster

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^(```+|~~~+)\s*([\w-]*)")


@dataclass(frozen=True, slots=True)
class DocCommand:
    text: str  # the command as the reader types it, continuation lines joined
    line: int  # where it starts in the document (1-based), for failure messages
    document: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: $ {self.text}"


def commands_in(path: Path, info: str = "console") -> list[DocCommand]:
    """Every ``$ `` command of the document's ``info`` blocks, in order."""
    out: list[DocCommand] = []
    fence = ""
    running = False
    pending: list[str] = []
    start = 0
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        opened = _FENCE.match(line)
        if not fence and opened:
            fence, running = opened.group(1), opened.group(2) == info
            continue
        closing = line.strip()
        if fence and len(closing) >= len(fence) and closing == fence[0] * len(closing):
            fence, running = "", False
            continue
        if not running:
            continue
        if pending:
            pending.append(line.strip())
        elif line.startswith("$ "):
            pending, start = [line[2:].strip()], number
        else:
            continue
        if pending[-1].endswith("\\"):
            pending[-1] = pending[-1][:-1].rstrip()
            continue
        out.append(DocCommand(" ".join(p for p in pending if p), start, path.name))
        pending = []
    return out


def shell_env(cluster: LocalCluster) -> dict[str, str]:
    """The reader's shell after ``make up``: KUBECONFIG set, the cluster's kubectl and the
    project's commands first on PATH."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([str(cluster.layout.bin), venv_bin, env.get("PATH", "")])
    env["KUBECONFIG"] = str(cluster.kubeconfig)
    return env


def run(command: DocCommand | str, env: dict[str, str], *, cwd: Path = ROOT,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a command through bash from the checkout's root, as the reader would."""
    text = command.text if isinstance(command, DocCommand) else command
    return subprocess.run(["bash", "-c", text], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
