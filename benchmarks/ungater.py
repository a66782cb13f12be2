"""The practical ceiling: the bare ungater drains gated GPU pods on a fresh local control plane.

    .venv/bin/python -m benchmarks.ungater [--pods 1000] [--cap 32] [--nodes 16] [--gpus 8] [--seconds 2]

1,000 gated 1-GPU pods of 2 s are created first (a burst, over two queues and two teams), then
the bare ungater (``python -m audit.ungating``, its own process and its own service account)
releases them, at most ``--cap`` running at once, while the recorder watches. Reported: the
drain (first release to last finish) against the floor (pods x seconds / cap), releases per
second, freed slot -> next release p50/p99, the API requests the ungater made per pod (the
API server's count for its FlowSchema), and its CPU seconds and peak RSS. The run fails if
the cap was ever exceeded or a pod was lost: that would be a bug, not a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from audit.checking import Cap, Limits, lost, peaks, released_twice, violations
from audit.connection import Connection, Credentials
from audit.identities import provision
from audit.latencies import creation_to_release, drain, freed_to_release
from audit.loading import Load, names, submit
from audit.recording import Recorder
from audit.scraping import flow_totals, increase, process_usage, request_totals, scrape
from controlplane.checkout import harness_environment
from controlplane.launching import LocalCluster

PROGRESS_SECONDS = 5.0


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def bench(cluster: LocalCluster, args: argparse.Namespace, kubeconfig: Path) -> dict[str, Any]:
    admin = Credentials.from_kubeconfig(cluster.kubeconfig)
    load = Load(pods=args.pods, queues=names("q", 2), teams=names("team", 2), gpus=1,
                seconds=args.seconds, gated=True, concurrency=16)
    async with Connection(admin, connections=load.concurrency + 2) as connection:
        identity = await provision(connection, "bench-ungater")
        identity.credentials.write_kubeconfig(kubeconfig)
        recorder = Recorder(admin, selector=load.selector)
        recording = asyncio.create_task(recorder.run())
        await recorder.until_synced()
        say(f"submitting {load.pods} gated pods")
        submitted = await submit(connection, load, progress=say)
        if submitted.refused:
            raise SystemExit(f"{len(submitted.refused)} pods refused, e.g. {submitted.refused[0]}")
        await recorder.until(lambda t: t.pods >= load.pods, timeout=120)
        say(f"submitted in {submitted.seconds:.1f}s; starting the bare ungater, cap {args.cap}")
        before = await scrape(connection)
        ungater = subprocess.Popen(
            [sys.executable, "-m", "audit.ungating", "--kubeconfig", str(kubeconfig),
             "--selector", load.selector, "--cap", str(args.cap)],
            stdout=subprocess.PIPE, text=True, env=harness_environment(),
        )
        try:
            assert ungater.stdout is not None
            if ungater.stdout.readline().strip() != "ready":
                raise SystemExit("the ungater did not start")
            started = time.monotonic()
            while (tally := recorder.tally()).finished < load.pods:
                await asyncio.sleep(PROGRESS_SECONDS)
                elapsed = time.monotonic() - started
                say(f"  {elapsed:5.0f}s: {tally.released} released, {tally.finished} finished")
            usage = process_usage(ungater.pid)
            after = await scrape(connection)
        finally:
            ungater.send_signal(signal.SIGTERM)
            out, _ = ungater.communicate(timeout=30)
        recording.cancel()
        record = recorder.snapshot()

    over = violations(record, Limits(cluster=Cap(running=args.cap)))
    missing = lost(record, submitted.pods)
    twice = released_twice(record)
    if over or missing or twice:
        raise SystemExit(f"incorrect run: {len(over)} violations (first: {over[:1]}), "
                         f"{len(missing)} lost, {len(twice)} released twice")
    requests = increase(flow_totals(after), flow_totals(before)).get(identity.flow_schema, 0.0)
    patches = increase(request_totals(after), request_totals(before)).get(("PATCH", "pods", ""), 0.0)
    drained = drain(record)
    freed = freed_to_release(record)
    return {
        "pods": args.pods, "cap": args.cap, "nodes": args.nodes, "gpusPerNode": args.gpus,
        "seconds": args.seconds,
        "floorSeconds": args.pods * args.seconds / args.cap,
        "drainSeconds": drained.seconds,
        "releasesPerSecond": drained.releases_per_second,
        "freedToReleaseP50ms": freed.p50 * 1000, "freedToReleaseP99ms": freed.p99 * 1000,
        "freedSamples": freed.count,
        "creationToReleaseP99s": creation_to_release(record).p99,
        "peakRunning": peaks(record).cluster.running,
        "ungaterRequests": requests, "requestsPerPod": requests / args.pods,
        "podPatchesAllClients": patches,
        "ungaterClientRequests": json.loads(out.splitlines()[-1])["requests"] if out.strip() else None,
        "ungaterCpuSeconds": usage.cpu_seconds, "ungaterPeakRssMiB": usage.peak_rss_bytes / 2**20,
        "submitSeconds": submitted.seconds, "relists": record.relists,
    }


def report(figures: dict[str, Any]) -> str:
    f = figures
    return "\n".join([
        f"bare ungater: {f['pods']} pods x {f['seconds']:g}s, cap {f['cap']}, "
        f"{f['nodes']} nodes x {f['gpusPerNode']} GPUs",
        f"  drain (first release -> last finish)  {f['drainSeconds']:.1f}s   "
        f"(floor {f['floorSeconds']:.1f}s, x{f['drainSeconds'] / f['floorSeconds']:.2f})",
        f"  releases per second                   {f['releasesPerSecond']:.1f}",
        f"  freed slot -> next release            p50 {f['freedToReleaseP50ms']:.0f} ms, "
        f"p99 {f['freedToReleaseP99ms']:.0f} ms  (n={f['freedSamples']})",
        f"  peak running                          {f['peakRunning']}",
        f"  API requests by the ungater           {f['ungaterRequests']:.0f}  "
        f"({f['requestsPerPod']:.3f} per pod; its own count {f['ungaterClientRequests']})",
        f"  ungater CPU / peak RSS                {f['ungaterCpuSeconds']:.1f} CPU-s / "
        f"{f['ungaterPeakRssMiB']:.0f} MiB",
        f"  (submitting the burst took {f['submitSeconds']:.1f}s; watch relists {f['relists']})",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ungater", description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--cap", type=int, default=32)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--seconds", type=float, default=2.0, help="how long kwok runs each pod")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    say(f"machine: {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="bench-ungater-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", nodes=args.nodes, gpus_per_node=args.gpus)
        cluster.up(progress=say)
        try:
            figures = asyncio.run(bench(cluster, args, Path(tmp) / "ungater.kubeconfig"))
        finally:
            cluster.down()
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
