"""Run Kueue as a process against a LocalCluster: install, start, configure queues, stop.

Kueue runs as its own user (``kueue``, a client certificate signed by the cluster's CA, bound to
the release's manager roles), serves its webhooks on 127.0.0.1 with a certificate for that
address, and is stopped (with its webhooks removed) by ``stop()`` or, as a safety net, by
stopping the cluster: its process id is recorded in the cluster's ``cluster.json``.

Kueue reads its metrics certificate from the hard-coded ``/etc/kueue/metrics/certs`` when its
own certificate management is off. It therefore runs in a private mount namespace
(``unshare -m``) in which ``/etc`` is an overlay whose upper layer, in the cluster's directory,
adds those two files; the machine's ``/etc`` is never written. That needs root (or
CAP_SYS_ADMIN), which this machine's test runs have.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from controlplane import building
from controlplane.kueue import manifests
from controlplane.kueue.manifests import ClientLimits, Endpoints
from controlplane.kueue.queues import KueueCohort, KueueQueue, policy_objects
from controlplane.launching import READY_SECONDS, LocalCluster
from controlplane.processes import answers_ready, free_port, log_tail, record, stop_process, wait_ready
from process import kubeyaml

Progress = Callable[[str], None]

NAME = "kueue"
METRICS_CERTS = Path("kueue/metrics/certs")  # below /etc, where Kueue looks for them
# The release's manager runs with --zap-log-level=2 (config/default/manager_config_patch.yaml).
SHIPPED_LOG_LEVEL = 2


class KueueError(RuntimeError):
    """Kueue could not be installed, started or configured; the message ends with its log."""


def _quiet(line: str) -> None:
    del line


class Kueue:
    """Kueue v0.17.0 beside one running LocalCluster.

    ``limits`` replaces the shipped client QPS/burst (None keeps the release's 50/100);
    ``log_level`` is zap's verbosity (the release runs at 2).
    """

    def __init__(
        self, cluster: LocalCluster, limits: ClientLimits | None = None, log_level: int = SHIPPED_LOG_LEVEL
    ) -> None:
        self.cluster = cluster
        self.limits = limits
        self.log_level = log_level
        self.root = cluster.layout.root / NAME
        self.endpoints = Endpoints(webhook=free_port(), metrics=free_port(), health=free_port())
        self.configuration: dict[str, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.cluster.layout.log(NAME)

    @property
    def pid(self) -> int | None:
        """The Kueue process's id while it runs (for CPU and memory figures)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    # --- starting -------------------------------------------------------------------------

    def start(self, progress: Progress = _quiet) -> None:
        """Build (if needed) and install Kueue, start it and wait until its webhooks answer."""
        started = time.monotonic()
        progress("kueue: checking the binary")
        binary = building.ensure_kueue(progress)
        source = building.kueue_source()
        progress("kueue: installing CRDs and RBAC")
        self._install(source)
        self._write_files()
        self.configuration = manifests.configuration(
            manifests.shipped_configuration(source), self.endpoints, self.root / "serving", self.limits
        )
        config = self.root / "configuration.yaml"
        config.write_text(kubeyaml.dump(self.configuration, sort_keys=False))
        progress(f"kueue: starting ({time.monotonic() - started:.1f}s)")
        try:
            self._spawn(binary, config)
            self._wait("its webhook server", self._ready)
            self.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(
                manifests.webhook_configurations(
                    manifests.shipped_webhooks(source), f"https://127.0.0.1:{self.endpoints.webhook}",
                    self.cluster.layout.pki.ca_cert.read_bytes(),
                )
            ))
            # The apiserver reaching the webhook with our CA: a server-side dry run goes through it.
            self._wait("its webhooks, called by the API server", self._webhooks_answer)
        except BaseException:
            self.stop()
            raise
        progress(f"kueue: ready in {time.monotonic() - started:.1f}s (pid {self.pid}, log {self.log})")

    def _install(self, source: Path) -> None:
        crds = manifests.crd_files(source)
        # Server-side: the Workload CRD is too large for client-side apply's annotation.
        self.cluster.kubectl("apply", "--server-side", "--force-conflicts", *(f"-f={crd}" for crd in crds))
        names = [f"crd/{yaml.safe_load(crd.read_text())['metadata']['name']}" for crd in crds]
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
        self.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(
            manifests.rbac(manifests.shipped_roles(source))
        ))

    def _write_files(self) -> None:
        pki = self.cluster.layout.pki
        authority = pki.authority()
        if self.root.exists():
            shutil.rmtree(self.root)
        serving = authority.issue_serving("kueue", ("127.0.0.1",))
        serving.write(self.root / "serving", "tls")
        # The overlay's upper layer adds /etc/kueue/metrics/certs/tls.{crt,key}.
        serving.write(self.root / "etc" / METRICS_CERTS, "tls")
        (self.root / "overlay-work").mkdir()
        client = authority.issue_client(manifests.USER)
        pki.write_client_kubeconfig(self.root / "kubeconfig", self.cluster.server, manifests.USER, client)

    def _spawn(self, binary: Path, config: Path) -> None:
        overlay = f"lowerdir=/etc,upperdir={self.root / 'etc'},workdir={self.root / 'overlay-work'}"
        # unshare and sh exec in turn, so the process id ends up being Kueue's own.
        script = f'mount -t overlay overlay -o {overlay} /etc && exec "$0" "$@"'
        args = [str(binary), f"--config={config}", f"--zap-log-level={self.log_level}"]
        env = dict(os.environ, KUBECONFIG=str(self.root / "kubeconfig"))
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, *args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.root, env=env,
            )
        record(self.cluster.layout.root, NAME, self._proc.pid)

    def _wait(self, what: str, ready: Callable[[], bool], seconds: float = READY_SECONDS) -> None:
        wait_ready(self._proc, "kueue", self.log, what, ready, seconds, KueueError)

    def _ready(self) -> bool:
        return answers_ready(self.endpoints.health)

    def _webhooks_answer(self) -> bool:
        probe = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                 "metadata": {"name": "kueue-webhook-probe"}}
        done = self.cluster.kubectl("create", "--dry-run=server", "-f", "-",
                                    input=json.dumps(probe), check=False)
        return done.returncode == 0

    # --- policy ---------------------------------------------------------------------------

    def configure(
        self, queues: Sequence[KueueQueue], namespaces: Sequence[str], cohorts: Sequence[KueueCohort] = ()
    ) -> None:
        """Label ``namespaces`` as Kueue's (creating missing ones), create the flavor, cohorts,
        ClusterQueues and LocalQueues, and wait until every ClusterQueue is active."""
        objects = [*(manifests.managed_namespace(ns) for ns in namespaces),
                   *policy_objects(queues, namespaces, cohorts)]
        self.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(objects))
        names = [f"clusterqueue/{q.name}" for q in queues]
        if not names:
            return
        waited = self.cluster.kubectl("wait", "--for=condition=Active", "--timeout=60s", *names, check=False)
        if waited.returncode != 0:
            raise KueueError(f"kueue: ClusterQueues not active: {waited.stderr.strip()}; "
                             f"last lines of {self.log}:\n{log_tail(self.log)}")

    # --- stopping -------------------------------------------------------------------------

    def stop(self) -> None:
        """Remove Kueue's webhooks, then stop the process (SIGTERM, SIGKILL after a grace period).

        The webhooks go first: with ``failurePolicy: Fail``, pods in Kueue's namespaces would be
        refused while no Kueue answers. Pods Kueue still holds keep its gates and finalizer.
        """
        names = ["mutatingwebhookconfiguration/kueue-mutating-webhook-configuration",
                 "validatingwebhookconfiguration/kueue-validating-webhook-configuration"]
        if self.cluster.layout.state.exists():
            self.cluster.kubectl("delete", "--ignore-not-found", *names, check=False)
        proc, self._proc = self._proc, None
        stop_process(self.cluster.layout.root, NAME, proc)

    def __enter__(self) -> Kueue:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
