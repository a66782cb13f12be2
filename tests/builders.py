"""Fluent builders for test objects: ``MakePod("ns", "p").queue("a").gpus(2).gated().obj()``.

Every builder starts from a minimal valid object and each call changes one thing. ``obj()``
gives the Kubernetes object as plain JSON data (what the API server sends); ``model()`` gives
the parsed frozen dataclass that policy code decides over, so the parsers are exercised too.
Workloads are made from pods (``workloads(...)``) the way the controller makes them.

``MakePod`` builds a pod as the API server stores it; ``MakePod.submitted()`` builds one as a
user submits it, before it is stored: what admission reviews. ``create`` and ``update`` wrap an
object in the admission request that carries it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Self

from policy import keys, marks
from policy.devices import Devices
from policy.inventory import Inventory
from policy.model import Namespace, Policy, Queue, Snapshot, Team, Workload
from policy.placing import Node
from policy.pods import Pod, Submitter, format_admitted_at
from policy.reviews import JOB, POD, Kind, Operation, Request
from policy.workloads import build_workloads

Obj = dict[str, Any]

T0 = 1_700_000_000.0
"""A fixed epoch for creation times: builders count seconds from it."""

NOW = datetime(2026, 11, 30, 10, 4, 30, 123456, tzinfo=UTC)
"""The clock of every admission test: requests are reviewed at this instant."""
STAMP = marks.admitted_at(NOW)
"""The admission stamp a pod admitted at ``NOW`` carries: ``2026-11-30T10:04:30.123456Z``."""


def timestamp(seconds: float) -> str:
    """RFC 3339, as the API server writes ``creationTimestamp``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Builder:
    def __init__(self, obj: Obj) -> None:
        self._obj = obj

    def obj(self) -> Obj:
        return copy.deepcopy(self._obj)

    @property
    def _meta(self) -> Obj:
        meta: Obj = self._obj.setdefault("metadata", {})
        return meta

    @property
    def _spec(self) -> Obj:
        spec: Obj = self._obj.setdefault("spec", {})
        return spec

    def set_spec(self, **fields: Any) -> Self:
        """Any spec field as is, valid or not: for the refusals."""
        self._spec.update(fields)
        return self

    def label(self, key: str, value: str) -> Self:
        self._meta.setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._meta.setdefault("annotations", {})[key] = value
        return self


