"""One run: one system, one scenario, on a running cluster; measured, checked, and reported.

The system is started and configured first; then the recorder (``audit``: its own connection)
starts watching the run's pods, the API server's counters and the processes' CPU are read, and
the load driver submits every pod as a burst (16 at a time over keep-alive connections) while
the system releases them. Once every pod has finished, the counters and CPU are read again.

The run's own correctness is checked from the record, and any problem is a failure of the run,
not a figure: a release beyond a configured limit, a pod lost or released twice, a pod created
without the system's gate, a system whose own account disagrees (``System.finish``), fewer
pod writes from the system than pods (it cannot have released them itself), or no process of
the system measured (its CPU and memory would read as zero).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from audit.checking import Limits, lost, peaks, released_twice, violations
from audit.connection import Connection, Credentials
from audit.latencies import Latency, creation_to_release, drain, freed_to_release
from audit.loading import Load, Submitted, names, new_run, prepare, remove, submit
from audit.recording import Recorder
from audit.records import Kind, Record
from audit.scraping import (
    ProcessError,
    ProcessUsage,
    flow_totals,
    increase,
    scrape,
    tree_usage,
    webhook_calls,
)
from benchmarks import counting, machine
from benchmarks.profiling import Profiles
from benchmarks.results import Percentiles, Run, Usage
from benchmarks.scenarios import Scenario
from benchmarks.systems import Account, Progress, Setup, System
from controlplane.launching import LocalCluster

PROGRESS_SECONDS = 10.0
# A run in which nothing was released or finished for this long has stalled: it fails rather
# than hang an unattended matrix.
STALL_SECONDS = 180.0
CONCURRENCY = 16
CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-scheduler", "kube-controller-manager", "kwok")


class Stalled(Exception):
    """Nothing moved for STALL_SECONDS."""


@dataclass(frozen=True, slots=True)
class Measured:
    submitted: Submitted
    record: Record
    requests: dict[str, float]
    """By kind (``counting.KINDS``)."""
    requests_all: float
    processes: Mapping[str, Usage]
    control_plane: Mapping[str, float]
    load_average: tuple[float, float]
    problems: tuple[str, ...]
    webhooks: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Admission webhook calls and the API server's wait for them, by webhook name."""


def make_load(scenario: Scenario, system: System) -> Load:
    run = new_run()
    return Load(
        pods=scenario.pods, queues=names(f"{run}-q", scenario.queues), teams=names("t", scenario.teams),
        gpus=1, seconds=scenario.seconds, concurrency=CONCURRENCY, run=run, naming=system.naming,
        gated=system.gates_by_driver, namespace_labels=dict(system.namespace_labels),
    )


