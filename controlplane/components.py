"""How each component of the local control plane is started: its command line, from where the
cluster keeps its files (``Layout``) and the free loopback ports it was given (``Ports``).
``controlplane.launching`` starts them in order and waits for each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controlplane.extenders import SchedulerExtender
from controlplane.pki import FRONT_PROXY_CLIENT
from controlplane.processes import Layout, free_port
from process import kubeyaml

KWOK_CONFIG = Path(__file__).resolve().parent / "kwok.yaml"
SERVICE_CIDR = "10.96.0.0/16"


@dataclass(slots=True)
class Ports:
    etcd_client: int = field(default_factory=free_port)
    etcd_peer: int = field(default_factory=free_port)
    apiserver: int = field(default_factory=free_port)
    controller_manager: int = field(default_factory=free_port)
    scheduler: int = field(default_factory=free_port)


def etcd(layout: Layout, ports: Ports) -> list[str]:
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        "--name=sluicegate",
        f"--data-dir={layout.etcd}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=sluicegate={peer}",
        "--initial-cluster-state=new",
        # A test cluster's data is thrown away; skipping fsync makes writes cheap.
        "--unsafe-no-fsync=true",
        "--auto-compaction-retention=1",
        "--log-level=warn",
    ]

def apiserver(layout: Layout, ports: Ports) -> list[str]:
    pki = layout.pki
    return [
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={layout.root / 'apiserver-certs'}",
        f"--tls-cert-file={pki.apiserver_cert}",
        f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_cert}",
        f"--service-account-key-file={pki.sa_public}",
        f"--service-account-signing-key-file={pki.sa_private}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=RBAC",
        # The aggregation layer: the API server proxies an APIService's requests (the recorder's
        # records.sluicegate.dev) with this client certificate and names the user it
        # authenticated in X-Remote-* headers, which the aggregated server trusts only from a
        # certificate of this CA with this name. Published in
        # kube-system/extension-apiserver-authentication, where aggregated servers read it.
        f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki.front_proxy_client_cert}",
        f"--proxy-client-key-file={pki.front_proxy_client_key}",
        # No kube-proxy here, so no Service's cluster IP is reachable: the aggregation layer
        # calls an endpoint's address instead.
        "--enable-aggregator-routing=true",
        "--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
        "--allow-privileged=true",
        # Loopback cannot be a Service endpoint; nothing in the cluster dials the apiserver's Service.
        "--endpoint-reconciler-type=none",
        # PodTemplates (which nothing here uses) skip the watch cache, so their watches are
        # served by etcd: after a compaction, a watch from an old resourceVersion gets the
        # 410 Gone that a long-running cluster gives, and tests can see reflectors relist.
        "--watch-cache-sizes=podtemplates#0",
        "--profiling=false",
        "--v=1",
    ]

def controller_manager(layout: Layout, ports: Ports) -> list[str]:
    pki = layout.pki
    return [
        f"--kubeconfig={layout.kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.controller_manager}",
        "--leader-elect=false",
        # Each controller acts as its own service account, so pods a Job creates are
        # created by system:serviceaccount:kube-system:job-controller, as in a real cluster.
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.sa_private}",
        f"--root-ca-file={pki.ca_cert}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
        "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        "--profiling=false",
        "--v=1",
    ]

def scheduler(layout: Layout, ports: Ports, configuration: dict[str, Any]) -> list[str]:
    config = layout.root / "scheduler.yaml"
    config.write_text(kubeyaml.dump(configuration))
    return [
        f"--config={config}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.scheduler}",
        "--profiling=false",
        "--v=1",
    ]

def scheduler_configuration(kubeconfig: Path, extender: SchedulerExtender | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
    }
    if extender is not None:
        config["extenders"] = [extender.entry()]
    return config

def kwok(layout: Layout) -> list[str]:
    return [
        f"--kubeconfig={layout.kubeconfig}",
        f"--config={KWOK_CONFIG}",
        "--manage-all-nodes=true",
        "--cidr=10.0.0.1/16",
        "--node-ip=10.0.0.1",
    ]
