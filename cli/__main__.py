"""``sluicegate`` (also ``kubectl sluicegate``): the command line.

Each subcommand lives in its own module and is listed in ``COMMANDS``; adding one is a new
module with a ``COMMAND`` and one line here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cli import explain, export, pods, queues, report, simulate, synth
from cli.commands import EXPECTED, Command, add

COMMANDS: tuple[Command, ...] = (
    simulate.COMMAND,
    Command("records", "run records: traces of what ran (synth, export)",
            subcommands=(synth.COMMAND, export.COMMAND)),
    report.COMMAND,
    queues.COMMAND,
    pods.COMMAND,
    explain.COMMAND,
)


def parser(prog: str = "sluicegate") -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=prog, description="GPU queueing for Kubernetes: what waits, what runs, and what if."
    )
    commands = top.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for command in COMMANDS:
        add(commands, command)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    # Run by kubectl as a plugin, help and usage say what the user typed.
    plugin = Path(sys.argv[0]).name == "kubectl-sluicegate"
    args = parser("kubectl sluicegate" if plugin else "sluicegate").parse_args(argv)
    try:
        status: int = args.run(args)
    except EXPECTED as e:
        print(f"sluicegate: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"sluicegate: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
