"""The monitoring component's scrape and rule file: the ServiceMonitor scrapes what the rules
read, and the rule file Prometheus loads (and its test-shortened form) is the PrometheusRule's."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane import rulefiles
from controlplane.monitoring import ApiServerScrape, active_lines, configuration, metrics_reader
from tests.manifest_files import MANIFESTS, documents, objects

MONITORING = MANIFESTS / "components" / "monitoring"


def test_the_service_monitor_scrapes_the_metrics_port_of_every_process_the_rules_name() -> None:
    (component,) = documents(MONITORING / "kustomization.yaml")
    assert "servicemonitor.yaml" in component["resources"]
    (monitor,) = documents(MONITORING / "servicemonitor.yaml")
    selector = monitor["spec"]["selector"]
    (components,) = [e["values"] for e in selector["matchExpressions"]
                     if e["key"] == "app.kubernetes.io/component"]
    scraped = [s for s in objects("default") if s["kind"] == "Service"
               and selector["matchLabels"].items() <= s["metadata"]["labels"].items()
               and s["metadata"]["labels"]["app.kubernetes.io/component"] in components]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert {s["metadata"]["name"] for s in scraped} == {
        "sluicegate-webhook", "sluicegate-extender", "sluicegate-recorder"}
    for service in scraped:
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}, service["metadata"]["name"]
    containers = {c["name"] for d in objects("default") if d["kind"] == "Deployment"
                  for c in d["spec"]["template"]["spec"]["containers"]}
    rules = rulefiles.alerts(rulefiles.rule_file(rulefiles.read()))
    for alert, container in (("SluicegateWebhookDown", "webhook"),
                             ("SluicegateControllerDown", "controller")):
        assert f'container="{container}"' in rules[alert]["expr"] and container in containers
    assert monitor["metadata"]["namespace"] == "sluicegate-system"
    assert endpoint["scheme"] == "http"


def test_the_rule_file_is_the_prometheus_rules_groups_and_refuses_anything_else() -> None:
    document = rulefiles.read()
    rules = rulefiles.rule_file(document)
    assert rules == {"groups": document["spec"]["groups"]}
    assert len(rulefiles.alerts(rules)) == 14
    with pytest.raises(rulefiles.RuleFileError, match="expected a PrometheusRule"):
        rulefiles.rule_file({"kind": "ConfigMap"})
    with pytest.raises(rulefiles.RuleFileError, match=r"no spec\.groups"):
        rulefiles.rule_file({"kind": "PrometheusRule", "spec": {}})


def test_shortened_scales_every_for_and_every_threshold_in_seconds_and_nothing_else() -> None:
    rules = rulefiles.rule_file(rulefiles.read())
    short = rulefiles.shortened(rules, 1 / 120)
    before, after = rulefiles.alerts(rules), rulefiles.alerts(short)
    gated = after["SluicegatePodsGatedTooLong"]
    assert gated["for"] == "5000ms"
    assert gated["expr"].endswith("[2m])) > 30") and "> 3600" not in gated["expr"]
    starved = after["SluicegateQueueStarved"]["expr"]
    assert "[2m])) > 15)" in starved and "> 1800" not in starved
    assert "<= 0" in starved  # a comparison with no seconds before it is left as it was
    assert after["SluicegateNoLeader"]["for"] == "1000ms"
    assert after["SluicegateWebhookErrors"]["expr"] == before["SluicegateWebhookErrors"]["expr"]
    for name, rule in before.items():
        assert rulefiles.seconds(after[name]["for"]) == pytest.approx(rulefiles.seconds(rule["for"]) / 120)
        assert after[name]["labels"] == rule["labels"] and after[name]["annotations"] == rule["annotations"]
    assert rulefiles.alerts(rules) == before, "the rule file given is left as it was"
    with pytest.raises(rulefiles.RuleFileError, match="factor"):
        rulefiles.shortened(rules, 2)


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("1h30m", 5400), ("2500ms", 2.5), ("1d", 86400)])
def test_durations_read_as_prometheus_writes_them(text: str, seconds: float) -> None:
    assert rulefiles.seconds(text) == seconds
    assert rulefiles.seconds(rulefiles.duration(seconds)) == seconds


def test_a_duration_prometheus_would_refuse_is_refused() -> None:
    for text in ("10", "m", "1.5m", "10 m", ""):
        with pytest.raises(rulefiles.RuleFileError, match="not a Prometheus duration"):
            rulefiles.seconds(text)


def test_the_local_scrape_labels_each_process_as_a_service_monitor_would() -> None:
    targets = {"webhook": ("webhook", 4001), "controller-standby": ("controller", 4002)}
    config = configuration(targets, "r.yaml")
    (job,) = config["scrape_configs"]
    assert config["rule_files"] == ["r.yaml"]
    assert job["static_configs"] == [
        {"targets": ["127.0.0.1:4002"],
         "labels": {"namespace": "sluicegate-system", "container": "controller",
                    "pod": "controller-standby"}},
        {"targets": ["127.0.0.1:4001"],
         "labels": {"namespace": "sluicegate-system", "container": "webhook", "pod": "webhook"}},
    ]


def test_the_api_server_is_scraped_over_tls_as_a_user_that_may_only_get_metrics(tmp_path: Path) -> None:
    scrape = ApiServerScrape("127.0.0.1:6443", tmp_path / "ca.crt", tmp_path / "c.crt", tmp_path / "c.key")
    config = configuration({"webhook": ("webhook", 4001)}, "r.yaml", scrape)
    apiserver, sluicegate = config["scrape_configs"]
    assert apiserver["job_name"] == "apiserver" and sluicegate["job_name"] == "sluicegate"
    assert apiserver["scheme"] == "https" and apiserver["metrics_path"] == "/metrics"
    assert apiserver["tls_config"] == {"ca_file": str(tmp_path / "ca.crt"),
                                       "cert_file": str(tmp_path / "c.crt"),
                                       "key_file": str(tmp_path / "c.key")}
    assert apiserver["static_configs"] == [{"targets": ["127.0.0.1:6443"]}]
    role, binding = metrics_reader("reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "reader"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_active_alerts_are_one_line_each_firing_first() -> None:
    lines = active_lines([
        {"labels": {"alertname": "SluicegatePodsGatedTooLong", "queue": "q", "severity": "warning"},
         "annotations": {"summary": "Work in queue q has been gated for over an hour"},
         "state": "pending", "activeAt": "2026-12-02T09:12:03.5Z"},
        {"labels": {"alertname": "SluicegateNoLeader", "severity": "critical"},
         "annotations": {"summary": "No Sluicegate controller is leading"},
         "state": "firing", "activeAt": "2026-12-02T09:10:00Z"},
    ])
    assert lines == [
        "SluicegateNoLeader firing since 09:10:00 UTC severity=critical: No Sluicegate controller is leading",
        "SluicegatePodsGatedTooLong pending since 09:12:03 UTC queue=q severity=warning: "
        "Work in queue q has been gated for over an hour",
    ]
