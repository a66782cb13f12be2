"""Extracting the commands a document shows (``tests.doc_commands``), and the CLI's refusals
that need no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.__main__ import main
from tests.doc_commands import commands_in

DOC = """\
# Guide

```console
$ kubectl apply -k manifests/samples
namespace/vision-research created
$ sluicegate pods \\
    -n vision-research
NAME  QUEUE
```

```yaml
$ not a command: a yaml block
```

````console
$ kubectl get queues
```
$ still inside the four-backtick block
````

Text with $ signs is not a command.
"""


def test_commands_are_the_prompted_lines_of_console_blocks_in_order(tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text(DOC)
    found = commands_in(doc)
    assert [c.text for c in found] == [
        "kubectl apply -k manifests/samples",
        "sluicegate pods -n vision-research",
        "kubectl get queues",
        "still inside the four-backtick block",
    ]
    assert [c.line for c in found] == [4, 6, 16, 18]
    assert str(found[0]) == "guide.md:4: $ kubectl apply -k manifests/samples"


def test_the_cli_guide_runs_every_cluster_command() -> None:
    found = commands_in(Path(__file__).resolve().parents[2] / "docs" / "cli.md")
    typed = {c.text.split()[1] for c in found if c.text.startswith("sluicegate ")}
    assert typed == {"queues", "pods", "explain"}


def test_without_a_kubeconfig_a_command_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert main(["queues"]) == 1
    missing = tmp_path / "missing"
    said = f"sluicegate: no kubeconfig found at {missing} (set --kubeconfig or KUBECONFIG)\n"
    assert capsys.readouterr().err == said
