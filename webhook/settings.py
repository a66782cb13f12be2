"""The webhook's settings, from flags and their environment variables (``process.flags``):
``python -m webhook --help`` lists them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from process.settings import Flags, ServerSettings, server_settings

CONTROLLER: Final = "system:serviceaccount:sluicegate-system:sluicegate-controller"
# The largest AdmissionReview the API server sends carries a pod and its old version, each up
# to etcd's 1.5 MiB request limit; 4 MiB holds both with room for the envelope, and a bigger
# body cannot be a real review.
MAX_BODY_BYTES: Final = 4 * 1024 * 1024
# Each open TLS connection holds a 256 KiB buffer: 512 of them are 128 MiB, inside the
# Deployment's 512 MiB limit with the cache beside them, and far more than the few keep-alive
# connections each API server keeps to a webhook.
MAX_CONNECTIONS: Final = 512
# A worker beats every second (``webhook.workers.HEARTBEAT_SECONDS``); after four missed beats it
# is replaced: within the admission webhooks' 5 s timeout of its first silent second, and a
# loop held by one slow review on a busy machine is not taken for a stuck worker.
WORKER_TIMEOUT_SECONDS: Final = 4.0


@dataclass(frozen=True, slots=True)
class Settings(ServerSettings):
    max_body_bytes: int = MAX_BODY_BYTES
    max_connections: int = MAX_CONNECTIONS
    """In all: with several workers, each gets its share."""
    controller: str = CONTROLLER
    workers: int = 0
    """Admission worker processes sharing the port; 0: one per CPU of the CPU limit
    (``process.cpus.cpu_limit``)."""
    worker: int = 0
    """Set by the supervisor on each worker it starts (1, 2, ...); 0 in the process started."""
    worker_timeout_seconds: float = WORKER_TIMEOUT_SECONDS
    """A worker whose heartbeat is older than this is killed and started again."""


def parse(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    d = Settings()
    flags = Flags("python -m webhook", "Sluicegate's admission webhook.", environ)
    flags.server("admission", d, drained="serving", awaited="requests in flight")
    flags.add("max-body-bytes", d.max_body_bytes, "larger request bodies are answered 413", int)
    flags.add("max-connections", d.max_connections, "admission connections open at once; more are closed",
              int)
    flags.add("controller", d.controller,
              "the only user that may remove the gate or change Sluicegate's keys")
    flags.add("workers", d.workers, "admission worker processes sharing the admission port; 0: one per "
              "CPU of the container's CPU limit (else of the machine)", int)
    flags.add("worker-timeout-seconds", d.worker_timeout_seconds,
              "a worker silent this long (stopped, its loop blocked) is killed and started again", float)
    flags.add("worker", d.worker, "set by the webhook on the workers it starts; do not set", int)
    args = flags.parse(argv)
    if args.max_body_bytes < 1024:
        flags.error("--max-body-bytes must be at least 1024")
    if args.max_connections < 1:
        flags.error("--max-connections must be at least 1")
    if args.workers < 0 or args.worker < 0:
        flags.error("--workers must be 0 or more")
    if args.worker_timeout_seconds <= 1.0:
        flags.error("--worker-timeout-seconds must be more than 1 (the heartbeat's period)")
    return Settings(**server_settings(args), max_body_bytes=args.max_body_bytes,
                    max_connections=args.max_connections, controller=args.controller,
                    workers=args.workers, worker=args.worker,
                    worker_timeout_seconds=args.worker_timeout_seconds)
