"""The Helm chart charts/sluicegate beside the kustomize install: the chart's copies of files from
manifests/, written from them, and the comparison that keeps both installs one.

Helm reads no file outside the chart's directory, so the files the chart takes from manifests/
as they are (the CRDs, RBAC, the webhook configurations, the records and visibility APIServices,
the scheduler's configuration, the monitoring component, cert-manager's certificates, the
samples) are copied
into it: ``python -m tests.chart`` (``make chart``) writes them, and tests/unit/test_chart.py
fails when the checked-in copies differ from what it writes. Which files are copied is read from
the kustomizations themselves, so a file added to one of them reaches the chart at the next
``make chart``. The chart's own templates (the Deployments, the StatefulSet, their Services) are
held equal to manifests/default by tests/e2e/manifests/test_chart.py, which renders both and
compares them with ``differences``. See docs/decisions/0038-a-helm-chart-equal-to-kustomize.md.
"""

from __future__ import annotations

import difflib
import os
import subprocess
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from controlplane import building
from process import kubeyaml
from tests.manifest_files import MANIFESTS, ROOT, documents, generated_file

CHART: Final = ROOT / "charts" / "sluicegate"
WRITTEN: Final = ("crds", "files")
"""The chart's directories that ``make chart`` writes whole: nothing else may be in them."""
COPIED: Final = (
    ("crds", "crds"),
    ("base", "files/base"),
    ("admission", "files/admission"),
    ("records-api", "files/records-api"),
    ("visibility-api", "files/visibility-api"),
    ("scheduler", "files/scheduler"),
    ("components/monitoring", "files/monitoring"),
    ("components/cert-manager", "files/cert-manager"),
    ("samples", "files/samples"),
)
"""Each kustomization whose files the chart takes as they are, and where in the chart they go."""
HELM_LABELS: Final = frozenset({
    "helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
})
"""The labels the chart adds to every object it renders and kustomize does not: forgiven on
every object by ``differences``."""
KEEP: Final = ("helm.sh/resource-policy", "keep")
"""The annotation the chart adds to each object of the samples, so that Helm leaves them on
uninstall and upgrade: forgiven by ``differences`` on exactly the objects it is told are kept."""


def _header(source: Path) -> str:
    return (f"# Written by `make chart` (python -m tests.chart) from {source.relative_to(ROOT)};\n"
            "# change that file and run `make chart`, not this one.\n")


def _files(kustomization_dir: str) -> Iterator[tuple[Path, bool]]:
    """The files a kustomization names itself, in order, each with whether the chart renders its
    objects (a resource) or embeds its text (a generator's file, copied exactly); the
    kustomizations it names are copied from their own directories."""
    (kustomization,) = documents(MANIFESTS / kustomization_dir / "kustomization.yaml")
    named = [(name, True) for name in kustomization.get("resources", ())]
    named += [(generated_file(f), False) for g in kustomization.get("configMapGenerator", ())
              for f in g.get("files", ())]
    for name, rendered in named:
        path = MANIFESTS / kustomization_dir / name
        if path.is_file():
            yield path, rendered


def copies() -> dict[Path, str]:
    """Each file of the chart that ``make chart`` writes, with its text."""
    out: dict[Path, str] = {}
    for source_dir, target_dir in COPIED:
        for source, rendered in _files(source_dir):
            text = source.read_text()
            out[CHART / target_dir / source.name] = _header(source) + text if rendered else text
    return out


def written_files() -> list[Path]:
    """The files now in the directories ``make chart`` owns."""
    return sorted(p for d in WRITTEN for p in (CHART / d).rglob("*") if p.is_file())


# --- comparing two renderings --------------------------------------------------------------

Key = tuple[str, str, str, str]
"""An object's apiVersion, kind, namespace and name."""


def objects(text: str) -> dict[Key, dict[str, Any]]:
    """The objects of a YAML stream by key; a key twice is an error."""
    out: dict[Key, dict[str, Any]] = {}
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        meta = doc["metadata"]
        key = (doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"])
        if key in out:
            raise ValueError(f"{_name(key)} is rendered twice")
        out[key] = doc
    return out


def normalised(obj: dict[str, Any], kept: bool = False) -> dict[str, Any]:
    """``obj`` without the labels Helm's chart adds and, if it is ``kept``, without the annotation
    ``KEEP`` (and without a labels or annotations map they leave empty)."""
    meta = dict(obj["metadata"])
    labels = {k: v for k, v in meta.get("labels", {}).items() if k not in HELM_LABELS}
    meta.pop("labels", None)
    if labels:
        meta["labels"] = labels
    name, value = KEEP
    if kept and meta.get("annotations", {}).get(name) == value:
        annotations = {k: v for k, v in meta.pop("annotations").items() if k != name}
        if annotations:
            meta["annotations"] = annotations
    return {**obj, "metadata": meta}


def differences(chart: str, kustomize: str, kept: Collection[Key] = ()) -> list[str]:
    """What differs between the chart's rendering and kustomize's, object by object: an object
    only one of them renders, or an object that differs once normalised (a unified diff); the
    chart's objects whose keys are in ``kept`` may carry ``KEEP`` more."""
    ours, theirs = objects(chart), objects(kustomize)
    found = [f"only the chart renders {_name(k)}" for k in sorted(ours.keys() - theirs.keys())]
    found += [f"only kustomize renders {_name(k)}" for k in sorted(theirs.keys() - ours.keys())]
    for key in sorted(ours.keys() & theirs.keys()):
        a, b = _lines(normalised(ours[key], key in kept)), _lines(normalised(theirs[key]))
        if a != b:
            diff = "\n".join(difflib.unified_diff(b, a, "kustomize", "chart", lineterm=""))
            found.append(f"{_name(key)} differs:\n{diff}")
    return found


def _name(key: Key) -> str:
    api, kind, namespace, name = key
    return f"{kind} {namespace + '/' if namespace else ''}{name} ({api})"


def _lines(obj: dict[str, Any]) -> list[str]:
    return kubeyaml.dump(obj).splitlines()


# --- running helm ---------------------------------------------------------------------------

RELEASE: Final = "sluicegate"
RELEASE_NAMESPACE: Final = "sluicegate-release"
"""Where the tests record the release, as the admin guide does: the chart creates
sluicegate-system itself and refuses default (anyone who may write Secrets there could rewrite
the release record)."""


@dataclass(frozen=True, slots=True)
class Helm:
    """helm of the pinned release (built into its cache when missing), with its cache, config
    and data directories under ``home`` rather than the user's."""

    binary: Path
    home: Path

    @classmethod
    def built(cls, home: Path) -> Helm:
        return cls(building.ensure_helm(), home)

    def env(self) -> dict[str, str]:
        dirs = {f"HELM_{part.upper()}_HOME": str(self.home / part) for part in ("cache", "config", "data")}
        return {**os.environ, **dirs}

    def run(self, *args: str, kubeconfig: Path | None = None, check: bool = True,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.binary), *args, *([f"--kubeconfig={kubeconfig}"] if kubeconfig else [])]
        result = subprocess.run(cmd, capture_output=True, text=True, env=self.env(), timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def template(self, *values: str) -> str:
        """``helm template`` of the chart with its CRDs, as the release the tests install."""
        return self.run("template", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE, "--include-crds",
                        *values).stdout


def main() -> None:
    wanted = copies()
    for stale in set(written_files()) - wanted.keys():
        stale.unlink()
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(wanted)} files into {CHART.relative_to(ROOT)}/{{{','.join(WRITTEN)}}} from manifests/")


if __name__ == "__main__":
    main()
