"""Start and stop the local control plane: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, each a real upstream binary, all on loopback with free ports.

A cluster lives in one directory (``controlplane.processes.Layout``): certificates, kubeconfig,
etcd's data, one log file per component and ``cluster.json``, which records the process ids so
that another process (``make cluster-down``) can stop it (``controlplane.processes.stop``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from controlplane import building, components, networks
from controlplane.components import Ports
from controlplane.extenders import SchedulerExtender
from controlplane.nodes import device_class, gpu_nodes, resource_slice
from controlplane.processes import STOP_SECONDS, Layout, log_tail, stop
from process import kubeyaml

Progress = Callable[[str], None]

# Budgets for each wait; generous because two busy cores can be slow, and a wait ends as soon
# as its component is ready.
READY_SECONDS = 90.0
# Node objects are created by this many kubectl processes at once (see _create_nodes).
NODE_BATCHES = 4
# Writes to etcd that move its revision past every watcher's before a compaction: the API
# server answers 410 to a watch older than its cache's list (one write would do) and etcd to
# one from before the compacted revision (the API server asks for resourceVersion + 1, so
# two); three leave no doubt.
EXPIRY_WRITES = 3


class StartError(RuntimeError):
    """A component did not start; the message names it and ends with its log."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class LocalCluster:
    """One local control plane. ``up()`` builds what is missing and starts it; ``down()`` stops it.

    Each ``up()`` starts from an empty cluster; ``keep_state=True`` keeps etcd's data and the
    certificates of the last run instead, so its objects come back.

    With an ``extender`` (set it before ``up()``), kube-scheduler starts configured to call it:
    its address is fixed before the scheduler starts, and the extender may come up later (it
    is ignorable: until it answers, pods are placed without it).
    """

    def __init__(
        self,
        root: Path,
        nodes: int = 4,
        gpus_per_node: int = 8,
        *,
        keep_state: bool = False,
        extender: SchedulerExtender | None = None,
    ) -> None:
        self.layout = Layout(root.resolve())
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.keep_state = keep_state
        self.extender = extender
        self.ports = Ports()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._bin: Path | None = None
        self.network: networks.Network | None = None
        """Where the API server reaches the processes it proxies to (``controlplane.networks``)."""

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def binary(self, name: str) -> str:
        if self._bin is None:
            self._bin = building.ensure_binaries()
        return str(self._bin / name)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the control plane's own kubectl against this cluster."""
        cmd = [self.binary("kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    # --- starting -------------------------------------------------------------------------

    def up(self, progress: Progress = _stderr) -> None:
        started = time.monotonic()
        if self.layout.state.exists():
            stop(self.layout.root)
        progress("control plane: checking binaries")
        self._bin = building.ensure_binaries(progress)
        self._link_bin()
        kept = self.keep_state and self.layout.etcd.exists()
        if not kept:
            self._clear()
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        if kept and self.layout.pki.ca_cert.exists():
            progress("control plane: keeping the objects and certificates of the last run")
            if not self.layout.pki.front_proxy_client_key.exists():  # kept from before the front proxy
                self.layout.pki.generate_front_proxy()
        else:
            progress("control plane: generating certificates")
            self.layout.pki.generate()
        self.layout.pki.write_kubeconfig(self.kubeconfig, self.server)
        try:
            progress("control plane: making the network namespace of the served processes")
            self.network = networks.create(self.layout.root)
            self._start_all(progress)
        except BaseException:
            self.down()
            raise
        progress(f"control plane: ready in {time.monotonic() - started:.1f}s; "
                 f"KUBECONFIG={self.kubeconfig}")

    def _clear(self) -> None:
        """Start from an empty cluster: etcd's data and the certificates go; the last run's logs
        move to ``logs.previous``, where they stay until the next fresh start."""
        shutil.rmtree(self.layout.etcd, ignore_errors=True)
        shutil.rmtree(self.layout.root / "apiserver-certs", ignore_errors=True)
        shutil.rmtree(self.layout.root / "pki", ignore_errors=True)
        previous = self.layout.root / "logs.previous"
        if self.layout.logs.exists():
            shutil.rmtree(previous, ignore_errors=True)
            self.layout.logs.rename(previous)

    def _link_bin(self) -> None:
        assert self._bin is not None
        self.layout.root.mkdir(parents=True, exist_ok=True)
        if self.layout.bin.is_symlink() or self.layout.bin.exists():
            self.layout.bin.unlink()
        self.layout.bin.symlink_to(self._bin)

    def _start_all(self, progress: Progress) -> None:
        arguments, ready = self._arguments(), self._ready_probes()
        progress("control plane: starting etcd")
        self._spawn("etcd", arguments["etcd"]())
        self._wait("etcd", ready["etcd"])
        progress("control plane: starting kube-apiserver")
        self._spawn("kube-apiserver", arguments["kube-apiserver"]())
        self._wait("kube-apiserver", ready["kube-apiserver"])
        progress("control plane: starting kube-controller-manager, kube-scheduler and kwok")
        self._spawn("kube-controller-manager", arguments["kube-controller-manager"]())
        self._spawn("kube-scheduler", arguments["kube-scheduler"]())
        self._spawn("kwok", arguments["kwok"]())
        self._wait("kube-controller-manager", ready["kube-controller-manager"])
        self._wait("kube-scheduler", ready["kube-scheduler"])
        progress(f"control plane: creating {self.nodes} fake nodes with {self.gpus_per_node} GPUs each")
        self._create_nodes()
        # kwok makes about a hundred nodes Ready per second on an idle machine; allow for many.
        self._wait("kwok", ready["kwok"], READY_SECONDS + self.nodes / 4)
        self._wait("kube-controller-manager", self._default_service_account)

    def _create_nodes(self) -> None:
        """Create the fake nodes, their ResourceSlices and the DeviceClass: ``kubectl create``
        (one request per object, where ``apply`` makes two), in a few batches at once. An object
        kept from the last run (``keep_state``) is left as it is. Measured on 2 busy cores: about
        18 nodes a second either way, so 512 nodes took about half a minute to create and ten
        seconds more to be Ready (before each node had a ResourceSlice beside it: one more
        object per node)."""
        nodes = gpu_nodes(self.nodes, self.gpus_per_node)
        # Each node's GPUs as DRA devices too (controlplane/nodes.py), beside the node.
        objects = [device_class(), *nodes,
                   *(resource_slice(n["metadata"]["name"], self.gpus_per_node) for n in nodes)]
        batches = [objects[i::NODE_BATCHES] for i in range(min(NODE_BATCHES, len(objects)))]

        def create(batch: list[dict[str, Any]]) -> None:
            done = self.kubectl("create", "-f", "-", input=kubeyaml.dump_all(batch), check=False)
            problems = [line for line in done.stderr.splitlines() if "AlreadyExists" not in line]
            if done.returncode != 0 and problems:
                raise StartError(f"creating the fake nodes failed: {' '.join(problems)}")

        with ThreadPoolExecutor(len(batches)) as pool:
            list(pool.map(create, batches))

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        log = self.layout.log(name).open("ab")
        proc = subprocess.Popen(
            [self.binary(name), *args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=self.layout.root,
        )
        log.close()
        self._procs[name] = proc
        self._save_state()

    def _save_state(self) -> None:
        state = {
            "pids": {name: p.pid for name, p in self._procs.items()},
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "nodes": self.nodes,
            "gpusPerNode": self.gpus_per_node,
        }
        self.layout.state.write_text(json.dumps(state, indent=2))

    def _wait(self, name: str, ready: Callable[[], bool], seconds: float = READY_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for proc_name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise StartError(
                        f"{proc_name} exited with code {proc.returncode} while waiting for {name}; "
                        f"last lines of {self.layout.log(proc_name)}:\n{log_tail(self.layout.log(proc_name))}"
                    )
            if ready():
                return
            time.sleep(0.2)
        raise StartError(
            f"{name} was not ready after {seconds:.0f}s; last lines of {self.layout.log(name)}:\n"
            f"{log_tail(self.layout.log(name))}"
        )

    # --- readiness probes -----------------------------------------------------------------

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports.etcd_client}/health", timeout=2) as r:
                return bool(json.load(r).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _https_ok(self, port: int, path: str, *, client: bool) -> bool:
        pki = self.layout.pki
        if client:
            context = ssl.create_default_context(cafile=str(pki.ca_cert))
            context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        else:  # controller-manager and scheduler serve a self-signed certificate of their own
            context = ssl._create_unverified_context()
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", timeout=2, context=context) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _nodes_ready(self) -> bool:
        ready = '{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}'
        out = self.kubectl("get", "nodes", "-o", f"jsonpath={ready}", check=False)
        if out.returncode != 0:
            return False
        return out.stdout.split().count("True") >= self.nodes

    def _default_service_account(self) -> bool:
        return self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0

    # --- faults ---------------------------------------------------------------------------

    def restart(self, component: str, *, hard: bool = False) -> None:
        """Stop one running component (SIGTERM, or SIGKILL when ``hard``) and start it again with
        the same arguments, ports and data; return once it answers again. The fault suite uses
        it on etcd and kube-apiserver in the middle of a burst."""
        self._stop_component(component, hard=hard)
        self._start_component(component)

    def expire_watches(self) -> int:
        """Make every watch of this cluster expire, for certain, as a long-running cluster's
        compaction does: each one resumed afterwards gets 410 Gone and must list again.

        kube-apiserver is stopped first, so no watcher can have seen a resourceVersion newer
        than etcd's revision at that moment; etcd's revision is then moved past it by writes
        of its own (keys outside the API server's prefix, which nothing reads) and its history
        compacted up to there; kube-apiserver starts again with a watch cache listed at that
        revision or later. Every watcher's resourceVersion is now older than what the cache
        or etcd still holds. Returns the compacted revision."""
        self._stop_component("kube-apiserver")
        for i in range(EXPIRY_WRITES):
            self._etcd("put", {"key": _b64(f"/sluicegate-expiry/{i}"), "value": _b64(str(time.time_ns()))})
        revision = self.compact()
        self._start_component("kube-apiserver")
        return revision

    def compact(self) -> int:
        """Compact etcd's history up to its current revision. A watch resumed from an older
        resourceVersion then gets 410 Gone, from etcd directly or from a watch cache rebuilt
        after a restart; a watch that has seen the current revision does not (``expire_watches``
        makes sure none has). Returns the revision."""
        # A range read of any key answers with the store's current revision in its header.
        revision = int(self._etcd("range", {"key": _b64("/")})["header"]["revision"])
        self._etcd("compaction", {"revision": str(revision), "physical": True})
        return revision

    def stored(self, prefix: str) -> dict[str, bytes]:
        """What etcd itself holds under the keys that start with ``prefix``, by key: how an
        object is stored, whatever version the API server would serve it as (custom resources
        are kept as JSON at ``/registry/<group>/<plural>/<name>``)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        answer = self._etcd("range", {"key": _b64(prefix), "range_end": _b64(end)})
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"])
                for kv in answer.get("kvs", [])}

    def _etcd(self, call: str, body: dict[str, Any]) -> dict[str, Any]:
        """One call of etcd's v3 key-value API through its JSON gateway."""
        return _post_json(f"http://127.0.0.1:{self.ports.etcd_client}/v3/kv/{call}", body)

    def _stop_component(self, component: str, *, hard: bool = False) -> None:
        if component not in self._ready_probes() or component not in self._procs:
            raise StartError(f"{component} is not a running component of this cluster")
        proc = self._procs.pop(component)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL if hard else signal.SIGTERM)
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def _start_component(self, component: str) -> None:
        self._spawn(component, self._arguments()[component]())
        self._wait(component, self._ready_probes()[component])

    def scheduler_configuration(self) -> dict[str, Any]:
        return components.scheduler_configuration(self.kubeconfig, self.extender)

    def _arguments(self) -> dict[str, Callable[[], list[str]]]:
        layout, ports = self.layout, self.ports
        return {
            "etcd": lambda: components.etcd(layout, ports),
            "kube-apiserver": lambda: components.apiserver(layout, ports),
            "kube-controller-manager": lambda: components.controller_manager(layout, ports),
            "kube-scheduler": lambda: components.scheduler(layout, ports, self.scheduler_configuration()),
            "kwok": lambda: components.kwok(layout),
        }

    def _ready_probes(self) -> dict[str, Callable[[], bool]]:
        return {
            "etcd": self._etcd_healthy,
            "kube-apiserver": lambda: self._https_ok(self.ports.apiserver, "/readyz", client=True),
            "kube-controller-manager":
                lambda: self._https_ok(self.ports.controller_manager, "/healthz", client=False),
            "kube-scheduler": lambda: self._https_ok(self.ports.scheduler, "/healthz", client=False),
            "kwok": self._nodes_ready,
        }

    # --- stopping -------------------------------------------------------------------------

    def down(self) -> None:
        stop(self.layout.root)  # the network namespace too
        self._procs.clear()
        self.network = None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        data: dict[str, Any] = json.load(answer)
        return data


