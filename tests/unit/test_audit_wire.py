"""What the auditor sends and reads: pods and namespaces of a load, kubeconfig credentials,
the API server's metrics and a process's /proc figures."""

from __future__ import annotations

import base64
import os
import ssl
from pathlib import Path

import pytest

from audit.connection import Credentials, CredentialsError
from audit.identities import flow_schema
from audit.loading import KWOK_DELAY_ANNOTATION, Load, names, namespace_manifest, pod_manifest
from audit.naming import KUEUE, RUN_LABEL
from audit.scraping import flow_totals, increase, parse_usage, request_totals, tree_usage
from certs.authority import Authority
from process import kubeyaml


def test_pods_spread_over_every_queue_and_team() -> None:
    load = Load(pods=8, queues=names("q", 2), teams=names("t", 2), run="r1")
    placed = [load.placement(i) for i in range(8)]
    assert placed[:4] == [("q0", "t0"), ("q1", "t0"), ("q0", "t1"), ("q1", "t1")]
    assert {(q, t): placed.count((q, t)) for q, t in set(placed)} == {
        ("q0", "t0"): 2, ("q1", "t0"): 2, ("q0", "t1"): 2, ("q1", "t1"): 2,
    }


def test_a_load_pod_asks_for_its_gpus_runs_for_its_time_and_names_its_queue() -> None:
    load = Load(pods=3, queues=("a", "b"), teams=("vision",), gpus=2, seconds=1.5, run="r1", gated=True)
    pod = pod_manifest(load, 1)
    assert pod["metadata"]["namespace"] == "r1-vision"
    assert pod["metadata"]["labels"] == {RUN_LABEL: "r1", "sluicegate.dev/queue": "b"}
    assert pod["metadata"]["annotations"] == {KWOK_DELAY_ANNOTATION: "1.5s"}
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"nvidia.com/gpu": "2"},
                                                         "limits": {"nvidia.com/gpu": "2"}}
    assert pod["spec"]["schedulingGates"] == [{"name": "sluicegate.dev/dispatch"}]
    assert "schedulingGates" not in pod_manifest(Load(pods=1, run="r1"), 0)["spec"]


def test_a_kueue_load_uses_kueues_names_for_the_queue_the_gates_and_the_team() -> None:
    load = Load(pods=1, queues=("lq",), teams=("vision",), run="r2", naming=KUEUE, gated=True,
                namespace_labels={"kueue-managed": "true"})
    pod = pod_manifest(load, 0)
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert [g["name"] for g in pod["spec"]["schedulingGates"]] == list(KUEUE.gates)
    assert namespace_manifest(load, "vision")["metadata"]["labels"] == {
        RUN_LABEL: "r2", "kueue-managed": "true", "audit.sluicegate-test/team": "vision",
    }
    assert load.selector == f"{RUN_LABEL}=r2"


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority.create("audit-test-ca")


def kubeconfig(user: dict[str, object], cluster: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443/", **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}},
                     {"name": "other", "context": {"cluster": "k", "user": "nobody"}}],
    }


def test_credentials_from_embedded_certificates(tmp_path: Path, authority: Authority) -> None:
    client = authority.issue_client("alice", ("devs",))

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    path = tmp_path / "config"
    path.write_text(kubeyaml.dump(kubeconfig(
        {"client-certificate-data": b64(client.cert_pem), "client-key-data": b64(client.key_pem)},
        {"certificate-authority-data": b64(authority.cert_pem)},
    )))
    found = Credentials.from_kubeconfig(path)
    assert (found.server, found.ca_pem, found.cert_pem, found.token) == (
        "https://127.0.0.1:6443", authority.cert_pem, client.cert_pem, None,
    )
    assert found.ssl_context().verify_mode == ssl.CERT_REQUIRED  # the key pair loads
    again = Credentials.from_kubeconfig(found.write_kubeconfig(tmp_path / "copy"))
    assert again == found


def test_credentials_from_files_relative_to_the_kubeconfig_and_a_token_file(
    tmp_path: Path, authority: Authority
) -> None:
    (tmp_path / "ca.crt").write_bytes(authority.cert_pem)
    (tmp_path / "token").write_text("secret-token\n")
    path = tmp_path / "config"
    path.write_text(kubeyaml.dump(kubeconfig({"tokenFile": "token"}, {"certificate-authority": "ca.crt"})))
    found = Credentials.from_kubeconfig(path)
    assert (found.ca_pem, found.token, found.cert_pem) == (authority.cert_pem, "secret-token", None)


