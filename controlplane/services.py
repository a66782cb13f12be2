"""Sluicegate's own processes, as ``make up`` runs them beside the local control plane.

One row per process. Each runs as ``python -m <module>`` under its own ServiceAccount (a
token from the TokenRequest API), so the RBAC in ``manifests/`` is what it really runs with.
Each names the ports it needs; the one called ``metrics`` must answer ``/readyz``. The gate
controller and scheduler extender is one more row. The ports a row names ``served`` are those
the API server reaches through a Service: they listen inside the cluster's network namespace
(controlplane/networks.py) on a socket the process inherits (``--listen-fd``); every other
port, and the process itself, stays on this host's loopback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

NAMESPACE: Final = "sluicegate-system"
EXTENDER_PORT: Final = "extender"
"""The port name of the scheduler extender: kube-scheduler is started pointed at it."""


@dataclass(frozen=True, slots=True)
class Launch:
    """What one process is given on this machine."""

    server: str  # the API server's URL
    ca_file: Path  # the CA that signed the API server's certificate
    token_file: Path  # the ServiceAccount's token
    tls_cert: Path  # the webhook serving certificate (names 127.0.0.1)
    tls_key: Path
    ports: Mapping[str, int]  # free loopback ports, by the names the row asks for
    data: Path = Path("sluicegate")  # where a process keeps its state (the recorder's database)
    address: str = "127.0.0.1"
    """The cluster network namespace's inner address: where the API server reaches a served port
    (it refuses loopback endpoints); see controlplane/endpoints.py and controlplane/networks.py."""
    listen_fds: Mapping[str, int] = field(default_factory=dict)
    """The inherited listening socket of each served port, bound inside the namespace."""


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    module: str
    account: str  # a ServiceAccount in sluicegate-system
    ports: tuple[str, ...]
    arguments: Callable[[Launch], list[str]]
    served: tuple[str, ...] = ()
    """The ports the API server reaches through a Service (inside the network namespace)."""

    @property
    def log_name(self) -> str:
        return f"sluicegate-{self.name}"

    def command(self, python: str, launch: Launch) -> list[str]:
        return [python, "-m", self.module, *self.arguments(launch)]


def connection_arguments(launch: Launch) -> list[str]:
    return [
        "--server", launch.server,
        "--token-file", str(launch.token_file),
        "--certificate-authority", str(launch.ca_file),
    ]


def server_arguments(launch: Launch, port: str, host: str = "127.0.0.1") -> list[str]:
    """The flags every server process shares (process/settings.py): where it serves ``port``
    over TLS, its probes and metrics on loopback, and the API server. Each serves with the
    webhook's certificate: it names 127.0.0.1, and the local kube-scheduler trusts its CA."""
    return [
        "--host", host,
        "--port", str(launch.ports[port]),
        "--metrics-host", "127.0.0.1",
        "--metrics-port", str(launch.ports["metrics"]),
        "--tls-cert", str(launch.tls_cert),
        "--tls-key", str(launch.tls_key),
        *connection_arguments(launch),
    ]


def webhook_arguments(launch: Launch) -> list[str]:
    return [
        *server_arguments(launch, "admission"),
        # Nobody routes traffic away from a local process before it stops: no need to linger.
        "--drain-seconds", "0",
    ]


WEBHOOK: Final = Service(
    name="webhook",
    module="webhook",
    account="sluicegate-webhook",
    ports=("admission", "metrics"),
    arguments=webhook_arguments,
)


VISIBILITY_PORT: Final = "visibility"
"""The port name of the controller's visibility API (its Service's port ``https``)."""


def controller_arguments(launch: Launch) -> list[str]:
    return [
        *server_arguments(launch, EXTENDER_PORT),
        *visibility_arguments(launch),
        # Locally a standby takes over within 8 s of a leader's death (15 s in a cluster).
        "--lease-duration", "8",
        "--renew-deadline", "6",
        "--retry-period", "1",
        "--drain-seconds", "0",
    ]


CONTROLLER: Final = Service(
    name="controller",
    module="controller",
    account="sluicegate-controller",
    ports=(EXTENDER_PORT, VISIBILITY_PORT, "metrics"),
    arguments=controller_arguments,
    served=(VISIBILITY_PORT,),
)

RECORDS_PORT: Final = "records"
"""The port name of the recorder's HTTPS API (the Service's port ``https``)."""


def served_arguments(launch: Launch, port: str, flag: str = "--listen-fd") -> list[str]:
    """Serve ``port`` on its socket inside the network namespace: the API server's service
    proxy, through which the CLI reads it, does not proxy to loopback (controlplane/endpoints.py).
    None for a release older than the network namespace (``Launch.listen_fds`` empty): it serves
    on loopback, where the API server does not reach it."""
    fd = launch.listen_fds.get(port)
    return [] if fd is None else [flag, str(fd)]


def visibility_arguments(launch: Launch) -> list[str]:
    """The controller's visibility API, on its socket inside the network namespace; none for a
    release older than the API (which knows none of these flags)."""
    if VISIBILITY_PORT not in launch.listen_fds:
        return []
    return [
        "--visibility-host", launch.address,
        "--visibility-tls-cert", str(launch.tls_cert),
        "--visibility-tls-key", str(launch.tls_key),
        "--visibility-port", str(launch.ports[VISIBILITY_PORT]),
        *served_arguments(launch, VISIBILITY_PORT, "--visibility-listen-fd"),
    ]


def recorder_arguments(launch: Launch) -> list[str]:
    return [
        *server_arguments(launch, RECORDS_PORT, host=launch.address),
        *served_arguments(launch, RECORDS_PORT),
        "--database", str(launch.data / "recorder" / "records.db"),
        # Commit often: the e2e tests kill it and count what survived.
        "--flush-seconds", "0.2",
    ]


RECORDER: Final = Service(
    name="recorder",
    module="recorder",
    account="sluicegate-recorder",
    ports=(RECORDS_PORT, "metrics"),
    arguments=recorder_arguments,
    served=(RECORDS_PORT,),
)

SERVICES: Final[tuple[Service, ...]] = (WEBHOOK, CONTROLLER, RECORDER)
"""Every process ``make up`` starts, in start order."""
