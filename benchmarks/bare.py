"""The bare ungater as a system under test: the practical ceiling, with no policy at all.

It runs as ``python -m audit.ungating`` in its own process under its own ServiceAccount (a
token from the TokenRequest API), capped as the others are: at most the scenario's limit in each
queue (the load driver writes each pod's queue label) and the sum of them in all. No webhook
exists for it, so the load driver writes its gate on each pod at creation. Its gate and labels
are its own (``BARE``), so on a shared cluster neither Sluicegate nor Kueue ever sees its pods.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final

from audit.checking import Cap, Limits
from audit.connection import Connection, Credentials
from audit.identities import NAMESPACE, Identity, provision, retire
from audit.naming import AUDIT_TEAM_LABEL, Naming
from benchmarks.counting import Obj, service_account
from benchmarks.systems import Account, Progress, Setup, SystemFailure, queue_limits
from controlplane.checkout import harness_environment
from controlplane.launching import LocalCluster

BARE: Final = Naming(
    gates=("benchmarks.sluicegate.dev/hold",),
    queue_label="benchmarks.sluicegate.dev/queue",
    team_label=AUDIT_TEAM_LABEL,
    workflow_label="",
    group_label="",
)
ACCOUNT: Final = "bench-ungater"
VERSION: Final = "audit.ungating (this repository), capped per queue"
"""Runs saved before it was held to the queues' limits say only "audit.ungating (this repository)"."""
STOP_SECONDS = 30.0


class Bare:
    key = "bare"
    title = "bare ungater"
    naming = BARE
    namespace_labels: Mapping[str, str] = {}
    gates_by_driver = True
    subjects: Sequence[Obj] = (service_account(NAMESPACE, ACCOUNT),)

    def __init__(self) -> None:
        self._cluster: LocalCluster | None = None
        self._identity: Identity | None = None
        self._kubeconfig: Path | None = None
        self._proc: subprocess.Popen[str] | None = None
        self.released: int | None = None

    def version(self) -> str:
        return VERSION

    def prepare(self, cluster: LocalCluster) -> None:
        del cluster  # nothing to tell the cluster before it starts

    def start(self, cluster: LocalCluster, progress: Progress) -> None:
        self._cluster = cluster
        progress("bare ungater: provisioning its ServiceAccount and token")
        self._identity = asyncio.run(self._provision(Credentials.from_kubeconfig(cluster.kubeconfig)))
        self._kubeconfig = self._identity.credentials.write_kubeconfig(
            cluster.layout.root / f"{ACCOUNT}.kubeconfig")

    @staticmethod
    async def _provision(admin: Credentials) -> Identity:
        async with Connection(admin) as connection:
            return await provision(connection, ACCOUNT)

    def configure(self, setup: Setup) -> None:
        """Start the ungater for this run's pods, capped at the scenario's total."""
        assert self._kubeconfig is not None, "start() first"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "audit.ungating", "--kubeconfig", str(self._kubeconfig),
             "--selector", setup.load.selector, "--cap", str(setup.scenario.cap),
             "--queue-label", BARE.queue_label, "--queue-cap", str(setup.scenario.max_running),
             *(f"--gate={g}" for g in BARE.gates)],
            stdout=subprocess.PIPE, text=True, start_new_session=True, env=harness_environment(),
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            code = self._proc.wait()
            raise SystemFailure(f"the bare ungater exited with code {code} before it was ready")

    def processes(self) -> Mapping[str, int]:
        return {"ungater": self._proc.pid} if self._proc is not None and self._proc.poll() is None else {}

    def limits(self, setup: Setup) -> Limits:
        """Each queue's limit, as Sluicegate and Kueue are held to, and their sum in all."""
        total = Cap(running=setup.scenario.cap, gpus=setup.scenario.cap * setup.load.gpus)
        return replace(queue_limits(setup), cluster=total)

    def finish(self, setup: Setup) -> Account:
        """Stop the ungater and read its own count of the releases it made."""
        self.released = self._terminate()
        if self.released != setup.scenario.pods:
            return Account(problems=(f"the bare ungater says it released {self.released} pods, "
                                     f"not {setup.scenario.pods}",))
        return Account()

    def _terminate(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return self.released
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        lines = out.strip().splitlines()
        return int(json.loads(lines[-1])["released"]) if lines and lines[-1].startswith("{") else None

    def stop(self) -> None:
        self._terminate()
        if self._identity is not None and self._cluster is not None:
            identity, self._identity = self._identity, None
            asyncio.run(self._retire(Credentials.from_kubeconfig(self._cluster.kubeconfig), identity))

    @staticmethod
    async def _retire(admin: Credentials, identity: Identity) -> None:
        async with Connection(admin) as connection:
            await retire(connection, identity)
