"""A replica whose tries for the Lease fail tells the controller's error counter each time, so
``sluicegate_api_errors_total{operation="lease"}`` shows an API server the replicas cannot
reach, not only a leader that is missing."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.metrics import ControllerMetrics
from kube.connecting import ApiError, Unreachable
from kube.leasing import Elector, LeaseSettings

SETTINGS = LeaseSettings(identity="replica-a", duration=0.5, renew_deadline=0.2, retry=0.01)


class _Failing:
    """A connection whose every request fails as ``error`` says (or never answers)."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.requests = 0

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        self.requests += 1
        if self.error is None:
            await asyncio.sleep(10)  # no answer: the try's own deadline ends it
        raise self.error if self.error is not None else AssertionError("unreachable")


async def _campaign(connection: _Failing, metrics: ControllerMetrics, tries: int) -> Elector:
    elector = Elector(connection, SETTINGS, on_error=metrics.failed)  # type: ignore[arg-type]
    task = asyncio.create_task(elector.run())
    for _ in range(500):
        await asyncio.sleep(0.01)
        if connection.requests >= tries and _lease_errors(metrics) >= tries:
            break
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return elector


def _lease_errors(metrics: ControllerMetrics) -> float:
    value = metrics.registry.get_sample_value("sluicegate_api_errors_total", {"operation": "lease"})
    return 0.0 if value is None else value


async def test_every_failed_try_for_the_lease_is_counted() -> None:
    metrics = ControllerMetrics()
    elector = await _campaign(_Failing(Unreachable("connection refused")), metrics, 3)
    assert _lease_errors(metrics) >= 3
    assert not elector.leading


async def test_a_try_that_times_out_and_a_refused_one_are_counted_too() -> None:
    metrics = ControllerMetrics()
    await _campaign(_Failing(None), metrics, 2)
    assert _lease_errors(metrics) >= 2
    refused = ControllerMetrics()
    await _campaign(_Failing(ApiError(403, "Forbidden", "leases is forbidden")), refused, 2)
    assert _lease_errors(refused) >= 2
