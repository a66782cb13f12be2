"""The Grafana dashboard in manifests/ is well formed and covers what operators watch."""

from __future__ import annotations

import re

from tests.dashboards import dashboard, panels, queries, series
from tests.manifest_files import MANIFESTS, documents


def test_every_panel_queries_sluicegate_series_through_the_chosen_data_source() -> None:
    board = dashboard()
    found = list(panels(board))
    assert len(found) >= 12
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    for panel in found:
        assert panel["title"] and panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["gridPos"]["x"] >= 0 and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        for target in panel["targets"]:
            assert "sluicegate_" in target["expr"], (panel["title"], target["expr"])


def test_the_panels_cover_queues_waits_gpu_use_unplaceable_pods_and_denials() -> None:
    used = series(dashboard())
    assert {
        "sluicegate_queue_pending_workloads", "sluicegate_queue_running_workloads",
        "sluicegate_wait_seconds_bucket", "sluicegate_team_usage", "sluicegate_queue_usage",
        "sluicegate_dispatched_unplaceable_pods", "sluicegate_admission_denials_total",
    } <= used
    assert any(q.startswith("histogram_quantile(0.95, ") and "sluicegate_wait_seconds_bucket" in q
               for q in queries(dashboard()))


def test_the_monitoring_component_ships_it_as_a_configmap_for_the_grafana_sidecar() -> None:
    (component,) = documents(MANIFESTS / "components" / "monitoring" / "kustomization.yaml")
    (generator,) = component["configMapGenerator"]
    assert generator["files"] == ["sluicegate.json=dashboard.json"]
    assert generator["options"]["labels"]["grafana_dashboard"] == "1"
    assert generator["options"]["disableNameSuffixHash"] is True


def test_the_admin_guide_names_every_alert_the_rules_ship() -> None:
    rules = documents(MANIFESTS / "components" / "monitoring" / "prometheusrule.yaml")[0]
    alerts = {r["alert"] for g in rules["spec"]["groups"] for r in g["rules"] if "alert" in r}
    guide = (MANIFESTS.parent / "docs" / "admin-guide.md").read_text()
    assert len(alerts) >= 11
    assert {a for a in alerts if f"`{a}`" not in guide} == set()


def test_the_process_alerts_read_the_scrape_and_errors_are_divided_by_the_reviews_they_are_part_of() -> None:
    rules = documents(MANIFESTS / "components" / "monitoring" / "prometheusrule.yaml")[0]
    expr = {r["alert"]: r["expr"] for g in rules["spec"]["groups"] for r in g["rules"] if "alert" in r}
    for name, container in (("SluicegateWebhookDown", "webhook"), ("SluicegateControllerDown", "controller")):
        assert expr[name] == f'absent(up{{namespace="sluicegate-system", container="{container}"}} == 1)'
    assert expr["SluicegateWebhookErrors"] == (
        "sum by (webhook) (rate(sluicegate_admission_errors_total[5m]))"
        " / sum by (webhook) (rate(sluicegate_admission_duration_seconds_count[5m])) > 0.01")


def test_the_api_servers_failed_calls_are_read_for_every_webhook_sluicegate_configures() -> None:
    rules = documents(MANIFESTS / "components" / "monitoring" / "prometheusrule.yaml")[0]
    expr = {r["alert"]: r["expr"] for g in rules["spec"]["groups"] for r in g["rules"] if "alert" in r}
    calls = expr["SluicegateWebhookCallsFailing"]
    (pattern,) = set(re.findall(r'name=~"([^"]+)"', calls))
    names = [w["name"] for d in documents(MANIFESTS / "admission" / "webhooks.yaml")
             for w in d.get("webhooks", ())]
    assert len(names) >= 7
    for name in names:
        assert re.fullmatch(pattern.replace("\\\\", "\\"), name), name
    assert re.fullmatch(pattern.replace("\\\\", "\\"), "pods.mutate.example.com") is None

