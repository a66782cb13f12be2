"""How the API server reaches a process that runs on this host (``make up``).

The CLI reads the recorder as a user would in a real cluster: through the API server, which
serves the records as an aggregated API and proxies to the recorder's Service. The aggregation
layer (with ``--enable-aggregator-routing``: no kube-proxy here) resolves the Service through
its EndpointSlices, mirrored from the Endpoints of a Service without selector; the service proxy
(``/api/v1/namespaces/.../services/https:sluicegate-recorder:8443/proxy/...``, Kubernetes v1.36,
pkg/registry/core/service/storage ``ResourceLocation``) proxies only to an address that is a
pod's: the address needs a ``targetRef`` to a Pod of the namespace whose ``status.podIPs``
holds it. Endpoints and EndpointSlices also refuse loopback addresses.

So locally the recorder listens inside the cluster's network namespace, on its inner address
(controlplane/networks.py: never loopback, never this host's own network address), and
``expose`` writes: a Service without selector (nothing manages its Endpoints), a stand-in Pod
held by a scheduling gate of its own (never scheduled, so kwok never plays it and nothing
deletes it), its status given that address as its pod IP, and Endpoints naming the Pod. The
controller's visibility API is reached the same way.
"""

from __future__ import annotations

import json
from typing import Any, Final

from controlplane.launching import LocalCluster

STAND_IN_GATE: Final = "local.sluicegate.dev/host-process"


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
