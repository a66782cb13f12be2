"""``make status`` (``python -m controlplane status``) on a recorded cluster: each component's pid
checked, a dead one named with the end of its log and the exit status non-zero; Sluicegate's
ports shown; ``make`` commands that name a non-default cluster directory."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.__main__ import main
from controlplane.deploying import make_command


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def recorded(root: Path, pids: dict[str, int]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cluster.json").write_text(json.dumps({
        "pids": pids, "server": "https://127.0.0.1:1", "kubeconfig": str(root / "kubeconfig")}))


def status(root: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--root", str(root), "status"])
    return code, out.getvalue()


def test_a_dead_control_plane_component_is_named_and_status_fails(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    root = tmp_path / "cluster"
    recorded(root, {"etcd": gone.pid, "sleep": sleeper.pid})
    (root / "logs").mkdir()
    (root / "logs" / "etcd.log").write_text("etcd: the last words\n")
    code, out = status(root)
    assert code == 1
    assert f"  sleep: running, pid {sleeper.pid}" in out
    assert f"  etcd: NOT RUNNING (pid {gone.pid} is gone)" in out
    assert "etcd: the last words" in out
    assert f"not running: etcd; stop the rest with 'make down CLUSTER_DIR={root}'" in out


def test_a_running_cluster_passes_and_shows_sluicegate_ports(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    root = tmp_path / "cluster"
    recorded(root, {"sleep": sleeper.pid})
    # The command it was started with: /proc read right after Popen may still show the forked
    # parent's command line, before the child has exec'd.
    command = ["sleep", "600"]
    (root / "sluicegate.json").write_text(json.dumps({
        "pids": {"webhook": sleeper.pid}, "commands": {"webhook": command},
        "ports": {"webhook": {"admission": 9443, "metrics": 9090}}}))
    code, out = status(root)
    assert code == 0, out
    assert "  sluicegate webhook: running, admission port 9443, metrics port 9090, log " in out


def test_no_cluster_is_said_and_fails(tmp_path: Path) -> None:
    assert status(tmp_path / "nothing") == (1, f"no cluster runs in {tmp_path / 'nothing'}\n")


def test_make_commands_name_the_cluster_directory_only_when_not_the_default(tmp_path: Path) -> None:
    assert make_command("down", Path(".cluster")) == "make down"
    assert make_command("down", tmp_path / "c") == f"make down CLUSTER_DIR={tmp_path / 'c'}"
