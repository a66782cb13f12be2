"""Leader election on a coordination.k8s.io Lease, so that only one replica dispatches.

The algorithm is client-go's. A replica holds the Lease while it renews it every ``retry``
seconds; it counts as leader only while its last renewal is younger than ``renew_deadline``,
so a leader cut off from the API server stops writing before anyone else may start. A standby
takes the Lease once it has seen the record unchanged for the Lease's own
``leaseDurationSeconds``, measured on the standby's clock from the moment it saw the record
change (never from the holder's timestamps, so clock skew between machines does not matter).
Every write carries the ``resourceVersion`` it read, so two standbys cannot both take over:
the second gets 409 Conflict. A replica that stops cleanly releases the Lease (empty holder,
one-second duration) and the standby takes over at its next try.

    duration 15 s  >  renew_deadline 10 s  >  retry 2 s      (client-go's defaults)

The gap between the deadline and the duration is the fence: a leader that could not renew has
stopped for ``duration - renew_deadline`` seconds before a standby may start.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final

from kube.connecting import JSON, ApiError, Connection, KubeError
from kube.resources import LEASES
from kube.writing import micro_time

log = logging.getLogger(__name__)

# A standby retries a little later than the holder renews, spread out, as client-go's jitter does.
JITTER: Final = 0.2


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    namespace: str = "sluicegate-system"
    name: str = "sluicegate-controller"
    identity: str = ""
    duration: float = 15.0
    renew_deadline: float = 10.0
    retry: float = 2.0

    def check(self) -> str | None:
        """Why these settings cannot work, or None."""
        if not self.identity:
            return "the leader-election identity is empty"
        if not 0 < self.retry < self.renew_deadline < self.duration:
            return (f"need 0 < retry ({self.retry}) < renew deadline ({self.renew_deadline}) "
                    f"< lease duration ({self.duration})")
        return None


class _Try(Enum):
    HELD = "held"  # this replica holds the Lease now
    OTHER = "other"  # another replica holds it, and its lease has not run out
    FAILED = "failed"  # no answer, or a race lost: nothing learnt


Listener = Callable[[bool], None]


class Elector:
    """Campaigns for the Lease until cancelled; ``leading`` says whether this replica may write."""

    def __init__(
        self,
        connection: Connection,
        settings: LeaseSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        on_error: Callable[[str, int], None] | None = None,
    ) -> None:
        """``on_error("lease", status)`` is told of every try that failed (the API server's
        status, 0 when it did not answer in time), for the controller's error counter."""
        problem = settings.check()
        if problem:
            raise ValueError(f"leader election: {problem}")
        self.connection = connection
        self.settings = settings
        self._clock = clock
        self._wall = wall
        self._on_error = on_error
        self._path = LEASES.path(settings.name, namespace=settings.namespace)
        self._record: JSON | None = None  # the Lease as this replica last wrote it
        self._observed_version = ""
        self._observed_at = 0.0
        self._renewed = -math.inf
        self._leading = False
        self._listeners: list[Listener] = []
        self.holder = ""
        """The holder as last seen (this replica's identity while it leads)."""
        self.terms = 0
        """How many times this replica became leader."""

    @property
    def identity(self) -> str:
        return self.settings.identity

    @property
    def leading(self) -> bool:
        """Holds the Lease and renewed it within the renew deadline."""
        return self._leading and self._clock() - self._renewed < self.settings.renew_deadline

    def on_change(self, listener: Listener) -> None:
        """Call ``listener(leading)`` whenever this replica starts or stops leading."""
        self._listeners.append(listener)

    # --- the campaign ---------------------------------------------------------------------

    async def run(self) -> None:
        s = self.settings
        try:
            while True:
                outcome = _Try.FAILED
                # A renewal may take until the renew deadline (a busy API server is slow, not
                # gone); a standby's try as long as the deadline too.
                budget = s.renew_deadline
                if self._leading:
                    budget = max(s.retry, s.renew_deadline - (self._clock() - self._renewed))
                try:
                    async with asyncio.timeout(budget):
                        outcome = await self._try()
                except (KubeError, TimeoutError) as e:
                    log.warning("lease %s/%s: %s", s.namespace, s.name, str(e) or "no answer in time")
                    if self._on_error is not None:
                        self._on_error("lease", e.status if isinstance(e, ApiError) else 0)
                now = self._clock()
                if outcome is _Try.HELD:
                    self._renewed = now
                    self._set(True)
                elif self._leading and (outcome is _Try.OTHER or now - self._renewed >= s.renew_deadline):
                    self._set(False)
                pause = s.retry if self._leading else s.retry * random.uniform(1.0, 1.0 + JITTER)
                await asyncio.sleep(pause)
        finally:
            self._set(False)

    def _set(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        s = self.settings
        if leading:
            self.terms += 1
            log.info("became the leader (lease %s/%s, identity %s)", s.namespace, s.name, s.identity)
        else:
            self._record = None
            log.warning("stopped leading (lease %s/%s, identity %s)", s.namespace, s.name, s.identity)
        for listener in list(self._listeners):
            try:
                listener(leading)
            except Exception:
                log.exception("a leadership listener failed")

    def _observe(self, lease: JSON) -> tuple[str, float]:
        """Note the record; return its holder and lease duration."""
        meta = lease.get("metadata") or {}
        version = str(meta.get("resourceVersion") or "")
        if version != self._observed_version:
            self._observed_version = version
            self._observed_at = self._clock()
        spec = lease.get("spec") or {}
        self.holder = str(spec.get("holderIdentity") or "")
        duration = spec.get("leaseDurationSeconds")
        return self.holder, float(duration) if isinstance(duration, int | float) else self.settings.duration

    async def _try(self) -> _Try:
        me = self.identity
        lease = self._record if self._leading else None
        if lease is None:
            try:
                lease = await self.connection.request("GET", self._path, timeout=self.settings.renew_deadline)
            except ApiError as e:
                if not e.not_found:
                    raise
                return await self._create()
            holder, duration = self._observe(lease)
            if holder and holder != me and self._clock() < self._observed_at + duration:
                return _Try.OTHER
        spec = lease.get("spec") or {}
        previous = str(spec.get("holderIdentity") or "")
        now = micro_time(self._wall())
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        lease = {
            **lease,
            "spec": {
                "holderIdentity": me,
                "leaseDurationSeconds": math.ceil(self.settings.duration),
                "acquireTime": spec.get("acquireTime") if previous == me else now,
                "renewTime": now,
                "leaseTransitions": transitions if previous in (me, "") else transitions + 1,
            },
        }
        try:
            written = await self.connection.request("PUT", self._path, body=lease,
                                                    timeout=self.settings.renew_deadline)
        except ApiError as e:
            if e.conflict:  # someone wrote the Lease since we read it: read again next time
                self._record = None
                return _Try.FAILED
            raise
        self._record = written
        self._observe(written)
        return _Try.HELD

    async def _create(self) -> _Try:
        s = self.settings
        now = micro_time(self._wall())
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": s.name, "namespace": s.namespace},
            "spec": {"holderIdentity": s.identity, "leaseDurationSeconds": math.ceil(s.duration),
                     "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
        }
        try:
            written = await self.connection.request("POST", LEASES.path(namespace=s.namespace), body=body)
        except ApiError as e:
            if e.conflict:  # another replica created it first
                return _Try.FAILED
            raise
        self._record = written
        self._observe(written)
        return _Try.HELD

    async def release(self) -> None:
        """Give the Lease up (if held) so that a standby takes over at once; stop leading."""
        record = self._record if self.leading else None
        self._set(False)
        if record is None:
            return
        spec = record.get("spec") or {}
        now = micro_time(self._wall())
        body = {**record, "spec": {"leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                                   "leaseTransitions": spec.get("leaseTransitions", 0)}}
        try:
            await self.connection.request("PUT", self._path, body=body, timeout=self.settings.retry * 2)
            log.info("released the lease %s/%s", self.settings.namespace, self.settings.name)
        except KubeError as e:
            log.warning("could not release the lease %s/%s: %s", self.settings.namespace,
                        self.settings.name, e)
