"""The controller's settings: flags, each with an environment variable for its default.

``python -m extender --help`` lists them. Every flag ``--some-name`` can also be given as
``SLUICEGATE_SOME_NAME`` (a flag wins). The leader-election identity defaults to ``POD_NAME``
(the Deployment sets it from the pod's name), else ``<hostname>_<pid>``.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kube.connecting import ConnectionSettings
from kube.leasing import LeaseSettings
from process.logs import FORMATS, Format


@dataclass(frozen=True, slots=True)
class Settings:
    # The scheduler extender, over TLS (kube-scheduler calls it).
    host: str = "0.0.0.0"
    port: int = 8444
    extender: bool = True
    tls_cert: str = "/etc/sluicegate/tls/tls.crt"
    tls_key: str = "/etc/sluicegate/tls/tls.key"
    cert_reload_seconds: float = 10.0
    # Probes and metrics, plain HTTP.
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    connection: ConnectionSettings = field(default_factory=ConnectionSettings)
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
    event_interval_seconds: float = 300.0
    # Queue, Team and Policy status: written at most this often, and only what changed.
    status_seconds: float = 2.0
    log_level: str = "INFO"
    log_format: Format = "json"
    drain_seconds: float = 3.0
    shutdown_seconds: float = 10.0


def default_identity(environ: Mapping[str, str]) -> str:
    return environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


def _env(environ: Mapping[str, str], flag: str) -> str | None:
    return environ.get("SLUICEGATE_" + flag.upper().replace("-", "_"))


def parse(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    d = Settings()
    lease = LeaseSettings()
    parser = argparse.ArgumentParser(
        prog="python -m extender",
        description="Sluicegate's gate controller and scheduler extender. Every flag can also be "
        "set as SLUICEGATE_<FLAG> (e.g. SLUICEGATE_PORT).",
    )

    def add(flag: str, default: object, help: str, kind: type = str, **kw: object) -> None:
        raw = _env(environ, flag)
        parser.add_argument(f"--{flag}", type=kind, default=kind(raw) if raw is not None else default,
                            help=f"{help} (default: %(default)s)", **kw)  # type: ignore[arg-type]

    add("host", d.host, "address to serve the scheduler extender on (TLS)")
    add("port", d.port, "port of the scheduler extender", int)
    raw_extender = _env(environ, "extender")
    parser.add_argument("--extender", action=argparse.BooleanOptionalAction,
                        default=d.extender if raw_extender is None else raw_extender.lower() in ("1", "true"),
                        help="serve the scheduler extender (default: %(default)s)")
    add("tls-cert", d.tls_cert, "the extender's serving certificate (PEM), reloaded when it changes")
    add("tls-key", d.tls_key, "the extender's serving key (PEM), reloaded when it changes")
    add("cert-reload-seconds", d.cert_reload_seconds, "how often to look for a new certificate", float)
    add("metrics-host", d.metrics_host, "address of /healthz, /readyz and /metrics (plain HTTP)")
    add("metrics-port", d.metrics_port, "port of /healthz, /readyz and /metrics", int)
    add("kubeconfig", "", "kubeconfig file; else --server with --token-file, else in-cluster")
    add("context", "", "kubeconfig context (default: the current one)")
    add("server", "", "API server URL, with --token-file and --certificate-authority")
    add("token-file", "", "bearer token file, read again every minute")
    add("certificate-authority", "", "CA file that signed the API server's certificate")
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
    add("event-interval-seconds", d.event_interval_seconds,
        "at most one unplaceable event per pod this often", float)
    add("status-seconds", d.status_seconds, "write Queue, Team and Policy status at most this often", float)
    add("log-level", d.log_level, "DEBUG, INFO, WARNING or ERROR")
    add("log-format", d.log_format, "json or text", choices=FORMATS)
    add("drain-seconds", d.drain_seconds, "after SIGTERM, keep serving the extender this long while unready",
        float)
    add("shutdown-seconds", d.shutdown_seconds, "then wait this long for writes in flight", float)
    args = parser.parse_args(argv)
    if not 0 <= args.port < 65536 or not 0 <= args.metrics_port < 65536:
        parser.error("ports must be between 0 and 65535")
    if args.release_concurrency < 1 or args.write_concurrency < 1:
        parser.error("--release-concurrency and --write-concurrency must be at least 1")
    if not 0 <= args.debounce_seconds <= args.longest_seconds:
        parser.error("need 0 <= --debounce-seconds <= --longest-seconds")
    lease = LeaseSettings(
        namespace=args.lease_namespace, name=args.lease_name, identity=args.identity,
        duration=args.lease_duration, renew_deadline=args.renew_deadline, retry=args.retry_period,
    )
    problem = lease.check()
    if problem:
        parser.error(f"leader election: {problem}")
    return Settings(
        host=args.host,
        port=args.port,
        extender=args.extender,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        cert_reload_seconds=args.cert_reload_seconds,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        connection=ConnectionSettings(
            kubeconfig=args.kubeconfig,
            context=args.context,
            server=args.server,
            token_file=args.token_file,
            ca_file=args.certificate_authority,
        ),
        lease=lease,
        debounce_seconds=args.debounce_seconds,
        longest_seconds=args.longest_seconds,
        resync_seconds=args.resync_seconds,
        release_concurrency=args.release_concurrency,
        give_up_seconds=args.give_up_seconds,
        write_concurrency=args.write_concurrency,
        explain_after_seconds=args.explain_after_seconds,
        unplaceable_after_seconds=args.unplaceable_after_seconds,
        event_interval_seconds=args.event_interval_seconds,
        status_seconds=args.status_seconds,
        log_level=args.log_level,
        log_format=args.log_format,
        drain_seconds=args.drain_seconds,
        shutdown_seconds=args.shutdown_seconds,
    )
