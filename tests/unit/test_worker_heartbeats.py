"""What the webhook's supervisor says of its workers from their heartbeats: a worker not yet
serving, one that has stopped answering (not ready: it is being replaced), and one silent long
after its replacement (unhealthy: the container must restart). The replacement itself, a
stopped worker killed and started again, is e2e (``tests/e2e/test_webhook_workers.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from webhook.settings import parse
from webhook.workers import Workers, silence

NOW = 1_000_000.0


def supervisor(tmp_path: Path, beats: dict[int, float]) -> Workers:
    """Two workers under a 4 s timeout; ``beats``: worker -> seconds since its last heartbeat."""
    for worker, ago in beats.items():
        path = tmp_path / f"ready-{worker}"
        path.touch()
        os.utime(path, (NOW - ago, NOW - ago))
    settings = parse(["--tls-cert", "c", "--tls-key", "k", "--worker-timeout-seconds", "4"])
    replaced = Counter("replaced", "", registry=CollectorRegistry())
    return Workers(settings, [], 2, tmp_path, replaced, clock=lambda: NOW)


@pytest.mark.parametrize(
    ("beats", "ready", "healthy"),
    [
        pytest.param({1: 0.5, 2: 3.9}, None, None, id="both beat within the timeout: ready"),
        pytest.param({1: 0.5}, "admission workers 2 do not serve yet", None, id="one still starting"),
        pytest.param({1: 0.5, 2: 6.0},
                     "admission workers 2 (6s) have stopped answering: replacing them", None,
                     id="one silent past the timeout: not ready while it is replaced"),
        pytest.param({1: 0.5, 2: 13.0},
                     "admission workers 2 (13s) have stopped answering: replacing them",
                     "admission worker 2 has not answered for 13s",
                     id="silent three timeouts: its replacement did not help, unhealthy"),
        pytest.param({2: 5.0},
                     "admission workers 1 do not serve yet; admission workers 2 (5s) have stopped "
                     "answering: replacing them", None, id="both at once"),
    ],
)
def test_the_supervisor_is_ready_while_every_worker_beats_and_unhealthy_when_one_stays_silent(
    tmp_path: Path, beats: dict[int, float], ready: str | None, healthy: str | None,
) -> None:
    workers = supervisor(tmp_path, beats)
    assert workers.waiting() == ready
    assert workers.unhealthy() == healthy


def test_a_worker_with_no_file_has_not_begun_and_one_that_beat_has_a_silence(tmp_path: Path) -> None:
    assert silence(tmp_path / "ready-1", NOW) is None
    supervisor(tmp_path, {1: 2.5})
    assert silence(tmp_path / "ready-1", NOW) == pytest.approx(2.5)


def test_the_timeout_must_outlast_a_heartbeat() -> None:
    with pytest.raises(SystemExit):
        parse(["--tls-cert", "c", "--tls-key", "k", "--worker-timeout-seconds", "1"])
