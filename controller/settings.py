"""The controller's settings, from flags and their environment variables (``process.flags``):
``python -m controller --help`` lists them. The leader-election identity defaults to ``POD_NAME``
(the Deployment sets it from the pod's name), else ``<hostname>_<pid>``.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kube.leasing import LeaseSettings
from process.settings import Flags, ServerSettings, server_settings


@dataclass(frozen=True, slots=True)
class Settings(ServerSettings):
    port: int = 8444  # the scheduler extender, over TLS (kube-scheduler calls it)
    extender: bool = True
    # The visibility API (visibility.sluicegate.dev), over TLS with the same certificate: the API
    # server's aggregation layer calls it through the Service sluicegate-controller.
    visibility: bool = True
    visibility_host: str = "0.0.0.0"
    visibility_port: int = 8445
    visibility_listen_fd: int | None = None
    # The webhook's certificate (it names the Service sluicegate-visibility; the APIService trusts
    # its CA), not the extender's.
    visibility_tls_cert: str = "/etc/sluicegate/visibility-tls/tls.crt"
    visibility_tls_key: str = "/etc/sluicegate/visibility-tls/tls.key"
    visibility_seconds: float = 2.0  # a read sees a board at most this old
    # Start estimates (controller.estimates): at most this share of one core, from the holds of
    # the recorder's records (read through the API server from ``records_namespace`` every
    # ``records_seconds``) and of the pods seen to end.
    estimate_cpu_share: float = 0.1
    records_namespace: str = "sluicegate-system"
    records_seconds: float = 300.0
    lease: LeaseSettings = field(default_factory=lambda: LeaseSettings(identity="sluicegate"))
    # The dispatch loop. A burst of events makes one cycle: the first opens a quiet period of
    # ``debounce_seconds`` that each further event extends, up to ``longest_seconds``. A cycle
    # also runs every ``resync_seconds`` (ages, starvation deadlines, anything missed).
    debounce_seconds: float = 0.005
    longest_seconds: float = 0.05
    resync_seconds: float = 10.0
    # Writes: gate removals at most ``release_concurrency`` at once (retried with backoff for up
    # to ``give_up_seconds``); conditions and events ``write_concurrency`` at once.
    release_concurrency: int = 16
    give_up_seconds: float = 60.0
    write_concurrency: int = 4
    # A pending pod is explained once it has waited ``explain_after_seconds``; a released pod
    # that cannot be placed once it has been unplaceable ``unplaceable_after_seconds``, with a
    # Warning event at most once per ``event_interval_seconds``.
    explain_after_seconds: float = 1.0
    unplaceable_after_seconds: float = 1.0
    # A released pod that no scheduler has looked at for ``unscheduled_after_seconds`` (its
    # PodScheduled still says SchedulingGated: its spec.schedulerName names no running
    # scheduler, or that scheduler is down) counts as unplaceable. kube-scheduler looks at a
    # released pod within seconds even when busy; a minute leaves it room.
    unscheduled_after_seconds: float = 60.0
    event_interval_seconds: float = 300.0
    # Queue, Team and Policy status: written at most this often, and only what changed; at most
    # ``status_writes`` objects a round, those written longest ago first.
    status_seconds: float = 2.0
    status_writes: int = 20


def default_identity(environ: Mapping[str, str]) -> str:
    return environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


def parse(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    d = Settings()
    lease = LeaseSettings()
    flags = Flags("python -m controller", "Sluicegate's gate controller and its extender.", environ)
    add = flags.add
    flags.server("the scheduler extender", d, drained="serving the extender", awaited="writes in flight")
    flags.switch("extender", d.extender, "serve the scheduler extender")
    flags.switch("visibility", d.visibility, "serve the visibility API (visibility.sluicegate.dev)")
    add("visibility-host", d.visibility_host, "address to serve the visibility API on (TLS)")
    add("visibility-port", d.visibility_port, "port of the visibility API", int)
    add("visibility-listen-fd", d.visibility_listen_fd,
        "serve the visibility API on this inherited listening socket instead", int)
    add("visibility-tls-cert", d.visibility_tls_cert, "the visibility API's serving certificate (PEM)")
    add("visibility-tls-key", d.visibility_tls_key, "the visibility API's serving key (PEM)")
    add("visibility-seconds", d.visibility_seconds, "rebuild the visibility API's answers at most this often",
        float)
    add("estimate-cpu-share", d.estimate_cpu_share,
        "start estimates take at most this share of one core (0 turns them off)", float)
    add("records-namespace", d.records_namespace, "the recorder's namespace (its records.sluicegate.dev)")
    add("records-seconds", d.records_seconds, "read the recorder's records again this often", float)
    add("lease-namespace", lease.namespace, "namespace of the leader-election Lease")
    add("lease-name", lease.name, "name of the leader-election Lease")
    add("identity", default_identity(environ), "this replica's leader-election identity")
    add("lease-duration", lease.duration, "seconds a standby waits for the leader to renew", float)
    add("renew-deadline", lease.renew_deadline, "seconds the leader keeps leading without renewing", float)
    add("retry-period", lease.retry, "seconds between tries to acquire or renew the Lease", float)
    add("debounce-seconds", d.debounce_seconds, "quiet time that ends a burst of events", float)
    add("longest-seconds", d.longest_seconds, "longest a burst delays its cycle", float)
    add("resync-seconds", d.resync_seconds, "a cycle runs at least this often", float)
    add("release-concurrency", d.release_concurrency, "gate removals in flight at once", int)
    add("give-up-seconds", d.give_up_seconds, "retry a failing gate removal this long", float)
    add("write-concurrency", d.write_concurrency, "condition and event writes in flight at once", int)
    add("explain-after-seconds", d.explain_after_seconds, "explain a pending pod once it waited this long",
        float)
    add("unplaceable-after-seconds", d.unplaceable_after_seconds,
        "report a released pod the scheduler cannot place once it has been so this long", float)
    add("unscheduled-after-seconds", d.unscheduled_after_seconds,
        "count a released pod no scheduler has looked at as unplaceable after this long", float)
    add("event-interval-seconds", d.event_interval_seconds,
        "at most one unplaceable event per pod this often", float)
    add("status-seconds", d.status_seconds, "write Queue, Team and Policy status at most this often", float)
    add("status-writes", d.status_writes, "at most this many status writes each --status-seconds", int)
    args = flags.parse(argv)
    if args.release_concurrency < 1 or args.write_concurrency < 1 or args.status_writes < 1:
        flags.error("--release-concurrency, --write-concurrency and --status-writes must be at least 1")
    if not (math.isfinite(args.status_seconds) and args.status_seconds > 0):
        # 0, a negative or NaN would write status in a busy loop; infinity, never.
        flags.error("--status-seconds must be a positive number of seconds")
    if not 0 <= args.visibility_port < 65536:
        flags.error("ports must be between 0 and 65535")
    if not (math.isfinite(args.visibility_seconds) and args.visibility_seconds > 0):
        flags.error("--visibility-seconds must be a positive number of seconds")
    if not (math.isfinite(args.estimate_cpu_share) and 0 <= args.estimate_cpu_share <= 1):
        flags.error("--estimate-cpu-share must be between 0 and 1")
    if not (math.isfinite(args.records_seconds) and args.records_seconds > 0):
        flags.error("--records-seconds must be a positive number of seconds")
    if not 0 <= args.debounce_seconds <= args.longest_seconds:
        flags.error("need 0 <= --debounce-seconds <= --longest-seconds")
    lease = LeaseSettings(
        namespace=args.lease_namespace, name=args.lease_name, identity=args.identity,
        duration=args.lease_duration, renew_deadline=args.renew_deadline, retry=args.retry_period,
    )
    problem = lease.check()
    if problem:
        flags.error(f"leader election: {problem}")
    return Settings(
        **server_settings(args),
        extender=args.extender,
        visibility=args.visibility,
        visibility_host=args.visibility_host,
        visibility_port=args.visibility_port,
        visibility_listen_fd=args.visibility_listen_fd,
        visibility_tls_cert=args.visibility_tls_cert,
        visibility_tls_key=args.visibility_tls_key,
        visibility_seconds=args.visibility_seconds,
        estimate_cpu_share=args.estimate_cpu_share,
        records_namespace=args.records_namespace,
        records_seconds=args.records_seconds,
        lease=lease,
        debounce_seconds=args.debounce_seconds,
        longest_seconds=args.longest_seconds,
        resync_seconds=args.resync_seconds,
        release_concurrency=args.release_concurrency,
        give_up_seconds=args.give_up_seconds,
        write_concurrency=args.write_concurrency,
        explain_after_seconds=args.explain_after_seconds,
        unplaceable_after_seconds=args.unplaceable_after_seconds,
        unscheduled_after_seconds=args.unscheduled_after_seconds,
        event_interval_seconds=args.event_interval_seconds,
        status_seconds=args.status_seconds,
        status_writes=args.status_writes,
    )
