"""promtool, of the Prometheus the suite builds, parses the monitoring component's rules and
evaluates every alert against the test file named after it (``<alert>.yaml`` here): input
series that make it fire and series that must not.

The rule file is made from the PrometheusRule by ``controlplane.rulefiles.rule_file``, the
function the local Prometheus loads its rules with. The test files state labels, not the
annotations' prose (promtool would want every word of it again): the rules given to
``promtool test rules`` leave annotations out, and ``promtool check rules`` parses their
templates on the full file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane import building, rulefiles

HERE = Path(__file__).resolve().parent
RULES_NAME = "sluicegate.rules.yaml"  # what every test file's rule_files names
RULES = rulefiles.rule_file(rulefiles.read())
ALERTS = sorted(rulefiles.alerts(RULES))


@pytest.fixture(scope="module")
def promtool() -> Path:
    return building.ensure_prometheus() / "promtool"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test files beside the rule file they name, without annotations."""
    directory = tmp_path_factory.mktemp("alerts")
    bare = rulefiles.rule_file(rulefiles.read())
    for rule in rulefiles.alerts(bare).values():
        rule.pop("annotations", None)
    (directory / RULES_NAME).write_text(yaml.safe_dump(bare, sort_keys=False))
    for alert in ALERTS:
        shutil.copy(HERE / f"{alert}.yaml", directory)
    return directory


def _run(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_accepts_every_rule_and_template(promtool: Path, tmp_path: Path) -> None:
    (tmp_path / RULES_NAME).write_text(yaml.safe_dump(RULES, sort_keys=False))
    checked = _run(promtool, "check", "rules", RULES_NAME, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout, checked.stdout


def test_every_alert_has_its_test_file_with_a_firing_and_a_quiet_case() -> None:
    assert len(ALERTS) == 14
    files = {p.stem for p in HERE.glob("Sluicegate*.yaml")}
    assert files == set(ALERTS), f"test files without an alert: {files - set(ALERTS)}"
    for alert in ALERTS:
        cases = _cases(HERE / f"{alert}.yaml", alert)
        assert any(c["exp_alerts"] for c in cases), f"{alert}: no case in which it fires"
        assert any(not c["exp_alerts"] for c in cases), f"{alert}: no case in which it stays quiet"


@pytest.mark.parametrize("alert", ALERTS)
def test_promtool_evaluates_the_alert_as_its_file_says(alert: str, promtool: Path, workdir: Path) -> None:
    tested = _run(promtool, "test", "rules", f"{alert}.yaml", cwd=workdir)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout, tested.stdout


def _cases(path: Path, alert: str) -> list[dict[str, Any]]:
    document = yaml.safe_load(path.read_text())
    assert document["rule_files"] == [RULES_NAME], path.name
    return [case for test in document["tests"] for case in test.get("alert_rule_test", [])
            if case["alertname"] == alert]
