"""How the local kube-scheduler is told about the extender: the shipped entry, with only the
address, the trust and the managed resources of this machine."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from controlplane.deploying import LocalSluicegate
from controlplane.extenders import SHIPPED, ExtenderError, SchedulerExtender
from controlplane.launching import LocalCluster
from controlplane.services import WEBHOOK, Service, connection_arguments

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def shipped() -> dict[str, object]:
    (entry,) = yaml.safe_load(SHIPPED.read_text())["extenders"]
    assert isinstance(entry, dict)
    return entry


def test_the_local_entry_is_the_shipped_one_pointed_at_loopback_and_trusting_the_given_ca() -> None:
    entry = SchedulerExtender("https://127.0.0.1:8444", ca_bundle=CA).entry()

    assert entry["urlPrefix"] == "https://127.0.0.1:8444"
    assert entry["tlsConfig"] == {"caData": base64.b64encode(CA).decode()}
    assert entry["enableHTTPS"] is True
    kept = {k: v for k, v in shipped().items() if k not in ("urlPrefix", "tlsConfig")}
    assert {k: entry[k] for k in kept} == kept  # verbs, weight, ignorable, nodeCacheCapable, ...
    assert entry["ignorable"] is True and entry["nodeCacheCapable"] is True
    assert entry["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]


def test_loopback_tls_may_skip_verification_and_other_resources_and_timeouts_may_be_named() -> None:
    entry = SchedulerExtender("https://127.0.0.1:9/", insecure=True,
                              managed_resources=("nvidia.com/gpu", "amd.com/gpu"), http_timeout="5s").entry()

    assert entry["urlPrefix"] == "https://127.0.0.1:9"
    assert entry["tlsConfig"] == {"insecure": True}
    assert [r["name"] for r in entry["managedResources"]] == ["nvidia.com/gpu", "amd.com/gpu"]
    assert entry["httpTimeout"] == "5s"


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"url": "127.0.0.1:8444", "insecure": True}, r"is not http\(s\)://host:port"),
        ({"url": "https://127.0.0.1:8444"}, "needs a CA bundle"),
        ({"url": "https://extender.example:8444", "insecure": True}, "loopback only"),
        ({"url": "https://127.0.0.1:1", "ca_bundle": CA, "managed_resources": ()}, "at least one"),
    ],
    ids=["no scheme", "https without trust", "insecure off loopback", "no managed resource"],
)
def test_settings_that_cannot_work_are_refused(settings: dict[str, object], says: str) -> None:
    with pytest.raises(ExtenderError, match=says):
        SchedulerExtender(**settings)  # type: ignore[arg-type]


def test_a_cluster_without_an_extender_configures_none(tmp_path: Path) -> None:
    assert "extenders" not in LocalCluster(tmp_path).scheduler_configuration()


def test_a_cluster_given_an_extender_configures_exactly_it(tmp_path: Path) -> None:
    extender = SchedulerExtender("https://127.0.0.1:8444", ca_bundle=CA)
    config = LocalCluster(tmp_path, extender=extender).scheduler_configuration()

    assert config["extenders"] == [extender.entry()]


EXTENDING = Service("controller", "controller", "sluicegate-controller", ("extender", "metrics"),
                    connection_arguments)


def test_make_up_learns_the_extenders_port_and_ca_before_any_process_starts(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path)
    sluicegate = LocalSluicegate(cluster, services=(WEBHOOK, EXTENDING))

    extender = sluicegate.scheduler_extender()

    assert extender is not None
    assert extender.url == f"https://127.0.0.1:{sluicegate.port('controller', 'extender')}"
    assert extender.ca_bundle == sluicegate.tls.ca_cert.read_bytes()
    sluicegate.prepare()  # up() prepares again: the same ports and certificate
    assert sluicegate.scheduler_extender() == extender


def test_without_a_process_serving_the_extender_the_scheduler_gets_none(tmp_path: Path) -> None:
    assert LocalSluicegate(LocalCluster(tmp_path), services=(WEBHOOK,)).scheduler_extender() is None
