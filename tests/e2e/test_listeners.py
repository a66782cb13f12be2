"""Who may read the run records, tried as an attacker tries it on the running install: the
recorder's TLS port called directly with no credentials, with forged front-proxy headers, with
a token that is not one and with an ordinary account's token; the API server's service proxy,
which vouches for no one; and the ways in that Kubernetes authenticates and RBAC decides (the
CLI through the API server, a user with the Role sluicegate-records-reader, a token bound to it).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.deploying import LocalSluicegate
from controlplane.launching import LocalCluster
from tests.doc_commands import run, shell_env
from tests.e2e.conftest import Kubectl, eventually

RECORDS = "/apis/records.sluicegate.dev/v1alpha1/namespaces/sluicegate-system/records"
SERVICE_PROXY = "/api/v1/namespaces/sluicegate-system/services/https:sluicegate-recorder:8443/proxy/records"
NAMESPACE = "sluicegate-system"


def direct(sluicegate: LocalSluicegate, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """GET the recorder's own TLS port, as anything that can reach it can (``curl -k``)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    url = f"https://{sluicegate.address}:{sluicegate.port('recorder', 'records')}{path}"
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def answered(sluicegate: LocalSluicegate, path: str, headers: dict[str, str], status: int) -> Any:
    """The body, once the recorder answers ``path`` with ``status``."""

    def probe() -> Any:
        got, body = direct(sluicegate, path, headers)
        return body if got == status else None

    return eventually(probe, f"the recorder to answer {path} with {status}")


def token(cluster: LocalCluster, account: str, namespace: str) -> str:
    return cluster.kubectl("create", "token", account, "-n", namespace).stdout.strip()


def bind_reader(cluster: LocalCluster, name: str, subject: str) -> None:
    """As the admin guide says: a RoleBinding to the Role sluicegate-records-reader."""
    cluster.kubectl("create", "rolebinding", name, "-n", NAMESPACE, "--role=sluicegate-records-reader",
                    subject)


@pytest.fixture
def reader_binding(cluster: LocalCluster) -> Iterator[str]:
    """A RoleBinding's name in sluicegate-system, deleted after the test."""
    name = f"e2e-records-{uuid.uuid4().hex[:8]}"
    yield name
    cluster.kubectl("delete", "rolebinding", name, "-n", NAMESPACE, "--ignore-not-found", check=False)


def test_the_recorders_port_answers_no_one_without_credentials(running: LocalSluicegate) -> None:
    assert running.address != "127.0.0.1", "the cluster has no network namespace to reach the recorder in"
    for path in ("/records", RECORDS, "/nowhere"):
        status, body = direct(running, path)
        assert status == 401, (path, body)
        assert body["error"].startswith("no credentials: this listener answers only callers Kubernetes "
                                        "authenticates"), body
    # Headers that name a user count only from the API server's front proxy, which proves
    # itself with a client certificate.
    forged = {"X-Remote-User": "kubernetes-admin", "X-Remote-Group": "system:masters"}
    status, body = direct(running, "/records", forged)
    assert status == 401 and "items" not in body
    status, body = direct(running, "/records", {"Authorization": "Bearer not-a-token"})
    assert (status, body) == (401, {"error": "the API server does not accept this bearer token"})


def test_an_ordinary_accounts_token_is_forbidden(running: LocalSluicegate, kubectl: Kubectl) -> None:
    ordinary = token(kubectl.cluster, "default", kubectl.namespace)
    status, body = direct(running, "/records", {"Authorization": f"Bearer {ordinary}"})
    assert status == 403
    assert body == {"error": f'user "system:serviceaccount:{kubectl.namespace}:default" may not list '
                             f"records.records.sluicegate.dev in namespace {NAMESPACE}"}


def test_a_token_bound_to_the_reader_role_reads_until_the_binding_goes(
    running: LocalSluicegate, kubectl: Kubectl, reader_binding: str
) -> None:
    cluster = kubectl.cluster
    kubectl.run("create", "serviceaccount", "exporter")
    bind_reader(cluster, reader_binding, f"--serviceaccount={kubectl.namespace}:exporter")
    bearer = {"Authorization": f"Bearer {token(cluster, 'exporter', kubectl.namespace)}"}
    body = answered(running, "/records", bearer, 200)  # RBAC caches take a moment to see the binding
    assert body["kind"] == "RecordList" and isinstance(body["items"], list)
    cluster.kubectl("delete", "rolebinding", reader_binding, "-n", NAMESPACE)
    # Answers are remembered for seconds: the revoked binding stops working within them.
    body = answered(running, "/records", bearer, 403)
    assert "may not list records.records.sluicegate.dev" in body["error"]


def test_the_service_proxy_vouches_for_no_one_so_it_reads_nothing(running: LocalSluicegate) -> None:
    """Even the cluster admin reads nothing through services/proxy: the API server connects to
    the recorder with no client certificate and without the user's credentials."""
    refused = running.cluster.kubectl("get", "--raw", SERVICE_PROXY, check=False)
    assert refused.returncode != 0 and refused.stdout == ""
    # kubectl words the recorder's 401 as its own: "the server has asked for the client to
    # provide credentials".
    assert "provide credentials" in refused.stderr, refused.stderr


def impersonating(cluster: LocalCluster, path: Path, user: str, group: str) -> Path:
    """A kubeconfig of the cluster admin's that acts as ``user`` of ``group``, as a user's own
    kubeconfig would authenticate them."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in config["users"]:
        entry["user"].update({"as": user, "as-groups": [group]})
    path.write_text(yaml.safe_dump(config))
    return path


def test_through_the_api_server_rbac_decides_and_the_recorder_knows_who_read(
    running: LocalSluicegate, reader_binding: str, tmp_path: Path
) -> None:
    cluster = running.cluster
    user, group = f"reader-{uuid.uuid4().hex[:8]}", f"readers-{uuid.uuid4().hex[:8]}"
    config = impersonating(cluster, tmp_path / "reader.kubeconfig", user, group)
    export = f"sluicegate records export --since 1h --kubeconfig {config}"
    refused = run(export, shell_env(cluster))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("sluicegate: you may not read the run records: "), refused.stderr
    assert f'"{user}"' in refused.stderr
    bind_reader(cluster, reader_binding, f"--group={group}")

    def exported() -> str | None:
        done = run(export, shell_env(cluster))
        return done.stderr if done.returncode == 0 else None

    said = eventually(exported, f"{user} of {group} to read once the group is bound to the Role")
    assert said.startswith("sluicegate: exported ")
    # The recorder was told who read, by the API server's front proxy, and logged it.
    assert f"records to {user} (front proxy)" in running.log("recorder").read_text()
