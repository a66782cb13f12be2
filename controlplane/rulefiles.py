"""The monitoring component's PrometheusRule as a plain Prometheus rule file, and the same rules
with every wait shortened for tests.

``manifests/components/monitoring/prometheusrule.yaml`` is the one source of the alerts. A
Prometheus without the Operator (``make up MONITORING=1``, the promtool tests, the e2e with a
real Prometheus, a Helm chart's generator) loads its ``spec.groups`` as a rule file:
``rule_file`` makes one, ``shortened`` scales its waits. Both are pure (no files, no clock), so
any generator can call them on a document it has read; ``read`` is the one reader of the file.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

MONITORING: Final = Path(__file__).resolve().parents[1] / "manifests" / "components" / "monitoring"
PROMETHEUS_RULE: Final = MONITORING / "prometheusrule.yaml"
DASHBOARD: Final = MONITORING / "dashboard.json"

_DURATION: Final = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
# A threshold on a gauge counted in seconds, as the rules write it: ``..._seconds) > 3600``,
# also with a selector and a range (``..._seconds{reason="x"}[2m])) > 3600``).
_SECONDS_THRESHOLD: Final = re.compile(r"(_seconds(?:\{[^}]*\})?(?:\[[^\]]*\])?\)+\s*>\s*)(\d+(?:\.\d+)?)")


class RuleFileError(ValueError):
    """The document is not a PrometheusRule with groups, or a duration does not parse."""


def read(path: Path = PROMETHEUS_RULE) -> dict[str, Any]:
    """The PrometheusRule document in ``path``."""
    document = yaml.safe_load(path.read_text())
    if not isinstance(document, dict):
        raise RuleFileError(f"{path} does not hold one YAML mapping")
    return document


def rule_file(prometheus_rule: Mapping[str, Any]) -> dict[str, Any]:
    """The rule file Prometheus loads (``rule_files:``) for a PrometheusRule: its groups."""
    if prometheus_rule.get("kind") != "PrometheusRule":
        raise RuleFileError(f"expected a PrometheusRule, got kind {prometheus_rule.get('kind')!r}")
    groups = (prometheus_rule.get("spec") or {}).get("groups")
    if not isinstance(groups, list) or not groups:
        raise RuleFileError("the PrometheusRule has no spec.groups")
    return {"groups": copy.deepcopy(groups)}


def shortened(rules: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """The rule file with every rule's ``for:`` and every threshold on a gauge in seconds
    (``..._seconds) > N``) multiplied by ``factor`` (0 < factor <= 1); nothing else changes,
    so a test that waits minutes of real time instead of hours judges the same expressions."""
    if not 0 < factor <= 1:
        raise RuleFileError(f"factor must be in (0, 1], got {factor}")
    out = copy.deepcopy(dict(rules))
    for group in out["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = duration(seconds(rule["for"]) * factor)
            rule["expr"] = _SECONDS_THRESHOLD.sub(
                lambda m: m.group(1) + _number(float(m.group(2)) * factor), rule["expr"])
    return out


def alerts(rules: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every alerting rule of a rule file, by alert name."""
    return {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}


def seconds(text: str) -> float:
    """A Prometheus duration (``10m``, ``1h30m``, ``2500ms``) in seconds."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise RuleFileError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)


def duration(value: float) -> str:
    """Seconds as a Prometheus duration, to the millisecond (at least ``1ms``)."""
    return f"{max(1, round(value * 1000))}ms"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"
