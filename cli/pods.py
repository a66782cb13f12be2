"""``sluicegate pods``: pending pods in dispatch order, with their position and reason.

    sluicegate pods [-q QUEUE] [-n NS | -A] [--kubeconfig F] [--context C] [-o json|yaml|wide]

Pods held by Sluicegate come in the order the controller would release them: higher queue
priority first, queues of equal priority taking turns, each queue in its own order (pod
priority, then submission). POSITION is the pod's place among the workloads waiting in its
queue; REASON and MESSAGE are the Dispatched condition's, worked out now by the controller's
own decision. A pod that fits now is about to be released (reason ``-``).
Pods released but not placed by kube-scheduler come last, as ``Dispatched`` with the
scheduler's words: those wait for Kubernetes, not for Sluicegate. EXPECTED-START is when the
pod is expected to start (``~14m (9–31m)``: about 14 minutes from now, between 9 and 31 eight
times in ten), from the visibility API; ``unknown`` when the controller cannot say (``-o json``
and ``explain`` say why).

A user who may read only their own namespaces' pods reads them through the visibility API
(``visibility.sluicegate.dev``, which the sample role ``sluicegate-ml-engineer`` lets them read
in their team's namespaces): the same positions, reasons and messages, worked out by the
controller. Without that API (an older install, or a role without it) they get that
namespace's pending pods with the reason and message of their Dispatched condition, without
position, and a note that says so.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from cli import clusters
from cli.commands import Command, CommandError
from cli.standings import (
    LIMITED_NOTE,
    RELEASING,
    Entry,
    expected_start,
    from_conditions,
    from_visibility,
    stand,
)
from cli.tables import age, table

HEADER = ("NAME", "QUEUE", "POSITION", "EXPECTED-START", "WAITED", "REASON")
WIDE_EXTRA = ("TEAM", "GPUS", "PRIORITY", "WORKFLOW")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--queue", default="", help="only this queue's pods")
    clusters.configure(parser)


def as_json(e: Entry) -> dict[str, Any]:
    return {
        "namespace": e.namespace, "name": e.name, "queue": e.queue, "team": e.team, "state": e.state,
        "position": e.position, "workloadsAhead": e.ahead, "reason": e.reason or None, "message": e.message,
        "expectedStart": None if e.expected is None else e.expected.as_json(),
        "waitedSeconds": round(e.waited, 1), "gpus": e.gpus, "priority": e.priority,
        "workflow": e.workflow or None, "workload": e.workload,
    }


def cells(e: Entry, *, namespaced: bool, wide: bool) -> list[str]:
    out = [e.namespace] if namespaced else []
    out += [e.name, e.queue, "-" if e.position is None else str(e.position), expected_start(e.expected),
            age(e.waited), e.reason or "-"]
    if wide:
        out += [e.team or "-", str(e.gpus), str(e.priority), e.workflow or "-"]
    return [*out, e.message]


def run(args: argparse.Namespace) -> int:
    reading = clusters.read(args)
    if reading.unserved:
        print(f"Note: {reading.unserved}.", file=sys.stderr)
    if reading.limited and reading.pending is not None:
        entries = [e for e in from_visibility(reading.pending, reading.seen)
                   if not args.queue or e.queue == args.queue]
    elif reading.limited:
        entries = [e for e in from_conditions(reading.seen) if not args.queue or e.queue == args.queue]
        print(f"Note: {LIMITED_NOTE}.", file=sys.stderr)
    else:
        entries = stand(reading.seen).lineup(queue=args.queue, namespace=reading.namespace)
        if reading.pending is not None:  # the expected starts, where the controller made them
            served = {e.key: e for e in from_visibility(reading.pending, reading.seen)}
            entries = [replace(e, ahead=served[e.key].ahead, expected=served[e.key].expected)
                       if e.key in served else e for e in entries]
    names = {str((q.get("metadata") or {}).get("name") or "") for q in reading.seen.queues}
    if args.queue and args.queue not in names:
        if not entries:
            raise CommandError(f'queue "{args.queue}" does not exist')
        print(f'Note: queue "{args.queue}" does not exist; its pods wait until it is created.',
              file=sys.stderr)
    if reading.stalled:
        print(f"Note: {reading.stalled}.", file=sys.stderr)
        entries = [replace(e, message=reading.stalled) if e.state == RELEASING else e for e in entries]
    text = clusters.structured({"pods": [as_json(e) for e in entries]}, args.output)
    if text is None:
        if not entries:
            where = "in any namespace" if not reading.namespace else f"in namespace {reading.namespace}"
            queue = f" of queue {args.queue}" if args.queue else ""
            print(f"No pending pods{queue} {where}.", file=sys.stderr)
            return 0
        wide = args.output == "wide"
        namespaced = not reading.namespace
        header = (*(("NAMESPACE",) if namespaced else ()), *HEADER, *(WIDE_EXTRA if wide else ()), "MESSAGE")
        # The message is free text: keep it last and left-aligned, like every text column.
        text = table(header, [cells(e, namespaced=namespaced, wide=wide) for e in entries], left=len(header))
    sys.stdout.write(text)
    return 0


COMMAND = Command("pods", "pending pods in dispatch order, with their position and reason",
                  configure, run, description=__doc__ or "")
