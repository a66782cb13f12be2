"""The guides' commands are all found and all tagged with where they run (the e2e test runs them)."""

from __future__ import annotations

from pathlib import Path

from tests.doc_commands import GUIDES, SHELLS, WHERE, blocks, scripts


def test_every_shell_block_of_the_guides_says_where_it_runs() -> None:
    untagged = [str(b) for guide in GUIDES for b in blocks(guide)
                if b.lang in SHELLS and b.where not in WHERE]
    assert untagged == []
    assert all(scripts(guide, "cluster") for guide in GUIDES)
    assert scripts(GUIDES[0], "install") and scripts(GUIDES[0], "helm")
    assert scripts(GUIDES[0], "upgrade") and scripts(GUIDES[0], "rollback")


def test_a_block_inside_a_list_item_loses_its_indentation_and_keeps_its_line(tmp_path: Path) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text("# Title\n\n1. Step:\n\n   ```sh cluster\n   cat <<'EOF'\n   a: 1\n   EOF\n   ```\n\n"
                     "```yaml\nb: 2\n```\n")
    found = blocks(guide)
    assert [(b.line, b.lang, b.where) for b in found] == [(5, "sh", "cluster"), (11, "yaml", "")]
    assert found[0].text == "cat <<'EOF'\na: 1\nEOF\n"
    assert scripts(guide, "cluster") == found[:1] and scripts(guide, "install") == []
