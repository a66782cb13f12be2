"""What every server process is told (``ServerSettings``), and its flags (``Flags``), each with
an environment variable for its default.

Every flag ``--some-name`` can also be given as ``SLUICEGATE_SOME_NAME`` (a flag wins), which is
how the Deployments set them; ``python -m <process> --help`` lists them. What every server
process has (where to serve over TLS and with which certificate, the probes' port, how to reach
the API server, logging, draining) is defined once here; each process's ``Settings`` extends
``ServerSettings`` with its own fields (and defaults), and adds their flags.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from kube.connecting import ConnectionSettings
from process.logs import FORMATS, Format


@dataclass(frozen=True, slots=True)
class ServerSettings:
    # What the API server or kube-scheduler calls, over TLS.
    host: str = "0.0.0.0"
    port: int = 8443
    listen_fd: int | None = None
    """An inherited socket, already listening, to serve on instead of ``host:port`` (the local
    control plane binds it inside a network namespace: controlplane/networks.py)."""
    tls_cert: str = "/etc/sluicegate/tls/tls.crt"
    tls_key: str = "/etc/sluicegate/tls/tls.key"
    cert_reload_seconds: float = 10.0
    # Probes and metrics, plain HTTP.
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8080
    connection: ConnectionSettings = field(default_factory=ConnectionSettings)
    log_level: str = "INFO"
    log_format: Format = "json"
    # After SIGTERM: unready but serving for ``drain_seconds``, then work in flight may finish.
    drain_seconds: float = 3.0
    shutdown_seconds: float = 10.0


def env_name(flag: str) -> str:
    return "SLUICEGATE_" + flag.upper().replace("-", "_")


class Flags:
    def __init__(self, prog: str, description: str, environ: Mapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.parser = argparse.ArgumentParser(
            prog=prog, description=f"{description} Every flag can also be set as SLUICEGATE_<FLAG> "
            "(e.g. SLUICEGATE_PORT).",
        )

    def add(self, flag: str, default: object, help: str, kind: Callable[[str], Any] = str, **kw: Any) -> None:
        # A variable's text is a default that argparse converts with ``kind``, as it would the
        # flag's: a value it cannot read is refused with the flag's name.
        raw = self.environ.get(env_name(flag))
        self.parser.add_argument(f"--{flag}", type=kind, default=raw if raw is not None else default,
                                 help=f"{help} (default: %(default)s)", **kw)

    def switch(self, flag: str, default: bool, help: str) -> None:
        """``--flag`` / ``--no-flag``; the variable is true when it reads 1 or true."""
        raw = self.environ.get(env_name(flag))
        self.parser.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction,
                                 default=default if raw is None else raw.lower() in ("1", "true"),
                                 help=f"{help} (default: %(default)s)")

    def server(self, what: str, d: ServerSettings, *, drained: str | None, awaited: str) -> None:
        """The flags of ``ServerSettings``, with ``d``'s values as defaults: where to serve
        ``what`` over TLS, the probes, the API server, logging, and what goes on after SIGTERM
        (``drained`` while unready, then ``awaited`` may finish). A process that does not drain
        (``drained=None``) has no ``--drain-seconds``: it stops serving at once."""
        add = self.add
        add("host", d.host, f"address to serve {what} on (TLS)")
        add("port", d.port, f"port of {what}", int)
        add("listen-fd", d.listen_fd, f"serve {what} on this inherited listening socket instead of "
            "--host and --port", int)
        add("tls-cert", d.tls_cert, f"{what}'s serving certificate (PEM), reloaded when it changes")
        add("tls-key", d.tls_key, f"{what}'s serving key (PEM), reloaded when it changes")
        add("cert-reload-seconds", d.cert_reload_seconds, "how often to look for a new certificate", float)
        add("metrics-host", d.metrics_host, "address of /healthz, /readyz and /metrics (plain HTTP)")
        add("metrics-port", d.metrics_port, "port of /healthz, /readyz and /metrics", int)
        add("kubeconfig", "", "kubeconfig file; else --server with --token-file, else in-cluster")
        add("context", "", "kubeconfig context (default: the current one)")
        add("server", "", "API server URL, with --token-file and --certificate-authority")
        add("token-file", "", "bearer token file, read again every minute")
        add("certificate-authority", "", "CA file that signed the API server's certificate")
        add("log-level", d.log_level, "DEBUG, INFO, WARNING or ERROR")
        add("log-format", d.log_format, "json or text", choices=FORMATS)
        if drained is None:
            add("shutdown-seconds", d.shutdown_seconds, f"after SIGTERM, wait this long for {awaited}", float)
            return
        add("drain-seconds", d.drain_seconds, f"after SIGTERM, keep {drained} this long while unready", float)
        add("shutdown-seconds", d.shutdown_seconds, f"then wait this long for {awaited}", float)

    def parse(self, argv: Sequence[str] | None) -> argparse.Namespace:
        """The answers; ports out of range are refused here for every process."""
        args = self.parser.parse_args(argv)
        for name in ("port", "metrics_port"):
            value = getattr(args, name, None)
            if value is not None and not 0 <= value < 65536:
                self.error("ports must be between 0 and 65535")
        return args

    def error(self, message: str) -> NoReturn:
        self.parser.error(message)


def server_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The answers to ``Flags.server``, as keywords of a ``ServerSettings`` (or a subclass)."""
    return {
        "host": args.host, "port": args.port, "listen_fd": args.listen_fd, "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "cert_reload_seconds": args.cert_reload_seconds, "metrics_host": args.metrics_host,
        "metrics_port": args.metrics_port,
        "connection": ConnectionSettings(kubeconfig=args.kubeconfig, context=args.context, server=args.server,
                                         token_file=args.token_file, ca_file=args.certificate_authority),
        "log_level": args.log_level, "log_format": args.log_format,
        # No flag when the process does not drain (``Flags.server(drained=None)``).
        "drain_seconds": getattr(args, "drain_seconds", 0.0), "shutdown_seconds": args.shutdown_seconds,
    }
