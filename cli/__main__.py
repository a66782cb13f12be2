"""``sluicegate`` (also ``kubectl sluicegate``): the command line.

Each subcommand lives in its own module, listed in ``COMMANDS`` by name with its one-line
help; adding one is a new module with a ``COMMAND`` and one line here. Only the module of the
subcommand being run is imported: ``sluicegate --help`` lists the commands without loading the
Kubernetes client, the policy or the charting libraries, so it answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cli.commands import Command, CommandError, add, add_global_flags, expected


@dataclass(frozen=True, slots=True)
class Listed:
    """A subcommand as the top-level help lists it, and where its ``Command`` lives."""

    name: str
    help: str
    module: str  # the module whose COMMAND it is; a group lists its subcommands' modules
    group: tuple[str, ...] = ()


COMMANDS: tuple[Listed, ...] = (
    Listed("simulate", "replay a trace under proposed Queues, Teams and Policy: waits, GPU use, makespan",
           "cli.simulate"),
    Listed("records", "run records: traces of what ran (synth, export)", "",
           group=("cli.synth", "cli.export")),
    Listed("report", "GPU-hours, jobs, waits and shares per team, queue or user", "cli.report"),
    Listed("queues", "every queue: priority, running/max, pending, GPUs used/quota, oldest wait",
           "cli.queues"),
    Listed("pods", "pending pods in dispatch order, with their position and reason", "cli.pods"),
    Listed("explain", "one pod's story: who, which presets, why it waits, where it runs", "cli.explain"),
    Listed("migrate-storage", "store every Queue, Team, Preset and Policy in the CRDs' storage "
           "version (after an upgrade)", "cli.migrate"),
)


def _command(listed: Listed) -> Command:
    if listed.group:
        subcommands = tuple(importlib.import_module(m).COMMAND for m in listed.group)
        return Command(listed.name, listed.help, subcommands=subcommands)
    command: Command = importlib.import_module(listed.module).COMMAND
    return command


class _Version(argparse.Action):
    """``--version``: the installed package's version (read only when asked)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        import importlib.metadata as metadata

        try:
            found = metadata.version("sluicegate")
        except metadata.PackageNotFoundError:
            found = "unknown"
        print(f"{parser.prog} {found}")
        parser.exit()


def parser(prog: str = "sluicegate", argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of the subcommand ``argv`` names (every subcommand's when
    ``argv`` is None); the others are listed with their help only."""
    top = argparse.ArgumentParser(
        prog=prog, description="GPU queueing for Kubernetes: what waits, what runs, and what if."
    )
    top.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    flags = top.add_argument_group("global flags (before or after the command, as kubectl takes them)")
    add_global_flags(flags, top=True)
    commands = top.add_subparsers(title="commands", metavar="COMMAND", required=True)
    words = set(argv) if argv is not None else None
    for listed in COMMANDS:
        if words is None or listed.name in words:
            add(commands, _command(listed))
        else:
            commands.add_parser(listed.name, help=listed.help)
    return top


def _expected(e: Exception) -> bool:
    if isinstance(e, CommandError):
        return True
    return isinstance(e, expected())


def main(argv: Sequence[str] | None = None) -> int:
    # Run by kubectl as a plugin, help and usage say what the user typed.
    plugin = Path(sys.argv[0]).name == "kubectl-sluicegate"
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser("kubectl sluicegate" if plugin else "sluicegate", words).parse_args(words)
    try:
        status: int = args.run(args)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"sluicegate: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except Exception as e:
        if not _expected(e):
            raise
        print(f"sluicegate: {e}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
