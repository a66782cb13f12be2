"""The documents stay navigable: the architecture page stays an overview, every relative link of
docs/ and the READMEs reaches a file (and a heading, when it names one), and every decision
record has its four parts and names tests that exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[2]
DOCS: Final = ROOT / "docs"
DECISIONS: Final = DOCS / "decisions"
PAGES: Final = sorted([*DOCS.rglob("*.md"), ROOT / "README.md", ROOT / "benchmarks" / "README.md"])
OVERVIEW_LINES: Final = 300
PARTS: Final = ("## Context", "## Decision", "## Consequences", "## Tested by")

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text without its fenced code blocks, whose brackets are not links."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading, as GitHub makes it: lower case, inline
    code marks and punctuation dropped (word characters, hyphens and spaces stay), spaces as
    hyphens."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(prose(page.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: {file.name} has no heading #{anchor}")
    return broken


def test_the_architecture_page_is_an_overview_a_newcomer_reads_in_one_sitting() -> None:
    lines = (DOCS / "architecture.md").read_text().splitlines()
    assert len(lines) <= OVERVIEW_LINES, (
        f"docs/architecture.md has {len(lines)} lines; detail goes to docs/reference/"
    )


def test_headings_become_the_anchors_a_renderer_makes() -> None:
    assert slug("Catalog health (process/catalogs.py)") == "catalog-health-processcatalogspy"
    assert slug("The cycle's goals: a 10k burst, `run_paced`") == "the-cycles-goals-a-10k-burst-run_paced"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    assert broken_links(page) == []


def test_a_link_to_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# There\n\n## A section (with/paths.py)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-section-withpathspy) [gone](missing.md) [bad](there.md#nowhere)\n"
        "[web](https://example.org/x.md)\n```\n[in code](not-a-link.md)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "there.md#nowhere: there.md has no heading #nowhere",
    ]


RECORDS: Final = sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: p.name)
def test_every_decision_record_has_context_decision_consequences_and_its_tests(record: Path) -> None:
    text = record.read_text()
    assert text.startswith(f"# {record.name[:4]}: "), "the title is '# NNNN: what was decided'"
    positions = [text.find(f"\n{part}\n") for part in PARTS]
    assert -1 not in positions, f"missing: {[p for p, at in zip(PARTS, positions, strict=True) if at == -1]}"
    assert positions == sorted(positions), f"the parts go in the order {PARTS}"
    tested_by = text[positions[-1]:]
    assert "tests/" in tested_by or "benchmarks/" in tested_by, "Tested by names no test"


def test_every_test_a_record_names_exists() -> None:
    defined = set()
    for source in (ROOT / "tests").rglob("*.py"):
        defined.update(re.findall(r"^(?:async )?def (test_\w+)|^(test_\w+) =", source.read_text(), re.M))
    names = {name for pair in defined for name in pair if name}
    cited = {
        (record.name, name) for record in RECORDS for name in re.findall(r"`(test_\w+)`", record.read_text())
    }
    assert sorted((record, name) for record, name in cited if name not in names) == []


def test_the_index_lists_every_record_once() -> None:
    index = (DECISIONS / "README.md").read_text()
    listed = re.findall(r"\]\((\d{4}-[^)]+\.md)\)", index)
    assert sorted(listed) == [record.name for record in RECORDS]
    numbers = [record.name[:4] for record in RECORDS]
    assert len(set(numbers)) == len(numbers), "two records share a number"
