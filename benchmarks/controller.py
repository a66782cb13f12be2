"""The gate controller on a fresh local control plane, against the bare ungater in the same run.

    .venv/bin/python -m benchmarks.controller [--nodes 16] [--gpus 8] [--cap 20] [--limited 300]
        [--burst 300] [--drain 1000] [--json PATH] [--profile DIR]

Sluicegate runs as ``make up`` runs it (the webhook and one controller, each as its own
ServiceAccount); the auditor records every pod. Each phase runs twice on the same cluster: with
Sluicegate, then with the bare ungater (``audit.ungating``: no policy, its own process and
ServiceAccount) on the same load in a namespace Sluicegate does not manage, so every figure
has its ceiling from the same machine minutes apart:

1. **freed slot -> next release**: ``--limited`` 1-GPU pods of 1 s into a queue of maxRunning
   ``--cap`` (the ungater: at most ``--cap`` running), as a burst; each freed slot is paired
   with the first release after it.
2. **creation -> release under a burst**: ``--burst`` pods into an unlimited queue (the
   ungater: no cap), as fast as 16 connections create them.
3. **drain rate**: ``--drain`` pods wait gated (in a paused queue, unpaused at the start; the
   ungater starts once they all wait); releases per second from the first release to the last.

Pods of phases 2 and 3 ask for no GPU (the queue label makes them managed): how fast
kube-scheduler places them is not what is measured, and 1,000 of them fit the nodes at once.
API requests per released pod are the API server's own counts for the controller's identity
(APF's ``apiserver_flowcontrol_dispatched_requests_total`` by a FlowSchema matching only the
controller's ServiceAccount), per phase; ``apiserver_request_total`` by verb and resource
shows what they were. A phase fails if a limit was exceeded, a pod lost or released twice.
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
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from audit.checking import Cap, Limits, lost, released_twice, violations
from audit.connection import ApiError, Connection, Credentials
from audit.identities import FLOWCONTROL, flow_schema, provision
from audit.latencies import Latency, creation_to_release, drain, freed_to_release
from audit.loading import Load, new_run, submit
from audit.recording import Recorder
from audit.records import Record
from audit.scraping import flow_totals, increase, process_usage, request_totals, scrape
from benchmarks.bare import BARE
from benchmarks.profiling import Profiles
from controlplane.checkout import harness_environment
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from controlplane.services import NAMESPACE
from policy import keys

PROGRESS_SECONDS = 5.0
WAIT_SECONDS = 600.0
CONTROLLER_ACCOUNT = "sluicegate-controller"


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Bench:
    def __init__(
        self, connection: Connection, admin: Credentials, schema: str, pid: int, metrics_port: int
    ) -> None:
        self.connection = connection
        self.admin = admin
        self.schema = schema
        self.pid = pid  # the controller's process
        self.metrics_port = metrics_port
        self.ungater_kubeconfig = Path()
        self.profile: Path | None = None
        """A directory: sample the controller with py-spy during phase 1 (``--profile``)."""

    async def admin_object(self, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
        await self.connection.create(f"/apis/{keys.API_VERSION}/{plural}",
                                     {"apiVersion": keys.API_VERSION, "kind": kind,
                                      "metadata": {"name": name}, "spec": spec})

    async def controller_requests(
        self, work: Callable[[], Awaitable[None]]
    ) -> tuple[float, dict[str, float]]:
        """Run ``work``; the controller's requests meanwhile (and its CPU seconds, under the key
        ``controllerCpuSeconds``), and every client's requests by verb and resource."""
        before, cpu = await scrape(self.connection), process_usage(self.pid).cpu_seconds
        cycles = self.cycles()
        await work()
        await asyncio.sleep(2.0)  # let the last conditions and events go out
        after = await scrape(self.connection)
        mine = increase(flow_totals(after), flow_totals(before)).get(self.schema, 0.0)
        grown = increase(request_totals(after), request_totals(before))
        totals: dict[str, float] = {"/".join(k for k in key if k): v for key, v in sorted(grown.items())}
        totals["controllerCpuSeconds"] = process_usage(self.pid).cpu_seconds - cpu
        totals["controllerCycles"] = self.cycles() - cycles
        return mine, totals

    def cycles(self) -> float:
        """Dispatch cycles the controller has run (its own /metrics)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        families = text_string_to_metric_families(text)
        return sum(sample.value for family in families for sample in family.samples
                   if sample.name == "sluicegate_dispatch_cycle_seconds_count")

    async def run_load(self, load: Load, until_finished: bool = True) -> tuple[Recorder, asyncio.Task[None]]:
        recorder = Recorder(self.admin, selector=load.selector)
        task = asyncio.create_task(recorder.run())
        await recorder.until_synced()
        submitted = await submit(self.connection, load, progress=say)
        if submitted.refused:
            raise SystemExit(f"{len(submitted.refused)} pods refused, e.g. {submitted.refused[0]}")
        say(f"  submitted {load.pods} pods in {submitted.seconds:.1f}s ({submitted.rate:.0f}/s)")
        if until_finished:
            await self.until(recorder, lambda t: t.finished >= load.pods)
        return recorder, task

    async def until(self, recorder: Recorder, done: Callable[[Any], bool]) -> None:
        started = last = time.monotonic()
        while not done(tally := recorder.tally()):
            now = time.monotonic()
            if now - started > WAIT_SECONDS:
                raise SystemExit(f"gave up after {WAIT_SECONDS:.0f}s: {tally}")
            if now - last > PROGRESS_SECONDS:
                say(f"  {now - started:4.0f}s: {tally.released} released, {tally.finished} finished")
                last = now
            await asyncio.sleep(0.05)

    async def explained(self, namespace: str, pod: str) -> None:
        """Until the pod carries the Dispatched condition (the controller's explanations of a
        backlog are written in order, so the last pod's comes last)."""
        started = time.monotonic()
        while time.monotonic() - started < WAIT_SECONDS:
            obj = await self.connection.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
            if any(c.get("type") == keys.CONDITION for c in obj.get("status", {}).get("conditions", [])):
                return
            await asyncio.sleep(0.5)
        raise SystemExit(f"{namespace}/{pod} was never explained")

    # --- phases ---------------------------------------------------------------------------

    async def freed_slot(self, pods: int, cap: int) -> dict[str, Any]:
        run = new_run()
        queue, team = f"{run}-q", f"{run}-t"
        await self.admin_object("teams", "Team", team, {})
        await self.admin_object("queues", "Queue", queue, {"maxRunning": cap})
        load = Load(pods=pods, queues=(queue,), teams=(team,), gpus=1, seconds=1.0, run=run)
        say(f"phase 1: {pods} 1-GPU pods of 1 s into a queue of maxRunning {cap}")
        profiles = Profiles(self.profile, "limited") if self.profile is not None else None
        if profiles is not None:
            for problem in profiles.start({"controller": self.pid}):
                say(problem)
        try:
            record = await self._measured(load, Limits(queues={queue: Cap(running=cap)}))
        finally:
            if profiles is not None:
                profiles.stop()
                for role, folded in profiles.files.items():
                    say(f"phase 1 profile of the {role}: {folded} (python -m benchmarks.profiling {folded})")
        say(f"phase 1, bare ungater: the same, at most {cap} running")
        bare = await self.ungater(pods, gpus=1, seconds=1.0, cap=cap, first=True)
        return {**record.figures, "freed": _latency(freed_to_release(record.record)),
                "ungaterFreed": _latency(freed_to_release(bare))}

    async def burst(self, pods: int) -> dict[str, Any]:
        run = new_run()
        queue, team = f"{run}-q", f"{run}-t"
        await self.admin_object("teams", "Team", team, {})
        await self.admin_object("queues", "Queue", queue, {})
        load = Load(pods=pods, queues=(queue,), teams=(team,), gpus=0, seconds=1.0, run=run)
        say(f"phase 2: a burst of {pods} pods into an unlimited queue")
        record = await self._measured(load, Limits())
        say("phase 2, bare ungater: the same burst, no cap")
        bare = await self.ungater(pods, gpus=0, seconds=1.0, cap=None, first=True)
        return {**record.figures, "creationToRelease": _latency(creation_to_release(record.record)),
                "ungaterCreationToRelease": _latency(creation_to_release(bare))}

    async def drain_sluicegate(self, pods: int) -> dict[str, Any]:
        run = new_run()
        queue, team = f"{run}-q", f"{run}-t"
        await self.admin_object("teams", "Team", team, {})
        await self.admin_object("queues", "Queue", queue, {"paused": True})
        load = Load(pods=pods, queues=(queue,), teams=(team,), gpus=0, seconds=5.0, run=run)
        say(f"phase 3: {pods} pods wait in a paused queue, then it is unpaused")
        recorder, task = await self.run_load(load, until_finished=False)
        await self.until(recorder, lambda t: t.pods >= pods)
        await self.explained(load.namespace(team), f"p{pods - 1:05d}")  # a quiet start

        async def work() -> None:
            await self.connection.patch(f"/apis/{keys.API_VERSION}/queues/{queue}",
                                        {"spec": {"paused": False}}, kind="merge")
            await self.until(recorder, lambda t: t.released >= pods)
            await self.until(recorder, lambda t: t.finished >= pods)

        requests, totals = await self.controller_requests(work)
        task.cancel()
        record = recorder.snapshot()
        _check(record, Limits(), load)
        drained = drain(record)
        return {"pods": pods, "releasesPerSecond": drained.releases_per_second,
                "releaseSpanSeconds": drained.last_release - drained.first_release,
                "controllerRequests": requests, "requestsPerPod": requests / pods, "byResource": totals}

    async def ungater(self, pods: int, *, gpus: int, seconds: float, cap: int | None,
                      first: bool) -> Record:
        """The same load released by the bare ungater (no policy, ``cap`` at most running), in a
        namespace Sluicegate does not manage: started before the pods are created (``first``),
        or once they all wait (a drain)."""
        # The matrix's bare system's gate and labels: outside opted-in namespaces Sluicegate's
        # admission refuses a sluicegate.dev/ gate or key on a pod.
        load = Load(pods=pods, queues=("unmanaged",), teams=("none",), gpus=gpus, seconds=seconds,
                    gated=True, naming=BARE)
        recorder = Recorder(self.admin, selector=load.selector, naming=BARE)
        task = asyncio.create_task(recorder.run())
        await recorder.until_synced()
        command = [sys.executable, "-m", "audit.ungating", "--kubeconfig", str(self.ungater_kubeconfig),
                   "--selector", load.selector, *(f"--gate={g}" for g in BARE.gates),
                   *(("--cap", str(cap)) if cap else ())]
        ungater: subprocess.Popen[str] | None = None
        try:
            if first:
                ungater = _start_ungater(command)
            submitted = await submit(self.connection, load, progress=say)
            say(f"  submitted {load.pods} pods in {submitted.seconds:.1f}s ({submitted.rate:.0f}/s)")
            await self.until(recorder, lambda t: t.pods >= pods)
            if ungater is None:
                ungater = _start_ungater(command)
            await self.until(recorder, lambda t: t.finished >= pods)
        finally:
            if ungater is not None:
                ungater.send_signal(signal.SIGTERM)
                ungater.communicate(timeout=30)
            task.cancel()
        record = recorder.snapshot()
        _check(record, Limits(cluster=Cap(running=cap)), load)
        return record

    async def _measured(self, load: Load, limits: Limits) -> _Measured:
        holder: dict[str, Any] = {}

        async def work() -> None:
            recorder, task = await self.run_load(load)
            task.cancel()
            holder["record"] = recorder.snapshot()

        requests, totals = await self.controller_requests(work)
        record: Record = holder["record"]
        _check(record, limits, load)
        released = sum(1 for e in record.events if e.kind.value == "ungated")
        return _Measured(record, {"pods": load.pods, "controllerRequests": requests,
                                  "requestsPerPod": requests / max(1, released), "byResource": totals})


class _Measured:
    def __init__(self, record: Record, figures: dict[str, Any]) -> None:
        self.record = record
        self.figures = figures


def _start_ungater(command: list[str]) -> subprocess.Popen[str]:
    ungater = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=harness_environment())
    assert ungater.stdout is not None
    if ungater.stdout.readline().strip() != "ready":
        raise SystemExit("the ungater did not start")
    return ungater


