"""Reading the files under manifests/ for tests: paths, YAML documents, objects by kind and name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
CONTAINERFILE = ROOT / "Containerfile"

NAMESPACE = "sluicegate-system"
WEBHOOK_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:sluicegate-webhook"
CONTROLLER_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:sluicegate-controller"
ACCOUNT_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated")

LOCAL_PLACEHOLDERS = ("${SLUICEGATE_WEBHOOK_PORT}", "${SLUICEGATE_CA_BUNDLE}")


def yaml_files() -> list[Path]:
    return sorted(MANIFESTS.rglob("*.yaml"))


def kustomizations() -> list[Path]:
    return sorted(MANIFESTS.rglob("kustomization.yaml"))


def documents(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def objects(*relative: str) -> Iterator[dict[str, Any]]:
    """Every Kubernetes object in the given files or directories (relative to manifests/)."""
    for rel in relative:
        path = MANIFESTS / rel
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            if file.name == "kustomization.yaml":
                continue
            for doc in documents(file):
                if isinstance(doc, dict) and "kind" in doc:
                    yield doc


def find(kind: str, name: str, *relative: str) -> dict[str, Any]:
    for obj in objects(*relative):
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(f"no {kind} {name} in {', '.join(relative)}")


def crd(plural: str) -> dict[str, Any]:
    return find("CustomResourceDefinition", f"{plural}.sluicegate.dev", "crds")


def crd_schema(plural: str) -> dict[str, Any]:
    versions = crd(plural)["spec"]["versions"]
    schema: dict[str, Any] = versions[0]["schema"]["openAPIV3Schema"]
    return schema


def kind_name(obj: dict[str, Any]) -> str:
    """An object as ``kubectl get -o name`` names it: ``deployment.apps/sluicegate-webhook``."""
    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    kind = obj["kind"].lower() + (f".{group}" if group else "")
    return f"{kind}/{obj['metadata']['name']}"


def generated_file(entry: str) -> str:
    """The file of a generator's ``files`` entry: ``path``, or ``key=path``."""
    return entry.partition("=")[2] or entry


def kustomize_references(kustomization: dict[str, Any]) -> list[str]:
    """The files and directories a kustomization names."""
    refs = [*kustomization.get("resources", ()), *kustomization.get("components", ())]
    refs += [p["path"] for p in kustomization.get("patches", ()) if "path" in p]
    refs += list(kustomization.get("patchesStrategicMerge", ()))
    refs += [generated_file(f) for generator in kustomization.get("configMapGenerator", ())
             for f in generator.get("files", ())]
    return [str(r) for r in refs]
