"""The chart's copies of manifests/ are what ``make chart`` writes, and the comparison of the
chart's rendering with kustomize's forgives Helm's labels, Helm's keep policy on the objects
said to be kept (the samples), and nothing else (the e2e test tests/e2e/manifests/test_chart.py
renders both)."""

from __future__ import annotations

from pathlib import Path

import pytest

from process import kubeyaml
from tests import chart
from tests.chart import CHART, copies, differences, written_files
from tests.manifest_files import MANIFESTS


def test_the_charts_copies_of_manifests_are_what_make_chart_writes() -> None:
    wanted = copies()
    stale = [str(p.relative_to(CHART)) for p in written_files() if p not in wanted]
    assert not stale, f"files make chart would remove: {stale}; run make chart"
    differ = [str(p.relative_to(CHART)) for p, text in wanted.items()
              if not p.exists() or p.read_text() != text]
    assert not differ, f"out of date (run make chart): {differ}"


def test_the_chart_holds_every_crd_and_each_resource_of_the_kustomizations_it_copies() -> None:
    names = {p.relative_to(CHART).as_posix() for p in copies()}
    assert {f"crds/{p.name}" for p in (MANIFESTS / "crds").glob("*.yaml") if p.name != "kustomization.yaml"} \
        <= names
    assert {"files/admission/webhooks.yaml", "files/monitoring/prometheusrule.yaml",
            "files/monitoring/dashboard.json", "files/scheduler/scheduler-config.yaml"} <= names


def test_a_file_added_to_a_copied_kustomization_reaches_the_chart(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "components" / "monitoring").mkdir(parents=True)
    (tmp_path / "components" / "monitoring" / "kustomization.yaml").write_text(
        "kind: Component\nresources:\n- servicemonitor.yaml\n"
        "configMapGenerator:\n- name: d\n  files:\n  - sluicegate.json=dashboard.json\n")
    (tmp_path / "components" / "monitoring" / "servicemonitor.yaml").write_text("kind: ServiceMonitor\n")
    (tmp_path / "components" / "monitoring" / "dashboard.json").write_text("{}\n")
    monkeypatch.setattr(chart, "MANIFESTS", tmp_path)
    monkeypatch.setattr(chart, "ROOT", tmp_path)
    monkeypatch.setattr(chart, "COPIED", (("components/monitoring", "files/monitoring"),))
    written = {p.relative_to(CHART).as_posix(): text for p, text in chart.copies().items()}
    assert written["files/monitoring/dashboard.json"] == "{}\n", "a generator's file is copied exactly"
    assert written["files/monitoring/servicemonitor.yaml"].startswith("# Written by `make chart`")
    assert written["files/monitoring/servicemonitor.yaml"].endswith("kind: ServiceMonitor\n")


def _role(verbs: list[str], labels: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "sluicegate-webhook", "labels": labels},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": verbs}]}


OURS = {"app.kubernetes.io/name": "sluicegate"}
HELMS = {"helm.sh/chart": "sluicegate-0.1.0", "app.kubernetes.io/managed-by": "Helm",
         "app.kubernetes.io/instance": "sluicegate", "app.kubernetes.io/version": "0.1.0"}


def test_helms_four_labels_are_the_only_difference_forgiven() -> None:
    kustomize = kubeyaml.dump(_role(["get", "list"], OURS))
    assert differences(kubeyaml.dump(_role(["get", "list"], {**OURS, **HELMS})), kustomize) == []
    (extra,) = differences(kubeyaml.dump(_role(["get", "list"], {**OURS, "team": "x"})), kustomize)
    assert "ClusterRole sluicegate-webhook" in extra and "+    team: x" in extra


def test_a_changed_rule_and_an_object_only_one_side_renders_are_reported() -> None:
    kustomize = kubeyaml.dump_all([_role(["get", "list"], OURS),
                                   {**_role([], OURS), "metadata": {"name": "gone"}}])
    found = differences(kubeyaml.dump(_role(["get", "list", "watch"], {**OURS, **HELMS})), kustomize)
    assert found[0] == "only kustomize renders ClusterRole gone (rbac.authorization.k8s.io/v1)"
    assert "+  - watch" in found[1]


def test_an_object_rendered_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="rendered twice"):
        chart.objects(kubeyaml.dump_all([_role([], OURS), _role([], OURS)]))


def _queue(annotations: dict[str, str] | None = None, name: str = "notebooks") -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "labels": OURS}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "sluicegate.dev/v1beta1", "kind": "Queue", "metadata": meta,
            "spec": {"priority": 1}}


QUEUE_KEY = ("sluicegate.dev/v1beta1", "Queue", "", "notebooks")


def test_helms_keep_policy_is_forgiven_only_on_the_objects_said_to_be_kept() -> None:
    kustomize = kubeyaml.dump(_queue())
    kept = kubeyaml.dump(_queue({"helm.sh/resource-policy": "keep"}))
    assert differences(kept, kustomize, kept={QUEUE_KEY}) == []
    (unforgiven,) = differences(kept, kustomize)
    assert "Queue notebooks" in unforgiven and "+    helm.sh/resource-policy: keep" in unforgiven
    (other,) = differences(kubeyaml.dump(_queue({"helm.sh/resource-policy": "keep", "team": "x"})), kustomize,
                           kept={QUEUE_KEY})
    assert "+    team: x" in other and "resource-policy" not in other
