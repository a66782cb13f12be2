"""The processes of a cluster directory, as any process can see them: where a cluster keeps
its files (``Layout``), the record of what runs there (``cluster.json``: names and process
ids), whether each still runs, and stopping them. ``controlplane.launching`` starts what this
records; ``controlplane.deploying`` keeps Sluicegate's processes in a record of its own beside
it and stops them the same way (``terminate``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from controlplane import networks
from controlplane.pki import Pki

STOP_SECONDS = 15.0
"""How long a stopped process has after SIGTERM before SIGKILL."""
KILL_SECONDS = 5.0
"""How long ``terminate`` waits for killed processes to be gone."""


PORT_RANGE: Final = "/proc/sys/net/ipv4/ip_local_port_range"
PORTS_BELOW: Final = 20_000
"""How many ports under the ephemeral range ``free_port`` picks from."""
PICKS: Final = 64
"""Random picks ``free_port`` tries before it asks the kernel."""
HELD: Final = 256
"""How many of the ports it handed out a process keeps held (the oldest is let go)."""
LINUX_RANGE: Final = (32768, 60999)
_held: dict[int, socket.socket] = {}
"""The ports ``free_port`` handed out in this process, oldest first, each held by a socket."""
_holding = threading.Lock()


class NoFreePort(RuntimeError):
    """No loopback port could be bound."""


def free_port() -> int:
    """A loopback port that is free now, that no outgoing connection will take meanwhile, and
    that no other caller of ``free_port`` is given, in this process or another.

    The port is handed to a process that binds it a moment later (seconds later for the ports
    of the components that start last). A port from the kernel's ephemeral range (what binding
    port 0 gives) can be taken in that moment as the local end of any connection the machine
    opens, and a busy test run opens thousands; so the port is picked at random outside that
    range (the ``PORTS_BELOW`` ports under it, and those above it up to 65535), which only an
    explicit bind can take. A range that leaves no room outside it (``1024 65535``) leaves the
    kernel's choice. The port is checked free by binding it, and stays held: bound, not
    listening, with ``SO_REUSEADDR`` set after the bind, until ``HELD`` more are handed out.
    The component binds it all the same (Go's and asyncio's servers listen with
    ``SO_REUSEADDR``, and a bound socket that does not listen is no conflict between two that
    set it); another check binds without it and is refused. So clusters started at once by
    several processes never share a port, and one process never hands out a port twice.
    Raises ``NoFreePort`` when nothing can be bound."""
    with _holding:  # threads of one process take turns: each sees the others' ports held
        return _free_port()


def _free_port() -> int:
    low, high = _ephemeral_range()
    spans = [(lo, hi) for lo, hi in ((max(1024, low - PORTS_BELOW), low), (max(1024, high + 1), 65536))
             if lo < hi]
    total = sum(hi - lo for lo, hi in spans)
    for _ in range(PICKS if spans else 0):
        port = _pick(spans, total)
        held = None if port in _held else _reserve(port)
        if held is not None:
            return _keep(port, held)
    for _ in range(PICKS):  # every pick taken: fall back on the kernel's choice
        held = _reserve(0)
        if held is None:
            raise NoFreePort(f"no free loopback port: {PICKS} picked outside the ephemeral range "
                             f"{low}-{high} were taken, and the kernel had none")
        chosen: int = held.getsockname()[1]
        if chosen not in _held:
            return _keep(chosen, held)
        held.close()
    raise NoFreePort(f"no free loopback port: every one found was handed out already in this process "
                     f"(ephemeral range {low}-{high})")


def _pick(spans: list[tuple[int, int]], total: int) -> int:
    """A port of one of ``spans`` (each ``[lo, hi)``), every port as likely as another."""
    at = random.random() * total
    for lo, hi in spans:
        if at < hi - lo:
            return random.randrange(lo, hi)
        at -= hi - lo
    lo, hi = spans[-1]
    return random.randrange(lo, hi)


def _reserve(port: int) -> socket.socket | None:
    """A socket bound to ``port`` on loopback (``0``: the kernel's choice), or None when it is
    taken; ``SO_REUSEADDR`` is set only after the bind, so the bind itself conflicts with every
    other socket on the port."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return s


def _keep(port: int, held: socket.socket) -> int:
    _held[port] = held
    while len(_held) > HELD:
        _held.pop(next(iter(_held))).close()
    return port


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(n) for n in Path(PORT_RANGE).read_text().split()[:2])
    except (OSError, ValueError):
        return LINUX_RANGE  # Linux's default
    return low, high


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log written)"


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a cluster keeps its files."""

    root: Path

    @property
    def pki(self) -> Pki:
        return Pki(self.root / "pki")

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def state(self) -> Path:
        return self.root / "cluster.json"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def etcd(self) -> Path:
        return self.root / "etcd"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def _runs(pid: int, component: str) -> bool:
    """Whether ``pid`` is still the component started under it, not a process that reused it."""
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name == component
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here: trust the record
        return alive(pid)


def record(root: Path, name: str, pid: int) -> None:
    """Add a process started beside the cluster (a peer such as Kueue) to ``cluster.json``, so
    that stopping the cluster stops it too, first. Its executable must be named ``name``."""
    layout = Layout(root.resolve())
    state = json.loads(layout.state.read_text())
    # Last in the record, so stop(), which goes in reverse start order, stops it first.
    state["pids"] = {**{k: v for k, v in state["pids"].items() if k != name}, name: pid}
    layout.state.write_text(json.dumps(state, indent=2))


def forget(root: Path, name: str) -> None:
    """Remove a process that has stopped from ``cluster.json``."""
    layout = Layout(root.resolve())
    with contextlib.suppress(FileNotFoundError):
        state = json.loads(layout.state.read_text())
        state["pids"].pop(name, None)
        layout.state.write_text(json.dumps(state, indent=2))


def status(root: Path) -> dict[str, bool]:
    """Each component recorded in ``root/cluster.json``, and whether it still runs."""
    layout = Layout(root.resolve())
    try:
        recorded: dict[str, int] = json.loads(layout.state.read_text())["pids"]
    except (FileNotFoundError, KeyError, ValueError):
        return {}
    return {name: _runs(pid, name) for name, pid in recorded.items()}


def terminate(pids: Sequence[int]) -> None:
    """SIGTERM each process group in ``pids`` (in that order), wait up to ``STOP_SECONDS`` for
    them to end, then SIGKILL what is left."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    # A killed process is gone only once it is reaped: wait for that (``alive`` reaps our
    # children), or a caller that checks at once finds a zombie of a process that was stopped.
    deadline = time.monotonic() + KILL_SECONDS
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)


