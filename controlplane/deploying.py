"""Run Sluicegate on a local control plane, as ``make up`` does and the e2e tests do.

``LocalSluicegate(cluster).up()`` installs ``manifests/local`` with the real kubectl (CRDs,
namespace, ServiceAccounts, RBAC), issues the webhook's serving certificate for 127.0.0.1,
gets each ServiceAccount a token from the TokenRequest API, starts every process of
``services.SERVICES`` as its account, waits until each is ready, points the recorder's Service
at the local recorder and registers the records APIService, then applies the webhook
configurations pointed at the local webhook and waits until the API server calls it.

The scheduler extender (a port named ``extender`` in a row of ``services.SERVICES``) must be
known to kube-scheduler when it starts: ``scheduler_extender()`` issues the certificate and
picks the ports first and returns what to give ``LocalCluster`` before its ``up()``; this
object's ``up()`` then starts the process on that port, with that certificate.

Files, in the cluster's directory: ``sluicegate/tls`` (CA and serving pair),
``sluicegate/tokens/<account>``, ``logs/sluicegate-<name>.log``, and ``sluicegate.json``
(process ids, commands and ports), so ``down`` works from another process and a restarted
process gets the same ports.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from certs import bundles
from certs.issuing import WebhookFiles, issue
from controlplane import networks, processes
from controlplane.endpoints import expose
from controlplane.extenders import SchedulerExtender
from controlplane.launching import READY_SECONDS, LocalCluster, Progress, StartError
from controlplane.processes import STOP_SECONDS, free_port, log_tail, terminate
from controlplane.services import (
    EXTENDER_PORT,
    NAMESPACE,
    RECORDS_PORT,
    SERVICES,
    VISIBILITY_PORT,
    Launch,
    Service,
)
from policy import keys
from process import kubeyaml

LOCAL_MANIFESTS: Final = Path(__file__).resolve().parents[1] / "manifests" / "local"
PORT_PLACEHOLDER: Final = "${SLUICEGATE_WEBHOOK_PORT}"
CA_PLACEHOLDER: Final = "${SLUICEGATE_CA_BUNDLE}"
# Long enough for any test run or working day; the processes read the file again every minute,
# so a longer session only needs `make up` again.
TOKEN_DURATION: Final = "24h"
RECORDER_SERVICE: Final = "sluicegate-recorder"
RECORDER_SERVICE_PORT: Final = 8443  # as in manifests/default/recorder.yaml
VISIBILITY_SERVICE: Final = "sluicegate-visibility"
VISIBILITY_SERVICE_PORT: Final = 443  # as in manifests/default/controller.yaml
SERVED: Final[Mapping[str, tuple[str, int]]] = {
    RECORDS_PORT: (RECORDER_SERVICE, RECORDER_SERVICE_PORT),
    VISIBILITY_PORT: (VISIBILITY_SERVICE, VISIBILITY_SERVICE_PORT),
}
"""Each served port's Service (name, port), through which the API server reaches it."""


def _quiet(line: str) -> None:
    del line


