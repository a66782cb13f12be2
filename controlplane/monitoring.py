"""A real Prometheus beside Sluicegate on a local control plane: ``make up MONITORING=1``, the
demo with ``MONITORING=1`` and the e2e of the alerts.

``LocalPrometheus(sluicegate).up()`` builds prometheus if the cache lacks it, writes its
configuration and the monitoring component's rules (``controlplane.rulefiles``) in the
cluster's directory (``prometheus/``), and starts it on a free loopback port, scraping every
Sluicegate process's ``/metrics`` as the monitoring component's ServiceMonitor does: plain HTTP
on the operations port, which the manifests serve without TLS or a token (kubelet's probes read
the same port). Each target carries the labels a ServiceMonitor's scrape gives it (``namespace``,
``container``, ``pod``), which the rules on ``up`` select by. The scrape and the evaluation run
every second, so an alert's ``for:`` is the only wait.

Its process id is recorded in the cluster's ``cluster.json`` (``processes.record``), so
``make status`` shows it and ``make down`` (stopping the cluster) stops it; its address is
kept in ``prometheus/address`` for ``make status``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import yaml

from controlplane import building, rulefiles
from controlplane.deploying import LocalSluicegate
from controlplane.launching import READY_SECONDS
from controlplane.processes import forget, free_port, log_tail, record, terminate
from controlplane.services import NAMESPACE
from process import kubeyaml

NAME: Final = "prometheus"
INTERVAL: Final = "1s"
"""Scrape and evaluation interval: short, so a test or a demo waits only for an alert's ``for:``."""
JOB: Final = "sluicegate"
APISERVER_JOB: Final = "apiserver"
APISERVER_INTERVAL: Final = "5s"
PROMETHEUS_USER: Final = "sluicegate-local-prometheus"
Progress = Callable[[str], None]


class PrometheusError(RuntimeError):
    """Prometheus could not start or answer; the message ends with its log."""


def _quiet(line: str) -> None:
    del line


def configuration(
    targets: Mapping[str, tuple[str, int]], rule_file: str, apiserver: ApiServerScrape | None = None
) -> dict[str, Any]:
    """Prometheus's configuration: one static target per process (name → (container, port)),
    labelled as a ServiceMonitor's scrape labels it, the rule file, and with ``apiserver`` the
    API server's own ``/metrics`` (job ``apiserver``, as kube-prometheus scrapes it), read with
    a client certificate whose user may only get ``/metrics``."""
    scrapes: list[dict[str, Any]] = []
    if apiserver is not None:
        scrapes.append({
            "job_name": APISERVER_JOB,
            # Its /metrics is megabytes, which a busy machine does not serve within 1 s.
            "scrape_interval": APISERVER_INTERVAL,
            "scrape_timeout": APISERVER_INTERVAL,
            "scheme": "https",
            "metrics_path": "/metrics",
            "tls_config": {"ca_file": str(apiserver.ca), "cert_file": str(apiserver.cert),
                           "key_file": str(apiserver.key)},
            "static_configs": [{"targets": [apiserver.address]}],
        })
    return {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL, "scrape_timeout": INTERVAL},
        "rule_files": [rule_file],
        "scrape_configs": [*scrapes, {
            "job_name": JOB,
            "scheme": "http",
            "metrics_path": "/metrics",
            "static_configs": [
                {"targets": [f"127.0.0.1:{port}"],
                 "labels": {"namespace": NAMESPACE, "container": container, "pod": name}}
                for name, (container, port) in sorted(targets.items())
            ],
        }],
    }


@dataclass(frozen=True, slots=True)
class ApiServerScrape:
    """Where the API server serves ``/metrics`` and the files Prometheus authenticates with."""

    address: str  # host:port
    ca: Path
    cert: Path
    key: Path


def metrics_reader(user: str) -> list[dict[str, Any]]:
    """RBAC letting ``user`` get the API server's ``/metrics`` and nothing else."""
    name = "sluicegate-local-prometheus"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ]


