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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from controlplane.pki import Pki

STOP_SECONDS = 15.0
"""How long a stopped process has after SIGTERM before SIGKILL."""


PORT_RANGE: Final = "/proc/sys/net/ipv4/ip_local_port_range"
PORTS_BELOW: Final = 20_000
"""How many ports under the ephemeral range ``free_port`` picks from."""
PICKS: Final = 64
"""Random picks ``free_port`` tries before it asks the kernel."""
LINUX_RANGE: Final = (32768, 60999)
_given: set[int] = set()
"""Every port ``free_port`` handed out in this process: never handed out again."""


class NoFreePort(RuntimeError):
    """No loopback port could be bound."""


def free_port() -> int:
    """A loopback port that is free now and that no outgoing connection will take meanwhile.

    The port is handed to a process that binds it a moment later. A port from the kernel's
    ephemeral range (what binding port 0 gives) can be taken in that moment as the local end
    of any connection the machine opens, and a busy test run opens thousands; so the port is
    picked at random outside that range (the ``PORTS_BELOW`` ports under it, and those above
    it up to 65535), which only another explicit bind can take, and checked by binding it. A
    range that leaves no room outside it (``1024 65535``) leaves the kernel's choice. A port
    is handed out once per process: a port checked free is let go, so two picks in a row could
    otherwise be the same port, and the second process to bind it would fail. Raises
    ``NoFreePort`` when nothing can be bound."""
    low, high = _ephemeral_range()
    spans = [(lo, hi) for lo, hi in ((max(1024, low - PORTS_BELOW), low), (max(1024, high + 1), 65536))
             if lo < hi]
    total = sum(hi - lo for lo, hi in spans)
    for _ in range(PICKS if spans else 0):
        port = _pick(spans, total)
        if port not in _given and _bindable(port):
            _given.add(port)
            return port
    for _ in range(PICKS):  # every pick taken: fall back on the kernel's choice
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", 0))
            except OSError as e:
                raise NoFreePort(f"no free loopback port: {PICKS} picked outside the ephemeral range "
                                 f"{low}-{high} were taken, and the kernel had none ({e})") from e
            chosen: int = s.getsockname()[1]
        if chosen not in _given:
            _given.add(chosen)
            return chosen
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


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


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
        if alive(pid):
            time.sleep(0.2)


def stop(root: Path) -> list[str]:
    """Stop every process recorded in ``root/cluster.json``; return the names stopped."""
    layout = Layout(root.resolve())
    try:
        recorded: dict[str, int] = json.loads(layout.state.read_text())["pids"]
    except (FileNotFoundError, KeyError, ValueError):
        return []
    running = {name: pid for name, pid in recorded.items() if _runs(pid, name)}
    # Stop in reverse start order: clients first, etcd last.
    order = list(reversed(running.items()))
    terminate([pid for _, pid in order])
    layout.state.unlink(missing_ok=True)
    return [name for name, _ in order]