class MakePod(_Builder):
    """A pod with one container ``main`` and no requests, created at ``T0``, ungated."""

    @classmethod
    def submitted(cls, *, namespace: str = "vision-ml", name: str = "train-0") -> MakePod:
        """A pod as a user submits it: no uid, creation time or status yet, one container
        ``main`` running ``trainer:1``."""
        pod = cls(namespace, name)
        pod._obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "trainer:1"}]},
        }
        return pod

    def __init__(self, namespace: str, name: str) -> None:
        super().__init__(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "namespace": namespace,
                    "name": name,
                    "uid": f"uid-{namespace}-{name}",
                    "creationTimestamp": timestamp(T0),
                },
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
                "status": {"phase": "Pending"},
            }
        )

    def model(self) -> Pod:
        return Pod.parse(self.obj())

    def workload(self) -> Workload:
        return workloads(self)[0]

    # --- what users set ----------------------------------------------------------------------

    def queue(self, name: str) -> Self:
        return self.label(keys.QUEUE_LABEL, name)

    def team(self, name: str) -> Self:
        return self.label(keys.TEAM_LABEL, name)

    def workflow(self, name: str, max_running: int | None = None) -> Self:
        self.label(keys.WORKFLOW_LABEL, name)
        if max_running is not None:
            self.annotation(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, str(max_running))
        return self

    def group(self, name: str, size: int | None = None) -> Self:
        """A member of pod group ``name`` of ``size`` pods (no size: the annotation is missing)."""
        self.label(keys.GROUP_LABEL, name)
        if size is not None:
            self.annotation(keys.GROUP_SIZE_ANNOTATION, str(size))
        return self

    def presets(self, *names: str) -> Self:
        return self.annotation(keys.PRESETS_ANNOTATION, ",".join(names))

    def priority(self, value: int, class_name: str = "") -> Self:
        self._spec["priority"] = value
        if class_name:
            self._spec["priorityClassName"] = class_name
        return self

    def created(self, seconds_after_t0: float) -> Self:
        self._meta["creationTimestamp"] = timestamp(T0 + seconds_after_t0)
        return self

    def admitted(self, seconds_after_t0: float) -> Self:
        """The admission stamp, to the microsecond (``created`` keeps whole seconds)."""
        return self.annotation(keys.ADMITTED_AT_ANNOTATION, format_admitted_at(T0 + seconds_after_t0))

    def dispatched(self, seconds_after_t0: float) -> Self:
        """Released by the controller then: its ``sluicegate.dev/dispatched-at`` stamp, ungated."""
        stamp = format_admitted_at(T0 + seconds_after_t0)  # the same RFC 3339 form, to the microsecond
        return self.ungated().phase("Running").annotation(keys.DISPATCHED_AT_ANNOTATION, stamp)

    def stamped(self, value: str = STAMP) -> Self:
        """The admission stamp, as admission at ``NOW`` writes it unless ``value`` is given."""
        return self.annotation(keys.ADMITTED_AT_ANNOTATION, value)

    def sealed(self) -> Self:
        """Admission's seal of the pod's Sluicegate keys and gates as they are now
        (``policy.marks.seal``): call it last, as admission writes it last."""
        notes = self._meta.get("annotations") or {}
        gates = [g["name"] for g in self._spec.get("schedulingGates") or ()]
        return self.annotation(keys.SEAL_ANNOTATION, marks.seal(self._meta.get("labels") or {}, notes, gates))

    def submitter(self, user: str, *groups: str) -> Self:
        return self.annotation(keys.SUBMITTER_ANNOTATION, Submitter(user, frozenset(groups)).to_annotation())

    def owned_by(self, kind: Kind, name: str = "train", *, controller: bool = True) -> Self:
        self._meta.setdefault("ownerReferences", []).append(
            {"apiVersion": kind.api_version, "kind": kind.kind, "name": name, "uid": f"uid-{name}",
             "controller": controller}
        )
        return self

    def devices(self, own: Mapping[str, int] | None = None, **shared: Mapping[str, int]) -> Self:
        """What admission found its DRA claims count as: ``own`` (claims from templates) and
        each shared ResourceClaim by name (the annotation ``sluicegate.dev/devices``)."""
        counted = Devices(
            MappingProxyType({k: v * 1000 for k, v in (own or {}).items()}),
            MappingProxyType({name: MappingProxyType({k: v * 1000 for k, v in amounts.items()})
                              for name, amounts in shared.items()}),
        )
        return self.annotation(keys.DEVICES_ANNOTATION, counted.to_annotation())

    def claim(self, name: str, *, template: str = "", claim: str = "") -> Self:
        """An entry of ``spec.resourceClaims``: a ResourceClaimTemplate's or a ResourceClaim's."""
        entry = {"name": name, "resourceClaimTemplateName": template} if template else {
            "name": name, "resourceClaimName": claim}
        self._spec.setdefault("resourceClaims", []).append(entry)
        return self

    def claim_made(self, name: str, claim: str) -> Self:
        """The ResourceClaim Kubernetes made for the pod's claim ``name`` from its template
        (``status.resourceClaimStatuses``)."""
        self._obj.setdefault("status", {}).setdefault("resourceClaimStatuses", []).append(
            {"name": name, "resourceClaimName": claim})
        return self

    def mirror(self, node: str = "gpu-node-1") -> Self:
        """A mirror pod's marks: the kubelet's annotation and the node it runs on."""
        return self.annotation(keys.MIRROR_POD_ANNOTATION, "hash-of-the-static-pod").node(node)

    def no_labels(self) -> Self:
        self._meta.pop("labels", None)
        return self

    # --- resources -----------------------------------------------------------------------------

    def _main(self) -> Obj:
        main: Obj = self._spec["containers"][0]
        return main

    def requests(self, **amounts: str | int) -> Self:
        """Requests of the main container; underscores stand for dots and slashes are spelled
        out by ``request``. ``requests(cpu="500m", memory="1Gi")``."""
        for name, amount in amounts.items():
            self.request(name, amount)
        return self

    def request(self, resource: str, amount: str | int) -> Self:
        self._main().setdefault("resources", {}).setdefault("requests", {})[resource] = str(amount)
        return self

    def limit(self, resource: str, amount: str | int) -> Self:
        self._main().setdefault("resources", {}).setdefault("limits", {})[resource] = str(amount)
        return self

    def gpus(self, count: int, resource: str = keys.GPU_RESOURCE) -> Self:
        """GPUs as extended resources are asked for: a limit (the request defaults to it)."""
        return self.limit(resource, count)

    def main(self, field: str, value: Any, index: int = 0) -> Self:
        """One field of the container at ``index`` (the main container unless it says)."""
        self._spec["containers"][index][field] = copy.deepcopy(value)
        return self

    def env(self, name: str, value: str) -> Self:
        self._main().setdefault("env", []).append({"name": name, "value": value})
        return self

    def container(self, name: str, **fields: Any) -> Self:
        self._spec["containers"].append({"name": name, "image": "busybox", **fields})
        return self

    def init_container(self, name: str, **fields: Any) -> Self:
        self._spec.setdefault("initContainers", []).append({"name": name, "image": "busybox", **fields})
        return self

    def pod_resources(
        self, requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None
    ) -> Self:
        """Pod-level ``spec.resources`` (Kubernetes 1.34+)."""
        resources: Obj = self._spec.setdefault("resources", {})
        if requests is not None:
            resources["requests"] = dict(requests)
        if limits is not None:
            resources["limits"] = dict(limits)
        return self

    def spec(self, **fields: Any) -> Self:
        self._spec.update(copy.deepcopy(fields))
        return self

    def template(self) -> Obj:
        """The pod as a pod template (a Job's): its metadata and spec, without name or namespace."""
        obj = self.obj()
        meta = obj["metadata"]
        meta.pop("name", None)
        meta.pop("namespace", None)
        if not meta:
            obj.pop("metadata")
        return {k: obj[k] for k in ("metadata", "spec") if k in obj}

    # --- life ----------------------------------------------------------------------------------

    def gated(self) -> Self:
        """Sluicegate's gate added to the pod's scheduling gates."""
        gates: list[Obj] = self._spec.setdefault("schedulingGates", [])
        if {"name": keys.GATE} not in gates:
            gates.append({"name": keys.GATE})
        return self

    def ungated(self) -> Self:
        self._spec.pop("schedulingGates", None)
        return self

    def phase(self, phase: str) -> Self:
        self._obj.setdefault("status", {})["phase"] = phase
        return self

    def running(self, node: str = "") -> Self:
        """Released (no gate) and running; on ``node`` when one is given."""
        self.ungated().phase("Running")
        if node:
            self._spec["nodeName"] = node
        return self

    def finished(self, phase: str = "Succeeded") -> Self:
        return self.ungated().phase(phase)

    def node(self, name: str) -> Self:
        self._spec["nodeName"] = name
        return self

    def deleted(self, finalizer: str = "example.com/keep") -> Self:
        """Deleted, and kept by ``finalizer`` for now: it has a deletionTimestamp."""
        meta = self._obj["metadata"]
        meta["deletionTimestamp"] = timestamp(T0 + 60)
        meta["finalizers"] = [finalizer]
        return self

    def held(self, reason: str, message: str) -> Self:
        """Carrying ``sluicegate.dev/Dispatched=False`` with ``reason`` and ``message``, as the
        gate controller writes it."""
        self._obj["status"].setdefault("conditions", []).append(
            {"type": keys.CONDITION, "status": "False", "reason": reason, "message": message}
        )
        return self

    def scheduler(self, name: str) -> Self:
        self._obj["spec"]["schedulerName"] = name
        return self

    def scheduling_gated(self) -> Self:
        """The PodScheduled condition the API server writes at the create of a gated pod."""
        self._obj["status"].setdefault("conditions", []).append(
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
             "message": "Scheduling is blocked due to non-empty scheduling gates"}
        )
        return self

    def unschedulable(self, message: str) -> Self:
        self._obj["status"].setdefault("conditions", []).append(
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        )
        return self


