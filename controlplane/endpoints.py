"""How the API server reaches a process that runs on this host (``make up``).

The CLI reads the recorder as a user would in a real cluster: through the API server, which
serves the records as an aggregated API and proxies to the recorder's Service. The aggregation
layer (with ``--enable-aggregator-routing``: no kube-proxy here) resolves the Service through
its EndpointSlices, mirrored from the Endpoints of a Service without selector; the service proxy
(``/api/v1/namespaces/.../services/https:sluicegate-recorder:8443/proxy/...``, Kubernetes v1.36,
pkg/registry/core/service/storage ``ResourceLocation``) proxies only to an address that is a
pod's: the address needs a ``targetRef`` to a Pod of the namespace whose ``status.podIPs``
holds it. Endpoints and EndpointSlices also refuse loopback addresses.

So locally the recorder listens on this host's own non-loopback address, and ``expose``
writes: a Service without selector (nothing manages its Endpoints), a stand-in Pod held by a
scheduling gate of its own (never scheduled, so kwok never plays it and nothing deletes it),
its status given that address as its pod IP, and Endpoints naming the Pod. Without a
non-loopback address the recorder still records, but the CLI cannot reach it.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any, Final

from controlplane.launching import LocalCluster

STAND_IN_GATE: Final = "local.sluicegate.dev/host-process"
# Any address outside this host's networks (TEST-NET-3): connecting a UDP socket sends nothing,
# it only makes the kernel choose the source address a packet would leave with.
_PROBE: Final = ("203.0.113.1", 9)


def host_address() -> str | None:
    """This host's own IPv4 address that is not loopback, or None when it has none."""
    candidates: list[str] = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(_PROBE)
            candidates.append(probe.getsockname()[0])
    except OSError:
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            candidates.append(str(info[4][0]))
    except OSError:
        pass
    for candidate in candidates:
        address = ipaddress.ip_address(candidate)
        if not (address.is_loopback or address.is_link_local or address.is_unspecified):
            return candidate
    return None


def objects(namespace: str, name: str, port: int, target_port: int, address: str) -> list[dict[str, Any]]:
    """The Service, the stand-in Pod and the Endpoints for a process on ``address:target_port``."""
    labels = {"app.kubernetes.io/name": "sluicegate", "app.kubernetes.io/component": name.removeprefix(
        "sluicegate-")}
    pod = f"{name}-local"
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "spec": {"ports": [{"name": "https", "port": port, "targetPort": target_port, "protocol": "TCP"}]}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": pod, "namespace": namespace, "labels": labels,
                      "annotations": {STAND_IN_GATE: f"the host process on {address}:{target_port}"}},
         "spec": {"schedulingGates": [{"name": STAND_IN_GATE}],
                  # The namespace enforces the restricted Pod Security level.
                  "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                  "containers": [{"name": "process", "image": "registry.invalid/host-process:none",
                                  "securityContext": {"allowPrivilegeEscalation": False,
                                                      "capabilities": {"drop": ["ALL"]}}}]}},
        {"apiVersion": "v1", "kind": "Endpoints",
         "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "subsets": [{"addresses": [{"ip": address, "targetRef": {"kind": "Pod", "name": pod,
                                                                  "namespace": namespace}}],
                      "ports": [{"name": "https", "port": target_port, "protocol": "TCP"}]}]},
    ]


def expose(
    cluster: LocalCluster, namespace: str, name: str, port: int, target_port: int, address: str
) -> None:
    """Make ``https:<name>:<port>`` in ``namespace`` reach ``address:target_port`` through the
    API server's service proxy."""
    service, pod, endpoints = objects(namespace, name, port, target_port, address)
    pod_name = pod["metadata"]["name"]
    cluster.kubectl("delete", "pod", pod_name, "-n", namespace, "--ignore-not-found", "--wait=true")
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": [service, pod]}))
    status = {"status": {"podIP": address, "podIPs": [{"ip": address}]}}
    cluster.kubectl("patch", "pod", pod_name, "-n", namespace, "--subresource=status", "--type=merge",
                    "-p", json.dumps(status))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(endpoints))
