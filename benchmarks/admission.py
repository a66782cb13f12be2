"""Admission throughput and latency, and what the webhook costs a pod create, in one run.

    .venv/bin/python -m benchmarks.admission [--seconds 10] [--concurrency 1,8] [--pods 200] [--rounds 3]

Starts a local control plane (one node) and Sluicegate on it as ``make up`` does, with a team,
a queue, a preset and an opted-in namespace whose default queue and preset apply to every pod.

1. **Reviews**: the webhook on loopback over TLS (its workers, one per CPU, with it: set
   ``SLUICEGATE_WORKERS=1`` for one process), sent the AdmissionReview of a managed
   GPU pod (no queue: the namespace's default; a default preset merged) by an aiohttp client
   with N keep-alive connections for a fixed time. Reported: reviews per second, and latency
   p50/p99 as the client saw it (its own share of the two cores included) and as the server
   measured it (the ``ms`` of each decision's log line: parse to decision, without HTTP), and
   the webhook's CPU time per review (``/proc``, its workers' included), whose inverse is the
   rate one CPU of this machine could sustain for it: a figure the client's share of the cores
   does not blur.
2. **Pod creates through the API server**: rounds that create the same GPU pods with C requests
   in flight, alternating between the opted-in namespace (the API server calls the mutating
   webhook; the validating one only for a pod whose seal broke) and a namespace without the team
   label (it calls neither). Pods in
   both are held by a scheduling gate (Sluicegate's, or a hand-written one), so the scheduler
   and kwok do the same (nothing) in both. Reported: creates per second with and without, and
   the median of the per-round ratios without/with (the slowdown; goal <= 1.2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import ssl
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from audit.scraping import tree_usage
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from kube.connecting import Connection
from kube.resources import PODS
from policy import keys
from process import kubeyaml

MANAGED, PLAIN = "bench-managed", "bench-plain"


def world() -> list[dict[str, Any]]:
    api = keys.API_VERSION
    return [
        {"apiVersion": api, "kind": "Team", "metadata": {"name": "bench"},
         "spec": {"members": {"users": ["alice"], "groups": ["bench-devs"]}}},
        # Open to everyone: the pod-create rounds run as the cluster admin.
        {"apiVersion": api, "kind": "Queue", "metadata": {"name": "bench-train"}, "spec": {"priority": 10}},
        {"apiVersion": api, "kind": "Preset", "metadata": {"name": "bench-data"},
         "spec": {"patchStrategy": "post_merge",
                  "container": {"env": [{"name": "DATA_ROOT", "value": "/datasets"}],
                                "resources": {"requests": {"cpu": "4", "memory": "16Gi"}}}}},
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": MANAGED, "labels": {keys.TEAM_LABEL: "bench"},
                      "annotations": {keys.DEFAULT_QUEUE_ANNOTATION: "bench-train",
                                      keys.DEFAULT_PRESETS_ANNOTATION: "bench-data"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLAIN}},
    ]


def gpu_pod(name: str, *, gated_by_hand: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "train", "image": "registry.invalid/train:1",
                        "resources": {"limits": {keys.GPU_RESOURCE: "1"}}}],
    }
    if gated_by_hand:
        spec["schedulingGates"] = [{"name": "example.com/hold"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def review_body() -> bytes:
    pod = gpu_pod("trainer-0") | {"metadata": {"name": "trainer-0", "namespace": MANAGED}}
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": MANAGED, "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["bench-devs", "system:authenticated"]},
            "object": pod, "oldObject": None, "dryRun": False,
        },
    }).encode()


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process and its workers have used (``/proc``)."""
    return tree_usage(pid).cpu_seconds


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- 1. reviews on loopback -----------------------------------------------------------------


async def reviews(sluicegate: LocalSluicegate, concurrency: int, seconds: float) -> dict[str, float]:
    url = f"https://127.0.0.1:{sluicegate.port('webhook', 'admission')}/mutate"
    context = ssl.create_default_context(cafile=str(sluicegate.tls.ca_cert))
    body = review_body()
    log = sluicegate.log("webhook")
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency, ssl=context)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.post(url, data=body) as first:  # warm up, and check the answer
            answer = (await first.json())["response"]
            assert answer["allowed"] and answer["patchType"] == "JSONPatch", answer
        for _ in range(200):
            async with session.post(url, data=body) as r:
                await r.read()
        offset = log.stat().st_size
        cpu = cpu_seconds(sluicegate.pid("webhook"))
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                async with session.post(url, data=body) as r:
                    await r.read()
                    assert r.status == 200
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(sluicegate.pid("webhook")) - cpu
    with log.open() as f:
        f.seek(offset)
        server = [json.loads(line)["ms"] / 1000 for line in f if '"webhook": "mutate"' in line]
    return {
        "rate": len(latencies) / elapsed,
        "cpu": cpu / len(latencies),
        "client_p50": percentile(latencies, 0.50), "client_p99": percentile(latencies, 0.99),
        "server_p50": percentile(server, 0.50), "server_p99": percentile(server, 0.99),
    }