@pytest.mark.parametrize(
    ("user", "context", "message"),
    [
        ({"token": "t"}, "missing", "no context named 'missing'"),
        ({"token": "t"}, "other", "no user named 'nobody'"),
        ({"exec": {"command": "aws"}}, None, "exec plugins and auth providers are not supported"),
        ({"tokenFile": "absent"}, None, "cannot read absent"),
    ],
    ids=["unknown-context", "unknown-user", "exec-plugin", "missing-token-file"],
)
def test_kubeconfigs_the_auditor_cannot_use_say_why(
    tmp_path: Path, user: dict[str, object], context: str | None, message: str
) -> None:
    path = tmp_path / "config"
    path.write_text(kubeyaml.dump(kubeconfig(user, {})))
    with pytest.raises(CredentialsError, match=message):
        Credentials.from_kubeconfig(path, context)


def request(code: str, verb: str, scope: str, subresource: str, value: int) -> str:
    labels = (f'code="{code}",component="apiserver",dry_run="",group="",resource="pods",'
              f'scope="{scope}",subresource="{subresource}",verb="{verb}",version="v1"')
    return f"apiserver_request_total{{{labels}}} {value}"


def dispatched(schema: str, level: str, value: int) -> str:
    labels = f'flow_schema="{schema}",priority_level="{level}"'
    return f"apiserver_flowcontrol_dispatched_requests_total{{{labels}}} {value}"


METRICS = "\n".join([
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
    "# TYPE apiserver_request_total counter",
    request("200", "PATCH", "resource", "", 40),
    request("409", "PATCH", "resource", "", 2),
    request("200", "WATCH", "cluster", "", 3),
    request("201", "POST", "resource", "binding", 40),
    "# HELP apiserver_flowcontrol_dispatched_requests_total [BETA] Number of requests executed",
    "# TYPE apiserver_flowcontrol_dispatched_requests_total counter",
    dispatched("sluicegate-audit-ungater", "workload-low", 43),
    dispatched("exempt", "exempt", 900),
    "",
])


def test_request_counters_by_verb_and_resource_and_by_flow_schema() -> None:
    assert request_totals(METRICS) == {("PATCH", "pods", ""): 42, ("WATCH", "pods", ""): 3,
                                       ("POST", "pods", "binding"): 40}
    assert request_totals(METRICS, by=("code",)) == {("200",): 43, ("409",): 2, ("201",): 40}
    assert flow_totals(METRICS) == {"sluicegate-audit-ungater": 43, "exempt": 900}
    assert increase({"a": 50.0, "b": 9.0, "c": 1.0}, {"a": 43.0, "b": 9.0}) == {"a": 7.0, "c": 1.0}


def test_a_flow_schema_matches_only_its_own_service_account() -> None:
    schema = flow_schema("ungater", "sluicegate-audit", "workload-low")
    (rule,) = schema["spec"]["rules"]
    assert schema["metadata"]["name"] == "sluicegate-audit-ungater"
    assert rule["subjects"] == [{"kind": "ServiceAccount",
                                 "serviceAccount": {"name": "ungater", "namespace": "sluicegate-audit"}}]


def test_cpu_seconds_and_peak_memory_from_proc() -> None:
    # A command name with spaces and parentheses must not shift the fields.
    stat = "4242 (python (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 10 5 20 0 3 0 100 0 0"
    status = "Name:\tpython\nVmPeak:\t  300000 kB\nVmHWM:\t  131072 kB\nVmRSS:\t   65536 kB\n"
    usage = parse_usage(4242, stat, status, ticks_per_second=100)
    assert (usage.cpu_seconds, usage.children_cpu_seconds) == (3.0, 0.15)
    assert (usage.rss_bytes, usage.peak_rss_bytes) == (64 * 2**20, 128 * 2**20)


def test_a_process_tree_counts_its_workers_cpu_and_memory_and_its_exited_childrens(tmp_path: Path) -> None:
    """A webhook supervisor (10) with two workers (11, 12), one of which left a dead child's time;
    another process (20) is not in the tree."""
    ticks = os.sysconf("SC_CLK_TCK")

    def process(pid: int, parent: int, user: int, children: int, rss_kib: int) -> None:
        directory = tmp_path / str(pid)
        directory.mkdir()
        (directory / "stat").write_text(
            f"{pid} (python) S {parent} {pid} {pid} 0 -1 0 0 0 0 0 {user} 0 {children} 0 20 0 1 0 1 0 0")
        (directory / "status").write_text(f"VmHWM:\t{rss_kib * 2} kB\nVmRSS:\t{rss_kib} kB\n")

    process(10, 1, 1 * ticks, 0, 100)
    process(11, 10, 5 * ticks, 0, 200)
    process(12, 10, 4 * ticks, 2 * ticks, 200)
    process(20, 1, 50 * ticks, 0, 999)
    (tmp_path / "self").mkdir()  # not a pid
    usage = tree_usage(10, tmp_path)
    assert usage.cpu_seconds == 1 + 5 + 4 + 2
    assert (usage.rss_bytes, usage.peak_rss_bytes) == (500 * 1024, 1000 * 1024)
