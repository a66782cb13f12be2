"""The launcher starts a cluster that reports its failures plainly and stops without a trace."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from controlplane.launching import LocalCluster, StartError


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stopping_a_cluster_leaves_no_process_behind(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "small", nodes=1, gpus_per_node=2)
    cluster.up(progress=lambda line: None)
    pids = json.loads(cluster.layout.state.read_text())["pids"]
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    assert all(alive(pid) for pid in pids.values())
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes] == ["2"]

    cluster.down()

    assert not [name for name, pid in pids.items() if alive(pid)]
    assert not cluster.layout.state.exists()


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
