"""The recorder's settings, from flags and their environment variables (``process.settings``):
``python -m recorder --help`` lists them. Every flag ``--some-name`` can also be given as
``SLUICEGATE_SOME_NAME`` (a flag wins), which is how the StatefulSet sets them.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from process.settings import Flags, ServerSettings, server_settings
from records.periods import parse_duration

# Each open TLS connection holds a 256 KiB buffer (process.connections): 128 of them are 32 MiB,
# well inside the StatefulSet's 1 GiB limit beside a week of records being answered, and far
# more than the few keep-alive connections the API server's aggregation layer keeps.
MAX_CONNECTIONS: Final = 128


@dataclass(frozen=True, slots=True)
class Settings(ServerSettings):
    database: str = "/var/lib/sluicegate/records.db"
    # Its own namespace: the records are served there (records.sluicegate.dev), and a reader
    # needs RBAC in it (the Role sluicegate-records-reader).
    namespace: str = "sluicegate-system"
    max_connections: int = MAX_CONNECTIONS
    retention_seconds: float = 90 * 86400.0
    flush_seconds: float = 0.5
    # The recorder does not drain (it has no --drain-seconds): on SIGTERM it stops at once.
    drain_seconds: float = 0.0


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def parse(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    d = Settings()
    flags = Flags("python -m recorder", "Sluicegate's run recorder.", environ)
    flags.server("the records API", d, drained=None, awaited="reads in flight")
    flags.add("database", d.database, "the SQLite file (on the persistent volume)")
    flags.add("namespace", d.namespace, "the recorder's namespace: where the records are served and "
              "where RBAC grants reading them")
    flags.add("max-connections", d.max_connections, "records connections open at once; more are closed", int)
    flags.add("retention", "90d", "forget pods that ended longer ago than this (90d, 2w, 36h)", _duration)
    flags.add("flush-seconds", d.flush_seconds, "how often the batched writes are committed", float)
    args = flags.parse(argv)
    if args.retention <= 0 or args.flush_seconds <= 0:
        flags.error("--retention and --flush-seconds must be above 0")
    if not args.namespace:
        flags.error("--namespace must not be empty")
    if args.max_connections < 1:
        flags.error("--max-connections must be at least 1")
    return Settings(**server_settings(args), database=args.database, namespace=args.namespace,
                    max_connections=args.max_connections, retention_seconds=float(args.retention),
                    flush_seconds=float(args.flush_seconds))
