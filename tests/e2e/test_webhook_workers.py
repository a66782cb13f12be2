"""The webhook on every core: the process started supervises one admission worker per CPU (two
on the test machine, at least two here), which share the admission port; each answers, the
supervisor's metrics add up what they answered, SIGTERM to the supervisor alone stops them
all, and a worker that stops answering is replaced."""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from controlplane.deploying import LocalSluicegate
from tests.e2e.conftest import eventually
from tests.e2e.scenes import Scene
from webhook.workers import HEADER

WORKERS = 2


def supervisor(running: LocalSluicegate) -> int:
    pid: int = json.loads(running.state.read_text())["pids"]["webhook"]
    return pid


def workers(pid: int) -> dict[int, int]:
    """The supervisor's admission workers: their number (``--worker``) by pid."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and "--worker" in argv:
            out[int(entry.name)] = int(argv[len(argv) - 1 - argv[::-1].index("--worker") + 1])
    return out


def listening(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on ``port`` (IPv4, any address)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if state == "0A" and int(local.split(":")[1], 16) == port and inode in inodes:
            return True
    return False


def ask(running: LocalSluicegate) -> tuple[int, str]:
    """A malformed review on a new connection: the status and the worker that answered it."""
    context = ssl.create_default_context(cafile=str(running.tls.ca_cert))
    connection = http.client.HTTPSConnection("127.0.0.1", running.port("webhook", "admission"),
                                             context=context, timeout=30)
    try:
        connection.request("POST", "/validate", body=b"{}", headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        answer.read()
        return answer.status, answer.getheader(HEADER) or ""
    finally:
        connection.close()


def scrape(running: LocalSluicegate, name: str, **labels: str) -> float:
    """The sum of the supervisor's samples ``name`` with ``labels``."""
    port = running.port("webhook", "metrics")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def invalid(running: LocalSluicegate) -> float:
    return scrape(running, "sluicegate_admission_requests_total", result="invalid")


def test_the_workers_share_the_admission_port_each_answers_and_the_metrics_add_up(
    running: LocalSluicegate,
) -> None:
    pid = supervisor(running)
    found = workers(pid)
    assert sorted(found.values()) == list(range(1, len(found) + 1)) and len(found) >= WORKERS, found
    port = running.port("webhook", "admission")
    assert all(listening(worker, port) for worker in found), "every worker listens on the admission port"
    assert not listening(pid, port), "the supervisor does not answer reviews itself"

    before = invalid(running)
    answered: list[str] = []

    def every_worker_answered() -> bool:
        status, worker = ask(running)
        assert status == 400
        answered.append(worker)
        return set(answered) == {str(n) for n in found.values()}

    eventually(every_worker_answered, "a new connection to reach each worker")
    assert invalid(running) - before == len(answered)


def test_sigterm_to_the_supervisor_alone_stops_every_worker(running: LocalSluicegate) -> None:
    pid = supervisor(running)
    found = workers(pid)
    assert len(found) >= WORKERS
    try:
        os.kill(pid, signal.SIGTERM)

        def gone() -> bool:
            return not any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in (pid, *found))

        eventually(gone, "the supervisor and its workers to exit")
    finally:
        running.stop("webhook")  # forgets the exited process
        running.start("webhook")
    assert len(workers(supervisor(running))) == len(found)


def test_a_stopped_worker_is_killed_and_replaced_and_admission_answers_again(
    running: LocalSluicegate, scene: Scene,
) -> None:
    """SIGSTOP leaves a worker holding its share of the port and answering nothing. The
    supervisor sees its heartbeat stop, kills it, starts another with the same number and
    counts it; then every new connection is answered and pods are admitted again."""
    pid = supervisor(running)
    found = workers(pid)
    assert len(found) >= WORKERS
    before = scrape(running, "sluicegate_webhook_workers_replaced_total")
    stuck, number = min(found.items())
    os.kill(stuck, signal.SIGSTOP)
    try:
        eventually(lambda: not Path(f"/proc/{stuck}").exists() or _state(stuck) == "Z",
                   f"the stopped worker {number} (pid {stuck}) to be killed")
        now = eventually(lambda: (lambda w: w if number in w.values() and stuck not in w else None)(
            workers(pid)), f"worker {number} to be started again")
        assert len(now) == len(found) and pid == supervisor(running)
        assert scrape(running, "sluicegate_webhook_workers_replaced_total") == before + 1
        eventually(lambda: ready(running), "the supervisor to be ready again")

        answered: set[str] = set()

        def every_worker_answers() -> bool:
            status, worker = ask(running)  # a worker that does not answer fails this by its timeout
            assert status == 400
            answered.add(worker)
            return answered == {str(n) for n in now.values()}

        eventually(every_worker_answers, "a new connection to reach each worker, the new one too")
        team = scene.team("vision")
        queue = scene.queue("train")
        namespace = scene.namespace(team)
        scene.pods(namespace, queue, 4, prefix="after", seconds=1)  # refused or timed out: raises
        assert all(scene.get("pod", f"after{i:02d}", namespace) for i in range(4))
    finally:
        if Path(f"/proc/{stuck}").exists():  # the supervisor did not kill it: leave a webhook that works
            os.kill(stuck, signal.SIGCONT)
            running.stop("webhook")
            running.start("webhook")


def ready(running: LocalSluicegate) -> bool:
    port = running.port("webhook", "metrics")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
