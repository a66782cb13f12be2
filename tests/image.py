"""What the image ships: the product's packages as pyproject.toml lists them, the harness beside
them, the Containerfile and .dockerignore written from that list, and the build context a
Containerfile really sees.

``python -m tests.image`` (``make containerfile``) writes the Containerfile and .dockerignore;
tests/unit/test_packaging.py fails when the checked-in files differ from what it writes, and
tests/e2e/test_image.py builds the wheel from ``build_context`` and starts the servers from it.
See docs/decisions/0034-the-product-and-its-harness.md.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
CONTAINERFILE = ROOT / "Containerfile"
IGNORE_FILES = (".containerignore", ".dockerignore")
"""Where podman looks for the context's ignore patterns, first found wins; docker reads the second."""
METADATA = ("pyproject.toml", "README.md")
"""What the wheel's build reads besides the packages: its configuration and its long description."""


def pyproject() -> dict[str, Any]:
    with PYPROJECT.open("rb") as file:
        return tomllib.load(file)


def product() -> tuple[str, ...]:
    """The product's top-level packages, in pyproject.toml's order: the names that
    ``tool.setuptools.packages.find`` includes (each also with ``.*``, its subpackages)."""
    included: list[str] = pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    return tuple(name for name in included if not name.endswith(".*"))


def harness() -> tuple[str, ...]:
    """The development harness's top-level packages (``tool.sluicegate.harness``)."""
    return tuple(pyproject()["tool"]["sluicegate"]["harness"])


# --- writing the Containerfile and .dockerignore --------------------------------------------

WRITTEN_BY = """\
# Written by `make containerfile` (python -m tests.image) from the product's packages in
# pyproject.toml (tool.setuptools.packages.find); change that list or tests/image.py, not this file.
"""

CONTAINERFILE_HEAD = """\
# Sluicegate's image: one image, three processes (the workloads in manifests/default choose the
# command):
#   python -m webhook     the admission webhook
#   python -m controller  the gate controller (it serves the scheduler extender too)
#   python -m recorder    the recorder of the run records
# Build: podman build -t sluicegate -f Containerfile .   (or docker build -f Containerfile .)

# The wheels of Sluicegate and its dependencies are built apart, so no compiler, pip cache or
# source tree reaches the final image. The build stage sees the product alone: pyproject.toml,
# README.md and the product's packages (.dockerignore keeps everything else out of the context).
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
"""

CONTAINERFILE_TAIL = """\
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \\
    PYTHONDONTWRITEBYTECODE=1 \\
    PIP_NO_CACHE_DIR=1 \\
    PIP_DISABLE_PIP_VERSION_CHECK=1
# A fixed numeric user, so Kubernetes can check runAsNonRoot without knowing the image; the
# Deployments in manifests/default run as the same uid.
RUN groupadd --system --gid 10001 sluicegate \\
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \\
      --shell /usr/sbin/nologin sluicegate
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-index --find-links /tmp/wheels sluicegate && rm -rf /tmp/wheels
WORKDIR /
USER 10001:10001
EXPOSE 8443 8444 8080
CMD ["python", "-m", "webhook"]
"""


def containerfile(packages: tuple[str, ...]) -> str:
    """The Containerfile that builds the wheel of ``packages`` (the product)."""
    copies = "".join(f"COPY {name}/ {name}/\n" for name in packages)
    return f"{WRITTEN_BY}\n{CONTAINERFILE_HEAD}COPY {' '.join(METADATA)} ./\n{copies}{CONTAINERFILE_TAIL}"


def dockerignore(packages: tuple[str, ...]) -> str:
    """The context's ignore patterns: everything but what the Containerfile copies, and no
    bytecode within it (read by both docker and podman)."""
    kept = "".join(f"!{name}\n" for name in (*METADATA, *(f"{p}/" for p in packages)))
    return (f"{WRITTEN_BY}# The build context is exactly what the Containerfile copies.\n"
            f"*\n{kept}**/__pycache__/\n**/*.pyc\n")


# --- reading a Containerfile's build context ------------------------------------------------


class UnreadableContainerfile(ValueError):
    """A Containerfile instruction this reader does not understand."""


@dataclass(frozen=True, slots=True)
class BuildStage:
    """The first stage of a Containerfile, as far as the build context goes."""

    workdir: str  # its last WORKDIR, absolute: where it builds the wheel
    copies: tuple[tuple[tuple[str, ...], str], ...]
    """Its ``COPY`` instructions from the context: each one's sources and its destination, made
    absolute against the ``WORKDIR`` before it (a trailing ``/`` kept)."""


