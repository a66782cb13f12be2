"""kube/: a reflector mirrors what the API server holds — the first list, then every change —
resumes after a 410 Gone by listing again, and survives an object its converter cannot read."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from controlplane.launching import LocalCluster
from kube.connecting import JSON, Connection
from kube.reflecting import Change, Reflector
from kube.resources import NAMESPACES, Resource
from process import kubeyaml

T = TypeVar("T")
PODTEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", namespaced=True)
WAIT = 60.0  # an upper bound for the watch to deliver, not a performance figure


@pytest.fixture
async def connection(cluster: LocalCluster) -> AsyncIterator[Connection]:
    async with await Connection.from_kubeconfig(Path(cluster.kubeconfig), user_agent="sluicegate-e2e") as c:
        yield c


@contextlib.asynccontextmanager
async def running(reflector: Reflector[T]) -> AsyncIterator[Reflector[T]]:
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), WAIT)
        yield reflector
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(holds: Callable[[], object], what: str) -> None:
    async def poll() -> None:
        while not holds():
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(poll(), WAIT)
    except TimeoutError:
        raise AssertionError(f"gave up waiting for {what}") from None


def namespaces(cluster: LocalCluster, run: str, *names: str, **labels: str) -> None:
    docs = [{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": n, "labels": {"e2e-run": run, **labels}}} for n in names]
    cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(docs))


def team_of(obj: JSON) -> str:
    labels: dict[str, Any] = obj["metadata"].get("labels", {})
    if "refuse" in labels:
        raise ValueError("this converter cannot read it")
    return str(labels.get("team", ""))


async def test_the_store_follows_list_then_watch_by_uid(
    cluster: LocalCluster, connection: Connection
) -> None:
    run = "r" + uuid.uuid4().hex[:8]  # a letter first: YAML never reads it as a number
    namespaces(cluster, run, f"refl-{run}-a", team="one")
    reflector = Reflector(connection, NAMESPACES, team_of, label_selector=f"e2e-run={run}")
    changes: list[Change[str]] = []
    reflector.add_listener(changes.append)
    try:
        async with running(reflector):
            assert list(reflector.values()) == ["one"]
            assert [(c.type, c.key, c.new) for c in changes] == [("ADDED", f"refl-{run}-a", "one")]

            namespaces(cluster, run, f"refl-{run}-b", team="two")
            await until(lambda: reflector.named(f"refl-{run}-b") == "two", "the new namespace")
            cluster.kubectl("label", "namespace", f"refl-{run}-a", "team=three", "--overwrite")
            await until(lambda: reflector.named(f"refl-{run}-a") == "three", "the relabelled namespace")
            cluster.kubectl("delete", "namespace", f"refl-{run}-b", "--wait=false")
            await until(lambda: any(c.type == "DELETED" for c in changes), "the deletion")

            seen = [(c.type, c.key, c.old, c.new) for c in changes]
            assert seen[1:3] == [
                ("ADDED", f"refl-{run}-b", None, "two"),
                ("MODIFIED", f"refl-{run}-a", "one", "three"),
            ]
            # A namespace being deleted is modified (Terminating) before it goes.
            assert seen[-1][:3] == ("DELETED", f"refl-{run}-b", "two")
            uid = cluster.kubectl("get", "namespace", f"refl-{run}-a", "-o", "jsonpath={.metadata.uid}")
            assert reflector.get(uid.stdout) == "three"
            assert reflector.lists == 1
    finally:
        cluster.kubectl("delete", "namespace", "-l", f"e2e-run={run}", "--wait=false")


def podtemplates(cluster: LocalCluster, run: str, **teams: str) -> None:
    docs = [{"apiVersion": "v1", "kind": "PodTemplate",
             "metadata": {"name": f"{name}-{run}", "namespace": "default",
                          "labels": {"e2e-run": run, "team": team}},
             "template": {"spec": {"containers": [{"name": "c", "image": "registry.invalid/c:1"}]}}}
            for name, team in teams.items()]
    cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(docs))


async def test_a_compacted_resource_version_answers_410_and_the_reflector_lists_again(
    cluster: LocalCluster, connection: Connection
) -> None:
    # The local API server keeps no watch cache for PodTemplates, so their watches are served
    # by etcd, which forgets what it compacted, as a long-running cluster's watch cache does.
    run = "r" + uuid.uuid4().hex[:8]  # a letter first: YAML never reads it as a number
    podtemplates(cluster, run, a="one")
    reflector = Reflector(connection, PODTEMPLATES, team_of, label_selector=f"e2e-run={run}")
    try:
        async with running(reflector):
            assert reflector.lists == 1
        podtemplates(cluster, run, b="two")
        podtemplates(cluster, run, c="three")
        cluster.compact()  # past the version the reflector will resume from
        async with running(reflector):
            await until(lambda: reflector.lists == 2, "a second list")
            assert sorted(reflector.values()) == ["one", "three", "two"]
    finally:
        cluster.kubectl("delete", "podtemplates", "-n", "default", "-l", f"e2e-run={run}")


async def test_an_object_the_converter_cannot_read_is_left_out_and_the_watch_goes_on(
    cluster: LocalCluster, connection: Connection
) -> None:
    run = "r" + uuid.uuid4().hex[:8]  # a letter first: YAML never reads it as a number
    reflector = Reflector(connection, NAMESPACES, team_of, label_selector=f"e2e-run={run}")
    try:
        async with running(reflector):
            namespaces(cluster, run, f"refl-{run}-a", team="one")
            namespaces(cluster, run, f"refl-{run}-bad", team="x", refuse="yes")
            namespaces(cluster, run, f"refl-{run}-c", team="three")
            await until(lambda: reflector.named(f"refl-{run}-c") == "three", "the one after the bad one")
            assert sorted(reflector.values()) == ["one", "three"]
            assert reflector.named(f"refl-{run}-bad") is None

            cluster.kubectl("label", "namespace", f"refl-{run}-a", "refuse=yes")
            await until(lambda: reflector.named(f"refl-{run}-a") is None, "one that became unreadable")
            assert list(reflector.values()) == ["three"]
    finally:
        cluster.kubectl("delete", "namespace", "-l", f"e2e-run={run}", "--wait=false")
