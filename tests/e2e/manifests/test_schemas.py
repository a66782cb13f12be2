"""The CRD schemas, judged by the real API server: the shapes of the design are stored as written,
and invalid Queues, Teams, Presets and Policies are refused with the offending field named.

Every request is a server-side dry run: validated exactly as a real write, stored never, so the
cases neither depend on nor disturb what else exists in the cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controlplane.launching import LocalCluster
from policy import keys
from process import kubeyaml

# The shapes of docs/concepts.md, every field set (names made unique where a name is free).
DESIGN_SHAPES: list[dict[str, Any]] = [
    {"kind": "Queue", "metadata": {"name": "design-vision-train"}, "spec": {
        "priority": 10, "maxRunning": 8, "quota": {"nvidia.com/gpu": "16", "cpu": "64"},
        "access": {"teams": ["vision"], "users": [], "groups": []},
        "ordering": "BestEffortFIFO", "paused": False, "nodePool": {"matchLabels": {"pool": "a100"}}}},
    {"kind": "Team", "metadata": {"name": "design-vision"}, "spec": {
        "maxRunning": 20, "quota": {"nvidia.com/gpu": "32"},
        "members": {"users": ["alice"], "groups": ["vision-devs"]}}},
    {"kind": "Preset", "metadata": {"name": "design-single-gpu"}, "spec": {
        "patchStrategy": "replace", "queue": "vision-train", "workflowMaxRunning": 4,
        "metadata": {"labels": {}, "annotations": {}},
        "pod": {"nodeSelector": {}, "tolerations": [], "affinity": {}, "priorityClassName": "",
                "runtimeClassName": "", "volumes": []},
        "container": {
            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
            "env": [], "envFrom": [], "volumeMounts": []}}},
    {"kind": "Policy", "metadata": {"name": "cluster"}, "spec": {
        "maxRunning": 100, "quota": {"nvidia.com/gpu": "64"}, "managedResources": ["nvidia.com/gpu"],
        "defaultQueue": "", "starvationSeconds": 600,
        "trustedControllers": ["system:serviceaccount:kube-system:job-controller"],
        "workflowLabels": ["workflows.argoproj.io/workflow", "katib.kubeflow.org/experiment"]}},
]


def _contains(stored: Any, sent: Any) -> bool:
    """Whether everything ``sent`` says is in ``stored`` unchanged (defaults may add fields)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and _contains(stored[k], v) for k, v in sent.items()
        )
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(_contains, stored, sent))
    return bool(stored == sent)


@pytest.mark.parametrize("shape", DESIGN_SHAPES, ids=lambda s: s["kind"])
def test_the_design_shapes_are_stored_as_written(installed: LocalCluster, shape: dict[str, Any]) -> None:
    obj = {"apiVersion": keys.API_VERSION, **shape}
    result = installed.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj))
    stored = json.loads(result.stdout)
    assert _contains(stored["spec"], shape["spec"]), f"sent {shape['spec']}\nstored {stored['spec']}"