class LocalSluicegate:
    """Sluicegate's processes beside one ``LocalCluster``.

    Each runs as ``python -m <module>`` with ``python`` (this interpreter by default), in
    ``workdir`` (the cluster's directory by default) and with ``environment`` (this process's
    by default); the image's smoke test gives them another virtual environment's interpreter,
    a directory outside the checkout and an environment without ``PYTHONPATH``. With ``tree``
    (a checkout of another commit), they run that tree's code: it goes first on
    ``PYTHONPATH``, ahead of the installed project. ``start(name, tree=...)`` starts one process
    from another tree, as a rolling upgrade replaces one replica at a time.
    """

    def __init__(
        self,
        cluster: LocalCluster,
        services: Sequence[Service] = SERVICES,
        manifests: Path = LOCAL_MANIFESTS,
        *,
        python: str = sys.executable,
        workdir: Path | None = None,
        environment: Mapping[str, str] | None = None,
        tree: Path | None = None,
    ) -> None:
        self.cluster = cluster
        self.services = tuple(services)
        self.manifests = manifests
        self.python = python
        self.workdir = workdir
        self.environment = environment
        self.tree = tree
        self.trees: dict[str, Path | None] = {}
        """The tree each process was last started from (None: as this interpreter finds it)."""
        self.root = cluster.layout.root / "sluicegate"
        self.state = cluster.layout.root / "sluicegate.json"
        self.tls = WebhookFiles(self.root / "tls")
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._ports: dict[str, dict[str, int]] = {}
        self._prepared = False

    @property
    def network(self) -> networks.Network | None:
        """The cluster's network namespace, where the API server reaches the served ports."""
        return self.cluster.network or networks.load(self.cluster.layout.root)

    @property
    def address(self) -> str:
        """Where the served ports listen: the network namespace's inner address."""
        network = self.network
        return network.inner_address if network is not None else "127.0.0.1"

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    def log(self, name: str) -> Path:
        return self.cluster.layout.log(self.service(name).log_name)

    def port(self, name: str, port: str) -> int:
        return self._ports[name][port]

    def pid(self, name: str) -> int:
        """The process id of a running process."""
        return self._procs[name].pid

    # --- up -------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Issue the serving certificate and pick every process's ports, once: before the
        cluster starts when kube-scheduler must know the extender, else at ``up()``."""
        if self._prepared:
            return
        issue(self.tls.directory, hosts=["127.0.0.1"], new_ca=True)
        self._ports = {s.name: {p: free_port() for p in s.ports} for s in self.services}
        # Replicas share a served port, as a Deployment's pods share their Service's target port:
        # each listens on it (SO_REUSEPORT) and the Endpoints name it once.
        shared: dict[str, int] = {}
        for s in self.services:
            for port in s.served:
                self._ports[s.name][port] = shared.setdefault(port, self._ports[s.name][port])
        self._prepared = True

    def scheduler_extender(self) -> SchedulerExtender | None:
        """What kube-scheduler needs to call the extender that ``up()`` will start (over TLS,
        trusting the CA of the certificate it serves); None when no process serves one."""
        for service in self.services:
            if EXTENDER_PORT in service.ports:
                self.prepare()
                return SchedulerExtender(
                    url=f"https://127.0.0.1:{self.port(service.name, EXTENDER_PORT)}",
                    ca_bundle=self.tls.ca_cert.read_bytes(),
                )
        return None

    def up(self, progress: Progress = _quiet) -> None:
        stop(self.cluster.layout.root)
        if not self.cluster.keep_state:  # a fresh cluster: the last run's records are of its pods
            shutil.rmtree(self.root / "recorder", ignore_errors=True)
        progress(f"sluicegate: installing {self.manifests}")
        documents = self._render()
        hooks = [d for d in documents if bundles.is_webhook_configuration(d)]
        apis = [d for d in documents if bundles.is_api_service(d)]
        self._install([d for d in documents
                       if not bundles.is_webhook_configuration(d) and not bundles.is_api_service(d)])
        progress("sluicegate: issuing the serving certificate and the accounts' tokens")
        self.prepare()
        for account in dict.fromkeys(s.account for s in self.services):
            self._token(account)
        try:
            for service in self.services:
                progress(f"sluicegate: starting {service.name} as {NAMESPACE}/{service.account}")
                self.start(service.name)
            self._expose_served(progress, apis)
            self.cluster.kubectl("apply", "-f", "-",
                                 input=kubeyaml.dump_all(self._pointed(hooks)))
            progress("sluicegate: waiting until the API server calls the webhook")
            self._wait_webhook_live()
        except BaseException:
            self.down()
            raise
        progress("sluicegate: ready; logs in " + str(self.cluster.layout.logs))

    def upgrade(self, manifests: Path, progress: Progress = _quiet) -> None:
        """Apply another release's local manifests over this install, as ``kubectl apply`` of a
        new release does: the CRDs first (until Established), then the rest, the webhook
        configurations pointed at the local webhook (the records APIService stays as ``up()``
        registered it). The processes go on running; replace them one at a time with ``stop``
        and ``start``."""
        progress(f"sluicegate: applying {manifests}")
        self.manifests = manifests
        documents = self._render()
        self._install([d for d in documents
                       if not bundles.is_webhook_configuration(d) and not bundles.is_api_service(d)])
        hooks = [d for d in documents if bundles.is_webhook_configuration(d)]
        self.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(self._pointed(hooks)))

    def _expose_served(self, progress: Progress, apis: Sequence[dict[str, Any]]) -> None:
        """Each served port's Service, reached by the API server as in a cluster, and then the
        APIServices (``apis``) trusting the local CA: an APIService the API server cannot reach
        would hold up the deletion of every namespace, so they are registered only here. A
        port that replicas share is exposed once; a process of a release older than the network
        namespace serves on loopback, out of the API server's reach, and is not exposed."""
        exposed: dict[str, str] = {}  # Service -> the first process serving it
        for service in self.services:
            if predates_networks(self.trees.get(service.name)):
                continue
            for port in service.served:
                name, service_port = SERVED[port]
                if name in exposed:
                    continue
                if self.network is None:
                    raise StartError(f"the cluster has no network namespace (controlplane/networks.py): "
                                     f"the API server could not reach {service.name}")
                expose(self.cluster, NAMESPACE, name, service_port, self.port(service.name, port),
                       self.address)
                exposed[name] = service.name
        served = {d["spec"]["service"]["name"]: d for d in apis}
        mine = [d for name, d in served.items() if name in exposed]
        if mine:
            progress("sluicegate: registering the aggregated APIs; waiting until the API server reaches them")
            self._register(mine, [exposed[d["spec"]["service"]["name"]] for d in mine])

    def _register(self, apis: Sequence[dict[str, Any]], names: Sequence[str]) -> None:
        """Apply the APIServices trusting the local CA; wait until the API server reaches the
        processes ``names`` through them, else fail with what the API server says and the end of
        their logs."""
        filled = bundles.fill(apis, self.tls.ca_cert.read_bytes())
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(filled))
        objects = [f"apiservice/{d['metadata']['name']}" for d in filled]
        waited = self.cluster.kubectl("wait", "--for=condition=Available", f"--timeout={READY_SECONDS:.0f}s",
                                      *objects, check=False)
        if waited.returncode != 0:
            said = self.cluster.kubectl("get", *objects, "-o", "jsonpath={.status.conditions[*].message}",
                                        check=False).stdout
            tails = "\n".join(f"last lines of {self.log(n)}:\n{log_tail(self.log(n))}" for n in names)
            raise StartError(f"the API server did not reach {', '.join(names)} through {', '.join(objects)} "
                             f"within {READY_SECONDS:.0f}s: {said or waited.stderr.strip()}\n{tails}")

    def _render(self) -> list[dict[str, Any]]:
        text = self.cluster.kubectl("kustomize", str(self.manifests)).stdout
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]

    def _install(self, documents: list[dict[str, Any]]) -> None:
        # Plain (client-side) `kubectl apply`, as an administrator applies manifests: a later
        # `kubectl apply -k manifests/default` then patches these objects cleanly (switching a
        # webhook's clientConfig from url to service, for one).
        crds = [d for d in documents if d.get("kind") == "CustomResourceDefinition"]
        rest = [d for d in documents if d.get("kind") != "CustomResourceDefinition"]
        if crds:
            self.cluster.kubectl("apply", "-f", "-",
                                 input=kubeyaml.dump_all(crds))
            names = [f"crd/{d['metadata']['name']}" for d in crds]
            self.cluster.kubectl("wait", "--for=condition=Established", f"--timeout={READY_SECONDS:.0f}s",
                                 *names)
        if rest:
            self.cluster.kubectl("apply", "-f", "-",
                                 input=kubeyaml.dump_all(rest))

    def _token(self, account: str) -> Path:
        """A token for ``account`` from the TokenRequest API, written where its process reads it."""
        token = self.cluster.kubectl("create", "token", account, "-n", NAMESPACE,
                                     f"--duration={TOKEN_DURATION}").stdout.strip()
        path = self.root / "tokens" / account
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(token)
        path.chmod(0o600)
        return path

    def _pointed(self, hooks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The webhook configurations, calling the local webhook and trusting its CA."""
        port = self.port("webhook", "admission")
        bundle = base64.b64encode(self.tls.ca_cert.read_bytes()).decode()
        text = kubeyaml.dump_all(list(hooks)).replace(PORT_PLACEHOLDER, str(port))
        text = text.replace(CA_PLACEHOLDER, bundle)
        return bundles.fill(yaml.safe_load_all(text), self.tls.ca_cert.read_bytes())

    def _wait_webhook_live(self) -> None:
        """Until a managed pod is refused by the webhook itself (a dry run in a scratch
        namespace), the API server may not have loaded the configurations yet."""
        namespace = f"sluicegate-probe-{uuid.uuid4().hex[:8]}"
        self.cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump({
            "apiVersion": "v1", "kind": "Namespace",
            # The namespace lists the probe's queue, so the refusal says it does not exist.
            "metadata": {"name": namespace, "labels": {keys.TEAM_LABEL: "sluicegate-probe"},
                         "annotations": {keys.ALLOWED_QUEUES_ANNOTATION: "sluicegate-probe"}},
        }))
        pod = kubeyaml.dump({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "probe", "labels": {keys.QUEUE_LABEL: "sluicegate-probe"}},
            "spec": {"containers": [{"name": "probe", "image": "registry.invalid/probe:1"}]},
        })
        try:
            deadline = time.monotonic() + READY_SECONDS
            while time.monotonic() < deadline:
                self._check_alive()
                out = self.cluster.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-",
                                           input=pod, check=False)
                if out.returncode != 0 and 'queue "sluicegate-probe" does not exist' in out.stderr:
                    return
                time.sleep(0.2)
            raise StartError(f"the API server did not call the webhook within {READY_SECONDS:.0f}s; "
                             f"last lines of {self.log('webhook')}:\n{log_tail(self.log('webhook'))}")
        finally:
            self.cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

    # --- one process ----------------------------------------------------------------------

    def start(self, name: str, *, tree: Path | None = None) -> None:
        """Start one process (again, on the same ports) and wait until it is ready; from ``tree``
        when given (``checkout.ROOT``: this checkout), else from this object's ``tree``."""
        service = self.service(name)
        source = tree or self.tree
        older = predates_networks(source)
        sockets = {} if older else self._served_sockets(service)
        launch = Launch(
            server=self.cluster.server,
            ca_file=self.cluster.layout.pki.ca_cert,
            token_file=self.root / "tokens" / service.account,
            tls_cert=self.tls.cert,
            tls_key=self.tls.key,
            ports=self._ports[name],
            data=self.root,
            address="127.0.0.1" if older else self.address,
            listen_fds={port: s.fileno() for port, s in sockets.items()},
        )
        command = service.command(self.python, launch)
        self.cluster.layout.logs.mkdir(parents=True, exist_ok=True)
        environment = dict(os.environ if self.environment is None else self.environment)
        if source is not None:
            earlier = environment.get("PYTHONPATH")
            environment["PYTHONPATH"] = os.pathsep.join([str(source), earlier] if earlier else [str(source)])
        self.trees[name] = source
        try:
            with self.log(name).open("ab") as log:
                self._procs[name] = subprocess.Popen(
                    command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True, cwd=self.workdir or self.cluster.layout.root,
                    env={**environment, "PYTHONUNBUFFERED": "1"},
                    pass_fds=tuple(s.fileno() for s in sockets.values()),
                )
        finally:
            for held in sockets.values():  # the process has its own copy
                held.close()
        self._save(commands={name: command})
        self._wait_ready(name)

    def _served_sockets(self, service: Service) -> dict[str, socket.socket]:
        """A listening socket inside the network namespace for each port the API server reaches
        through a Service, for the process to inherit."""
        if not service.served:
            return {}
        network = self.network
        if network is None:
            raise StartError(f"{service.name} serves the API server through a Service, but the cluster "
                             "has no network namespace (controlplane/networks.py)")
        return {port: networks.listen(network, self.port(service.name, port)) for port in service.served}

    def stop(self, name: str) -> None:
        """Stop one process (SIGTERM, then SIGKILL after a grace period)."""
        proc = self._procs.pop(name, None)
        if proc is not None:
            terminate([proc.pid])
            proc.wait()
            self._save()

    def _wait_ready(self, name: str) -> None:
        url = f"http://127.0.0.1:{self.port(name, 'metrics')}/readyz"
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        raise StartError(f"{name} was not ready after {READY_SECONDS:.0f}s; last lines of "
                         f"{self.log(name)}:\n{log_tail(self.log(name))}")

    def dead(self) -> list[str]:
        """A report for every process this object started that has exited: its name, exit code
        and the end of its log."""
        return [
            f"{name} exited with code {proc.returncode}; last lines of {self.log(name)}:\n"
            f"{log_tail(self.log(name))}"
            for name, proc in self._procs.items()
            if proc.poll() is not None
        ]

    def _check_alive(self) -> None:
        problems = self.dead()
        if problems:
            raise StartError("\n".join(problems))

    # --- state ----------------------------------------------------------------------------

    def _save(self, commands: dict[str, list[str]] | None = None) -> None:
        try:
            old = json.loads(self.state.read_text())
        except (FileNotFoundError, ValueError):
            old = {}
        state = {
            "pids": {name: p.pid for name, p in self._procs.items() if p.poll() is None},
            "commands": {**old.get("commands", {}), **(commands or {})},
            "ports": self._ports,
        }
        self.state.write_text(json.dumps(state, indent=2))

    def down(self) -> list[str]:
        """Stop every process (logs stay); the names of those that were still running."""
        stopped = stop(self.cluster.layout.root)
        for proc in self._procs.values():  # reap our children
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(STOP_SECONDS)
        self._procs.clear()
        return stopped


# --- stopping from any process --------------------------------------------------------------


def _runs(pid: int, command: Sequence[str]) -> bool:
    """Whether ``pid`` still runs ``command`` (not a process that reused the id)."""
    try:
        recorded = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return False
    return [part.decode(errors="replace") for part in recorded] == list(command)


def stop(root: Path) -> list[str]:
    """Stop every Sluicegate process recorded in ``root/sluicegate.json``; the names stopped."""
    path = root.resolve() / "sluicegate.json"
    try:
        state = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return []
    commands: dict[str, list[str]] = state.get("commands", {})
    running = {name: pid for name, pid in state.get("pids", {}).items()
               if _runs(pid, commands.get(name, []))}
    terminate(list(running.values()))
    path.unlink(missing_ok=True)
    return list(running)


def status(root: Path) -> dict[str, bool]:
    """Each recorded process, and whether it still runs."""
    try:
        state = json.loads((root.resolve() / "sluicegate.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    commands: dict[str, list[str]] = state.get("commands", {})
    return {name: _runs(pid, commands.get(name, [])) for name, pid in state.get("pids", {}).items()}


def ports(root: Path) -> dict[str, dict[str, int]]:
    """Each recorded process's ports, by name (``admission``, ``metrics``, ...)."""
    try:
        state = json.loads((root.resolve() / "sluicegate.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    recorded: dict[str, dict[str, int]] = state.get("ports", {})
    return recorded


def stop_everything(root: Path) -> list[str]:
    """Stop Sluicegate's processes, then the cluster, in ``root``; a Ctrl-C meanwhile is ignored,
    so an interrupted start never leaves half a cluster behind."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return [*stop(root), *processes.stop(root)]
    finally:
        signal.signal(signal.SIGINT, previous)


def make_command(target: str, root: Path, default: Path = Path(".cluster")) -> str:
    """The make command for ``target`` on the cluster in ``root`` (``CLUSTER_DIR=`` when it is
    not the Makefile's default)."""
    if root.resolve() == default.resolve():
        return f"make {target}"
    return f"make {target} CLUSTER_DIR={root}"


def predates_networks(tree: Path | None) -> bool:
    """``tree`` is a release older than the cluster's network namespace (it has no
    controlplane/networks.py): its processes know no ``--listen-fd`` and serve on loopback, so
    the API server does not reach its recorder (the upgrade test's previous release needs only
    its webhook and controller, which the API server and kube-scheduler reach on loopback)."""
    return tree is not None and not (tree / "controlplane" / "networks.py").exists()

