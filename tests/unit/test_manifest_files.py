"""The files under manifests/: every one is YAML, every kustomization names files that exist, the
CRDs say what the policy code reads, and the samples are objects Sluicegate itself accepts.

What the API server makes of them is tested against the real control plane in
tests/e2e/manifests/; these checks need no cluster.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from policy import keys
from policy.catalog import Catalog
from policy.model import Namespace, Ordering
from policy.presets import CONTAINER_FIELDS, POD_FIELDS, Strategy
from tests.manifest_files import (
    MANIFESTS,
    crd,
    crd_schema,
    documents,
    kustomizations,
    kustomize_references,
    objects,
    yaml_files,
)


def _rel(path: Path) -> str:
    return str(path.relative_to(MANIFESTS))


@pytest.mark.parametrize("path", yaml_files(), ids=_rel)
def test_every_manifest_is_yaml_made_of_objects_or_patches(path: Path) -> None:
    docs = documents(path)
    assert docs, f"{_rel(path)} holds no document"
    for doc in docs:
        if isinstance(doc, list):  # a JSON patch (RFC 6902) for kustomize
            assert all({"op", "path"} <= set(op) for op in doc), f"{_rel(path)}: a patch op lacks op or path"
        else:
            assert isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"), (
                f"{_rel(path)}: a document without apiVersion and kind"
            )


@pytest.mark.parametrize("path", kustomizations(), ids=_rel)
def test_every_kustomization_names_files_that_exist_and_every_file_is_named(path: Path) -> None:
    (kustomization,) = documents(path)
    assert kustomization["kind"] in ("Kustomization", "Component")
    named: set[Path] = set()
    for ref in kustomize_references(kustomization):
        target = (path.parent / ref).resolve()
        assert target.exists(), f"{_rel(path)} names {ref}, which does not exist"
        if target.is_dir():
            assert (target / "kustomization.yaml").exists(), f"{_rel(path)} names {ref}, not a kustomization"
        named.add(target)
    unnamed = [p.name for p in sorted(path.parent.glob("*.yaml")) if p != path and p.resolve() not in named]
    assert not unnamed, f"{_rel(path)} does not use {unnamed}: dead files in a kustomization directory"


# --- the CRDs against the code that reads the objects -------------------------------------------


@pytest.mark.parametrize(("plural", "kind"), [
    ("queues", "Queue"), ("teams", "Team"), ("presets", "Preset"), ("policies", "Policy"),
])
def test_each_crd_is_a_cluster_scoped_kind_of_the_sluicegate_group_stored_as_v1beta1(
    plural: str, kind: str
) -> None:
    spec = crd(plural)["spec"]
    assert spec["group"] == keys.GROUP
    assert spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == kind
    assert spec["names"]["plural"] == plural
    assert spec["names"]["shortNames"]
    assert "sluicegate" in spec["names"]["categories"]
    served = [f"{spec['group']}/{v['name']}" for v in spec["versions"] if v["served"]]
    assert served == list(keys.SERVED_API_VERSIONS)
    (stored,) = [v for v in spec["versions"] if v["storage"]]
    assert f"{spec['group']}/{stored['name']}" == keys.API_VERSION


@pytest.mark.parametrize("plural", ["queues", "teams", "presets", "policies"])
def test_v1alpha1_is_served_deprecated_with_the_schema_columns_and_subresources_of_v1beta1(
    plural: str
) -> None:
    beta, alpha = crd(plural)["spec"]["versions"]
    assert (beta["name"], alpha["name"]) == ("v1beta1", "v1alpha1")
    assert alpha["deprecated"] and "sluicegate.dev/v1beta1" in alpha["deprecationWarning"]
    assert not beta.get("deprecated")
    same = ("schema", "subresources", "additionalPrinterColumns")
    assert {k: alpha.get(k) for k in same} == {k: beta.get(k) for k in same}, "no conversion: equal schemas"
    assert "conversion" not in crd(plural)["spec"], "the API server converts by apiVersion alone"


@pytest.mark.parametrize("plural", ["queues", "teams", "policies"])
def test_the_kinds_the_controller_reports_on_have_a_status_subresource(plural: str) -> None:
    version = crd(plural)["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    status = crd_schema(plural)["properties"]["status"]["properties"]
    assert {"pending", "running", "usage", "oldestPendingTime", "display"} <= set(status)


def test_queue_columns_show_priority_running_pending_gpus_paused_and_age() -> None:
    version = crd("queues")["spec"]["versions"][0]
    default = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert default == ["Priority", "Running", "Pending", "GPUs", "Paused", "Age"]


def test_the_enums_of_the_schemas_are_the_values_the_code_knows() -> None:
    queue = crd_schema("queues")["properties"]["spec"]["properties"]
    assert set(queue["ordering"]["enum"]) == {o.value for o in Ordering}
    preset = crd_schema("presets")["properties"]["spec"]["properties"]
    assert set(preset["patchStrategy"]["enum"]) == {s.value for s in Strategy}


def test_a_preset_schema_offers_exactly_the_fields_merging_knows() -> None:
    spec = crd_schema("presets")["properties"]["spec"]["properties"]
    assert set(spec) == {"patchStrategy", "queue", "workflowMaxRunning", "metadata", "pod", "container"}
    assert set(spec["pod"]["properties"]) == set(POD_FIELDS)
    assert set(spec["container"]["properties"]) == {*CONTAINER_FIELDS, "resources"}


def test_the_policy_schema_insists_on_the_name_the_code_reads() -> None:
    (rule,) = crd_schema("policies")["x-kubernetes-validations"]
    assert rule["rule"] == f"self.metadata.name == '{keys.POLICY_NAME}'"
    assert rule["fieldPath"] == ".metadata.name"


def test_the_default_managed_resources_are_of_the_form_the_policy_schema_and_webhooks_require() -> None:
    """The webhooks' matchConditions send pods that request a domain-prefixed resource; the
    Policy schema only admits such names, and the built-in default must be one too."""
    spec = crd_schema("policies")["properties"]["spec"]["properties"]
    pattern = spec["managedResources"]["items"]["pattern"]
    for resource in keys.DEFAULT_MANAGED_RESOURCES:
        assert re.fullmatch(pattern, resource)
    for plain in ("cpu", "memory", "hugepages-2Mi", "ephemeral-storage"):
        assert not re.fullmatch(pattern, plain)


def _quantity_patterns(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["pattern"]] if node.get("x-kubernetes-int-or-string") and "pattern" in node else []
        return found + [p for v in node.values() for p in _quantity_patterns(v)]
    if isinstance(node, list):
        return [p for v in node for p in _quantity_patterns(v)]
    return []


@pytest.mark.parametrize("plural", ["queues", "teams", "presets", "policies"])
def test_quantity_patterns_accept_what_kubernetes_writes_and_refuse_negatives(plural: str) -> None:
    patterns = _quantity_patterns(crd_schema(plural))
    assert patterns
    for pattern in patterns:
        for good in ("16", "500m", "16Gi", "1e3", "0.5", "+2", "1.5k"):
            assert re.fullmatch(pattern, good), f"{plural}: {good!r} refused"
        for bad in ("-4", "lots", "1.5.2", "16 Gi", "", "1Gb"):
            assert not re.fullmatch(pattern, bad), f"{plural}: {bad!r} accepted"


# --- the samples are objects Sluicegate itself accepts -----------------------------------------


def _samples(kind: str) -> list[dict[str, Any]]:
    return [o for o in objects("samples") if o["kind"] == kind]


def test_the_samples_parse_as_sluicegate_reads_them() -> None:
    (policy,) = _samples("Policy")
    catalog = Catalog.from_objects(
        queues=_samples("Queue"), teams=_samples("Team"), presets=_samples("Preset"), policy=policy,
    )
    assert not catalog.invalid
    assert set(catalog.queues) == {
        "notebooks", "vision-train", "nlp-train", "urgent-retrain", "sweeps", "cpu-batch",
    }
    assert set(catalog.teams) == {"vision", "nlp"}
    assert {"single-gpu", "multi-gpu-8", "notebook", "data-lake"} <= set(catalog.presets)


def test_the_sample_namespaces_name_only_queues_and_presets_that_exist() -> None:
    catalog = Catalog.from_objects(
        queues=_samples("Queue"), presets=_samples("Preset"), teams=_samples("Team"),
    )
    namespaces = [Namespace.parse(o) for o in _samples("Namespace")]
    assert {ns.team for ns in namespaces} == set(catalog.teams)
    for ns in namespaces:
        assert ns.default_queue in catalog.queues
        assert ns.allowed_queues is not None and ns.default_queue in ns.allowed_queues
        assert ns.allowed_queues <= set(catalog.queues), ns.name
        assert set(ns.default_presets) <= set(catalog.presets), ns.name
        assert ns.allowed_presets is not None and ns.allowed_presets <= set(catalog.presets), ns.name
    for preset in catalog.presets.values():
        assert not preset.queue or preset.queue in catalog.queues


def _port_names(node: Any) -> list[str]:
    """Every container port name and named Service targetPort under ``node``."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "ports" and isinstance(value, list):
                for port in value:
                    if isinstance(port, dict):
                        found += [v for k, v in port.items()
                                  if k in ("name", "targetPort") and isinstance(v, str)]
            found += _port_names(value)
    elif isinstance(node, list):
        for item in node:
            found += _port_names(item)
    return found


@pytest.mark.parametrize("path", yaml_files(), ids=_rel)
def test_every_port_name_is_one_the_api_server_accepts(path: Path) -> None:
    """An IANA service name: at most 15 characters, lower-case letters, digits and dashes."""
    for name in _port_names(documents(path)):
        if "{{" in name:
            continue
        assert len(name) <= 15 and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name), (
            f"{_rel(path)}: port name {name!r} is not a valid port name (at most 15 characters)")