class _Limited(_Builder):
    """One of Sluicegate's own objects, with no spec yet. A Queue, a Team and the Policy each
    limit what runs in them the same way: ``spec.maxRunning`` and ``spec.quota``."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(
            {"apiVersion": keys.API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": {}}
        )

    def max_running(self, value: int) -> Self:
        self._spec["maxRunning"] = value
        return self

    def quota(self, amounts: Mapping[str, str | int] | None = None, **named: str | int) -> Self:
        """``quota(gpus=16)`` for nvidia.com/gpu, or ``quota({"cpu": "64"})``."""
        self._spec["quota"] = _quota(amounts, named)
        return self


class MakeQueue(_Limited):
    """A Queue of priority 0, unlimited, BestEffortFIFO, open to everyone."""

    def __init__(self, name: str) -> None:
        super().__init__("Queue", name)

    def model(self) -> Queue:
        return Queue.parse(self.obj())

    def priority(self, value: int) -> Self:
        self._spec["priority"] = value
        return self

    def strict(self) -> Self:
        self._spec["ordering"] = "StrictFIFO"
        return self

    def paused(self, value: bool = True) -> Self:
        self._spec["paused"] = value
        return self

    def access(
        self, teams: Iterable[str] = (), users: Iterable[str] = (), groups: Iterable[str] = ()
    ) -> Self:
        """Open to these teams, users and groups; ``access()`` names none (open to everyone)."""
        self._spec["access"] = _named(teams=teams, users=users, groups=groups)
        return self

    def node_pool(self, match_labels: Mapping[str, str] | None = None, **selector: Any) -> Self:
        pool: Obj = {"matchLabels": dict(match_labels or {})}
        pool.update(selector)
        self._spec["nodePool"] = pool
        return self


class MakeTeam(_Limited):
    def __init__(self, name: str) -> None:
        super().__init__("Team", name)

    def model(self) -> Team:
        return Team.parse(self.obj())

    def members(self, users: Iterable[str] = (), groups: Iterable[str] = ()) -> Self:
        """``members()`` names none: everyone who may create pods in the team's namespaces."""
        self._spec["members"] = _named(users=users, groups=groups)
        return self


