"""The runnable commands of the guides in docs/: fenced shell blocks, tagged with where they run.

A block opens with ```` ```sh install ```` (run on an empty cluster, without Sluicegate: the
install) or ```` ```sh cluster ```` (run on a cluster where Sluicegate runs, as ``make up``
leaves it). Blocks may sit inside list items; their indentation is removed, as a reader who
copies them gets them. Any other shell block is an error: every command in a guide is run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
GUIDES: Final = (ROOT / "docs" / "admin-guide.md", ROOT / "docs" / "user-guide.md")
WHERE: Final = frozenset({"install", "cluster"})
SHELLS: Final = frozenset({"sh", "bash", "shell", "console"})

_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[A-Za-z]*)(?P<tags>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Block:
    guide: str
    line: int
    lang: str
    where: str
    """``install``, ``cluster`` or "" (untagged)."""
    text: str

    def __str__(self) -> str:
        return f"{self.guide}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order."""
    text = path.read_text()
    out = []
    for found in _FENCE.finditer(text):
        indent = len(found["indent"])
        body = found["body"].splitlines()
        lines = [line[indent:] if line[:indent].strip() == "" else line for line in body]
        tags = found["tags"].split()
        out.append(Block(path.name, text.count("\n", 0, found.start()) + 1, found["lang"],
                         tags[0] if tags else "", "\n".join(lines) + "\n"))
    return out


def commands(path: Path, where: str) -> list[Block]:
    return [b for b in blocks(path) if b.lang in SHELLS and b.where == where]
