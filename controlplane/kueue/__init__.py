"""Kueue (kubernetes-sigs/kueue v0.17.0) as a peer on the local control plane, for benchmarks.

``building.ensure_kueue()`` builds the binary into its own cache; ``Kueue(cluster).start()``
installs its CRDs and RBAC, runs it as a process with the plain-pod integration and registers
its webhooks; ``configure()`` creates the queues; ``stop()`` removes the webhooks and stops it.
"""

from controlplane.kueue.manifests import (
    NAMESPACE_LABEL,
    NAMESPACE_LABEL_VALUE,
    RAISED_LIMITS,
    USER,
    ClientLimits,
)
from controlplane.kueue.queues import QUEUE_LABEL, KueueCohort, KueueQueue, policy_objects
from controlplane.kueue.running import Kueue, KueueError

__all__ = [
    "NAMESPACE_LABEL",
    "NAMESPACE_LABEL_VALUE",
    "QUEUE_LABEL",
    "RAISED_LIMITS",
    "USER",
    "ClientLimits",
    "Kueue",
    "KueueCohort",
    "KueueError",
    "KueueQueue",
    "policy_objects",
]
