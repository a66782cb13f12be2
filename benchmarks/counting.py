"""Counting each system's API requests, by kind, with API Priority and Fairness.

``apiserver_request_total`` has no user or user-agent label; the API server counts requests
per client only by the FlowSchema that classified them
(``apiserver_flowcontrol_dispatched_requests_total{flow_schema}``; ``audit.scraping``). So a
system's identities (its users or ServiceAccounts) get a small set of FlowSchemas of their own,
one per kind of request, tried in order: pod writes (gates, labels, finalizers), pod status
(conditions), events, writes to its own kinds (Kueue's Workloads, Sluicegate's status), leases
(leader election), reads (get, list, watch), and everything else. Each request lands in exactly
one, so their sum is the system's total and each one's share says where the requests go.

Every one sends requests to ``workload-low``, the priority level a controller running as a
ServiceAccount reaches through APF's stock ``service-accounts`` schema: classifying a system
apart changes how its requests are counted, not how they are served. Their precedences
(990-996) sit below the audit identities' (1000), so they win for the bare ungater's account.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from controlplane.launching import LocalCluster

Obj = dict[str, Any]
PRIORITY_LEVEL: Final = "workload-low"
FIRST_PRECEDENCE: Final = 990
WRITES: Final = ["create", "update", "patch", "delete", "deletecollection"]
READS: Final = ["get", "list", "watch"]


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> Obj:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources, "clusterScope": True,
            "namespaces": ["*"]}


# (kind, resource rules, non-resource rules), in the order they are tried.
KINDS: Final[tuple[tuple[str, list[Obj], list[Obj]], ...]] = (
    ("pod writes", [_rule(WRITES, [""], ["pods"])], []),
    ("pod status", [_rule(WRITES, [""], ["pods/status"])], []),
    ("events", [_rule(WRITES, ["", "events.k8s.io"], ["events"])], []),
    ("own objects", [_rule(WRITES, ["kueue.x-k8s.io", "sluicegate.dev"], ["*"])], []),
    ("leases", [_rule(["*"], ["coordination.k8s.io"], ["*"])], []),
    ("reads", [_rule(READS, ["*"], ["*"])], [{"verbs": ["get"], "nonResourceURLs": ["*"]}]),
    ("other", [_rule(["*"], ["*"], ["*"])], [{"verbs": ["*"], "nonResourceURLs": ["*"]}]),
)


def schema_name(system: str, kind: str) -> str:
    return f"bench-{system}-{kind.replace(' ', '-')}"


def flow_schemas(system: str, subjects: Sequence[Obj]) -> list[Obj]:
    """One FlowSchema per kind of request, each matching only ``subjects``."""
    schemas = []
    for index, (kind, resources, non_resources) in enumerate(KINDS):
        rule: Obj = {"subjects": list(subjects), "resourceRules": resources}
        if non_resources:
            rule["nonResourceRules"] = non_resources
        schemas.append({
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": schema_name(system, kind)},
            "spec": {
                "priorityLevelConfiguration": {"name": PRIORITY_LEVEL},
                "matchingPrecedence": FIRST_PRECEDENCE + index,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [rule],
            },
        })
    return schemas


def by_kind(system: str, grew: Mapping[str, float]) -> dict[str, float]:
    """The requests ``system`` made, by kind, from the FlowSchemas' increase over a run."""
    return {kind: grew.get(schema_name(system, kind), 0.0) for kind, _, _ in KINDS}


def user(name: str) -> Obj:
    return {"kind": "User", "user": {"name": name}}


def service_account(namespace: str, name: str) -> Obj:
    return {"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": namespace}}


def install(cluster: LocalCluster, system: str, subjects: Sequence[Obj]) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": flow_schemas(system, subjects)}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(listed))


def uninstall(cluster: LocalCluster, system: str) -> None:
    if cluster.layout.state.exists():
        cluster.kubectl("delete", "--ignore-not-found", "flowschemas",
                        *(schema_name(system, kind) for kind, _, _ in KINDS), check=False)
