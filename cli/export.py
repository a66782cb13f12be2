"""``sluicegate records export``: the recorder's run records as a trace (JSON Lines).

    sluicegate records export [--since 7d] [-o trace.jsonl] > trace.jsonl

One workload per line, in the schema of docs/records.md: what ``sluicegate simulate --trace``
and ``sluicegate report --trace`` read. ``--since`` is a length back from now (``7d``, ``36h``)
or an RFC 3339 time: the workloads still waiting or running then, or submitted after. Pods
the recorder found deleted while it was down are in the trace (phase Deleted) and counted on
stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cli import recorder
from cli.commands import Command, CommandError
from records.periods import start_of
from records.trace import write


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", help="a length back from now (7d), or an RFC 3339 time (default: all)")
    parser.add_argument("-o", "--output", type=Path, help="write to this file (default: standard output)")
    recorder.add_arguments(parser)


def since(text: str | None, now: float) -> float | None:
    if text is None:
        return None
    try:
        return start_of(text, now)
    except ValueError as e:
        raise CommandError(f"--since: {e}") from e


def run(args: argparse.Namespace) -> int:
    start = since(args.since, time.time())
    answer = recorder.fetch(args, start)
    if args.output is None:
        count = write(answer.records, sys.stdout)
    else:
        with args.output.open("w", encoding="utf-8") as stream:
            count = write(answer.records, stream)
    print(f"sluicegate: exported {count} workloads", file=sys.stderr)
    if answer.lost:
        print(f"sluicegate: {answer.lost} pods were deleted while the recorder was not running; they are "
              "in the trace as Deleted, ending when the recorder noticed", file=sys.stderr)
    return 0


COMMAND = Command("export", "the recorder's run records as a trace (JSON Lines)", configure, run,
                  description=__doc__ or "")