def run(
    cluster: LocalCluster, system: System, scenario: Scenario, *, command: str, progress: Progress,
    profile: Path | None = None,
) -> Run:
    """Start ``system`` on ``cluster``, run ``scenario`` through it, stop it; the measured run.
    With ``profile`` (a directory), the system's Python processes are sampled with py-spy during
    the load (``profiling``)."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load = make_load(scenario, system)
    admin = Credentials.from_kubeconfig(cluster.kubeconfig)
    say = _prefixed(progress, f"[{scenario.name} {system.key}]")
    begun = time.monotonic()
    say(f"starting {system.title}")
    counting.install(cluster, system.key, system.subjects)
    system.start(cluster, say)
    namespaces: tuple[str, ...] = ()
    try:
        namespaces = asyncio.run(_prepare(admin, load))
        setup = Setup(scenario, load, namespaces)
        system.configure(setup)
        say(f"started and configured in {time.monotonic() - begun:.1f}s")
        profiles = Profiles(profile, f"{scenario.name}.{system.key}") if profile is not None else None
        measured = asyncio.run(_measure(admin, cluster, system, setup, say, profiles))
        account = system.finish(setup)
    finally:
        stopping = time.monotonic()
        if namespaces:
            asyncio.run(_remove(admin, namespaces))
        system.stop()
        counting.uninstall(cluster, system.key)
        say(f"stopped in {time.monotonic() - stopping:.1f}s")
    problems = [*measured.problems, *check(system, setup, measured), *account.problems]
    for problem in problems:
        say(f"FAILED: {problem}")
    notes = run_notes(account, profiled=profile is not None)
    for note in notes:
        say(f"note: {note}")
    run = figures(system, scenario, measured, problems, started=started, command=command,
                  limits=system.limits(setup))
    return replace(run, notes=notes)


def run_notes(account: Account, *, profiled: bool) -> tuple[str, ...]:
    """What the report shows beside a run's figures: the system's notes, and whether py-spy
    sampled its processes (a run saved with the others must not pass for an ordinary one)."""
    sampled = ("sampled with py-spy during the load (--profile): its figures carry the sampling's cost",)
    return (*account.notes, *(sampled if profiled else ()))


def _prefixed(progress: Progress, prefix: str) -> Progress:
    return lambda line: progress(f"{prefix} {line}")


async def _prepare(admin: Credentials, load: Load) -> tuple[str, ...]:
    async with Connection(admin) as connection:
        return await prepare(connection, load)


async def _remove(admin: Credentials, namespaces: tuple[str, ...]) -> None:
    async with Connection(admin) as connection:
        await remove(connection, namespaces)


def _usage(pids: Mapping[str, int]) -> dict[str, ProcessUsage]:
    out = {}
    for name, pid in pids.items():
        try:
            out[name] = tree_usage(pid)  # a webhook's workers with it
        except ProcessError:
            continue
    return out


def _control_plane_pids(cluster: LocalCluster) -> dict[str, int]:
    try:
        recorded: dict[str, int] = json.loads(cluster.layout.state.read_text())["pids"]
    except (FileNotFoundError, KeyError, ValueError):
        return {}
    return {name: pid for name, pid in recorded.items() if name in CONTROL_PLANE}


async def _measure(
    admin: Credentials, cluster: LocalCluster, system: System, setup: Setup, say: Progress,
    profiles: Profiles | None = None,
) -> Measured:
    load = setup.load
    recorder = Recorder(admin, naming=system.naming, selector=load.selector)
    recording = asyncio.create_task(recorder.run(), name="bench-recorder")
    problems: list[str] = []
    try:
        await recorder.until_synced()
        async with Connection(admin, connections=load.concurrency + 2) as connection:
            pids = dict(system.processes())
            control = _control_plane_pids(cluster)
            before, cp_before = _usage(pids), _usage(control)
            metrics_before = await scrape(connection)
            load_before = os.getloadavg()[0]
            if profiles is not None:
                problems.extend(profiles.start(pids))
            say(f"submitting {load.pods} pods over {len(load.queues)} queues and {len(load.teams)} teams")
            submitting = asyncio.create_task(submit(connection, load))
            try:
                await _follow(recorder, submitting, load.pods, say)
            except Stalled as e:
                problems.append(str(e))
            submitted = await submitting
            after, cp_after = _usage(pids), _usage(control)
            if profiles is not None:
                profiles.stop()
            metrics_after = await scrape(connection)
            load_after = os.getloadavg()[0]
        record = recorder.snapshot()
    finally:
        recording.cancel()
    gone = sorted(set(pids) - set(after))
    if gone:
        problems.append(f"the system's process(es) {', '.join(gone)} exited during the run")
    grew = increase(flow_totals(metrics_after), flow_totals(metrics_before))
    processes = {
        name: Usage(after[name].cpu_seconds - before[name].cpu_seconds, after[name].peak_rss_bytes / 2**20)
        for name in after if name in before
    }
    control_plane = {n: cp_after[n].cpu_seconds - cp_before[n].cpu_seconds
                     for n in cp_after if n in cp_before}
    return Measured(
        submitted=submitted, record=record,
        requests=counting.by_kind(system.key, grew),
        requests_all=sum(grew.values()), processes=processes, control_plane=control_plane,
        webhooks=_webhooks(metrics_after, metrics_before),
        load_average=(load_before, load_after), problems=tuple(problems),
    )


async def _follow(recorder: Recorder, submitting: asyncio.Task[Submitted], pods: int, say: Progress) -> None:
    """Until every submitted pod has finished, saying how far the run got every few seconds."""
    started = last_report = last_move = time.monotonic()
    last = recorder.tally()
    while True:
        await asyncio.sleep(0.2)
        tally = recorder.tally()
        now = time.monotonic()
        expected = len(submitting.result().pods) if submitting.done() else pods
        if submitting.done() and tally.finished >= expected:
            say(f"{now - started:5.0f}s: all {expected} finished")
            return
        if (tally.released, tally.finished, tally.pods) != (last.released, last.finished, last.pods):
            last, last_move = tally, now
        elif now - last_move > STALL_SECONDS:
            raise Stalled(f"stalled: nothing released or finished for {STALL_SECONDS:.0f}s "
                          f"({tally.pods} seen, {tally.released} released, {tally.finished} finished)")
        if now - last_report >= PROGRESS_SECONDS:
            last_report = now
            say(f"{now - started:5.0f}s: {tally.pods}/{pods} created, {tally.released} released, "
                f"{tally.finished} finished")


def check(system: System, setup: Setup, measured: Measured) -> list[str]:
    """The run's correctness, from the record: every problem found, worded for a report."""
    record, submitted = measured.record, measured.submitted
    problems = []
    if submitted.refused:
        problems.append(f"{len(submitted.refused)} pods refused at creation, e.g. {submitted.refused[0]}")
    limits = system.limits(setup)
    problems.extend(_unchecked(record, limits))
    if record.relists:
        problems.append(f"the recorder's watch had to start over {record.relists} time(s): what was released "
                        "while it was away was not seen running, so the limits were not checked throughout")
    over = violations(record, limits)
    if over:
        releases = len({v.pod for v in over})
        problems.append(f"{releases} release(s) beyond the configured limits; first: {over[0]}")
    missing = lost(record, submitted.pods)
    if missing:
        problems.append(f"{len(missing)} pods never finished, e.g. {', '.join(map(str, missing[:3]))}")
    twice = released_twice(record)
    if twice:
        problems.append(f"{len(twice)} pods released twice, e.g. {twice[0].pod.key}")
    primary = system.naming.gates[0]
    ungated = [p.key for p in record.pods.values() if primary not in p.gates]
    if ungated:
        problems.append(f"{len(ungated)} pods were not created with the gate {primary}, e.g. {ungated[0]}")
    # Removing a gate is a write to the pod (a patch or an update): status writes, events and
    # reads, which a system may send for every pod it merely watches, prove no release.
    writes = measured.requests.get("pod writes", 0.0)
    if writes < len(submitted.pods):
        problems.append(f"the API server counted {writes:.0f} pod writes from {system.key} for "
                        f"{len(submitted.pods)} pods: it cannot have released them itself")
    if not measured.processes:
        problems.append(f"no process of {system.key} was measured: its CPU seconds and memory are unknown")
    return problems


