"""``sluicegate queues`` for someone who may read Queues and no pods (the sample
``sluicegate-reader`` role), with a kubeconfig that names no namespace, and kubectl's global
flags before the command. An API server on loopback plays the cluster: it lists Queues with the
status the controller wrote and refuses everything else as RBAC would (403)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cli.__main__ import main, parser
from kube.resources import QUEUES
from process import kubeyaml
from tests.builders import MakeQueue

TRAIN = MakeQueue("train").priority(5).max_running(8).obj()
TRAIN["status"] = {"pending": 3, "running": 8, "display": {"running": "8/8", "gpus": "16/16"}}


class QueueReaderApi(BaseHTTPRequestHandler):
    """What the API server answers a user bound only to the sample reader role."""

    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        type(self).asked.append(path)
        if path == QUEUES.path():
            self._answer(200, {"kind": "QueueList", "apiVersion": "sluicegate.dev/v1beta1",
                               "metadata": {}, "items": [TRAIN]})
            return
        self._answer(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                           "code": 403, "message": f'GET {path} is forbidden: User "alice" cannot get it'})

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for that server whose context names no namespace."""
    QueueReaderApi.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), QueueReaderApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "alice",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "alice", "user": {"token": "alice-token"}}],
        "contexts": [{"name": "alice", "context": {"cluster": "c", "user": "alice"}}],
    }
    path = tmp_path / "alice.kubeconfig"
    path.write_text(kubeyaml.dump(config))
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("order", ["after", "before"])
def test_a_queue_reader_without_a_namespace_gets_the_queue_status_and_a_note(
    kubeconfig: Path, order: str, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--kubeconfig", str(kubeconfig)]
    words = ["queues", *flags] if order == "after" else [*flags, "queues"]
    assert main(words) == 0
    out, err = capsys.readouterr()
    assert err == ("Note: from the Queue status the controller writes (not allowed to read every "
                   "namespace's pods).\n")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "PRIORITY", "RUNNING", "PENDING", "GPUS", "OLDEST-WAIT", "PAUSED"]
    assert row.split() == ["train", "5", "8/8", "3", "16/16", "-", "false"]
    assert not any("/pods" in path and "/namespaces/" in path for path in QueueReaderApi.asked), \
        QueueReaderApi.asked


def test_kubectls_global_flags_are_taken_before_the_command_and_after_it() -> None:
    def parsed(*words: str) -> tuple[str, str, str]:
        args = parser("sluicegate", list(words)).parse_args(list(words))
        return args.kubeconfig, args.context, args.namespace

    assert parsed("--kubeconfig", "k", "--context", "c", "-n", "ns", "explain", "p") == ("k", "c", "ns")
    assert parsed("explain", "p", "--kubeconfig", "k", "--context", "c", "-n", "ns") == ("k", "c", "ns")
    assert parsed("-n", "early", "pods", "-n", "late") == ("", "", "late")  # after the command wins
    assert parsed("pods") == ("", "", "")
    report = parser("sluicegate", ["report"]).parse_args(["--context", "c", "report", "--kubeconfig", "k"])
    assert (report.kubeconfig, report.context) == ("k", "c")