def build_stage(text: str) -> BuildStage:
    """The first stage of the Containerfile ``text``; ``UnreadableContainerfile`` for an ``ADD``
    or a ``COPY`` with flags (other than ``--from``), which this reader does not follow."""
    workdir, found, stages = "/", [], 0
    for line in _instructions(text):
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            stages += 1
            if stages > 1:
                break
        elif word == "WORKDIR":
            workdir = _joined(workdir, rest.strip())
        elif word in ("COPY", "ADD"):
            parts = rest.split()
            if any(part.startswith("--from") for part in parts):
                continue
            if word == "ADD" or any(part.startswith("--") for part in parts) or len(parts) < 2:
                raise UnreadableContainerfile(f"cannot read {line!r}")
            *sources, destination = parts
            slash = "/" if destination.endswith("/") else ""
            found.append((tuple(sources), _joined(workdir, destination) + slash))
    return BuildStage(workdir, tuple(found))


def build_context(containerfile_path: Path, into: Path, source: Path = ROOT) -> Path:
    """Lay out in ``into`` what the build stage of ``containerfile_path`` holds after its
    ``COPY`` instructions, from the context ``source`` filtered by its ignore file as podman
    and docker filter it; ``into`` stands for the stage's root. Returns where the stage's
    ``WORKDIR`` lies in it."""
    ignored = _ignore_patterns(source)
    stage = build_stage(containerfile_path.read_text())
    for sources, destination in stage.copies:
        for name in sources:
            relative = _joined("/", name).lstrip("/")  # "" for the whole context
            origin = source / relative
            if (relative and _excluded(relative, ignored)) or not origin.exists():
                raise FileNotFoundError(f"{containerfile_path.name} copies {name}, which is not in the "
                                        f"build context (missing, or excluded by the ignore file)")
            target = into / destination.lstrip("/")
            if origin.is_dir():
                _copy_tree(origin, target, relative, ignored)
            else:
                place = target / origin.name if destination.endswith("/") else target
                place.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, place)
    return into / stage.workdir.lstrip("/")


def _instructions(text: str) -> list[str]:
    """The instructions of a Containerfile, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [line.strip() for line in joined.splitlines() if line.strip()]


def _joined(workdir: str, path: str) -> str:
    joined = path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"
    return "/" + "/".join(part for part in joined.split("/") if part not in ("", "."))


Patterns = list[tuple[bool, re.Pattern[str]]]
"""Ignore patterns in their order, each ``(excludes, pattern)``."""


def _ignore_patterns(source: Path) -> Patterns:
    """The context's ignore patterns."""
    for name in IGNORE_FILES:
        path = source / name
        if path.exists():
            lines = [line.strip() for line in path.read_text().splitlines()]
            return [_pattern(line) for line in lines if line and not line.startswith("#")]
    return []


def _pattern(line: str) -> tuple[bool, re.Pattern[str]]:
    excludes = not line.startswith("!")
    glob = line.lstrip("!").strip("/")
    regex = "".join(
        ".*" if part == "**" else "[^/]*" if part == "*" else "[^/]" if part == "?" else re.escape(part)
        for part in re.split(r"(\*\*|\*|\?)", glob)
    )
    return excludes, re.compile(regex.replace(".*/", "(.*/)?"))


def _excluded(relative: str, patterns: Patterns) -> bool:
    """Whether the context leaves out ``relative``: the last pattern that matches it or one of
    the directories above it decides, as docker's and podman's do."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for excludes, pattern in patterns:
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            verdict = excludes
    return verdict


def _copy_tree(origin: Path, target: Path, relative: str, patterns: Patterns) -> None:
    for path in sorted(origin.rglob("*")):
        inside = "/".join(filter(None, [relative, path.relative_to(origin).as_posix()]))
        if path.is_dir() or _excluded(inside, patterns):
            continue
        place = target / path.relative_to(origin)
        place.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, place)


def main() -> None:
    packages = product()
    CONTAINERFILE.write_text(containerfile(packages))
    (ROOT / ".dockerignore").write_text(dockerignore(packages))
    print(f"wrote {CONTAINERFILE.name} and .dockerignore for {', '.join(packages)}")


if __name__ == "__main__":
    main()
