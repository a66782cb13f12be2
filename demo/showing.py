"""How the demo shows what happens: a live terminal view (rich), or plain lines for CI and logs.

Both take the same calls: ``said(at, line)`` when the story does something, ``update(at,
board)`` a few times a second, ``close()`` at the end. The summary is plain text either way
(``summary_lines``), so a log and a terminal end alike.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from demo.board import PLACEMENT, UNEXPLAINED, Board, Waiting
from demo.summary import Summary

STORY_LINES = 8
WAITING_ROWS = 14
STATUS_EVERY = 5.0


class View(Protocol):
    def said(self, at: float, line: str) -> None: ...

    def update(self, at: float, board: Board) -> None: ...

    def close(self) -> None: ...


def _reason(w: Waiting) -> str:
    if w.reason == PLACEMENT:
        return "released; Kubernetes cannot place it"
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
        queues = Table(title=f"Queues at {self.at:.0f}s", title_justify="left", expand=False)
        for column in ("queue", "priority", "running/max", "pending", "finished", "GPUs/quota"):
            queues.add_column(column, justify="left" if column == "queue" else "right")
        for q in self.board.queues:
            queues.add_row(q.name, str(q.priority), q.limit, str(q.pending), str(q.finished), q.gpu_use)
        teams = Table(title="GPUs per team", title_justify="left", min_width=20)
        teams.add_column("team")
        teams.add_column("GPUs", justify="right")
        for team, gpus in self.board.teams.items():
            teams.add_row(team or "(none)", str(gpus))
        waiting = Table(title=f"Waiting pods ({len(self.board.waiting)})", title_justify="left")
        for column in ("pod", "queue", "why", "message"):
            waiting.add_column(column, overflow="fold")
        for w in self.board.waiting[:WAITING_ROWS]:
            style = "bold red" if w.released else ""
            waiting.add_row(w.pod, w.queue, Text(_reason(w), style=style), w.message)
        if len(self.board.waiting) > WAITING_ROWS:
            waiting.add_row(f"... and {len(self.board.waiting) - WAITING_ROWS} more", "", "", "")
        story = Panel(Text("\n".join(self.story)), title="The story", title_align="left")
        return Group(story, queues, teams, waiting)


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


def summary_lines(summary: Summary, refused_by: str) -> list[str]:
    out = ["Summary, from the auditor's own record of every pod:",
           f"  {'queue':<16} {'pods':>5} {'released':>9} {'waiting':>8} {'mean wait':>10} {'p95 wait':>9} "
           f"{'GPU-hours':>10}"]
    for q in summary.queues:
        out.append(f"  {q.queue:<16} {q.pods:>5} {q.released:>9} {q.waiting:>8} {_seconds(q.mean_wait):>10} "
                   f"{_seconds(q.p95_wait):>9} {q.gpu_hours:>10.4f}")
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
    for pod, words in summary.unplaceable.items():
        out.append(f"unplaceable: {pod}: released by policy, Kubernetes cannot place it: {words}")
    if not summary.unplaceable:
        out.append("unplaceable: none seen")
    out.append("GPU-hours count a released pod from its release, as its quota is held from then: "
               "a pod Kubernetes cannot place is charged too.")
    return out
