"""The flags every server process shares (``process.settings``): the same names, the same
environment variables, each process's own defaults, and the same refusals."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from controller import settings as controller
from extender import serving as alone_extender
from process.settings import ServerSettings
from recorder import settings as recorder
from webhook import settings as webhook

Parse = Callable[[Sequence[str], Mapping[str, str]], ServerSettings]
PARSERS: dict[str, Parse] = {
    "webhook": webhook.parse,
    "controller": controller.parse,
    "extender alone": alone_extender.parse,
}


@pytest.mark.parametrize("name", PARSERS)
def test_every_process_reads_the_shared_flags_and_their_environment_variables(name: str) -> None:
    s = PARSERS[name](["--tls-cert", "/tls/flag.crt", "--metrics-port", "9090"], {
        "SLUICEGATE_TLS_CERT": "/tls/env.crt", "SLUICEGATE_TLS_KEY": "/tls/env.key",
        "SLUICEGATE_KUBECONFIG": "/home/admin/.kube/config", "SLUICEGATE_LOG_FORMAT": "text",
        "SLUICEGATE_DRAIN_SECONDS": "0.5", "POD_NAME": "replica-0",
    })
    assert (s.tls_cert, s.tls_key, s.metrics_port) == ("/tls/flag.crt", "/tls/env.key", 9090)
    assert s.connection.kubeconfig == "/home/admin/.kube/config"
    assert (s.log_format, s.drain_seconds) == ("text", 0.5)


def test_each_process_keeps_its_own_defaults() -> None:
    assert (webhook.parse([], {}).port, webhook.parse([], {}).host) == (8443, "0.0.0.0")
    ours = controller.parse([], {"POD_NAME": "r"})
    assert (ours.port, ours.log_format) == (8444, "json")
    alone = alone_extender.parse([], {})
    assert (alone.host, alone.port, alone.log_format) == ("127.0.0.1", 8444, "text")


@pytest.mark.parametrize("name", PARSERS)
def test_a_port_out_of_range_is_refused_by_every_process(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        PARSERS[name](["--port", "70000"], {"POD_NAME": "replica-0"})
    assert "ports must be between 0 and 65535" in capsys.readouterr().err


@pytest.mark.parametrize("name", PARSERS)
def test_an_environment_variable_that_does_not_read_is_refused_with_its_flag(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        PARSERS[name]([], {"SLUICEGATE_METRICS_PORT": "eighty", "POD_NAME": "replica-0"})
    assert "argument --metrics-port: invalid int value: 'eighty'" in capsys.readouterr().err


def test_the_recorder_reads_the_shared_flags_and_stops_without_draining(
    capsys: pytest.CaptureFixture[str],
) -> None:
    s = recorder.parse(["--tls-cert", "/tls/flag.crt"], {
        "SLUICEGATE_TLS_KEY": "/tls/env.key", "SLUICEGATE_KUBECONFIG": "/home/admin/.kube/config",
        "SLUICEGATE_METRICS_PORT": "9090",
    })
    assert (s.tls_cert, s.tls_key, s.metrics_port) == ("/tls/flag.crt", "/tls/env.key", 9090)
    assert (s.connection.kubeconfig, s.drain_seconds) == ("/home/admin/.kube/config", 0.0)
    with pytest.raises(SystemExit):
        recorder.parse(["--drain-seconds", "3"], {})
    assert "unrecognized arguments: --drain-seconds" in capsys.readouterr().err
