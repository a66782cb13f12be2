"""``python -m recorder``'s settings: flags, their environment variables, and refusals."""

from __future__ import annotations

import pytest

from recorder.settings import Settings, parse


def test_defaults_suit_the_statefulset() -> None:
    settings = parse([], environ={})
    assert settings == Settings()
    assert (settings.database, settings.retention_seconds, settings.port, settings.namespace) == (
        "/var/lib/sluicegate/records.db", 90 * 86400.0, 8443, "sluicegate-system")


def test_the_environment_sets_defaults_and_a_flag_wins() -> None:
    settings = parse(["--retention", "36h"], environ={"SLUICEGATE_RETENTION": "7d",
                                                      "SLUICEGATE_DATABASE": "/data/r.db"})
    assert (settings.retention_seconds, settings.database) == (36 * 3600.0, "/data/r.db")
    assert parse([], environ={"SLUICEGATE_RETENTION": "2w"}).retention_seconds == 14 * 86400.0
    # The StatefulSet names the pod's namespace: the records are served, and RBAC read, there.
    assert parse([], environ={"SLUICEGATE_NAMESPACE": "gpu-system"}).namespace == "gpu-system"
    assert parse(["--max-connections", "16"], environ={}).max_connections == 16


@pytest.mark.parametrize("argv", [["--retention", "forever"], ["--retention", "0"], ["--port", "70000"]])
def test_nonsense_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv, environ={})


@pytest.mark.parametrize(("argv", "why"), [
    (["--namespace", ""], "--namespace must not be empty"),
    (["--max-connections", "0"], "--max-connections must be at least 1"),
])
def test_no_namespace_and_no_room_for_connections_are_refused_saying_why(
    argv: list[str], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(argv, environ={})
    assert why in capsys.readouterr().err
