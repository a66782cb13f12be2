"""Run an operator as a process against a LocalCluster: install its CRDs and RBAC, start, stop.

Each operator runs as its release's ServiceAccount would (a client certificate signed by the
cluster's CA whose CN is ``system:serviceaccount:<namespace>:<name>``, with a ServiceAccount's
groups), so the API server, admission and RBAC see the user they would see in a real cluster;
the release's ClusterRole is bound to that ServiceAccount. Its metrics and probes listen on
127.0.0.1, and it is stopped by ``stop()`` or, as a safety net, by stopping the cluster: its
process id is recorded in the cluster's ``cluster.json``.

The training-operator (v1.8.1) always rotates its webhook certificate and waits, before it
starts its controllers, until ``/tmp/k8s-webhook-server/serving-certs/tls.crt`` exists, where
the release mounts its Secret. It therefore runs in a private mount namespace (``unshare -m``)
in which ``/tmp`` is a directory of the cluster's, holding a certificate for 127.0.0.1 signed by
the cluster's CA and the operator's kubeconfig (the cluster's own directory may itself be below
``/tmp``, out of the operator's sight); the machine's ``/tmp`` is never written. That needs root
(or CAP_SYS_ADMIN), as Kueue's ``/etc`` overlay does.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from controlplane import building
from controlplane.launching import READY_SECONDS, LocalCluster
from controlplane.operators import manifests
from controlplane.operators.manifests import KUBERAY, TRAINING_OPERATOR, Endpoints, Shape
from controlplane.processes import answers_ready, free_port, record, stop_process, wait_ready
from process import kubeyaml

Progress = Callable[[str], None]


class OperatorError(RuntimeError):
    """An operator could not be installed or started; the message ends with its log."""


def _quiet(line: str) -> None:
    del line


class LocalOperator:
    """One operator (``manifests.TRAINING_OPERATOR`` or ``manifests.KUBERAY``) beside one running
    LocalCluster."""

    def __init__(self, cluster: LocalCluster, shape: Shape) -> None:
        self.cluster = cluster
        self.shape = shape
        self.root = cluster.layout.root / shape.name
        self.endpoints = Endpoints(metrics=free_port(), health=free_port(),
                                   webhook=free_port() if shape is TRAINING_OPERATOR else 0)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def log(self) -> Path:
        return self.cluster.layout.log(self.name)

    @property
    def pid(self) -> int | None:
        """The operator's process id while it runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    # --- starting -------------------------------------------------------------------------

    def start(self, progress: Progress = _quiet) -> None:
        """Build the binary (if needed), install the CRDs and RBAC, start the operator and wait
        until it reports ready."""
        started = time.monotonic()
        progress(f"{self.name}: checking the binary")
        binary = building.ensure_operator(self.shape.build, progress)
        source = building.operator_source(self.shape.build)
        progress(f"{self.name}: installing CRDs and RBAC")
        self._install(source)
        self._write_files()
        progress(f"{self.name}: starting ({time.monotonic() - started:.1f}s)")
        try:
            self._spawn(binary)
            self._wait("its readiness probe", self._ready)
        except BaseException:
            self.stop()
            raise
        progress(f"{self.name}: ready in {time.monotonic() - started:.1f}s (pid {self.pid}, log {self.log})")

    def _install(self, source: Path) -> None:
        crds = manifests.crd_files(source, self.shape)
        # Server-side: the CRDs (pod templates in full) are too large for client-side apply's annotation.
        self.cluster.kubectl("apply", "--server-side", "--force-conflicts", *(f"-f={crd}" for crd in crds))
        names = [f"crd/{yaml.safe_load(crd.read_text())['metadata']['name']}" for crd in crds]
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
        objects = manifests.rbac(self.shape, manifests.shipped_roles(source, self.shape))
        if self.shape is TRAINING_OPERATOR:
            objects.append(manifests.webhook_secret())
        self.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(objects))

    def _write_files(self) -> None:
        pki = self.cluster.layout.pki
        authority = pki.authority()
        if self.root.exists():
            shutil.rmtree(self.root)
        self._files.mkdir(parents=True)
        client = authority.issue_client(self.shape.user, self.shape.groups)
        pki.write_client_kubeconfig(self._files / "kubeconfig", self.cluster.server, self.shape.user, client)
        if self.shape is TRAINING_OPERATOR:
            serving = authority.issue_serving(self.name, ("127.0.0.1",))
            serving.write(self._files / manifests.WEBHOOK_CERT_DIR, "tls")

    @property
    def _files(self) -> Path:
        """Where the operator's own files are: the training-operator's private ``/tmp``."""
        return self.root / "tmp" if self.shape is TRAINING_OPERATOR else self.root

    def _command(self, binary: Path) -> list[str]:
        if self.shape is KUBERAY:
            return [str(binary), *manifests.kuberay_args(self.endpoints)]
        # unshare and sh exec in turn, so the process id ends up being the operator's own.
        script = f'mount --bind {shlex.quote(str(self._files))} /tmp && exec "$0" "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                str(binary), *manifests.training_operator_args(self.endpoints)]

    def _spawn(self, binary: Path) -> None:
        env = dict(os.environ, KUBECONFIG=str(self._files / "kubeconfig"))
        if self.shape is TRAINING_OPERATOR:
            env["KUBECONFIG"] = "/tmp/kubeconfig"  # as the operator sees it, in its mount namespace
            env["MY_POD_NAMESPACE"] = self.shape.namespace  # where the rotator's Secret is
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                self._command(binary), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.root, env=env,
            )
        record(self.cluster.layout.root, self.name, self._proc.pid)

    def _wait(self, what: str, ready: Callable[[], bool], seconds: float = READY_SECONDS) -> None:
        wait_ready(self._proc, self.name, self.log, what, ready, seconds, OperatorError)

    def _ready(self) -> bool:
        return answers_ready(self.endpoints.health)

    # --- stopping -------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the process (SIGTERM, SIGKILL after a grace period). Its CRDs and the objects
        it made stay: the cluster goes with them."""
        proc, self._proc = self._proc, None
        stop_process(self.cluster.layout.root, self.name, proc)

    def __enter__(self) -> LocalOperator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def training_operator(cluster: LocalCluster) -> LocalOperator:
    return LocalOperator(cluster, TRAINING_OPERATOR)


def kuberay(cluster: LocalCluster) -> LocalOperator:
    return LocalOperator(cluster, KUBERAY)
