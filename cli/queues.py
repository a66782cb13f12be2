"""``sluicegate queues``: every queue at a glance, like ``kubectl get``.

    sluicegate queues [--kubeconfig F] [--context C] [-o json|yaml|wide]

Columns: priority, running/maxRunning, pending workloads, managed GPUs in use/quota, how long
the oldest pending workload has waited, paused. ``-o json|yaml`` gives numbers (``running``,
``maxRunning``, ``gpusUsed``, ``gpuQuota``; null where there is no limit). ``-o wide`` adds
the ordering, the pending work that can never run under the current limits, and the
released pods kube-scheduler cannot place. The figures are worked out from the pods as they
are now, by the controller's own decision, not read from the Queue status the controller
writes at a bounded rate. A queue that pods name but that does not exist is listed with
priority ``-``. A user who may not read every namespace's pods (the sample
``sluicegate-reader`` role) gets the Queue status instead, as ``kubectl get queues`` prints
it, and a note that says so; NEVER-RUN and UNPLACEABLE are then unknown (``-``). That needs
only to list Queues: no pod is read, whatever namespace the kubeconfig names.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli import clusters
from cli.commands import Command
from cli.standings import STATUS_NOTE, QueueRow, stand, status_rows
from cli.tables import age, table

HEADER = ("NAME", "PRIORITY", "RUNNING", "PENDING", "GPUS", "OLDEST-WAIT", "PAUSED")
WIDE = (*HEADER, "ORDERING", "NEVER-RUN", "UNPLACEABLE")


def configure(parser: argparse.ArgumentParser) -> None:
    # Queues are cluster-wide: -n and -A are accepted and mean nothing, as kubectl takes them
    # for cluster-scoped kinds.
    clusters.configure(parser)


def _pair(shown: str) -> tuple[int | None, int | None]:
    """``"3/8"`` -> (3, 8); ``"3/-"`` -> (3, None) (no limit); ``"-"`` -> (None, None)."""
    used, _, limit = shown.partition("/")
    return (int(used) if used.isdigit() else None, int(limit) if limit.isdigit() else None)


def as_json(row: QueueRow) -> dict[str, Any]:
    running, max_running = _pair(row.running)
    gpus_used, gpu_quota = _pair(row.gpus)
    return {
        "name": row.name, "priority": row.priority, "running": running, "maxRunning": max_running,
        "pending": row.pending, "gpusUsed": gpus_used, "gpuQuota": gpu_quota,
        "oldestWaitSeconds": None if row.oldest_wait is None else round(row.oldest_wait, 1),
        "paused": row.paused, "ordering": row.ordering, "neverRun": row.never,
        "unplaceable": row.unplaceable, "exists": row.priority is not None,
    }


def cells(row: QueueRow, wide: bool) -> list[str]:
    paused = "missing" if row.priority is None else str(row.paused).lower()
    out = [row.name, "-" if row.priority is None else str(row.priority), row.running, str(row.pending),
           row.gpus, age(row.oldest_wait), paused]
    if wide:
        out += [row.ordering, "-" if row.never is None else str(row.never),
                "-" if row.unplaceable is None else str(row.unplaceable)]
    return out


def run(args: argparse.Namespace) -> int:
    reading = clusters.read_queues(args)
    if reading.limited:
        rows = status_rows(reading.seen.queues, reading.seen.now)
        print(f"Note: {STATUS_NOTE}.", file=sys.stderr)
    else:
        rows = stand(reading.seen).queue_rows()
    if reading.stalled:
        print(f"Note: {reading.stalled}.", file=sys.stderr)
    text = clusters.structured({"queues": [as_json(r) for r in rows]}, args.output)
    if text is None:
        if not rows:
            print("No queues.", file=sys.stderr)
            return 0
        wide = args.output == "wide"
        header = WIDE if wide else HEADER
        text = table(header, [cells(r, wide) for r in rows], left=len(header))
    sys.stdout.write(text)
    return 0


COMMAND = Command("queues", "every queue: priority, running/max, pending, GPUs used/quota, oldest wait",
                  configure, run, description=__doc__ or "")
