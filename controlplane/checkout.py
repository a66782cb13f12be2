"""The checkout the development harness runs from.

The wheel ships the product alone; the harness (``audit``, ``benchmarks``, ``controlplane``,
``demo``, listed under ``tool.sluicegate`` in pyproject.toml) is found where it lies, in the
checkout: by a process that starts in its root (``make``, pytest, ``python -m controlplane``),
or by one given the checkout on its ``PYTHONPATH`` (``harness_environment``). See
docs/decisions/0034-the-product-and-its-harness.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
"""The root of the checkout: where pyproject.toml and the harness's packages are."""


def harness_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment by default) with the checkout first on
    ``PYTHONPATH``: for a process that runs a module of the harness (``python -m
    audit.ungating``), whatever its working directory."""
    environment = dict(os.environ if base is None else base)
    earlier = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), earlier] if earlier else [str(ROOT)])
    return environment