def stop(root: Path) -> list[str]:
    """Stop every process recorded in ``root/cluster.json`` and remove the cluster's network
    namespace (``controlplane.networks``); return the names stopped."""
    layout = Layout(root.resolve())
    try:
        recorded: dict[str, int] = json.loads(layout.state.read_text())["pids"]
    except (FileNotFoundError, KeyError, ValueError):
        networks.remove(layout.root)
        return []
    running = {name: pid for name, pid in recorded.items() if _runs(pid, name)}
    # Stop in reverse start order: clients first, etcd last.
    order = list(reversed(running.items()))
    terminate([pid for _, pid in order])
    layout.state.unlink(missing_ok=True)
    networks.remove(layout.root)
    return [name for name, _ in order]


def wait_ready(proc: subprocess.Popen[bytes] | None, name: str, log: Path, what: str,
               ready: Callable[[], bool], seconds: float, error: type[Exception]) -> None:
    """Wait until ``ready()`` for a process started beside the cluster (Kueue, an operator);
    ``error`` names it, with the end of its ``log``, when it exits first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is None or proc.poll() is not None:
            code = proc.returncode if proc else None
            raise error(f"{name} exited with code {code} while waiting for {what}; "
                        f"last lines of {log}:\n{log_tail(log)}")
        if ready():
            return
        time.sleep(0.2)
    raise error(f"{name}: {what} not ready after {seconds:.0f}s; last lines of {log}:\n{log_tail(log)}")


def answers_ready(port: int) -> bool:
    """Whether a controller-runtime manager's health port on loopback answers ``/readyz`` 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def stop_process(root: Path, name: str, proc: subprocess.Popen[bytes] | None) -> None:
    """Stop a process started beside the cluster (SIGTERM to its group, SIGKILL after
    ``STOP_SECONDS``) and forget it in the cluster's state."""
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    forget(root, name)
