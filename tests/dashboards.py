"""Reading the shipped Grafana dashboard for tests: its panels and the series their queries use."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from tests.manifest_files import MANIFESTS

DASHBOARD = MANIFESTS / "components" / "monitoring" / "dashboard.json"
SERIES = re.compile(r"\bsluicegate_[a-z0-9_]+")


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that queries (rows and the panels folded into them too)."""
    for panel in board.get("panels", []):
        yield from (p for p in panel.get("panels", []) if p.get("type") != "row")
        if panel.get("type") != "row":
            yield panel


def queries(board: dict[str, Any]) -> list[str]:
    """Every PromQL query: the panels' targets and the template variables'."""
    out = [t["expr"] for p in panels(board) for t in p.get("targets", [])]
    for variable in board.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            out.append(query.get("query", ""))
        elif variable.get("type") == "query" and isinstance(query, str):
            out.append(query)
    return out


def series(board: dict[str, Any]) -> set[str]:
    return {name for q in queries(board) for name in SERIES.findall(q)}
