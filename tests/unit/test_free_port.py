"""Ports for the local control plane's processes: free, out of the way of outgoing connections,
and never the same for two components, even of clusters that several processes start at once."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controlplane import processes


def listen(port: int) -> None:
    """Bind and listen on ``port`` as the components do (Go and asyncio set SO_REUSEADDR);
    raises if the port was not free."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


def test_a_port_is_picked_under_the_ephemeral_range_and_can_be_bound() -> None:
    low, high = processes._ephemeral_range()
    port = processes.free_port()
    assert low - processes.PORTS_BELOW <= port < low or high < port <= 65535
    listen(port)


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        picks = iter([busy, busy, free])
        monkeypatch.setattr(processes.random, "randrange", lambda lo, hi: next(picks))
        assert processes.free_port() == free


def test_when_every_pick_is_taken_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setattr(processes.random, "randrange", lambda lo, hi: busy)
        port = processes.free_port()
        assert port != busy
        listen(port)


def test_an_unreadable_port_range_means_linux_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "PORT_RANGE", "/nonexistent/ip_local_port_range")
    assert processes._ephemeral_range() == (32768, 60999)


def _port_range(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    monkeypatch.setattr(processes, "PORT_RANGE", str(path))


def test_an_ephemeral_range_that_starts_at_1024_leaves_the_ports_above_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _port_range(monkeypatch, tmp_path, "1024\t60999\n")  # nothing under the range to pick from
    for _ in range(20):
        port = processes.free_port()
        assert 61000 <= port <= 65535
        listen(port)


def test_an_ephemeral_range_that_covers_every_port_leaves_the_kernels_choice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _port_range(monkeypatch, tmp_path, "1024 65535")
    listen(processes.free_port())


def test_a_process_is_never_given_the_same_port_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each port is checked free by binding it and letting it go: two picks in a row (etcd's
    # client and peer ports, say) could be the same free port, and the second process to bind
    # it would fail.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        same = probe.getsockname()[1]
    real = processes.random.randrange
    picks = iter([same] * 64)
    monkeypatch.setattr(processes.random, "randrange", lambda lo, hi: next(picks, real(lo, hi)))
    ports = [processes.free_port() for _ in range(5)]
    assert len(set(ports)) == 5


class _Taken(socket.socket):
    """A socket for a machine where every loopback port is taken."""

    def bind(self, address: Any) -> None:
        raise OSError(98, "Address already in use")


def test_when_no_port_is_free_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes.socket, "socket", _Taken)
    with pytest.raises(processes.NoFreePort, match="no free loopback port"):
        processes.free_port()


def test_controlplane_up_says_when_no_port_is_free(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from controlplane.__main__ import main

    monkeypatch.setattr(processes.socket, "socket", _Taken)
    assert main(["--root", str(tmp_path / "cluster"), "up"]) == 1
    assert "error: no free loopback port" in capsys.readouterr().err


def test_a_port_handed_out_is_refused_to_every_other_check_but_the_component_binds_it() -> None:
    port = processes.free_port()
    with socket.socket() as check, pytest.raises(OSError):
        check.bind(("127.0.0.1", port))  # how free_port checks, in this process or another
    listen(port)
    listen(port)  # the component restarted on the same port (the fault suite does)


PICKER = """
import random, sys
from controlplane import processes
random.seed(7)
print(" ".join(str(processes.free_port()) for _ in range(40)), flush=True)
sys.stdin.readline()
"""


def test_two_processes_picking_at_once_never_get_the_same_port() -> None:
    # The same seed: without the ports held, both would pick exactly the same ones.
    first = subprocess.Popen([sys.executable, "-c", PICKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert first.stdout is not None
        ports = set(first.stdout.readline().split())
        second = subprocess.run([sys.executable, "-c", PICKER], input="\n", capture_output=True, text=True,
                                check=True, timeout=60)
        others = set(second.stdout.split())
    finally:
        first.communicate("\n", timeout=60)
    assert len(ports) == len(others) == 40
    assert ports.isdisjoint(others)
