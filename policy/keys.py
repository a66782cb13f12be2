"""Sluicegate's public names: label and annotation keys, the gate, the condition and its reasons.

Scripts and users depend on these exactly; every other module refers to them from here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

GROUP: Final = "sluicegate.dev"
VERSION: Final = "v1beta1"
"""The version Sluicegate reads and writes, and the one the API server stores."""
API_VERSION: Final = f"{GROUP}/{VERSION}"
SERVED_API_VERSIONS: Final = (API_VERSION, f"{GROUP}/v1alpha1")
"""Every version the CRDs serve: the same schema under each, so a manifest of any of them is
one object (v1alpha1 is the first release's, deprecated)."""
PREFIX: Final = "sluicegate.dev/"

GATE: Final = "sluicegate.dev/dispatch"
CONDITION: Final = "sluicegate.dev/Dispatched"
POLICY_NAME: Final = "cluster"

# Set by users on pods (or pod templates).
QUEUE_LABEL: Final = "sluicegate.dev/queue"
WORKFLOW_LABEL: Final = "sluicegate.dev/workflow"
GROUP_LABEL: Final = "sluicegate.dev/group"
PRESETS_ANNOTATION: Final = "sluicegate.dev/presets"
WORKFLOW_MAX_RUNNING_ANNOTATION: Final = "sluicegate.dev/workflow-max-running"
GROUP_SIZE_ANNOTATION: Final = "sluicegate.dev/group-size"

USER_LABELS: Final = frozenset({QUEUE_LABEL, WORKFLOW_LABEL, GROUP_LABEL})
USER_ANNOTATIONS: Final = frozenset(
    {PRESETS_ANNOTATION, WORKFLOW_MAX_RUNNING_ANNOTATION, GROUP_SIZE_ANNOTATION}
)

# Set by admins on namespaces. The team label opts a namespace in.
TEAM_LABEL: Final = "sluicegate.dev/team"
DEFAULT_QUEUE_ANNOTATION: Final = "sluicegate.dev/default-queue"
ALLOWED_QUEUES_ANNOTATION: Final = "sluicegate.dev/allowed-queues"
DEFAULT_PRESETS_ANNOTATION: Final = "sluicegate.dev/default-presets"
ALLOWED_PRESETS_ANNOTATION: Final = "sluicegate.dev/allowed-presets"

# Written by Sluicegate on pods and pod templates; users may not set or change them.
SUBMITTER_ANNOTATION: Final = "sluicegate.dev/submitter"
APPLIED_PRESETS_ANNOTATION: Final = "sluicegate.dev/applied-presets"
DISPATCHED_AT_ANNOTATION: Final = "sluicegate.dev/dispatched-at"
ADMITTED_AT_ANNOTATION: Final = "sluicegate.dev/admitted-at"
"""When admission admitted the pod: RFC 3339 in UTC with microseconds
(``2026-11-30T10:04:30.123456Z``). FIFO order inside a queue uses it, because
``creationTimestamp`` has one-second resolution."""
DEVICES_ANNOTATION: Final = "sluicegate.dev/devices"
"""What the pod's DRA ResourceClaims count as in quotas, by the Policy's ``deviceClasses``:
``{"pod": {"nvidia.com/gpu": "2"}, "claims": {"<shared ResourceClaim>": {...}}}``, written by
admission when they count for anything (``policy.devices``)."""
HELD_ANNOTATION: Final = "sluicegate.dev/held"
"""Why the pod was last held: the reason and message of its last ``Dispatched=False`` condition
(``QueueLimit: queue vision-train: 8/8 running``), written by the controller in the same request
as the condition, and kept after the release. ``kubectl describe pod`` lists annotations, but a
condition without its message."""
SEAL_ANNOTATION: Final = "sluicegate.dev/seal"
"""What admission wrote, sealed: every other ``sluicegate.dev/`` label and annotation and
Sluicegate's scheduling gates, as ``policy.marks.seal`` writes them. The API server compares it
with the stored pod (the validating webhook's ``sealed-as-admitted`` condition) and calls the
final check only when they differ."""

DEFAULT_MANAGED_RESOURCES: Final = ("nvidia.com/gpu",)
GPU_RESOURCE: Final = "nvidia.com/gpu"


class Reason(StrEnum):
    """Why a pending workload is not released; the reason of the Dispatched=False condition."""

    WORKFLOW_LIMIT = "WorkflowLimit"
    QUEUE_LIMIT = "QueueLimit"
    QUEUE_QUOTA = "QueueQuota"
    QUEUE_PAUSED = "QueuePaused"
    TEAM_LIMIT = "TeamLimit"
    TEAM_QUOTA = "TeamQuota"
    GLOBAL_LIMIT = "GlobalLimit"
    GLOBAL_QUOTA = "GlobalQuota"
    NO_NODE_FITS = "NoNodeFits"
    """Work that no node of the cluster could hold even if it were empty (``policy.inventory``):
    it can never run on the nodes that exist now, like work over a quota by itself."""
    RELEASE_REFUSED = "ReleaseRefused"
    """The API server refused the patch that removes the gate as invalid (a pod whose
    annotations grew after admission beyond what leaves room for the release stamp): the pod
    holds nothing and blocks nothing until it changes (``policy.model.Snapshot.refused``)."""
    HELD_FOR_PRIORITY = "HeldForPriority"
    GROUP_INCOMPLETE = "GroupIncomplete"
    WAITING_TURN = "WaitingTurn"
    NAMESPACE_LEFT_TEAM = "NamespaceLeftTeam"
    """Not a dispatch layer's: the pod's namespace no longer opts in to the team admission
    stamped on it, so the pod never reaches dispatch (``policy.membership``)."""
    CLAIMS_CHANGED = "ClaimsChanged"
    """Not a dispatch layer's: the DRA claims the pod names ask for more than (or other than)
    admission counted, or one does not exist now (``policy.devices.claims_changed``), so the
    pod never reaches dispatch until they ask no more."""


DISPATCHED_REASON: Final = "Dispatched"
UNPLACEABLE: Final = "dispatched, waiting for Kubernetes to place it: "
"""How the message of a released pod's condition begins while kube-scheduler cannot place it;
the scheduler's own words follow."""

# Kubernetes' own keys that Sluicegate reads.
DEFAULT_CONTAINER_ANNOTATION: Final = "kubectl.kubernetes.io/default-container"
MIRROR_POD_ANNOTATION: Final = "kubernetes.io/config.mirror"
RAY_NODE_TYPE_LABEL: Final = "ray.io/node-type"
"""KubeRay's label of the pods it creates: ``head`` or ``worker``. A worker beyond the size of
its running RayCluster's group is one the autoscaler added: it queues on its own
(``policy.workloads``)."""
RAY_WORKER: Final = "worker"

# Kubernetes' own identities and names that admission recognises.
NODE_USER_PREFIX: Final = "system:node:"
NODES_GROUP: Final = "system:nodes"
JOB_CONTROLLER: Final = "system:serviceaccount:kube-system:job-controller"
CRONJOB_CONTROLLER: Final = "system:serviceaccount:kube-system:cronjob-controller"
DEPLOYMENT_CONTROLLER: Final = "system:serviceaccount:kube-system:deployment-controller"
REPLICASET_CONTROLLER: Final = "system:serviceaccount:kube-system:replicaset-controller"
STATEFULSET_CONTROLLER: Final = "system:serviceaccount:kube-system:statefulset-controller"
REPLICATION_CONTROLLER: Final = "system:serviceaccount:kube-system:replication-controller"
DAEMONSET_CONTROLLER: Final = "system:serviceaccount:kube-system:daemon-set-controller"
CONTROLLER_MANAGER: Final = "system:kube-controller-manager"
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"
TRAINING_OPERATOR: Final = "system:serviceaccount:kubeflow:training-operator"
"""The Kubeflow training operator's account where its own manifests install it: the default of
the Policy's ``operatorAccounts`` for PyTorchJobs."""
KUBERAY_OPERATOR: Final = "system:serviceaccount:ray-system:kuberay-operator"
"""KubeRay's operator's account as its chart installs it in ``ray-system``: the default of the
Policy's ``operatorAccounts`` for RayClusters and RayJobs."""
SERVICE_ACCOUNT_TOKEN_PATH: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_ACCOUNT_VOLUME_PREFIX: Final = "kube-api-access-"
NODE_TAINT_PREFIX: Final = "node.kubernetes.io/"
CONDITION_TAINTS: Final = frozenset(NODE_TAINT_PREFIX + c for c in (
    "not-ready", "unreachable", "unschedulable", "memory-pressure", "disk-pressure", "pid-pressure",
    "network-unavailable",
))
"""The taints the node lifecycle controller and ``kubectl cordon`` set for a passing condition of a
node; every other taint, ``node.kubernetes.io/out-of-service`` (set by an admin) included, is
the node's shape until someone removes it."""

RELEASE_VERB: Final = "release"
"""The RBAC verb on ``queues.sluicegate.dev/<name>`` that lets a person remove the gate by hand."""
