"""The network namespace of a local cluster, without making one: its names fit Linux's limits
and differ per cluster directory, its addresses are a /30 of the private range apart from this
host's, and a cluster that has none removes nothing."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from controlplane import networks


def test_each_cluster_directory_has_names_of_its_own_that_linux_accepts(tmp_path: Path) -> None:
    first, second = networks.names(tmp_path / "a"), networks.names(tmp_path / "b")
    assert first != second
    assert networks.names(tmp_path / "a" / ".." / "a") == first  # the same directory, however named
    namespace, host, inner = first
    assert namespace.startswith("sluicegate-")
    assert all(len(link) <= 15 for link in (host, inner))  # IFNAMSIZ - 1


def test_every_slot_is_a_private_30_with_two_addresses_outside_the_clusters_other_ranges() -> None:
    slots = networks._slots()
    assert len(slots) == 2 ** (networks.PREFIX - 16)
    for slot in (slots[0], slots[-1]):
        assert slot.is_private and slot.prefixlen == networks.PREFIX and len(list(slot.hosts())) == 2
        for other in ("10.96.0.0/16", "10.0.0.0/16", "127.0.0.0/8"):  # Services, kwok's pods, loopback
            assert not slot.overlaps(ipaddress.ip_network(other))


def test_a_cluster_without_a_network_has_nothing_to_remove(tmp_path: Path) -> None:
    assert networks.load(tmp_path) is None
    assert networks.remove(tmp_path) is False