def _check(record: Record, limits: Limits, load: Load) -> None:
    over, twice = violations(record, limits), released_twice(record)
    missing = lost(record)
    if over or missing or twice or len(record.pods) != load.pods:
        raise SystemExit(f"incorrect run: {len(record.pods)}/{load.pods} pods recorded, {len(over)} "
                         f"violations (first: {over[:1]}), {len(missing)} lost, {len(twice)} released twice")


def _latency(latency: Latency) -> dict[str, float]:
    return {"p50ms": latency.p50 * 1000, "p99ms": latency.p99 * 1000, "maxms": latency.max * 1000,
            "count": latency.count}


async def run(cluster: LocalCluster, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    admin = Credentials.from_kubeconfig(cluster.kubeconfig)
    async with Connection(admin, connections=20) as connection:
        schema = flow_schema(CONTROLLER_ACCOUNT, NAMESPACE, "workload-low")
        try:
            await connection.create(f"{FLOWCONTROL}/flowschemas", schema)
        except ApiError as e:
            if e.status != 409:
                raise
        state = json.loads((cluster.layout.root / "sluicegate.json").read_text())
        bench = Bench(connection, admin, schema["metadata"]["name"], state["pids"]["controller"],
                      state["ports"]["controller"]["metrics"])
        bench.profile = args.profile
        ungater = await provision(connection, "bench-ungater")
        bench.ungater_kubeconfig = ungater.credentials.write_kubeconfig(tmp / "ungater.kubeconfig")
        figures: dict[str, Any] = {"nodes": args.nodes, "gpusPerNode": args.gpus}
        figures["freedSlot"] = await bench.freed_slot(args.limited, args.cap)
        figures["burst"] = await bench.burst(args.burst)
        figures["drain"] = await bench.drain_sluicegate(args.drain)
        say(f"phase 3, bare ungater: {args.drain} gated pods in an unmanaged namespace, then the ungater")
        bare = drain(await bench.ungater(args.drain, gpus=0, seconds=5.0, cap=None, first=False))
        figures["ungater"] = {"pods": args.drain, "releasesPerSecond": bare.releases_per_second,
                              "releaseSpanSeconds": bare.last_release - bare.first_release}
        sluicegate, bare = figures["drain"]["releasesPerSecond"], figures["ungater"]["releasesPerSecond"]
        figures["drainRatio"] = sluicegate / bare
        return figures


def _ms(latency: dict[str, float]) -> str:
    return f"p50 {latency['p50ms']:.0f} ms, p99 {latency['p99ms']:.0f} ms (n={latency['count']:.0f})"


def report(f: dict[str, Any]) -> str:
    freed, burst, drained, bare = f["freedSlot"], f["burst"], f["drain"], f["ungater"]
    return "\n".join([
        f"gate controller on {f['nodes']} nodes x {f['gpusPerNode']} GPUs",
        f"  freed slot -> next release      {_ms(freed['freed'])}   "
        f"(bare ungater {_ms(freed['ungaterFreed'])})",
        f"  creation -> release, burst      {_ms(burst['creationToRelease'])}   "
        f"(bare ungater {_ms(burst['ungaterCreationToRelease'])})",
        f"  drain of {drained['pods']} gated pods         {drained['releasesPerSecond']:.0f} releases/s "
        f"(bare ungater {bare['releasesPerSecond']:.0f}/s: x{f['drainRatio']:.2f})",
        "  controller API requests per released pod: "
        f"limited {freed['requestsPerPod']:.2f}, burst {burst['requestsPerPod']:.2f}, "
        f"drain {drained['requestsPerPod']:.2f}",
        "  controller CPU seconds (cycles): " + ", ".join(
            f"{name} {p['controllerCpuSeconds']:.1f} ({p['controllerCycles']:.0f})"
            for name, p in (("limited", freed["byResource"]), ("burst", burst["byResource"]),
                            ("drain", drained["byResource"]))),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.controller",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--cap", type=int, default=20, help="maxRunning of phase 1's queue")
    parser.add_argument("--limited", type=int, default=300, help="pods of phase 1")
    parser.add_argument("--burst", type=int, default=300, help="pods of phase 2")
    parser.add_argument("--drain", type=int, default=1000, help="pods of phase 3")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--profile", type=Path, help="sample the controller with py-spy during phase 1, "
                        "into this directory (the figures of such a run carry the sampling's cost)")
    args = parser.parse_args()
    say(f"machine: {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", nodes=args.nodes, gpus_per_node=args.gpus)
        cluster.up(progress=say)
        sluicegate = LocalSluicegate(cluster)
        try:
            sluicegate.up(progress=say)
            figures = asyncio.run(run(cluster, args, Path(tmp)))
        finally:
            sluicegate.down()
            cluster.down()
    print(report(figures))
    print(json.dumps(figures, indent=2), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
