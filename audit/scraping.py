"""What the API server and a process say about the work done: request counters, CPU, memory.

``apiserver_request_total`` in Kubernetes v1.36 is labelled by ``verb``, ``dry_run``,
``group``, ``version``, ``resource``, ``subresource``, ``scope``, ``component`` and ``code``:
no user agent and no user (a ``client`` label existed before v1.14 and was dropped for
cardinality). Per client, the API server counts requests only through API Priority and
Fairness: ``apiserver_flowcontrol_dispatched_requests_total`` is labelled by the FlowSchema
that classified each request. So each system under test runs as its own identity with a
FlowSchema of its own (``identities``), and its requests are that FlowSchema's count.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

from audit.connection import Connection

REQUESTS = "apiserver_request_total"
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
WEBHOOK_SECONDS = "apiserver_admission_webhook_admission_duration_seconds"
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def samples(text: str, name: str) -> list[Sample]:
    """Every sample of the metric ``name`` (a counter's ``_total`` name) in exposition text."""
    family = name.removesuffix("_total")
    out = []
    for metrics in text_string_to_metric_families(text):
        if metrics.name not in (family, name):
            continue
        for s in metrics.samples:
            if s.name == name:
                out.append(Sample(s.name, dict(s.labels), float(s.value)))
    return out


def totals(found: Iterable[Sample], by: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    """Sum samples by the values of the labels ``by``."""
    out: dict[tuple[str, ...], float] = {}
    for s in found:
        key = tuple(s.labels.get(label, "") for label in by)
        out[key] = out.get(key, 0.0) + s.value
    return out


async def scrape(connection: Connection) -> str:
    """The API server's ``/metrics`` (needs a user allowed ``get`` on that non-resource URL)."""
    return await connection.text("/metrics")


def request_totals(
    text: str, by: tuple[str, ...] = ("verb", "resource", "subresource")
) -> dict[tuple[str, ...], float]:
    """``apiserver_request_total`` summed by the labels ``by``."""
    return totals(samples(text, REQUESTS), by)


def flow_totals(text: str) -> dict[str, float]:
    """Requests the API server dispatched, by FlowSchema (one per client identity: ``identities``)."""
    return {k[0]: v for k, v in totals(samples(text, DISPATCHED), ("flow_schema",)).items()}


def webhook_calls(text: str) -> dict[str, tuple[float, float]]:
    """Admission webhook calls as the API server counts them, by webhook name: (calls, seconds
    spent waiting for answers), from ``apiserver_admission_webhook_admission_duration_seconds``."""
    out: dict[str, tuple[float, float]] = {}
    for metrics in text_string_to_metric_families(text):
        if metrics.name != WEBHOOK_SECONDS:
            continue
        for s in metrics.samples:
            part = {f"{WEBHOOK_SECONDS}_count": 0, f"{WEBHOOK_SECONDS}_sum": 1}.get(s.name)
            if part is None:
                continue
            name = s.labels.get("name", "")
            calls, seconds = out.get(name, (0.0, 0.0))
            out[name] = (calls + s.value, seconds) if part == 0 else (calls, seconds + s.value)
    return out


def increase(after: Mapping[K, float], before: Mapping[K, float]) -> dict[K, float]:
    """How much each counter grew between two scrapes."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


# --- processes ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    pid: int
    cpu_seconds: float
    """User plus system time of the process itself."""
    children_cpu_seconds: float
    """Of its children that it has waited for."""
    rss_bytes: int
    peak_rss_bytes: int
    """VmHWM: the most resident memory it ever had."""


class ProcessError(Exception):
    """The process is gone, or /proc cannot be read."""


def process_usage(pid: int, proc: Path = Path("/proc")) -> ProcessUsage:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        status = (proc / str(pid) / "status").read_text()
    except OSError as e:
        raise ProcessError(f"cannot read /proc for process {pid}: {e}") from e
    return parse_usage(pid, stat, status, os.sysconf("SC_CLK_TCK"))


def tree_usage(pid: int, proc: Path = Path("/proc")) -> ProcessUsage:
    """``process_usage`` of ``pid`` with every living descendant's added (a webhook's workers):
    their CPU time, and what their exited children had (``children_cpu_seconds`` summed into
    ``cpu_seconds``, so a worker that exits mid-run is still counted); the sum of their memory
    (an upper bound on the tree's peak)."""
    root = process_usage(pid, proc)
    parents: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    family, queue = [root], list(parents.get(pid, ()))
    while queue:
        child = queue.pop()
        try:
            family.append(process_usage(child, proc))
        except ProcessError:  # it exited meanwhile: its time went to its parent's children time
            continue
        queue.extend(parents.get(child, ()))
    return ProcessUsage(
        pid, sum(u.cpu_seconds + u.children_cpu_seconds for u in family), 0.0,
        sum(u.rss_bytes for u in family), sum(u.peak_rss_bytes for u in family),
    )


def parse_usage(pid: int, stat: str, status: str, ticks_per_second: int) -> ProcessUsage:
    """From the text of /proc/<pid>/stat and /proc/<pid>/status (see proc(5))."""
    # The command name (field 2) may hold spaces and parentheses: fields start after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))  # fields 14 to 17
    memory = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            memory[key] = int(value.split()[0]) * 1024  # reported in kB
    return ProcessUsage(
        pid, (utime + stime) / ticks_per_second, (cutime + cstime) / ticks_per_second,
        memory.get("VmRSS", 0), memory.get("VmHWM", 0),
    )