# (case, kind, spec, the field the error must name, words the error must contain)
INVALID: list[tuple[str, str, dict[str, Any], str, str]] = [
    ("queue-negative-max-running", "Queue", {"maxRunning": -1}, "spec.maxRunning",
     "greater than or equal to 0"),
    ("queue-unknown-ordering", "Queue", {"ordering": "FIFO"}, "spec.ordering", 'Unsupported value: "FIFO"'),
    ("queue-priority-a-word", "Queue", {"priority": "high"}, "spec.priority", "must be of type integer"),
    ("queue-paused-a-word", "Queue", {"paused": "yes"}, "spec.paused", "must be of type boolean"),
    ("queue-negative-quota", "Queue", {"quota": {"nvidia.com/gpu": "-4"}}, "spec.quota.nvidia.com/gpu",
     "should match"),
    ("queue-negative-quota-number", "Queue", {"quota": {"nvidia.com/gpu": -4}}, "spec.quota.nvidia.com/gpu",
     "greater than or equal to 0"),
    ("queue-quota-not-a-quantity", "Queue", {"quota": {"cpu": "lots"}}, "spec.quota.cpu", "should match"),
    ("queue-access-teams-not-a-list", "Queue", {"access": {"teams": "vision"}}, "spec.access.teams",
     "must be of type array"),
    ("queue-pool-in-without-values", "Queue",
     {"nodePool": {"matchExpressions": [{"key": "pool", "operator": "In"}]}},
     "spec.nodePool.matchExpressions[0]", "In and NotIn need values"),
    ("queue-pool-unknown-operator", "Queue",
     {"nodePool": {"matchExpressions": [{"key": "pool", "operator": "Has", "values": ["a"]}]}},
     "spec.nodePool.matchExpressions[0].operator", "Unsupported value"),
    ("queue-pool-label-value-with-a-space", "Queue", {"nodePool": {"matchLabels": {"pool": "a b"}}},
     "spec.nodePool.matchLabels.pool", "should match"),
    ("queue-pool-expression-value-with-a-space", "Queue",
     {"nodePool": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a b"]}]}},
     "spec.nodePool.matchExpressions[0].values[0]", "should match"),
    ("queue-misspelt-field", "Queue", {"maxrunning": 3}, "spec.maxrunning", "unknown field"),
    ("team-negative-max-running", "Team", {"maxRunning": -2}, "spec.maxRunning",
     "greater than or equal to 0"),
    ("team-members-not-a-list", "Team", {"members": {"users": "alice"}}, "spec.members.users",
     "must be of type array"),
    ("team-quota-not-a-quantity", "Team", {"quota": {"nvidia.com/gpu": "a lot"}}, "spec.quota.nvidia.com/gpu",
     "should match"),
    ("preset-unknown-strategy", "Preset", {"patchStrategy": "merge"}, "spec.patchStrategy",
     'Unsupported value: "merge"'),
    ("preset-zero-workflow-limit", "Preset", {"workflowMaxRunning": 0}, "spec.workflowMaxRunning",
     "greater than or equal to 1"),
    ("preset-sets-a-sluicegate-label", "Preset", {"metadata": {"labels": {keys.QUEUE_LABEL: "x"}}},
     "spec.metadata.labels", "may not set sluicegate.dev/ keys"),
    ("preset-env-twice", "Preset",
     {"container": {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}},
     "spec.container.env[1]", "Duplicate value"),
    ("preset-volume-without-name", "Preset", {"pod": {"volumes": [{"emptyDir": {}}]}},
     "spec.pod.volumes[0].name", "Required value"),
    ("preset-env-from-nothing", "Preset", {"container": {"envFrom": [{"prefix": "X_"}]}},
     "spec.container.envFrom[0]", "exactly one of configMapRef or secretRef"),
    ("preset-unknown-toleration-effect", "Preset",
     {"pod": {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "Sometimes"}]}},
     "spec.pod.tolerations[0].effect", "Unsupported value"),
    ("preset-request-not-a-quantity", "Preset",
     {"container": {"resources": {"requests": {"nvidia.com/gpu": "one"}}}},
     "spec.container.resources.requests.nvidia.com/gpu", "should match"),
    ("preset-pod-field-it-may-not-set", "Preset", {"pod": {"hostNetwork": True}}, "spec.pod.hostNetwork",
     "unknown field"),
    ("policy-not-named-cluster", "Policy", {"maxRunning": 10}, "metadata.name", "must be named 'cluster'"),
    ("policy-managed-resource-without-domain", "Policy", {"managedResources": ["gpu"]},
     "spec.managedResources[0]", "should match"),
    ("policy-no-managed-resources", "Policy", {"managedResources": []}, "spec.managedResources",
     "should have at least 1 items"),
    ("policy-negative-starvation", "Policy", {"starvationSeconds": -1}, "spec.starvationSeconds",
     "greater than or equal to 0"),
    ("policy-max-running-a-string", "Policy", {"maxRunning": "100"}, "spec.maxRunning",
     "must be of type integer"),
]


@pytest.mark.parametrize(("case", "kind", "spec", "field", "words"), INVALID, ids=[c[0] for c in INVALID])
def test_an_invalid_object_is_refused_naming_the_field(
    installed: LocalCluster, case: str, kind: str, spec: dict[str, Any], field: str, words: str
) -> None:
    name = "policy" if case == "policy-not-named-cluster" else (
        keys.POLICY_NAME if kind == "Policy" else case)
    obj = {"apiVersion": keys.API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}
    result = installed.kubectl(
        "create", "--dry-run=server", "-f", "-", input=kubeyaml.dump(obj), check=False,
    )
    assert result.returncode != 0, f"{case}: the API server accepted {obj}"
    assert field in result.stderr and words in result.stderr, result.stderr
