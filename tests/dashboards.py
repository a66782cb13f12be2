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


# The values Grafana gives the dashboard's variables by default: every queue, the GPU resource,
# and a rate window that holds several of a 1-second scrape's samples.
DEFAULTS = {"$queue": ".*", "$resource": "nvidia.com/gpu", "$__rate_interval": "1m"}


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel, with the variables as Grafana
    fills them by default."""
    out = []
    for panel in panels(board):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in DEFAULTS.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"{panel['title']}: a variable without a default here: {expr}"
            out.append((panel["title"], expr))
    return out
