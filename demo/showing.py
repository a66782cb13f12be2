"""How the demo shows what happens: a live terminal view (rich), or plain lines for CI and logs.

Both take the same calls: ``said(at, line)`` when the story does something, ``update(at,
board)`` a few times a second, ``close()`` at the end. The summary is plain text either way
(``summary_lines``), so a log and a terminal end alike.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Protocol, TextIO

from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from demo.board import PLACEMENT, UNEXPLAINED, Board, Waiting
from demo.summary import Summary

STORY_LINES = 8
MIN_STORY_LINES = 2
STATUS_EVERY = 5.0
CHROME = 1 + 2 + 3
"""Lines the live view spends besides story lines, queue rows and waiting rows: the cursor line
Live keeps below the view, the story panel's borders, the waiting table's title, header and rule."""


class View(Protocol):
    def said(self, at: float, line: str) -> None: ...

    def update(self, at: float, board: Board) -> None: ...

    def close(self) -> None: ...


def _reason(w: Waiting) -> str:
    if w.reason == PLACEMENT:
        return "released; unplaceable"
    if w.reason == UNEXPLAINED:
        return "gated (reason not written yet)"
    return w.reason


class LiveView:
    """Queues, GPU use per team, every waiting pod's reason and the story so far, redrawn in place."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.story: deque[str] = deque(maxlen=STORY_LINES)
        self.board = Board((), {}, ())
        self.at = 0.0
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def said(self, at: float, line: str) -> None:
        self.story.append(f"[{at:5.1f}s] {line}")
        self.live.update(self._render())

    def update(self, at: float, board: Board) -> None:
        self.at, self.board = at, board
        self.live.update(self._render())

    def close(self) -> None:
        self.live.stop()

    def _render(self) -> Group:
        queues = self._queues()
        fixed = CHROME + len(self.console.render_lines(queues, self.console.options, pad=False))
        story_lines, rows = fit(self.console.size.height - fixed, len(self.board.waiting))
        shown = self.board.waiting[:rows]
        waiting = Table(title=f"Waiting pods ({len(self.board.waiting)})", title_justify="left",
                        box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        # One line a row, the reason always whole: every column as wide as its longest cell
        # (the pod's name without its namespace, which the story names), the message gets what
        # is left and gives way first.
        names = [w.pod.rpartition("/")[2] for w in shown]
        widths = [max([len("pod"), *map(len, names)]),
                  max([len("queue"), *(len(w.queue) for w in shown)]),
                  max([len("why"), *(len(_reason(w)) for w in shown)])]
        rest = max(10, self.console.size.width - sum(widths) - 3 * len(widths))  # padding and rules
        for column, width in zip(("pod", "queue", "why"), widths, strict=True):
            waiting.add_column(column, no_wrap=True, width=width)
        waiting.add_column("message", no_wrap=True, overflow="ellipsis", width=rest)
        for w, name in zip(shown, names, strict=True):
            style = "bold red" if w.released else ""
            waiting.add_row(name, w.queue, Text(_reason(w), style=style), w.message)
        if len(self.board.waiting) > rows:
            waiting.add_row(f"… and {len(self.board.waiting) - rows} more", "", "", "")
        lines = list(self.story)[-story_lines:] if story_lines else []
        story = Panel(Text("\n".join(lines), no_wrap=True, overflow="ellipsis"),
                      title="The story", title_align="left")
        return Group(story, queues, waiting)

    def _queues(self) -> Table:
        """The queues, with GPU use per team in the title (one table: the view must fit 24 lines)."""
        teams = ", ".join(f"{team or '(none)'} {gpus}" for team, gpus in self.board.teams.items())
        queues = Table(title=f"Queues at {self.at:.0f}s; GPUs in use by team: {teams or 'none'}",
                       title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for column in ("queue", "priority", "running/max", "pending", "finished", "GPUs/quota"):
            queues.add_column(column, justify="left" if column == "queue" else "right", no_wrap=True)
        for q in self.board.queues:
            queues.add_row(q.name, str(q.priority), q.limit, str(q.pending), str(q.finished), q.gpu_use)
        return queues


def fit(free: int, waiting: int) -> tuple[int, int]:
    """How many story lines and waiting pods' rows to show in ``free`` lines, so the view fits
    the terminal: every waiting pod when they fit beside the minimum of story, else as many as
    fit with one line left for "… and N more"; the story gets what is left, up to its length,
    and at least its minimum (a terminal too small for that overflows, rows first kept at one)."""
    if waiting + MIN_STORY_LINES <= free:
        return min(STORY_LINES, free - waiting), waiting
    rows = max(1, free - MIN_STORY_LINES - 1)
    return MIN_STORY_LINES, min(rows, waiting)


class PlainView:
    """One line per thing that happens: story steps, each pod's new reason, and every few
    seconds a line of queue figures."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.reasons: dict[str, str] = {}
        self.last_status = -STATUS_EVERY

    def _print(self, at: float, line: str) -> None:
        print(f"[{at:5.1f}s] {line}", file=self.out, flush=True)

    def said(self, at: float, line: str) -> None:
        self._print(at, line)

    def update(self, at: float, board: Board) -> None:
        for w in board.waiting:
            # A released pod that cannot be placed is told once, by the story (``said``).
            if w.reason not in (UNEXPLAINED, PLACEMENT) and self.reasons.get(w.pod) != w.reason:
                self.reasons[w.pod] = w.reason
                self._print(at, f"{w.pod} waits in {w.queue}: {_reason(w)}: {w.message}")
        if at - self.last_status >= STATUS_EVERY:
            self.last_status = at
            queues = ", ".join(f"{q.name} {q.limit} running {q.pending} pending {q.finished} done"
                               for q in board.queues if q.running or q.pending or q.finished)
            teams = ", ".join(f"{t} {g}" for t, g in board.teams.items())
            self._print(at, f"queues: {queues or 'idle'}; GPUs in use: {teams or 'none'}")

    def close(self) -> None:
        self.out.flush()


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def summary_lines(summary: Summary, refused_by: str, no_node: Mapping[str, str] | None = None) -> list[str]:
    out = ["Summary, from the auditor's own record of every pod:",
           f"  {'queue':<16} {'pods':>5} {'released':>9} {'waiting':>8} {'mean wait':>10} {'p95 wait':>9} "
           f"{'GPU-hours':>10} {'unplaced quota-hours':>20}"]
    for q in summary.queues:
        out.append(f"  {q.queue:<16} {q.pods:>5} {q.released:>9} {q.waiting:>8} {_seconds(q.mean_wait):>10} "
                   f"{_seconds(q.p95_wait):>9} {q.gpu_hours:>10.4f} {q.quota_hours:>20.4f}")
    trials = summary.trial_waits
    out.append(f"urgent: the Job's pod waited {_seconds(summary.urgent_wait)}; the sweep's {trials.count} "
               f"trials waited {_seconds(trials.mean)} on average (longest {_seconds(trials.max)}); "
               f"{summary.overtaken} trials submitted before it were released after it")
    if summary.violations:
        out += ["limits: EXCEEDED:", *(f"  {v}" for v in summary.violations)]
    else:
        out.append("limits: none exceeded (queues, teams, the cluster and the sweep's workflow, "
                   "over the auditor's record)")
    out.append(f"refused: {refused_by}: {summary.refused}" if summary.refused
               else f"refused: NOT REFUSED: {refused_by} was admitted")
    for pod, words in (no_node or {}).items():
        out.append(f"no node fits: {pod}: never released, holds no quota: {words}")
    for pod, words in summary.unplaceable.items():
        out.append(f"unplaceable: {pod}: released by policy, Kubernetes cannot place it: {words}")
    if not summary.unplaceable:
        out.append("unplaceable: none seen")
    out.append("GPU-hours count a pod from its binding to a node; a released pod holds its quota from "
               "its release, and the time before it is placed is counted apart, as unplaced quota-hours "
               "(a pod Kubernetes cannot place uses no GPU-hours).")
    return out
