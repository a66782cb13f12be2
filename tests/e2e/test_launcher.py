"""The launcher starts a cluster that reports its failures plainly and stops without a trace."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from controlplane import networks
from controlplane.launching import LocalCluster, StartError


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def test_stopping_a_cluster_leaves_no_process_behind(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "small", nodes=1, gpus_per_node=2)
    cluster.up(progress=lambda line: None)
    pids = json.loads(cluster.layout.state.read_text())["pids"]
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    assert all(alive(pid) for pid in pids.values())
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes] == ["2"]
    network = networks.load(cluster.layout.root)
    assert network is not None and (networks.NETNS_DIR / network.namespace).exists()
    assert link_exists(network.host_link)

    cluster.down()

    assert not [name for name, pid in pids.items() if alive(pid)]
    assert not cluster.layout.state.exists()
    assert not (networks.NETNS_DIR / network.namespace).exists(), "the network namespace is left behind"
    assert not link_exists(network.host_link), "the veth pair is left behind"
    assert networks.load(cluster.layout.root) is None


def test_a_component_that_cannot_start_is_named_with_the_end_of_its_log(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "broken", nodes=1, gpus_per_node=1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cluster.ports.apiserver = taken.getsockname()[1]
        with pytest.raises(StartError) as failure:
            cluster.up(progress=lambda line: None)

    message = str(failure.value)
    assert message.startswith("kube-apiserver exited with code")
    assert str(cluster.layout.log("kube-apiserver")) in message
    assert "address already in use" in message
    assert not cluster.layout.state.exists(), "a failed start stops what it started"


def test_two_clusters_get_networks_of_their_own_and_a_killed_runs_is_replaced(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    try:
        a, b = networks.create(first), networks.create(second)
        assert a.namespace != b.namespace and a.inner_address != b.inner_address
        # This host reaches a socket served inside each namespace, at its inner address.
        for network in (a, b):
            with networks.listen(network, 8443) as served, \
                    socket.create_connection((network.inner_address, 8443), timeout=10) as client:
                accepted, (peer, _) = served.accept()
                accepted.close()
                assert peer == network.host_address
                assert client.getpeername()[0] == network.inner_address
        # A run killed before its stop leaves its namespace; the next start replaces it.
        again = networks.create(first)
        assert again == a
        assert link_exists(a.host_link) and (networks.NETNS_DIR / a.namespace).exists()
    finally:
        networks.remove(first)
        networks.remove(second)
    assert not link_exists(a.host_link) and not link_exists(b.host_link)
    assert not (networks.NETNS_DIR / a.namespace).exists()
