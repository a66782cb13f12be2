"""``sluicegate migrate-storage`` against an API server in memory: what it writes back, what it
skips, and when it refuses. The real API server's side (etcd holds the objects as v1beta1
afterwards) is shown by tests/e2e/test_faults_upgrade.py."""

from __future__ import annotations

import argparse
import asyncio
import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import pytest

from cli import migrate as migrating
from cli.commands import CommandError
from cli.migrate import migrate
from kube.connecting import ApiError, Connection
from kube.resources import CATALOG, CRDS, PRESETS, QUEUES

Obj = dict[str, Any]


def crd(storage: str, stored: list[str]) -> Obj:
    versions = [{"name": "v1beta1", "served": True, "storage": storage == "v1beta1"},
                {"name": "v1alpha1", "served": True, "storage": storage == "v1alpha1"}]
    return {"spec": {"versions": versions}, "status": {"storedVersions": stored}}


class Server:
    """The Queues and their CRD (None: deleted); ``answers`` scripts the status of the next PUTs of
    a name."""

    def __init__(self, definition: Obj | None, *names: str) -> None:
        self.crd = definition
        self.queues = {n: {"metadata": {"name": n, "resourceVersion": "1"}, "spec": {}} for n in names}
        self.answers: dict[str, list[int]] = {}
        self.written: list[tuple[str, str]] = []  # (name, resourceVersion sent)

    async def get(self, path: str, query: Mapping[str, str] | None = None) -> Obj:
        if path == CRDS.path(str(QUEUES)):
            if self.crd is None:
                raise ApiError(404, "NotFound", f"GET {path}")
            return copy.deepcopy(self.crd)
        if path == QUEUES.path():
            return {"items": copy.deepcopy(list(self.queues.values())), "metadata": {}}
        name = path.rsplit("/", 1)[1]
        if name not in self.queues:
            raise ApiError(404, "NotFound", path)
        return copy.deepcopy(self.queues[name])

    async def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> Obj:
        if method == "PATCH" and path == CRDS.path(str(QUEUES), subresource="status"):
            assert self.crd is not None
            self.crd["status"].update(body["status"])
            return self.crd
        assert method == "PUT", (method, path)
        name = body["metadata"]["name"]
        answer = self.answers.get(name, []).pop(0) if self.answers.get(name) else 200
        if answer != 200:
            if answer == 404:
                self.queues.pop(name, None)
            else:  # someone else wrote it meanwhile
                self.queues[name]["metadata"]["resourceVersion"] = "2"
            raise ApiError(answer, "", path)
        self.written.append((name, body["metadata"]["resourceVersion"]))
        return cast(Obj, body)


def run(server: Server) -> tuple[int, list[str]]:
    said: list[str] = []
    written = asyncio.run(migrate(cast(Connection, server), QUEUES, said.append))
    return written, said


def test_every_object_is_written_back_then_v1beta1_alone_is_stored() -> None:
    server = Server(crd("v1beta1", ["v1alpha1", "v1beta1"]), "a", "b")
    assert run(server) == (2, ["queues.sluicegate.dev: 2 objects written back as v1beta1; "
                               "storedVersions [v1alpha1, v1beta1] -> [v1beta1]"])
    assert server.written == [("a", "1"), ("b", "1")]
    assert server.crd["status"]["storedVersions"] == ["v1beta1"]


def test_an_object_written_meanwhile_is_read_again_and_one_deleted_meanwhile_is_skipped() -> None:
    server = Server(crd("v1beta1", ["v1alpha1", "v1beta1"]), "changed", "gone")
    server.answers = {"changed": [409], "gone": [404]}
    written, _ = run(server)
    assert written == 1
    assert server.written == [("changed", "2")]  # the version read again, not the stale one
    assert server.crd["status"]["storedVersions"] == ["v1beta1"]


def test_a_crd_storing_v1beta1_alone_already_is_left_alone() -> None:
    server = Server(crd("v1beta1", ["v1beta1"]), "a")
    assert run(server) == (0, ["queues.sluicegate.dev: stored as v1beta1 only; nothing to do"])
    assert server.written == []


def test_before_this_releases_crds_are_applied_it_refuses_and_writes_nothing() -> None:
    server = Server(crd("v1alpha1", ["v1alpha1"]), "a")
    with pytest.raises(CommandError, match=r"queues.sluicegate.dev stores v1alpha1, not v1beta1: apply this "
                                           r"release's CRDs first \(kubectl apply -k manifests/crds\)"):
        run(server)
    assert server.written == [] and server.crd["status"]["storedVersions"] == ["v1alpha1"]


def test_an_object_that_changes_at_every_try_ends_in_one_line_asking_to_run_again() -> None:
    server = Server(crd("v1beta1", ["v1alpha1", "v1beta1"]), "busy")
    server.answers = {"busy": [409] * 5}
    with pytest.raises(CommandError, match=r"queues\.sluicegate\.dev busy: changed on every one of 5 tries"):
        run(server)
    assert server.crd["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]


def test_a_deleted_crd_is_named_in_one_line_and_nothing_of_its_kind_is_migrated() -> None:
    server = Server(None, "a")
    assert run(server) == (0, ["queues.sluicegate.dev: the CRD does not exist; no Queue was migrated "
                               "(apply this release's CRDs: kubectl apply -k manifests/crds)"])
    assert server.written == []


def test_the_other_kinds_are_migrated_when_one_crd_is_missing(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The command over the four kinds, presets.sluicegate.dev deleted: one line for it, and the
    other three are migrated as before."""
    crds = {str(r): crd("v1beta1", ["v1alpha1", "v1beta1"]) for r in CATALOG if r != PRESETS}

    class Cluster:
        async def get(self, path: str, query: Mapping[str, str] | None = None) -> Obj:
            for resource in CATALOG:
                if path == CRDS.path(str(resource)):
                    if str(resource) not in crds:
                        raise ApiError(404, "NotFound", f"GET {path}")
                    return copy.deepcopy(crds[str(resource)])
                if path == resource.path():
                    return {"items": [], "metadata": {}}
            raise AssertionError(path)

        async def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> Obj:
            (resource,) = [r for r in CATALOG if path == CRDS.path(str(r), subresource="status")]
            crds[str(resource)]["status"].update(body["status"])
            return crds[str(resource)]

    def run_as_user(args: object, work: Callable[[Connection, str], Awaitable[None]]) -> None:
        asyncio.run(work(cast(Connection, Cluster()), ""))

    monkeypatch.setattr(migrating, "run_as_user", run_as_user)
    assert migrating.run(argparse.Namespace()) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "presets.sluicegate.dev: the CRD does not exist; no Preset was migrated " \
           "(apply this release's CRDs: kubectl apply -k manifests/crds)" in lines
    assert len(lines) == len(CATALOG)
    assert all(c["status"]["storedVersions"] == ["v1beta1"] for c in crds.values()) and len(crds) == 3
