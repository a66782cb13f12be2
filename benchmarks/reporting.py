"""``benchmarks/RESULTS.md`` from the saved runs: one table per scenario, the systems side by
side with ratios to the bare ungater, how the figures grow with the work, what was not run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path

from benchmarks.bare import VERSION as BARE_VERSION
from benchmarks.results import Run
from benchmarks.scenarios import ALL, QUICK, Scenario, floor

# Column order: the ceiling first, then the product, then the peer in both configurations.
ORDER = ("bare", "sluicegate", "kueue", "kueue-qps1000")
DASH = "–"


def _systems(runs: Sequence[Run]) -> list[str]:
    present = {r.system for r in runs}
    return [s for s in ORDER if s in present] + sorted(present - set(ORDER))


def _ratio(value: float, base: float | None) -> str:
    if base is None or base <= 0:
        return ""
    return f" ({value / base:.2f}×)"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def _s(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds < 100 else f"{seconds:.0f}"


def _webhooks(run: Run) -> str:
    """``pods.mutate.sluicegate.dev 1.00 × 4.2 ms, …``: calls per pod and the mean wait for an
    answer, as the API server measured them; a webhook called less than once per 100 pods is left
    out (a Job webhook the load never sends to)."""
    if run.webhooks is None:
        return "–"
    shown = [f"{name} {calls / run.pods:.2f} × {seconds / calls * 1000:.1f} ms"
             for name, (calls, seconds) in sorted(run.webhooks.items())
             if run.pods and calls >= run.pods / 100]
    return ", ".join(shown) or "none"


Row = tuple[str, Callable[[Run, Run | None], str]]

ROWS: tuple[Row, ...] = (
    ("result", lambda r, b: "ok" if r.ok else "**FAILED**"),
    ("drain: first creation → last pod finished (s)",
     lambda r, b: _s(r.drain_seconds) + _ratio(r.drain_seconds, b.drain_seconds if b else None)),
    ("drain ÷ floor", lambda r, b: f"{r.drain_seconds / floor(r.pods, r.seconds, r.cap):.2f}"),
    ("releases per second",
     lambda r, b: f"{r.releases_per_second:.1f}" + _ratio(r.releases_per_second,
                                                           b.releases_per_second if b else None)),
    ("creation → release p50 / p95 / p99 (s)",
     lambda r, b: " / ".join(_s(x) for x in (r.creation_to_release.p50, r.creation_to_release.p95,
                                              r.creation_to_release.p99))),
    # A slot is freed by a finish at a full limit while pods of its scope wait: a system that
    # never fills its limits frees few or none, so the count is part of the figure.
    ("freed slot → next release p50 / p99 (ms)",
     lambda r, b: (f"{_ms(r.freed_to_release.p50)} / {_ms(r.freed_to_release.p99)} "
                   f"(n={r.freed_to_release.count})"
                   if r.freed_to_release.count else "no finish at a full limit while pods waited")),
    ("peak running, all queues / limit", lambda r, b: f"{r.peak_running} / {r.cap}"),
    ("peak running, one queue / limit",
     # The bare ungater was held to the total only, before it was capped per queue too.
     lambda r, b: f"{r.peak_queue_running} / {r.max_running}"
     if r.system != "bare" or r.version == BARE_VERSION
     else f"{r.peak_queue_running} (it knew no queues)"),
    ("CPU seconds of the system during the run",
     lambda r, b: f"{r.cpu_seconds:.1f}" + _ratio(r.cpu_seconds, b.cpu_seconds if b else None)
     if r.processes else DASH),
    ("peak RSS (MiB), by process",
     lambda r, b: ", ".join(f"{name} {u.peak_rss_mib:.0f}" for name, u in sorted(r.processes.items()))
     or DASH),
    ("API requests by the system per pod",
     lambda r, b: f"{r.requests_per_pod:.2f}" + _ratio(r.requests, b.requests if b else None)),
    ("… by kind, per pod",
     lambda r, b: ", ".join(f"{kind} {count / r.pods:.2f}" for kind, count in r.requests_by_kind.items()
                            if count / r.pods >= 0.005) or DASH),
    ("API requests by the system / by all clients", lambda r, b: f"{r.requests:.0f} / {r.requests_all:.0f}"),
    ("kube-apiserver + etcd CPU seconds",
     lambda r, b: f"{r.control_plane_cpu_seconds.get('kube-apiserver', 0.0):.0f} + "
                  f"{r.control_plane_cpu_seconds.get('etcd', 0.0):.0f}"),
    ("submitting the pods took (s)", lambda r, b: _s(r.submit_seconds)),
    ("admission webhook calls per pod, mean wait (API server's measure)", lambda r, b: _webhooks(r)),
    ("load average before the run; at the load's start → end",
     lambda r, b: f"{_before(r)}; {r.load_average[0]:.1f} → {r.load_average[1]:.1f}"),
    ("run started (UTC)", lambda r, b: r.started.replace("+00:00", "")),
    # Runs of one table may come from different invocations; "+changes": uncommitted edits.
    ("commit of this repository", lambda r, b: r.versions.get("sluicegate", DASH)),
)


def median_runs(runs: Sequence[Run]) -> dict[str, Run]:
    """Each system's run of median drain among its passing rounds (the lower of the two middle
    ones for an even count); a system none of whose rounds passed shows its latest."""
    chosen = {}
    for system in _systems(runs):
        mine = sorted((r for r in runs if r.system == system), key=lambda r: r.round)
        passed = sorted((r for r in mine if r.ok), key=lambda r: r.drain_seconds)
        chosen[system] = passed[(len(passed) - 1) // 2] if passed else mine[-1]
    return chosen


def table(runs: Sequence[Run]) -> list[str]:
    """The systems side by side: each one's median run, and every round's drain when repeated."""
    by_system = median_runs(runs)
    columns = list(by_system)
    base = by_system.get("bare")
    base = base if base is not None and base.ok else None
    lines = ["| | " + " | ".join(by_system[s].title for s in columns) + " |",
             "| --- |" + " --- |" * len(columns)]
    for label, cell in ROWS:
        if label == "result":
            lines.append("| result | " + " | ".join(_result([r for r in runs if r.system == s])
                                                    for s in columns) + " |")
            continue
        lines.append(f"| {label} | " + " | ".join(cell(by_system[s], base) for s in columns) + " |")
    if any(r.round > 1 for r in runs):
        lines.append("| drain in each round, s (load average at its start) | " + " | ".join(
            ", ".join(f"{r.drain_seconds:.0f} ({r.load_average[0]:.0f})" + ("" if r.ok else " FAILED")
                      for r in sorted((r for r in runs if r.system == s), key=lambda r: r.round))
            for s in columns) + " |")
    return lines


def _result(rounds: Sequence[Run]) -> str:
    failed = sum(not r.ok for r in rounds)
    loaded = sum(r.load_allowed for r in rounds)
    mark = ""
    if loaded:
        mark = (" **LOADED** (started over the quiet bound, --allow-load)" if len(rounds) == 1
                else f" **LOADED** in {loaded} of {len(rounds)} rounds (--allow-load)")
    if not failed:
        return ("ok" if len(rounds) == 1 else f"ok ({len(rounds)} rounds; median shown)") + mark
    return ("**FAILED**" if len(rounds) == 1 else f"**FAILED** in {failed} of {len(rounds)} rounds") + mark


def _before(r: Run) -> str:
    """The load average just before the run, marked when it was over the quiet bound."""
    if r.load_before is None:
        return "not recorded"
    return f"{r.load_before:.1f}" + (" **over the bound**" if r.load_allowed else "")


def describe(s: Scenario | Run) -> str:
    cap = s.queues * s.max_running
    return (f"{s.pods:,} pods of {s.seconds:g} s (1 GPU each) over {s.queues} queue(s) and {s.teams} teams; "
            f"{s.nodes} nodes × {s.gpus_per_node} GPUs; at most {s.max_running} running per queue "
            f"({cap} in all); floor {floor(s.pods, s.seconds, cap):.1f} s")


def section(name: str, runs: Sequence[Run]) -> list[str]:
    first = runs[0]
    lines = [f"## {name}", "", describe(first) + ".", ""]
    loads = {describe(r) for r in runs}
    if len(loads) > 1:  # saved by invocations between which the scenario was redefined
        lines += ["**Not the same load**: " + "; ".join(
            f"{r.title}: {describe(r)}" for r in sorted(runs, key=lambda r: (r.system, r.round))), ""]
    lines += table(runs)
    commands = sorted({r.command for r in runs})
    lines += ["", "Command: " + "; ".join(f"`{c}`" for c in commands)]
    repeated = any(r.round > 1 for r in runs)
    for r in sorted(runs, key=lambda r: (_systems(runs).index(r.system), r.round)):
        which = f"{r.title}, round {r.round}" if repeated else r.title
        if not r.ok:
            lines += ["", f"**{which} FAILED**:", *(f"- {f}" for f in r.failures)]
        if r.notes:
            lines += ["", f"Note on {which}:", *(f"- {n}" for n in r.notes)]
    return [*lines, ""]


GROWN: tuple[tuple[str, Callable[[Run], float]], ...] = (
    ("drain s", lambda r: r.drain_seconds),
    ("CPU-s", lambda r: r.cpu_seconds),
    ("peak RSS MiB", lambda r: r.peak_rss_mib),
    ("requests/pod", lambda r: r.requests_per_pod),
)


def growth(runs: Sequence[Run]) -> list[str]:
    """Per system and shape (queues, nodes): the figures at each pod count, and how they grow."""
    shapes = sorted({(r.queues, r.nodes) for r in runs if r.scenario.startswith("p") and r.ok})
    lines: list[str] = []
    for queues, nodes in shapes:
        cells = [r for r in runs
                 if r.ok and r.scenario.startswith("p") and (r.queues, r.nodes) == (queues, nodes)]
        cells = [r for p in {r.pods for r in cells}
                 for r in median_runs([c for c in cells if c.pods == p]).values()]
        counts = sorted({r.pods for r in cells})
        if len(counts) < 2:
            continue
        lines += [f"### {queues} queues, {nodes} nodes", "",
                  "| system | " + " | ".join(f"{c:,} pods" for c in counts) + " | growth per step (pods ×" +
                  ", ×".join(f"{b / a:g}" for a, b in pairwise(counts)) + ") |",
                  "| --- |" + " --- |" * (len(counts) + 1)]
        for system in _systems(cells):
            mine = {r.pods: r for r in cells if r.system == system}
            for label, value in GROWN:
                shown = [f"{value(mine[c]):.1f}" if c in mine else DASH for c in counts]
                steps = [f"×{value(mine[b]) / value(mine[a]):.2f}"
                         if a in mine and b in mine and value(mine[a]) else DASH
                         for a, b in pairwise(counts)]
                title = mine[next(iter(mine))].title if mine else system
                lines.append(f"| {title}: {label} | " + " | ".join(shown) + " | " + ", ".join(steps) + " |")
        lines.append("")
    return lines


def coverage(runs: Sequence[Run], scenarios: Sequence[Scenario] = ALL) -> list[str]:
    lines = ["| scenario | systems run | failed |", "| --- | --- | --- |"]
    for s in scenarios:
        mine = [r for r in runs if r.scenario == s.name]
        ran = ", ".join(_systems(mine)) or "not run"
        failed = ", ".join(dict.fromkeys(r.system for r in mine if not r.ok)) or DASH
        lines.append(f"| {s.name} | {ran} | {failed} |")
    return lines


def report(runs: Sequence[Run], intro: Sequence[str] = ()) -> str:
    latest = max(runs, key=lambda r: r.started) if runs else None
    lines = ["# Benchmark results: Sluicegate, Kueue and the bare ungater", "",
             "Written by `python -m benchmarks.matrix` from the runs saved in `benchmarks/results/` "
             "(one JSON file per scenario and system). How to read and reproduce them: "
             "`benchmarks/README.md`.", "", *intro]
    if latest is not None:
        m, v = latest.machine, latest.versions
        lines += ["## Machine and versions", "",
                  f"- {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('memory', '?')} memory, "
                  f"Linux {m.get('kernel', '?')} ({m.get('arch', '?')}); shared with other work, so each "
                  "table gives the load average at the start and end of each run.",
                  f"- Kubernetes {v.get('kubernetes')}, etcd {v.get('etcd')}, kwok {v.get('kwok')}, "
                  f"Kueue {v.get('kueue')} (all built with {v.get('go')}), Python {v.get('python')}, "
                  f"Sluicegate at commit {v.get('sluicegate')} (of the latest run; each run's JSON "
                  "has its own).",
                  ""]
    lines += ["## Which cells were run", "", *coverage(runs), ""]
    order = [s.name for s in (*ALL, QUICK)]
    ranked = sorted({r.scenario for r in runs}, key=lambda n: order.index(n) if n in order else len(order))
    for name in ranked:
        lines += section(name, [r for r in runs if r.scenario == name])
    grown = growth(runs)
    if grown:
        lines += ["## Growth with the work", "",
                  "Each figure at 100, 1,000 and 5,000 pods for the same queues and nodes, and its "
                  "growth from one pod count to the next: linear growth matches the pod-count step.", "",
                  *grown]
    return "\n".join(lines).rstrip() + "\n"


def write(path: Path, runs: Sequence[Run], intro: Sequence[str] = ()) -> None:
    path.write_text(report(runs, intro))
