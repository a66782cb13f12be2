"""The commands the documents in docs/ show, extracted so that tests run them exactly as written.

Two kinds of fenced block hold commands, and every other block (``yaml``, ``text``) is never run:

* ``console`` blocks show a session: each command after a ``$ `` prompt (a line ending in ``\\``
  goes on on the next line), followed by the output a reader should expect, which is not run.
  ``commands_in`` lists their commands in order (docs/cli.md).
* shell blocks (``sh``, ``bash``, ``shell``) are scripts a reader pastes whole, tagged with where
  they run: ```` ```sh install ```` on an empty cluster without Sluicegate, ```` ```sh helm ````
  on another empty cluster with helm on ``PATH`` (the Helm install, which must not meet the
  kustomize one), ```` ```sh cluster ```` on a cluster where Sluicegate runs, as ``make up``
  leaves it, ```` ```sh upgrade ```` on one where the previous release was installed, and
  ```` ```sh rollback ```` after its upgrade, ```` ```sh operators ```` on a cluster where
  Sluicegate runs beside the Kubeflow training operator and KubeRay (the operators' tests run
  those). ``scripts`` lists them (the guides); an untagged shell block is an error, since
  every command of a guide is run.

Blocks may sit inside list items; their indentation is removed, as a reader who copies them
gets them. ``shell_env`` gives the reader's shell after ``make up`` and ``run`` runs a command
or a script through bash from the checkout's root::

    for command in commands_in(DOCS / "cli.md"):
        result = run(command, shell_env(cluster))
        assert result.returncode == 0, result.stderr
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from controlplane.launching import LocalCluster

ROOT: Final = Path(__file__).resolve().parents[1]
GUIDES: Final = (ROOT / "docs" / "admin-guide.md", ROOT / "docs" / "user-guide.md")
WHERE: Final = frozenset({"install", "helm", "cluster", "upgrade", "rollback", "operators"})
SHELLS: Final = frozenset({"sh", "bash", "shell"})

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)[ \t]*(?P<lang>[\w-]*)(?P<tags>.*)$")


@dataclass(frozen=True, slots=True)
class Block:
    document: str
    line: int
    """Where the block's fence opens (1-based)."""
    lang: str
    where: str
    """The first tag after the language: ``install``, ``helm``, ``cluster`` or "" (untagged)."""
    text: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}"


@dataclass(frozen=True, slots=True)
class DocCommand:
    text: str
    """The command as the reader types it, continuation lines joined."""
    line: int
    document: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: $ {self.text}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order; a block closes at a fence of its own character at
    least as long as the one that opened it."""
    out: list[Block] = []
    opened: re.Match[str] | None = None
    body: list[str] = []
    start = 0
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if opened is None:
            opened = _FENCE.match(line)
            body, start = [], number
            continue
        fence, closing = opened["fence"], line.strip()
        if len(closing) >= len(fence) and closing == fence[0] * len(closing):
            indent = len(opened["indent"])
            text = "\n".join(b[indent:] if b[:indent].strip() == "" else b for b in body) + "\n"
            tags = opened["tags"].split()
            out.append(Block(path.name, start, opened["lang"], tags[0] if tags else "", text))
            opened = None
            continue
        body.append(line)
    return out


def commands_in(path: Path, info: str = "console") -> list[DocCommand]:
    """Every ``$ `` command of the document's ``info`` blocks, in order."""
    out: list[DocCommand] = []
    for block in blocks(path):
        if block.lang != info:
            continue
        pending: list[str] = []
        start = 0
        for offset, line in enumerate(block.text.splitlines(), start=block.line + 1):
            if pending:
                pending.append(line.strip())
            elif line.startswith("$ "):
                pending, start = [line[2:].strip()], offset
            else:
                continue
            if pending[-1].endswith("\\"):
                pending[-1] = pending[-1][:-1].rstrip()
                continue
            out.append(DocCommand(" ".join(p for p in pending if p), start, path.name))
            pending = []
    return out


def scripts(path: Path, where: str) -> list[Block]:
    """The shell blocks of ``path`` tagged to run ``where``, in order."""
    return [b for b in blocks(path) if b.lang in SHELLS and b.where == where]


def shell_env(cluster: LocalCluster, kubeconfig: Path | None = None) -> dict[str, str]:
    """The reader's shell after ``make up``: KUBECONFIG set, the cluster's kubectl and the
    project's commands (``sluicegate``, ``kubectl-sluicegate``) first on PATH."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([str(cluster.layout.bin), venv_bin, env.get("PATH", "")])
    env["KUBECONFIG"] = str(kubeconfig or cluster.kubeconfig)
    return env


def run(command: DocCommand | Block | str, env: dict[str, str], *, cwd: Path = ROOT,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a command, or a script with errexit and nounset, through bash, as the reader would."""
    text = command if isinstance(command, str) else command.text
    if isinstance(command, Block):
        text = "set -eu\n" + text
    return subprocess.run(["bash", "-c", text], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
