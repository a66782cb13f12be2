"""The operators whose workloads the e2e tests submit, on the local control plane: the Kubeflow
training-operator v1.8.1 (PyTorchJob) and KubeRay v1.5.0 (RayCluster, RayJob).

``building.ensure_operator()`` builds each binary into its own cache; ``LocalOperator(cluster,
shape).start()`` installs the operator's CRDs and RBAC from its module's manifests and runs it
as a process, as its release's ServiceAccount; ``stop()`` stops it.
"""

from controlplane.operators.manifests import KUBERAY, SHAPES, TRAINING_OPERATOR, Endpoints, Shape
from controlplane.operators.running import LocalOperator, OperatorError, kuberay, training_operator

__all__ = [
    "KUBERAY",
    "SHAPES",
    "TRAINING_OPERATOR",
    "Endpoints",
    "LocalOperator",
    "OperatorError",
    "Shape",
    "kuberay",
    "training_operator",
]
