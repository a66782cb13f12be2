"""What a queueing system calls things: its gates, and the keys naming queue, team, workflow, group.

The recorder reads pods with a ``Naming`` and the load driver writes them with one, so the same
record and checks serve Sluicegate, Kueue and the bare ungater alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from policy import keys

# A label of the auditor's own, outside Sluicegate's prefix (users may not write sluicegate.dev/
# keys): it marks everything one load run created, so a recorder can select exactly that.
RUN_LABEL: Final = "audit.sluicegate-test/run"
KUEUE_ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
KUEUE_TOPOLOGY_GATE: Final = "kueue.x-k8s.io/topology"
KUEUE_QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
AUDIT_TEAM_LABEL: Final = "audit.sluicegate-test/team"
AUDIT_GATE: Final = "audit.sluicegate-test/hold"
AUDIT_QUEUE_LABEL: Final = "audit.sluicegate-test/queue"


@dataclass(frozen=True, slots=True)
class Naming:
    """How one system marks its pods and namespaces.

    ``gates``: a pod is *released* once it carries none of these. ``team_label`` is read from
    the pod and, when the pod lacks it, from its namespace (Sluicegate opts a namespace in with
    it and copies it onto pods; other systems only need it on the namespace). An empty key
    means the system has no such notion.
    """

    gates: tuple[str, ...] = (keys.GATE,)
    queue_label: str = keys.QUEUE_LABEL
    team_label: str = keys.TEAM_LABEL
    workflow_label: str = keys.WORKFLOW_LABEL
    group_label: str = keys.GROUP_LABEL
    gpu_resource: str = keys.GPU_RESOURCE


SLUICEGATE: Final = Naming()
KUEUE: Final = Naming(
    gates=(KUEUE_ADMISSION_GATE, KUEUE_TOPOLOGY_GATE),
    queue_label=KUEUE_QUEUE_LABEL,
    team_label=AUDIT_TEAM_LABEL,
    workflow_label="",
    group_label=KUEUE_GROUP_LABEL,
)
# Loads that only the bare ungater releases, on a cluster where Sluicegate may run: every key is
# the auditor's own, since Sluicegate refuses its gate and the keys it writes on pods it does not
# manage, in every namespace.
UNMANAGED: Final = Naming(
    gates=(AUDIT_GATE,),
    queue_label=AUDIT_QUEUE_LABEL,
    team_label=AUDIT_TEAM_LABEL,
    workflow_label="",
    group_label="",
)