class MakePolicy(_Limited):
    def __init__(self) -> None:
        super().__init__("Policy", keys.POLICY_NAME)

    def model(self) -> Policy:
        return Policy.parse(self.obj())

    def starvation_seconds(self, value: int) -> Self:
        self._spec["starvationSeconds"] = value
        return self

    def set(self, **fields: Any) -> Self:
        return self.set_spec(**fields)


class MakeNamespace(_Builder):
    """A namespace no team has opted in; admission's view of it is ``model()``."""

    def __init__(self, name: str) -> None:
        super().__init__({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def model(self) -> Namespace:
        return Namespace.parse(self.obj())

    def team(self, name: str) -> Self:
        return self.label(keys.TEAM_LABEL, name)

    def default_queue(self, name: str) -> Self:
        return self.annotation(keys.DEFAULT_QUEUE_ANNOTATION, name)

    def allowed_queues(self, names: Iterable[str]) -> Self:
        return self.annotation(keys.ALLOWED_QUEUES_ANNOTATION, ",".join(names))

    def default_presets(self, names: Iterable[str]) -> Self:
        return self.annotation(keys.DEFAULT_PRESETS_ANNOTATION, ",".join(names))

    def allowed_presets(self, names: Iterable[str]) -> Self:
        return self.annotation(keys.ALLOWED_PRESETS_ANNOTATION, ",".join(names))


class MakeNode(_Builder):
    """A ready node with 32 CPUs, 256Gi memory and no GPUs."""

    def __init__(self, name: str) -> None:
        super().__init__(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
            }
        )

    def gpus(self, count: int, resource: str = keys.GPU_RESOURCE) -> Self:
        self._obj["status"]["allocatable"][resource] = str(count)
        return self

    def allocatable(self, resource: str, amount: str | int) -> Self:
        self._obj["status"]["allocatable"][resource] = str(amount)
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        self._obj.setdefault("spec", {}).setdefault("taints", []).append(
            {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}
        )
        return self

    def cordoned(self) -> Self:
        """``kubectl cordon``: unschedulable, with the taint Kubernetes adds for it."""
        self._obj.setdefault("spec", {})["unschedulable"] = True
        return self.taint("node.kubernetes.io/unschedulable")

    def model(self) -> Node:
        return Node.parse(self._obj)


class MakeJob(_Builder):
    """A Job of the pod ``template`` (``MakePod.submitted()...template()``), backoffLimit 2."""

    def __init__(self, template: Obj, *, namespace: str = "vision-ml", name: str = "train") -> None:
        super().__init__(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"backoffLimit": 2, "template": copy.deepcopy(template)},
            }
        )


