"""The controller's flags and their environment variables."""

from __future__ import annotations

import pytest

from controller.settings import parse


def test_defaults_give_client_gos_lease_timing_and_the_pod_name_as_identity() -> None:
    s = parse([], {"POD_NAME": "sluicegate-controller-7d9f-x2"})
    assert (s.lease.duration, s.lease.renew_deadline, s.lease.retry) == (15.0, 10.0, 2.0)
    assert s.lease.identity == "sluicegate-controller-7d9f-x2"
    assert (s.lease.namespace, s.lease.name) == ("sluicegate-system", "sluicegate-controller")
    assert (s.port, s.metrics_port, s.extender) == (8444, 8080, True)


def test_flags_win_over_the_environment() -> None:
    s = parse(["--release-concurrency", "32", "--no-extender"],
              {"SLUICEGATE_RELEASE_CONCURRENCY": "8", "SLUICEGATE_STATUS_SECONDS": "5"})
    assert (s.release_concurrency, s.status_seconds, s.extender) == (32, 5.0, False)


@pytest.mark.parametrize("argv", [
    ["--renew-deadline", "20"],  # longer than the lease: two leaders could overlap
    ["--retry-period", "0"],
    ["--identity", ""],
    ["--release-concurrency", "0"],
    ["--status-writes", "0"],  # no status would ever be written
    ["--status-writes", "-5"],
    ["--debounce-seconds", "1", "--longest-seconds", "0.5"],
])
def test_settings_that_cannot_work_are_refused_at_start(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(argv, {})
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-2", "nan", "inf"])
def test_a_status_interval_that_is_not_a_positive_number_of_seconds_is_refused_by_name(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # 0, a negative or NaN would write status in a busy loop, with no bound on the rate;
    # infinity would never write it.
    with pytest.raises(SystemExit):
        parse(["--status-seconds", value], {})
    assert "--status-seconds must be a positive number of seconds" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse([], {"SLUICEGATE_STATUS_SECONDS": value})
    assert "--status-seconds must be a positive number of seconds" in capsys.readouterr().err


def test_the_visibility_api_is_on_by_default_on_its_own_port_with_the_webhooks_certificate() -> None:
    s = parse([], {})
    assert (s.visibility, s.visibility_host, s.visibility_port, s.visibility_listen_fd) == (
        True, "0.0.0.0", 8445, None)
    assert (s.visibility_tls_cert, s.visibility_tls_key) == (
        "/etc/sluicegate/visibility-tls/tls.crt", "/etc/sluicegate/visibility-tls/tls.key")
    assert s.visibility_seconds == 2.0


def test_the_visibility_api_can_serve_an_inherited_socket_or_be_off() -> None:
    s = parse(["--visibility-listen-fd", "7", "--listen-fd", "6"], {"SLUICEGATE_VISIBILITY": "false"})
    assert (s.visibility_listen_fd, s.listen_fd, s.visibility) == (7, 6, False)


@pytest.mark.parametrize("argv", [["--visibility-port", "70000"], ["--visibility-seconds", "0"],
                                  ["--visibility-seconds", "nan"]])
def test_a_visibility_setting_that_cannot_work_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv, {})
