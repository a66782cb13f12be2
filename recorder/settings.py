"""The recorder's settings: flags, each with an environment variable for its default.

``python -m recorder --help`` lists them. Every flag ``--some-name`` can also be given as
``SLUICEGATE_SOME_NAME`` (a flag wins), which is how the StatefulSet sets them.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kube.connecting import ConnectionSettings
from process.logs import FORMATS, Format
from records.periods import parse_duration


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = 8443
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    tls_cert: str = "/etc/sluicegate/tls/tls.crt"
    tls_key: str = "/etc/sluicegate/tls/tls.key"
    cert_reload_seconds: float = 10.0
    database: str = "/var/lib/sluicegate/records.db"
    retention_seconds: float = 90 * 86400.0
    flush_seconds: float = 0.5
    connection: ConnectionSettings = field(default_factory=ConnectionSettings)
    log_level: str = "INFO"
    log_format: Format = "json"
    shutdown_seconds: float = 10.0


def _env(environ: Mapping[str, str], flag: str) -> str | None:
    return environ.get("SLUICEGATE_" + flag.upper().replace("-", "_"))


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def parse(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    d = Settings()
    parser = argparse.ArgumentParser(
        prog="python -m recorder",
        description="Sluicegate's run recorder. Every flag can also be set as SLUICEGATE_<FLAG> "
        "(e.g. SLUICEGATE_DATABASE).",
    )

    def add(flag: str, default: object, help: str, kind: object = str, **kw: object) -> None:
        raw = _env(environ, flag)
        parser.add_argument(f"--{flag}", type=kind, default=raw if raw is not None else default,  # type: ignore[arg-type]
                            help=f"{help} (default: %(default)s)", **kw)  # type: ignore[arg-type]

    add("host", d.host, "address to serve the records on (TLS)")
    add("port", d.port, "port to serve the records on", int)
    add("metrics-host", d.metrics_host, "address of /healthz, /readyz and /metrics (plain HTTP)")
    add("metrics-port", d.metrics_port, "port of /healthz, /readyz and /metrics", int)
    add("tls-cert", d.tls_cert, "serving certificate (PEM), reloaded when it changes")
    add("tls-key", d.tls_key, "serving key (PEM), reloaded when it changes")
    add("cert-reload-seconds", d.cert_reload_seconds, "how often to look for a new certificate", float)
    add("database", d.database, "the SQLite file (on the persistent volume)")
    add("retention", "90d", "forget pods that ended longer ago than this (90d, 2w, 36h)", _duration)
    add("flush-seconds", d.flush_seconds, "how often the batched writes are committed", float)
    add("kubeconfig", "", "kubeconfig file; else --server with --token-file, else in-cluster")
    add("context", "", "kubeconfig context (default: the current one)")
    add("server", "", "API server URL, with --token-file and --certificate-authority")
    add("token-file", "", "bearer token file, read again every minute")
    add("certificate-authority", "", "CA file that signed the API server's certificate")
    add("log-level", d.log_level, "DEBUG, INFO, WARNING or ERROR")
    add("log-format", d.log_format, "json or text", choices=FORMATS)
    add("shutdown-seconds", d.shutdown_seconds, "after SIGTERM, wait this long for reads in flight", float)
    args = parser.parse_args(argv)
    if not 0 <= args.port < 65536 or not 0 <= args.metrics_port < 65536:
        parser.error("ports must be between 0 and 65535")
    if args.retention <= 0 or args.flush_seconds <= 0:
        parser.error("--retention and --flush-seconds must be above 0")
    return Settings(
        host=args.host,
        port=args.port,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        cert_reload_seconds=float(args.cert_reload_seconds),
        database=args.database,
        retention_seconds=float(args.retention),
        flush_seconds=float(args.flush_seconds),
        connection=ConnectionSettings(
            kubeconfig=args.kubeconfig,
            context=args.context,
            server=args.server,
            token_file=args.token_file,
            ca_file=args.certificate_authority,
        ),
        log_level=args.log_level,
        log_format=args.log_format,
        shutdown_seconds=float(args.shutdown_seconds),
    )
