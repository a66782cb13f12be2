"""The top of the ``sluicegate`` command: help that loads only what it shows, ``--version``,
help texts for people (no references to the code), and each listed command's help matching
its module's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cli.__main__ import COMMANDS, _command, main, parser


def test_top_level_help_loads_neither_the_kubernetes_client_nor_the_charting_library() -> None:
    probe = ("import sys\nfrom cli.__main__ import main\ntry:\n    main(['--help'])\n"
             "except SystemExit:\n    pass\n"
             "heavy = ('kubernetes_asyncio', 'matplotlib', 'policy', 'aiohttp')\n"
             "print(sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "[]", out


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    name, number = capsys.readouterr().out.split()
    assert name == "sluicegate" and number[0].isdigit()


@pytest.mark.parametrize("listed", COMMANDS, ids=lambda listed: listed.name)
def test_each_listed_command_has_its_modules_help_and_help_text_names_no_module(listed: object) -> None:
    from cli.__main__ import Listed

    assert isinstance(listed, Listed)
    command = _command(listed)
    assert command.help == listed.help
    words = [listed.name, *(c.name for c in command.subcommands[:1])]
    sub = parser("sluicegate", words)
    text = sub.format_help()
    assert listed.name in text
    for action in sub._subparsers._group_actions if sub._subparsers else ():
        for choice in getattr(action, "choices", {}).values():
            shown = choice.format_help()
            assert "``" not in shown and "cli." not in shown, shown
