"""The webhook's settings: flags, each with an environment variable for its default.

``python -m webhook --help`` lists them. Every flag ``--some-name`` can also be given as
``SLUICEGATE_SOME_NAME`` (a flag wins), which is how the Deployment sets them.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kube.connecting import ConnectionSettings
from process.logs import FORMATS, Format

CONTROLLER: Final = "system:serviceaccount:sluicegate-system:sluicegate-controller"
# The largest AdmissionReview the API server sends carries a pod and its old version, each up
# to etcd's 1.5 MiB request limit; 4 MiB holds both with room for the envelope, and a bigger
# body cannot be a real review.
MAX_BODY_BYTES: Final = 4 * 1024 * 1024
# Each open TLS connection holds a 256 KiB buffer: 512 of them are 128 MiB, inside the
# Deployment's 512 MiB limit with the cache beside them, and far more than the few keep-alive
# connections each API server keeps to a webhook.
MAX_CONNECTIONS: Final = 512


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "0.0.0.0"
    port: int = 8443
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    tls_cert: str = "/etc/sluicegate/tls/tls.crt"
    tls_key: str = "/etc/sluicegate/tls/tls.key"
    cert_reload_seconds: float = 10.0
    max_body_bytes: int = MAX_BODY_BYTES
    max_connections: int = MAX_CONNECTIONS
    controller: str = CONTROLLER
    connection: ConnectionSettings = field(default_factory=ConnectionSettings)
    log_level: str = "INFO"
    log_format: Format = "json"
    drain_seconds: float = 3.0
    shutdown_seconds: float = 10.0


def _env(environ: Mapping[str, str], flag: str) -> str | None:
    return environ.get("SLUICEGATE_" + flag.upper().replace("-", "_"))


def parse(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    d = Settings()
    parser = argparse.ArgumentParser(
        prog="python -m webhook",
        description="Sluicegate's admission webhook. Every flag can also be set as "
        "SLUICEGATE_<FLAG> (e.g. SLUICEGATE_PORT).",
    )

    def add(flag: str, default: object, help: str, kind: type = str, **kw: object) -> None:
        raw = _env(environ, flag)
        parser.add_argument(f"--{flag}", type=kind, default=kind(raw) if raw is not None else default,
                            help=f"{help} (default: %(default)s)", **kw)  # type: ignore[arg-type]

    add("host", d.host, "address to serve admission on (TLS)")
    add("port", d.port, "port to serve admission on", int)
    add("metrics-host", d.metrics_host, "address of /healthz, /readyz and /metrics (plain HTTP)")
    add("metrics-port", d.metrics_port, "port of /healthz, /readyz and /metrics", int)
    add("tls-cert", d.tls_cert, "serving certificate (PEM), reloaded when it changes")
    add("tls-key", d.tls_key, "serving key (PEM), reloaded when it changes")
    add("cert-reload-seconds", d.cert_reload_seconds, "how often to look for a new certificate", float)
    add("max-body-bytes", d.max_body_bytes, "larger request bodies are answered 413", int)
    add("max-connections", d.max_connections, "admission connections open at once; more are closed", int)
    add("controller", d.controller, "the only user that may remove the gate or change Sluicegate's keys")
    add("kubeconfig", "", "kubeconfig file; else --server with --token-file, else in-cluster")
    add("context", "", "kubeconfig context (default: the current one)")
    add("server", "", "API server URL, with --token-file and --certificate-authority")
    add("token-file", "", "bearer token file, read again every minute")
    add("certificate-authority", "", "CA file that signed the API server's certificate")
    add("log-level", d.log_level, "DEBUG, INFO, WARNING or ERROR")
    add("log-format", d.log_format, "json or text", choices=FORMATS)
    add("drain-seconds", d.drain_seconds, "after SIGTERM, keep serving this long while unready", float)
    add("shutdown-seconds", d.shutdown_seconds, "then wait this long for requests in flight", float)
    args = parser.parse_args(argv)
    if not 0 <= args.port < 65536 or not 0 <= args.metrics_port < 65536:
        parser.error("ports must be between 0 and 65535")
    if args.max_body_bytes < 1024:
        parser.error("--max-body-bytes must be at least 1024")
    if args.max_connections < 1:
        parser.error("--max-connections must be at least 1")
    return Settings(
        host=args.host,
        port=args.port,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        cert_reload_seconds=args.cert_reload_seconds,
        max_body_bytes=args.max_body_bytes,
        max_connections=args.max_connections,
        controller=args.controller,
        connection=ConnectionSettings(
            kubeconfig=args.kubeconfig,
            context=args.context,
            server=args.server,
            token_file=args.token_file,
            ca_file=args.certificate_authority,
        ),
        log_level=args.log_level,
        log_format=args.log_format,
        drain_seconds=args.drain_seconds,
        shutdown_seconds=args.shutdown_seconds,
    )