def _unchecked(record: Record, limits: Limits) -> list[str]:
    """What would make the limit check pass without checking: limits that cap nothing, or pods
    in no queue the limits name (a queue label the recorder could not read)."""
    caps = [limits.cluster, *limits.queues.values(), *limits.teams.values(), *limits.workflows.values()]
    if all(c.running is None and c.gpus is None for c in caps):
        return ["the limits checked cap nothing: no release could have gone beyond them"]
    if not limits.queues:
        return []
    outside = sorted((p.key, p.queue) for p in record.pods.values() if p.queue not in limits.queues)
    if not outside:
        return []
    key, queue = outside[0]
    return [f"{len(outside)} pods are in no queue the limits name, so no queue limit was checked for "
            f"them, e.g. {key} (queue {queue!r})"]


def _webhooks(after: str, before: str) -> dict[str, tuple[float, float]]:
    """Each admission webhook's calls and waiting during the run (those that were called)."""
    then = webhook_calls(before)
    out = {}
    for name, (calls, seconds) in webhook_calls(after).items():
        was = then.get(name, (0.0, 0.0))
        if calls > was[0]:
            out[name] = (calls - was[0], seconds - was[1])
    return out


def _percentiles(latency: Latency) -> Percentiles:
    return Percentiles(latency.count, latency.p50, latency.p95, latency.p99, latency.max)


def figures(
    system: System, scenario: Scenario, measured: Measured, problems: list[str], *,
    started: str, command: str, limits: Limits | None = None,
) -> Run:
    """The run's figures; ``limits`` (what the system enforces) say which finishes free a slot
    that waiting pods could take (``freed_to_release``)."""
    record = measured.record
    created = [e.at for e in record.events if e.kind is Kind.CREATED]
    drained = drain(record, since=min(created) if created else None)
    top = peaks(record)
    return Run(
        scenario=scenario.name, system=system.key, title=system.title, version=system.version(),
        pods=scenario.pods, queues=scenario.queues, teams=scenario.teams, nodes=scenario.nodes,
        gpus_per_node=scenario.gpus_per_node, seconds=scenario.seconds, max_running=scenario.max_running,
        cap=scenario.cap, floor_seconds=scenario.floor_seconds,
        rounds_floor_seconds=scenario.rounds_floor_seconds, started=started, command=command,
        load_average=measured.load_average, failures=tuple(problems),
        submit_seconds=measured.submitted.seconds, refused=len(measured.submitted.refused),
        drain_seconds=drained.seconds, releases_per_second=drained.releases_per_second,
        creation_to_release=_percentiles(creation_to_release(record)),
        freed_to_release=_percentiles(freed_to_release(record, limits)),
        peak_running=top.cluster.running,
        peak_queue_running=max((p.running for p in top.queues.values()), default=0),
        processes=dict(measured.processes), requests=sum(measured.requests.values()),
        requests_by_kind=dict(measured.requests), requests_all=measured.requests_all,
        control_plane_cpu_seconds=dict(measured.control_plane), webhooks=dict(measured.webhooks),
        relists=record.relists,
        machine=machine.machine(), versions=machine.versions(),
    )
