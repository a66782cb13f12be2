"""The benchmark harness on the real control plane, small enough for every test run: each system
under test drains a dozen GPU pods through two queues, and the harness's own correctness checks
(every pod finished, no limit exceeded, the system itself gated and released every pod) hold.
A system that breaks its limits is caught: the run fails, naming the limit."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pytest

from audit.checking import Cap, Limits
from benchmarks.bare import Bare
from benchmarks.kueue import shipped
from benchmarks.results import Run
from benchmarks.running import run
from benchmarks.scenarios import Scenario
from benchmarks.sluicegate import SluicegateSystem
from benchmarks.systems import Setup, System
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster

# The session cluster has 4 nodes x 8 GPUs; two queues of at most 2 running each.
SMOKE = Scenario(name="smoke", pods=12, queues=2, nodes=4, max_running=2, teams=2, seconds=1.0)


# The same load, each pod running 30 s: a system allowed past the cap is certainly seen past it
# (five of its releases within 30 s), not only when the machine releases faster than pods end.
OVERRUN = dataclasses.replace(SMOKE, seconds=30.0)


def measure(cluster: LocalCluster, system: System, lines: list[str], scenario: Scenario = SMOKE) -> Run:
    started = time.monotonic()

    def progress(line: str) -> None:
        lines.append(f"{time.monotonic() - started:5.1f}s {line}")

    return run(cluster, system, scenario, command="tests/e2e/test_benchmarks.py", progress=progress)


def assert_managed_within_limits(result: Run, lines: list[str]) -> None:
    assert result.failures == (), "\n".join(lines)
    assert result.creation_to_release.count == SMOKE.pods, "every pod was created gated and released"
    assert 0 < result.peak_running <= SMOKE.cap
    if result.system != "bare":  # the bare ungater knows no queues, only the total
        assert result.peak_queue_running <= SMOKE.max_running
    assert result.requests >= SMOKE.pods, "the API server saw the system's own requests"
    assert result.drain_seconds >= SMOKE.floor_seconds
    assert result.processes, "the system's processes were measured"
    assert all(u.peak_rss_mib > 0 for u in result.processes.values())


@pytest.mark.parametrize("make", [Bare, shipped], ids=["bare", "kueue"])
def test_a_peer_drains_the_smoke_load_through_its_own_gates_within_the_limits(
    cluster: LocalCluster, make: Callable[[], System]
) -> None:
    lines: list[str] = []
    result = measure(cluster, make(), lines)
    assert_managed_within_limits(result, lines)


def test_sluicegate_drains_the_smoke_load_through_its_gate_within_each_queues_limit(
    cluster: LocalCluster, sluicegate: LocalSluicegate
) -> None:
    lines: list[str] = []
    result = measure(cluster, SluicegateSystem(running=sluicegate), lines)
    assert_managed_within_limits(result, lines)
    assert set(result.processes) >= {"webhook", "controller"}
    assert sluicegate.dead() == []


class Overreaching(Bare):
    """The bare ungater, allowed twice the total it is judged against."""

    key = "overreaching"

    def configure(self, setup: Setup) -> None:
        doubled = Scenario(name=setup.scenario.name, pods=setup.scenario.pods, queues=setup.scenario.queues,
                           nodes=setup.scenario.nodes, max_running=setup.scenario.max_running * 2)
        super().configure(Setup(doubled, setup.load, setup.namespaces))

    def limits(self, setup: Setup) -> Limits:
        return Limits(cluster=Cap(running=setup.scenario.cap))


def test_a_system_that_releases_beyond_its_limit_fails_the_run(cluster: LocalCluster) -> None:
    lines: list[str] = []
    result = measure(cluster, Overreaching(), lines, OVERRUN)

    assert not result.ok
    assert any("beyond the configured limits" in f and f"limit {SMOKE.cap}" in f for f in result.failures), \
        result.failures
    assert result.peak_running > SMOKE.cap
