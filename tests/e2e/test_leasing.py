"""Leader election against the real API server: one replica leads, a standby waits while the
leader renews, takes over once the leader stops renewing, and at its next try when the leader
releases the Lease."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from audit.background import Background
from controlplane.launching import LocalCluster
from kube.connecting import Connection
from kube.leasing import Elector, LeaseSettings
from kube.resources import LEASES
from tests.e2e.conftest import Kubectl

# Terms short enough for a quick test, long enough that the leader's renewals, each an API
# write on a busy machine, cannot fall 7 s behind by chance: the test decides when a leader
# stops renewing, not the machine. The bound below is for giving up, not a performance target.
TIMING = {"duration": 10.0, "renew_deadline": 7.0, "retry": 0.5}
WAIT_SECONDS = 60.0


async def until(holds: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while not holds():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"gave up waiting for {what}") from None


def test_a_standby_takes_the_lease_when_the_leader_stops_renewing_or_releases_it(
    cluster: LocalCluster, kubectl: Kubectl
) -> None:
    async def scenario() -> None:
        connection = await Connection.from_kubeconfig(cluster.kubeconfig, user_agent="e2e-leasing")
        electors = {
            name: Elector(connection, LeaseSettings(namespace=kubectl.namespace, name="e2e", identity=name,
                                                    **TIMING))
            for name in ("a", "b", "c")
        }
        a, b, c = electors["a"], electors["b"], electors["c"]
        tasks = {"a": asyncio.create_task(a.run())}
        try:
            await until(lambda: a.leading, "a to lead")
            tasks["b"] = asyncio.create_task(b.run())
            await until(lambda: b.holder == "a", "b to see a holding the lease")
            assert not b.leading
            tasks.pop("a").cancel()  # a stops renewing without a word, as a killed process does
            await until(lambda: b.leading, "b to take over")
            lease = await connection.get(LEASES.path("e2e", namespace=kubectl.namespace))
            assert lease["spec"]["holderIdentity"] == "b"
            assert lease["spec"]["leaseTransitions"] == 1
            tasks["c"] = asyncio.create_task(c.run())
            await until(lambda: c.holder == "b", "c to see b holding the lease")
            await b.release()
            tasks.pop("b").cancel()
            await until(lambda: c.leading, "c to take over the released lease")
            assert not a.leading and not b.leading
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            await connection.close()

    with Background("leasing") as loop:
        loop.run(scenario())
