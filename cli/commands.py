"""What a subcommand is, so that adding one is a module and one line in ``cli.__main__``.

A ``Command`` names itself, adds its own arguments, and runs with the parsed arguments,
returning the exit status. A command with ``subcommands`` is a group (``records synth``,
later ``records export``). Expected failures raise ``CommandError`` (or one of the errors
``expected()`` lists); ``main`` prints them as one line on stderr and exits 1, never with a traceback.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass


class CommandError(Exception):
    """A command cannot do what was asked; the message says why, for the user."""


def expected() -> tuple[type[Exception], ...]:
    """The errors ``main`` prints as one line (loaded on first use, so that ``sluicegate --help``
    needs neither the trace nor the setup module)."""
    from records.trace import TraceError
    from simulator.setups import SetupError

    return (CommandError, TraceError, SetupError)


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None] | None = None
    run: Callable[[argparse.Namespace], int] | None = None
    subcommands: tuple[Command, ...] = ()
    description: str = ""


def add_global_flags(
    parser: argparse._ActionsContainer, *, namespaced: bool = True, top: bool = False
) -> None:
    """kubectl's global flags, which it takes before the command as well as after it:
    ``--kubeconfig``, ``--context`` and (``namespaced``) ``-n``. The top-level parser
    (``top``) holds their defaults; a command's parser repeats them without a default
    (``argparse.SUPPRESS``), so that a flag given before the command is not overwritten by the
    command's default, and one given after the command wins."""

    def default(value: str) -> str:
        return value if top else argparse.SUPPRESS

    parser.add_argument("--kubeconfig", default=default(""),
                        help="the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", default=default(""),
                        help="the kubeconfig context (default: its current context)")
    if namespaced:
        parser.add_argument("-n", "--namespace", default=default(""),
                            help="the namespace (default: the context's namespace)")


def for_people(doc: str) -> str:
    """A module's docstring as help text: no references to the code (``(``cli.x``)``), and
    literals in plain quotes rather than reStructuredText's double backticks."""
    doc = re.sub(r"\s*\(``[a-z_]+(\.[a-z_]+)+``\)", "", doc)
    return doc.replace("``", "'")


def add(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], command: Command) -> None:
    """Add ``command`` (and its subcommands) to a parser's subcommands."""
    parser = subparsers.add_parser(
        command.name,
        help=command.help,
        description=for_people(command.description or command.help),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if command.configure is not None:
        command.configure(parser)
    if command.run is not None:
        parser.set_defaults(run=command.run)
    if command.subcommands:
        inner = parser.add_subparsers(title="commands", metavar="COMMAND", required=command.run is None)
        for sub in command.subcommands:
            add(inner, sub)