# --- 2. pod creates through the API server --------------------------------------------------


async def create_pods(connection: Connection, namespace: str, count: int, concurrency: int) -> float:
    """Create ``count`` pods with ``concurrency`` in flight; creates per second."""
    names = iter(range(count))
    path = PODS.path(namespace=namespace)

    async def worker() -> None:
        for i in names:
            await connection.request("POST", path, body=gpu_pod(f"p-{i}", gated_by_hand=namespace == PLAIN))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def delete_pods(connection: Connection, namespace: str) -> None:
    await connection.request("DELETE", PODS.path(namespace=namespace), query={"gracePeriodSeconds": "0"})
    while (await connection.get(PODS.path(namespace=namespace), {"limit": "1"}))["items"]:
        await asyncio.sleep(0.2)


async def pod_rates(cluster: LocalCluster, pods: int, rounds: int, concurrency: int) -> dict[str, Any]:
    with_rates: list[float] = []
    without_rates: list[float] = []
    async with await Connection.from_kubeconfig(cluster.kubeconfig, user_agent="sluicegate-bench") as c:
        for _ in range(rounds):
            for namespace, rates in ((MANAGED, with_rates), (PLAIN, without_rates)):
                rates.append(await create_pods(c, namespace, pods, concurrency))
                await delete_pods(c, namespace)
        sample = await c.get(PODS.path(namespace=MANAGED))
    assert not sample["items"]
    ratios = [w / m for w, m in zip(without_rates, with_rates, strict=True)]
    return {"with": with_rates, "without": without_rates, "ratios": ratios}


# --- the run --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.admission", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="per review run (default: %(default)s)")
    parser.add_argument("--concurrency", default="1,8",
                        help="connections per review run (default: %(default)s)")
    parser.add_argument("--pods", type=int, default=200, help="pods per create round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="create rounds each way (default: %(default)s)")
    parser.add_argument("--in-flight", type=int, default=8, help="creates in flight (default: %(default)s)")
    args = parser.parse_args(argv)

    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as root:
        cluster = LocalCluster(Path(root), nodes=1, gpus_per_node=8)
        sluicegate = LocalSluicegate(cluster)
        try:
            cluster.up(progress=lambda line: None)
            sluicegate.up()
            cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(world()))
            probe = kubeyaml.dump(gpu_pod("probe"))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # until the webhook's cache has the world
                out = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-n", MANAGED, "-f", "-",
                                      "--as=alice", "--as-group=bench-devs", input=probe, check=False)
                if out.returncode == 0 and json.loads(out.stdout)["spec"].get("schedulingGates"):
                    break
                time.sleep(0.2)
            print("\nAdmissionReviews on loopback (the webhook and its workers, TLS, keep-alive)")
            print(" connections   reviews/s   client p50   client p99   server p50   server p99"
                  "   webhook CPU/review   reviews/s per CPU")
            for n in (int(x) for x in args.concurrency.split(",")):
                r = asyncio.run(reviews(sluicegate, n, args.seconds))
                ms = [r[k] * 1e3 for k in ("client_p50", "client_p99", "server_p50", "server_p99")]
                print(f" {n:>11} {r['rate']:>11.0f}" + "".join(f" {v:>10.2f}ms" for v in ms)
                      + f" {r['cpu'] * 1e6:>17.0f}µs {1 / r['cpu']:>19.0f}")
            if args.rounds:
                rates = asyncio.run(pod_rates(cluster, args.pods, args.rounds, args.in_flight))
                print(f"\nPod creates through the API server ({args.pods} per round, "
                      f"{args.in_flight} in flight)")
                print(" with the webhook:    " + ", ".join(f"{r:.0f}/s" for r in rates["with"]))
                print(" without the webhook: " + ", ".join(f"{r:.0f}/s" for r in rates["without"]))
                print(" without/with, per round: " + ", ".join(f"{r:.2f}" for r in rates["ratios"]))
                print(f" slowdown (median of the rounds): {statistics.median(rates['ratios']):.2f}x")
        finally:
            sluicegate.down()
            cluster.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
