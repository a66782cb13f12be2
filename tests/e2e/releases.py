"""The previous release, for the tests of an upgrade and a rollback: a fixed commit of this
repository, checked out beside this checkout with ``git worktree``, and how to read the objects
it left so that an upgrade can be held to leaving them unchanged."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from controlplane.checkout import ROOT
from controlplane.launching import LocalCluster
from policy import keys

PREVIOUS: Final = "ca29f8eb589b3431abed013f9bc0f7ebcc8d1b19"
"""The release before ``v1beta1``: main as it stood when the CRDs gained the version, the last
commit whose CRDs serve ``v1alpha1`` alone. Its processes take the command lines of
``controlplane.services`` as this checkout's do, and its admin guide installs it."""
ALPHA: Final = f"{keys.GROUP}/v1alpha1"
PLURALS: Final = ("queues", "teams", "presets", "policies")


def _git(*args: str) -> None:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr.strip()}"


@contextmanager
def checked_out(tree: Path) -> Iterator[Path]:
    """The previous release's tree at ``tree`` (a new directory), removed afterwards."""
    _git("worktree", "add", "--detach", str(tree), PREVIOUS)
    try:
        yield tree
    finally:
        _git("worktree", "remove", "--force", str(tree))


def read(cluster: LocalCluster, plural: str, name: str, version: str) -> dict[str, Any]:
    """One object, read through ``version`` of its kind."""
    obj: dict[str, Any] = json.loads(cluster.kubectl("get", f"{plural}.{version}.{keys.GROUP}", name,
                                                     "-o", "json").stdout)
    return obj


def read_all(cluster: LocalCluster, version: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every Queue, Team, Preset and Policy read through ``version``, what ``kept`` keeps of it,
    by plural and name."""
    out = {}
    for plural in PLURALS:
        listed = json.loads(cluster.kubectl("get", f"{plural}.{version}.{keys.GROUP}", "-o", "json").stdout)
        for item in listed["items"]:
            assert item["apiVersion"] == f"{keys.GROUP}/{version}"
            out[plural, item["metadata"]["name"]] = kept(item)
    return out


def kept(obj: dict[str, Any]) -> dict[str, Any]:
    """What an upgrade must not change: the object's identity, labels and spec (the controller
    keeps writing its status)."""
    meta = obj["metadata"]
    return {"uid": meta["uid"], "created": meta["creationTimestamp"], "generation": meta.get("generation"),
            "labels": meta.get("labels"), "spec": obj.get("spec")}


def stored_as(cluster: LocalCluster, plural: str, name: str = "") -> dict[str, str]:
    """The apiVersion etcd itself holds each object of ``plural`` (or the one named) in, by key."""
    prefix = f"/registry/{keys.GROUP}/{plural}/{name}"
    return {key: str(json.loads(value)["apiVersion"]) for key, value in cluster.stored(prefix).items()
            if not name or key == prefix}


def stored_versions(cluster: LocalCluster, plural: str) -> list[str]:
    """The CRD's ``status.storedVersions``."""
    out: list[str] = json.loads(cluster.kubectl("get", "crd", f"{plural}.{keys.GROUP}", "-o",
                                                "jsonpath={.status.storedVersions}").stdout)
    return out
