"""The e2e fixtures: one real local control plane per test session, one namespace per test."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from audit.connection import Credentials
from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from controlplane.operators import LocalOperator, kuberay, training_operator
from controlplane.services import CONTROLLER, SERVICES
from process import kubeyaml
from tests.e2e.projects import Project

if TYPE_CHECKING:
    from tests.e2e.scenes import Scene

T = TypeVar("T")

# Upper bounds for waiting on the cluster, not performance targets: a wait returns as soon as
# its condition holds, and these only decide when to give up and report.
WAIT_SECONDS = 60.0


def eventually(probe: Callable[[], T | None], what: str, seconds: float = WAIT_SECONDS) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + seconds
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"gave up after {seconds:.0f}s waiting for {what} (last seen: {last!r})")


class Kubectl:
    """The real kubectl, of the control plane's own release, bound to one namespace, acting as
    the admin or (``as_user``) impersonating a user and their groups."""

    def __init__(self, cluster: LocalCluster, namespace: str, identity: tuple[str, ...] = ()) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.identity = identity

    def as_user(self, user: str, *groups: str) -> Kubectl:
        return Kubectl(self.cluster, self.namespace, (f"--as={user}", *(f"--as-group={g}" for g in groups)))

    def run(self, *args: str, input: str | None = None, check: bool = True) -> str:
        result = self.cluster.kubectl(*self.identity, "-n", self.namespace, *args, input=input, check=check)
        return result.stdout

    def fails(self, *args: str, input: str | None = None) -> str:
        """Run a command that must be refused; return its error output."""
        result = self.cluster.kubectl(*self.identity, "-n", self.namespace, *args, input=input, check=False)
        assert result.returncode != 0, f"kubectl {' '.join(args)} succeeded but should have been refused"
        return result.stderr

    def apply(self, *objects: dict[str, Any]) -> None:
        self.run("apply", "-f", "-", input=kubeyaml.dump_all(objects))

    def get(self, kind: str, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.run("get", kind, name, "-o", "json"))
        return data

    def wait_for(
        self, kind: str, name: str, holds: Callable[[dict[str, Any]], object], what: str
    ) -> dict[str, Any]:
        """The object, once ``holds(object)`` is true."""

        def probe() -> dict[str, Any] | None:
            obj = self.get(kind, name)
            return obj if holds(obj) else None

        return eventually(probe, f"{kind} {name}: {what}")

    def items(self, kind: str, *selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self.run("get", kind, *selector, "-o", "json"))["items"]
        return items


# A second controller replica, as the Deployment runs two: it stands by for the Lease, and the
# failover test kills whichever leads.
STANDBY = dataclasses.replace(CONTROLLER, name="controller-standby")
# Sluicegate for each session cluster, planned before the cluster starts: kube-scheduler must
# start knowing where the extender will listen. Started only when a test asks for it.
_PLANNED: dict[Path, LocalSluicegate] = {}


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = Path(os.environ.get("SLUICEGATE_E2E_CLUSTER_DIR") or tmp_path_factory.mktemp("cluster"))
    local = LocalCluster(root, nodes=4, gpus_per_node=8)
    planned = _PLANNED[local.layout.root] = LocalSluicegate(local, services=(*SERVICES, STANDBY))
    local.extender = planned.scheduler_extender()  # ignorable: scheduling goes on until it serves
    local.up()
    try:
        yield local
    finally:
        local.down()


@pytest.fixture(scope="session")
def sluicegate(cluster: LocalCluster) -> Iterator[LocalSluicegate]:
    """Sluicegate installed from manifests/local and running as its ServiceAccounts (the webhook,
    and the controller with a standby replica, which also serve the scheduler extender) for the
    whole session, as ``make up`` leaves it."""
    local = _PLANNED[cluster.layout.root]
    local.up()
    try:
        yield local
    finally:
        local.down()


@pytest.fixture(scope="session")
def operators(cluster: LocalCluster) -> Iterator[dict[str, LocalOperator]]:
    """The training-operator and KubeRay running beside the session's cluster, by process name,
    started (and their binaries built, as ``make operators`` builds them) only when a test asks;
    stopped at the end of the session."""
    started: dict[str, LocalOperator] = {}
    try:
        for operator in (training_operator(cluster), kuberay(cluster)):
            operator.start()
            started[operator.name] = operator
        yield started
    finally:
        for operator in started.values():
            operator.stop()


@pytest.fixture(scope="session")
def credentials(cluster: LocalCluster) -> Credentials:
    """The cluster admin's credentials, for the auditor's own connection."""
    return Credentials.from_kubeconfig(cluster.kubeconfig)


@pytest.fixture
def running(sluicegate: LocalSluicegate) -> Iterator[LocalSluicegate]:
    """Sluicegate, checked after the test: a process that died fails it, by name, with its log."""
    yield sluicegate
    problems = sluicegate.dead()
    assert not problems, "\n".join(problems)


@pytest.fixture
def kubectl(cluster: LocalCluster) -> Iterator[Kubectl]:
    """A fresh namespace, with its default service account, deleted after the test."""
    name = f"e2e-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    eventually(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        f"the default service account of namespace {name}",
    )
    yield Kubectl(cluster, name)
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def project(kubectl: Kubectl, running: LocalSluicegate) -> Iterator[Project]:
    """This test's namespace, with users alice and bob (group vision-devs) allowed to work in it,
    and Sluicegate running; opt it in with ``project.opt_in(...)``."""
    project = Project(kubectl)
    project.grant()
    try:
        yield project
    finally:
        project.cleanup()


@pytest.fixture
def scene(cluster: LocalCluster, sluicegate: LocalSluicegate) -> Iterator[Scene]:
    """A dispatch test's own Queues, Teams and namespaces (``tests.e2e.scenes.Scene``), with
    Sluicegate running; cleaned up afterwards, and a Sluicegate process that died fails the test."""
    from tests.e2e.scenes import Scene  # scenes uses this module's helpers

    made = Scene(cluster)
    try:
        yield made
    finally:
        made.cleanup()
    problems = sluicegate.dead()
    assert not problems, "\n".join(problems)
