"""Ports for the local control plane's processes: free, and out of the way of outgoing connections."""

from __future__ import annotations

import socket

import pytest

from controlplane import processes


def test_a_port_is_picked_under_the_ephemeral_range_and_can_be_bound() -> None:
    low = processes._ephemeral_low()
    port = processes.free_port()
    assert low - processes.PORTS_BELOW <= port < low
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # raises if the port was not free


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
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_an_unreadable_port_range_means_linux_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "PORT_RANGE", "/nonexistent/ip_local_port_range")
    assert processes._ephemeral_low() == 32768
