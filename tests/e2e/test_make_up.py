"""``make up`` / ``make down`` (``python -m controlplane up --sluicegate``): Sluicegate running
as its ServiceAccounts on an empty cluster, ending with the line to paste; state kept only when
asked; a Sluicegate process that dies at start is named with the end of its log."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster, StartError
from controlplane.services import WEBHOOK, Launch, Service, webhook_arguments

ROOT = Path(__file__).resolve().parents[2]


def controlplane(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "controlplane", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


def kubectl(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The cluster's kubectl, as its admin."""
    return subprocess.run([str(root / "bin" / "kubectl"), f"--kubeconfig={root / 'kubeconfig'}", *args],
                          capture_output=True, text=True, timeout=120)


def pids(root: Path) -> list[int]:
    found = []
    for name in ("cluster.json", "sluicegate.json"):
        path = root / name
        if path.exists():
            found += list(json.loads(path.read_text())["pids"].values())
    return found


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def test_make_up_runs_sluicegate_on_an_empty_cluster_and_keeps_state_only_when_asked(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    try:
        up = controlplane(root, "up", "--sluicegate", "--nodes", "1")
        assert up.returncode == 0, up.stderr
        assert up.stdout.splitlines()[-1] == f"export KUBECONFIG={root.resolve() / 'kubeconfig'}"
        status = controlplane(root, "status").stdout
        assert "sluicegate webhook: running" in status
        # The webhook runs as its ServiceAccount, with exactly the RBAC of manifests/.
        server = json.loads((root / "cluster.json").read_text())["server"]
        token = (root / "sluicegate" / "tokens" / "sluicegate-webhook").read_text()

        def as_webhook(*args: str) -> str:
            return subprocess.run(
                [str(root / "bin" / "kubectl"), "--kubeconfig=/dev/null", f"--server={server}",
                 f"--token={token}", f"--certificate-authority={root / 'pki' / 'ca.crt'}", *args],
                capture_output=True, text=True, timeout=120,
            ).stdout

        whoami = as_webhook("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
        assert whoami == "system:serviceaccount:sluicegate-system:sluicegate-webhook"
        assert as_webhook("auth", "can-i", "watch", "queues.sluicegate.dev") == "yes\n"
        assert as_webhook("auth", "can-i", "create", "pods") == "no\n"
        assert kubectl(root, "create", "namespace", "from-the-last-run").returncode == 0
        running = pids(root)
        down = controlplane(root, "down")
        assert "webhook" in down.stdout
        assert not [p for p in running if alive(p)]
        assert (root / "logs" / "sluicegate-webhook.log").exists(), "logs stay after make down"

        # MONITORING=1: Prometheus beside it, scraping every process; status shows it, down stops it.
        kept = controlplane(root, "up", "--sluicegate", "--keep-state", "--monitoring", "--nodes", "1")
        assert kept.returncode == 0, kept.stderr
        assert kubectl(root, "get", "namespace", "from-the-last-run").returncode == 0
        status = controlplane(root, "status").stdout
        assert "prometheus: running" in status, status
        served = re.search(r"prometheus serves (http://127\.0\.0\.1:\d+)", status)
        assert served is not None, status
        query = urllib.parse.urlencode({"query": 'count(up{namespace="sluicegate-system"} == 1)'})
        with urllib.request.urlopen(f"{served.group(1)}/api/v1/query?{query}", timeout=10) as answer:
            (scraped,) = json.loads(answer.read())["data"]["result"]
        assert scraped["value"][1] == "3"  # the webhook, the controller and the recorder
        prometheus = json.loads((root / "cluster.json").read_text())["pids"]["prometheus"]
        down = controlplane(root, "down")
        assert "prometheus" in down.stdout and not alive(prometheus)

        fresh = controlplane(root, "up", "--nodes", "1")
        assert fresh.returncode == 0, fresh.stderr
        gone = kubectl(root, "get", "namespace", "from-the-last-run")
        assert gone.returncode != 0 and "NotFound" in gone.stderr
    finally:
        controlplane(root, "down")


def test_a_process_that_dies_at_start_is_named_with_the_end_of_its_log(tmp_path: Path) -> None:
    def without_key(launch: Launch) -> list[str]:
        return [*webhook_arguments(launch), "--tls-key", str(tmp_path / "missing.key")]

    cluster = LocalCluster(tmp_path / "cluster", nodes=1, gpus_per_node=1)
    broken = Service(WEBHOOK.name, WEBHOOK.module, WEBHOOK.account, WEBHOOK.ports, without_key)
    cluster.up(progress=lambda line: None)
    try:
        sluicegate = LocalSluicegate(cluster, services=[broken])
        with pytest.raises(StartError) as failure:
            sluicegate.up()
        message = str(failure.value)
        assert message.startswith("webhook exited with code 1; last lines of ")
        assert str(cluster.layout.log("sluicegate-webhook")) in message
        assert "missing.key" in message
        assert not (cluster.layout.root / "sluicegate.json").exists()
    finally:
        cluster.down()