def _api_version(kind: str) -> str:
    return "v1" if kind == "ReplicationController" else "apps/v1"


class MakeDeployment(_Builder):
    """An apps/v1 Deployment of ``replicas`` pods of ``template``; with ``kind`` a StatefulSet, a
    ReplicaSet, a DaemonSet or a (v1) ReplicationController of the same shape."""

    def __init__(
        self,
        template: Obj,
        *,
        namespace: str = "vision-ml",
        name: str = "notebook",
        replicas: int = 2,
        kind: str = "Deployment",
    ) -> None:
        labels = {"app": name}
        shaped = copy.deepcopy(template)
        shaped.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
        super().__init__(
            {
                "apiVersion": _api_version(kind),
                "kind": kind,
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": shaped},
            }
        )

    def owned_by(self, kind: Kind, name: str, uid: str = "") -> Self:
        """A controller ownerReference, as the deployment controller writes on a ReplicaSet."""
        self._meta["ownerReferences"] = [
            {"apiVersion": kind.api_version, "kind": kind.kind, "name": name, "uid": uid or f"uid-{name}",
             "controller": True}
        ]
        return self

    def replica(self, pod_name: str) -> Obj:
        """A pod its controller creates from its template: named, owned by it."""
        obj = self.obj()
        pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(obj["spec"]["template"])}
        pod["metadata"] = {
            **pod.get("metadata", {}),
            "name": pod_name,
            "namespace": obj["metadata"]["namespace"],
            "ownerReferences": [
                {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
                 "uid": f"uid-{obj['metadata']['name']}", "controller": True}
            ],
        }
        return pod


class MakePyTorchJob(_Builder):
    """A Kubeflow PyTorchJob as a user writes it: a ``Master`` of one replica and ``workers``
    ``Worker`` replicas, each of the pod ``template`` (``MakePod.submitted()...template()``) with
    its container named ``pytorch``, as the training operator requires."""

    def __init__(
        self, template: Obj, *, workers: int = 3, namespace: str = "vision-ml", name: str = "mnist"
    ) -> None:
        def replica(count: int) -> Obj:
            shaped = copy.deepcopy(template)
            for container in shaped.get("spec", {}).get("containers", [])[:1]:
                container["name"] = "pytorch"
                container["image"] = "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727"
            return {"replicas": count, "restartPolicy": "OnFailure", "template": shaped}

        super().__init__(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
            }
        )

    def replica(self, replica_type: str, index: int) -> Obj:
        """The pod the training operator creates for replica ``index`` of ``replica_type``
        (``Master``, ``Worker``): the template with its labels added, named
        ``<job>-<type>-<index>``, owned by the job (controller)."""
        obj = self.obj()
        name, kind = obj["metadata"]["name"], replica_type.lower()
        pod = {"apiVersion": "v1", "kind": "Pod",
               **copy.deepcopy(obj["spec"]["pytorchReplicaSpecs"][replica_type]["template"])}
        labels = {
            **pod.get("metadata", {}).get("labels", {}),
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": name,
            "training.kubeflow.org/replica-type": kind,
            "training.kubeflow.org/replica-index": str(index),
        }
        if replica_type == "Master":
            labels["training.kubeflow.org/job-role"] = "master"
        pod["metadata"] = {
            **pod.get("metadata", {}),
            "name": f"{name}-{kind}-{index}",
            "namespace": obj["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [
                {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name, "uid": f"uid-{name}",
                 "controller": True, "blockOwnerDeletion": True}
            ],
        }
        return pod


