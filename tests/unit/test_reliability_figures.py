"""The fault suite's figures file and the table rendered from it into docs/reliability.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.reliability import BEGIN, END, Figures, FiguresError, load, render, save, table


def test_a_scenario_run_again_replaces_its_row_and_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / "figures.json"
    save(path, Figures("kills", kills=10, submitted=100, finished=100))
    save(path, Figures("webhook", restarts=1, submitted=50, finished=50))
    save(path, Figures("kills", kills=12, submitted=120, finished=120))
    assert [(r.scenario, r.kills) for r in load(path)] == [("webhook", 0), ("kills", 12)]


def test_the_table_has_a_row_per_scenario_and_totals_of_the_counts() -> None:
    text = table([Figures("kills", suite="make test", kills=10, submitted=100, finished=100, seconds=61),
                  Figures("abuse", suite="make test", abuse_tried=9, abuse_refused=9, submitted=5,
                          finished=5, seconds=20),
                  Figures("soak", suite="make soak", kills=1, rss_start_mib=61.2, rss_end_mib=63.9),
                  Figures("upgrade", suite="make test", restarts=4, submitted=80, finished=80,
                          refused=6, refused_seconds=2.4)])
    lines = text.splitlines()
    assert lines[2].startswith("| kills | make test | 10 | 0 | 0 | 100 | 100 | 0 | 0 | 0 |  |  |  | 61 |")
    assert "| 9 / 9 |" in lines[3]
    assert "| 61 → 64 |" in lines[4]
    assert "| 0 |  | 6 (2.4 s) |  |" in lines[5]
    assert lines[-1].startswith(
        "| **total** |  | 11 | 4 | 0 | 185 | 185 | 0 | 0 | 0 | 9 / 9 | 6 (2.4 s) |  | 81 |")


def test_rendering_replaces_only_the_text_between_the_markers() -> None:
    document = f"# Reliability\n\nprose before\n\n{BEGIN}\nold table\n{END}\n\nprose after\n"
    out = render(document, [Figures("kills", kills=3)])
    assert out.startswith("# Reliability\n\nprose before\n\n" + BEGIN + "\n| Scenario |")
    assert "old table" not in out and out.endswith(f"{END}\n\nprose after\n")
    assert render(out, [Figures("kills", kills=3)]) == out


def test_a_document_without_markers_is_an_error_not_a_silent_rewrite() -> None:
    with pytest.raises(FiguresError, match="has no lines"):
        render("# Reliability\n", [])
