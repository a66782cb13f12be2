"""Test-suite-wide rules: a skipped test fails the run; under CI, hypothesis is derandomized;
nowhere does hypothesis judge a test by its speed.

Every component a test needs is built or started by the suite itself, so a skip can only mean
something is missing; CI must see that as a failure, not as a quiet pass. Property tests
explore fresh examples on every local run; in CI (``CI`` set) they run a fixed set, so a
submission is judged on the same examples every time it is run.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# No deadline and no too_slow health check: both measure time, and a loaded machine (CI shares
# two cores with a control plane) would fail a test for its speed. A test's own settings that
# name other health checks must list too_slow again.
QUIET = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, database=None, **QUIET)
settings.register_profile("dev", **QUIET)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

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