class MakeRayCluster(_Builder):
    """A KubeRay RayCluster as a user writes it: a head of the pod ``head`` template and one
    worker group ``gpu`` of ``workers`` replicas of ``worker`` (containers named
    ``ray-head`` and ``ray-worker``). With ``kind="RayJob"``, a RayJob whose
    ``spec.rayClusterSpec`` is that cluster's spec."""

    def __init__(
        self,
        head: Obj,
        worker: Obj,
        *,
        workers: int = 2,
        namespace: str = "vision-ml",
        name: str = "raycluster-gpu",
        kind: str = "RayCluster",
    ) -> None:
        def shaped(template: Obj, container: str) -> Obj:
            out = copy.deepcopy(template)
            for c in out.get("spec", {}).get("containers", [])[:1]:
                c["name"] = container
                c["image"] = "rayproject/ray:2.46.0"
            return out

        spec: Obj = {
            "rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {}, "template": shaped(head, "ray-head")},
            "workerGroupSpecs": [
                {"groupName": "gpu", "replicas": workers, "minReplicas": 0, "maxReplicas": 8,
                 "numOfHosts": 1, "rayStartParams": {}, "template": shaped(worker, "ray-worker")}
            ],
        }
        if kind == "RayJob":
            spec = {"entrypoint": "python /home/ray/samples/sample_code.py", "submissionMode": "K8sJobMode",
                    "shutdownAfterJobFinishes": True, "rayClusterSpec": spec}
        super().__init__(
            {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
             "spec": spec}
        )

    def owned_by(self, kind: Kind, name: str) -> Self:
        """A controller ownerReference, as KubeRay writes on the RayCluster of a RayJob."""
        self._meta["ownerReferences"] = [
            {"apiVersion": kind.api_version, "kind": kind.kind, "name": name, "uid": f"uid-{name}",
             "controller": True, "blockOwnerDeletion": True}
        ]
        return self

    def cluster(self, name: str) -> MakeRayCluster:
        """The RayCluster KubeRay creates for this RayJob: its rayClusterSpec as the spec, named
        ``name``, owned by the RayJob."""
        obj = self.obj()
        out = MakeRayCluster({}, {}, namespace=obj["metadata"]["namespace"], name=name)
        out._obj["spec"] = copy.deepcopy(obj["spec"]["rayClusterSpec"])
        return out.owned_by(Kind("ray.io", "v1", "RayJob"), obj["metadata"]["name"])

    def replica(self, node_type: str, suffix: str) -> Obj:
        """The pod KubeRay creates: the head (``node_type`` ``head``) or a worker of group
        ``gpu``, with its labels, owned by the cluster (controller)."""
        obj = self.obj()
        name = obj["metadata"]["name"]
        spec = obj["spec"]
        source = spec["headGroupSpec"] if node_type == "head" else spec["workerGroupSpecs"][0]
        pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(source["template"])}
        group = "headgroup" if node_type == "head" else "gpu"
        labels = {
            **pod.get("metadata", {}).get("labels", {}),
            "ray.io/cluster": name,
            "ray.io/node-type": node_type,
            "ray.io/group": group,
            "ray.io/is-ray-node": "yes",
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
        }
        pod_name = f"{name}-head" if node_type == "head" else f"{name}-gpu-worker-{suffix}"
        pod["metadata"] = {
            **pod.get("metadata", {}),
            "name": pod_name,
            "namespace": obj["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [
                {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": name, "uid": f"uid-{name}",
                 "controller": True, "blockOwnerDeletion": True}
            ],
        }
        return pod


class MakePreset(_Builder):
    """A Preset that sets nothing, with the replace strategy. Its ``pod_label`` and
    ``pod_annotation`` are what it writes on pods; ``label`` and ``annotation`` are its own."""

    def __init__(self, name: str) -> None:
        super().__init__(
            {"apiVersion": keys.API_VERSION, "kind": "Preset", "metadata": {"name": name}, "spec": {}}
        )

    def strategy(self, name: str) -> Self:
        self._spec["patchStrategy"] = name
        return self

    def queue(self, name: str) -> Self:
        self._spec["queue"] = name
        return self

    def workflow_max_running(self, limit: Any) -> Self:
        self._spec["workflowMaxRunning"] = limit
        return self

    def pod_label(self, key: str, value: str) -> Self:
        self._spec.setdefault("metadata", {}).setdefault("labels", {})[key] = value
        return self

    def pod_annotation(self, key: str, value: str) -> Self:
        self._spec.setdefault("metadata", {}).setdefault("annotations", {})[key] = value
        return self

    def pod(self, field: str, value: Any) -> Self:
        self._spec.setdefault("pod", {})[field] = copy.deepcopy(value)
        return self

    def container(self, field: str, value: Any) -> Self:
        self._spec.setdefault("container", {})[field] = copy.deepcopy(value)
        return self

    def requests(self, **amounts: Any) -> Self:
        """``requests(gpu=1)`` for nvidia.com/gpu; other names as they are."""
        resources = self._spec.setdefault("container", {}).setdefault("resources", {})
        resources.setdefault("requests", {}).update(_resource_names(amounts))
        return self

    def limits(self, **amounts: Any) -> Self:
        resources = self._spec.setdefault("container", {}).setdefault("resources", {})
        resources.setdefault("limits", {}).update(_resource_names(amounts))
        return self

    def gpus(self, count: int) -> Self:
        return self.requests(gpu=str(count)).limits(gpu=str(count))