class LocalPrometheus:
    """Prometheus scraping one ``LocalSluicegate``, with ``rules`` (a rule file: by default the
    monitoring component's, as shipped) loaded."""

    def __init__(self, sluicegate: LocalSluicegate, rules: Mapping[str, Any] | None = None) -> None:
        self.sluicegate = sluicegate
        self.rules = dict(rules) if rules is not None else rulefiles.rule_file(rulefiles.read())
        layout = sluicegate.cluster.layout
        self.root = layout.root / NAME
        self.log = layout.log(NAME)
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self, progress: Progress = _quiet) -> None:
        """Build (if needed) and start Prometheus; wait until it has scraped every process."""
        binary = building.ensure_prometheus(progress) / NAME
        shutil.rmtree(self.root, ignore_errors=True)
        (self.root / "data").mkdir(parents=True)
        (self.root / "rules.yaml").write_text(yaml.safe_dump(self.rules, sort_keys=False))
        targets = {s.name: (s.module, self.sluicegate.port(s.name, "metrics"))
                   for s in self.sluicegate.services}
        config = self.root / "prometheus.yaml"
        config.write_text(yaml.safe_dump(configuration(targets, "rules.yaml", self._apiserver()),
                                         sort_keys=False))
        self.port = free_port()
        progress(f"prometheus: starting on {self.url}, scraping {', '.join(sorted(targets))} "
                 f"every {INTERVAL}")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                [str(binary), f"--config.file={config}", f"--storage.tsdb.path={self.root / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1d"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.root,
            )
        record(self.sluicegate.cluster.layout.root, NAME, self._proc.pid)
        (self.root / "address").write_text(self.url)
        try:
            self._wait(f"all {len(targets)} targets and the API server scraped",
                       lambda: self._scraped(len(targets)))
        except BaseException:
            self.down()
            raise
        progress(f"prometheus: ready (pid {self._proc.pid}, log {self.log})")

    def _apiserver(self) -> ApiServerScrape:
        """A client certificate of its own (user ``PROMETHEUS_USER``, allowed ``/metrics`` only)
        for scraping the API server, as a Prometheus in a cluster scrapes it with its account."""
        cluster = self.sluicegate.cluster
        pki = cluster.layout.pki
        cert, key = pki.authority().issue_client(PROMETHEUS_USER).write(self.root, "apiserver-client")
        cluster.kubectl("apply", "-f", "-", input=kubeyaml.dump_all(metrics_reader(PROMETHEUS_USER)))
        return ApiServerScrape(f"127.0.0.1:{cluster.ports.apiserver}", pki.ca_cert, cert, key)

    def _scraped(self, count: int) -> bool:
        try:
            up = self.query("up == 1")
        except PrometheusError:
            return False
        return len(up) == count + 1  # Sluicegate's processes and the API server

    def _wait(self, what: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = self._proc.returncode if self._proc else None
                raise PrometheusError(f"prometheus exited with code {code} while waiting for {what}; "
                                      f"last lines of {self.log}:\n{log_tail(self.log)}")
            if ready():
                return
            time.sleep(0.25)
        raise PrometheusError(f"prometheus: {what} not seen after {READY_SECONDS:.0f}s; last lines of "
                              f"{self.log}:\n{log_tail(self.log)}")

    def evaluated_after(self, moment: float) -> None:
        """Wait until every rule group has been evaluated after ``moment`` (a Unix time), so the
        alerts read next judge what the processes exported after it."""
        def evaluated() -> bool:
            try:
                groups = self.rule_groups()
            except PrometheusError:
                return False
            return bool(groups) and all(_unix(g["lastEvaluation"]) > moment for g in groups)

        self._wait(f"every rule group evaluated after {moment:.0f}", evaluated)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` gives now (``/api/v1/query``); a query Prometheus refuses
        (it does not parse) raises ``PrometheusError`` with Prometheus's words."""
        return list(self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """Every active alert (pending or firing), as ``/api/v1/alerts`` gives it."""
        return list(self._get("/api/v1/alerts")["alerts"])

    def rule_groups(self) -> list[dict[str, Any]]:
        """Every rule group with its rules' state and its last evaluation (``/api/v1/rules``)."""
        return list(self._get("/api/v1/rules")["groups"])

    def _get(self, path: str) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as e:  # a refused query answers JSON; a starting server, text
            text = e.read().decode(errors="replace")
            try:
                said = json.loads(text).get("error", text)
            except ValueError:
                said = text.strip() or e.reason
            raise PrometheusError(f"{path}: {e.code} {said}") from e
        except (OSError, ValueError) as e:
            raise PrometheusError(f"{path}: {e}") from e
        data: dict[str, Any] = body["data"]
        return data

    def down(self) -> None:
        if self._proc is not None:
            terminate([self._proc.pid])
            self._proc.wait()
            self._proc = None
        forget(self.sluicegate.cluster.layout.root, NAME)
        (self.root / "address").unlink(missing_ok=True)


def _unix(stamp: str) -> float:
    """An RFC 3339 time as Prometheus writes it (nanoseconds, ``Z``) in Unix seconds."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float(f"0.{fraction or 0}")


def address(root: Path) -> str | None:
    """The URL of the Prometheus ``make up MONITORING=1`` started in ``root``, if any."""
    try:
        return (root.resolve() / NAME / "address").read_text().strip()
    except FileNotFoundError:
        return None


def active_lines(alerts: list[dict[str, Any]]) -> list[str]:
    """One line per active alert, firing ones first: its name, its state (a pending alert waits
    out its ``for:``), its labels and its summary."""
    def line(alert: dict[str, Any]) -> str:
        labels = alert["labels"]
        shown = " ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "alertname")
        since = f" since {alert['activeAt'][11:19]} UTC" if alert.get("activeAt") else ""
        summary = alert.get("annotations", {}).get("summary", "")
        return f"{labels['alertname']} {alert['state']}{since} {shown}: {summary}"
    return [line(a) for a in sorted(alerts, key=lambda a: (a["state"] != "firing", a["labels"]["alertname"]))]
