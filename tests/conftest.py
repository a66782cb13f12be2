"""Test-suite-wide rules: a skipped test fails the run.

Every component a test needs is built or started by the suite itself, so a skip can only mean
something is missing; CI must see that as a failure, not as a quiet pass.
"""

from __future__ import annotations

import pytest

_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped:
        terminalreporter.write_line(
            f"{len(_skipped)} test(s) skipped; a skip fails this suite: " + ", ".join(_skipped[:10]),
            red=True,
        )