def _resource_names(amounts: Mapping[str, Any]) -> dict[str, Any]:
    return {keys.GPU_RESOURCE if k == "gpu" else k: v for k, v in amounts.items()}


def _named(**kinds: Iterable[str]) -> dict[str, list[str]]:
    """Who a queue or team names, by kind; a kind it names no one of is left out."""
    named = {kind: list(names) for kind, names in kinds.items()}
    return {kind: names for kind, names in named.items() if names}


_SHORT_NAMES = {"gpus": keys.GPU_RESOURCE}


def _quota(amounts: Mapping[str, str | int] | None, named: Mapping[str, str | int]) -> dict[str, str]:
    out = {str(k): str(v) for k, v in (amounts or {}).items()}
    out.update({_SHORT_NAMES.get(k, k): str(v) for k, v in named.items()})
    return out


# --- collections -------------------------------------------------------------------------------


def workloads(*pods: MakePod | Pod) -> list[Workload]:
    """The workloads of ``pods`` as the controller builds them, in the order of their first pod."""
    parsed = [p.model() if isinstance(p, MakePod) else p for p in pods]
    built = build_workloads(parsed)
    first: dict[str, int] = {}
    for i, pod in enumerate(parsed):
        first.setdefault(pod.key, i)
    return sorted(built, key=lambda w: min(first[p.key] for p in w.pods))


def snapshot(
    pods: Iterable[MakePod | Pod] = (),
    queues: Iterable[MakeQueue | Queue] = (),
    teams: Iterable[MakeTeam | Team] = (),
    policy: MakePolicy | Policy | None = None,
    now: float = T0,
    extra: Iterable[Workload] = (),
    nodes: Iterable[MakeNode | Node] | None = None,
    refusals: Mapping[str, str] | None = None,
) -> Snapshot:
    """A snapshot of ``pods`` (made into workloads) plus ``extra`` workloads at time ``now``;
    ``nodes`` None leaves the nodes unknown (every pod fits); ``refusals``: pod uid -> why the
    API server refused to release it."""
    qs = [q.model() if isinstance(q, MakeQueue) else q for q in queues]
    ts = [t.model() if isinstance(t, MakeTeam) else t for t in teams]
    pol = policy.model() if isinstance(policy, MakePolicy) else (policy or Policy())
    return Snapshot(
        queues={q.name: q for q in qs},
        teams={t.name: t for t in ts},
        policy=pol,
        workloads=[*workloads(*pods), *extra],
        now=now,
        nodes=None if nodes is None else Inventory(n.model() if isinstance(n, MakeNode) else n
                                                   for n in nodes),
        refusals=dict(refusals or {}),
    )


# --- admission requests ------------------------------------------------------------------------


def create(obj: Obj, user: str = "alice", *groups: str, kind: Kind = POD) -> Request:
    """``user`` (in ``groups``) creates ``obj``: the request admission reviews."""
    return Request(Operation.CREATE, kind, user, frozenset(groups), obj)


def create_job(job: Obj, user: str = "alice", *groups: str) -> Request:
    return create(job, user, *groups, kind=JOB)


def update(old: Obj, new: Obj, user: str = "alice", *groups: str, kind: Kind = POD) -> Request:
    return Request(Operation.UPDATE, kind, user, frozenset(groups), new, old)
