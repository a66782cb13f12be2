"""One dispatch test's world on the shared cluster: its Queues, Teams, namespaces and pods.

Queues and Teams are cluster-scoped, so every name a scene makes ends in the scene's id, and
every object and pod carries the auditor's run label with that id: a recorder selects exactly
the scene's pods with ``scene.selector``. Pods are created through the real kubectl, as users
create them; the webhook adds the gate. ``cleanup`` deletes what the scene made (the Policy
too, if it set one: the cluster goes back to no global limits).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from audit.loading import IMAGE, KWOK_DELAY_ANNOTATION
from audit.naming import RUN_LABEL
from audit.recording import Recorder
from audit.records import TERMINAL, Event, Kind, PodInfo, Record
from controlplane.launching import LocalCluster
from controlplane.nodes import gpu_node
from policy import keys
from process import kubeyaml
from tests.e2e.conftest import eventually

POOL_LABEL = "e2e.sluicegate.dev/pool"
"""The label of the nodes a scene owns (its id): a queue's node pool names them alone."""

Obj = dict[str, Any]
API = keys.API_VERSION
HELD_SECONDS = 3600.0
"""A pod created with ``seconds=HELD_SECONDS`` runs until the test ends it with ``Scene.finish``:
the test, not the machine's speed, decides when its slot frees."""


class Scene:
    def __init__(self, cluster: LocalCluster, api_version: str = API) -> None:
        self.cluster = cluster
        self.api_version = api_version
        """The apiVersion the scene's Queues, Teams and Policy are created as."""
        # A letter first: an id of digits and one "e" would read as a number in YAML.
        self.id = f"s{uuid.uuid4().hex[:7]}"
        self._cluster_objects: list[tuple[str, str]] = []
        self._namespaces: list[str] = []

    @property
    def selector(self) -> str:
        return f"{RUN_LABEL}={self.id}"

    def name(self, base: str) -> str:
        return f"{base}-{self.id}"

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        return self.cluster.kubectl(*args, input=input, check=check).stdout

    def create(self, *objects: Obj) -> None:
        self.kubectl("create", "-f", "-", input=kubeyaml.dump_all(objects))

    # --- the admin's objects --------------------------------------------------------------

    def _admin(self, kind: str, plural: str, name: str, spec: Mapping[str, Any]) -> str:
        self.create({"apiVersion": self.api_version, "kind": kind,
                     "metadata": {"name": name, "labels": {RUN_LABEL: self.id}}, "spec": dict(spec)})
        self._cluster_objects.append((plural, name))
        return name

    def queue(self, base: str, **spec: Any) -> str:
        return self._admin("Queue", "queues", self.name(base), spec)

    def team(self, base: str, **spec: Any) -> str:
        return self._admin("Team", "teams", self.name(base), spec)

    def preset(self, base: str, **spec: Any) -> str:
        return self._admin("Preset", "presets", self.name(base), spec)

    def policy(self, **spec: Any) -> None:
        """The cluster's Policy (a singleton): removed again by ``cleanup``."""
        self._admin("Policy", "policies", keys.POLICY_NAME, spec)

    def patch(self, plural: str, name: str, spec: Mapping[str, Any]) -> None:
        self.kubectl("patch", plural, name, "--type=merge", "-p", json.dumps({"spec": dict(spec)}))

    def namespace(self, team: str, base: str = "ns") -> str:
        """A project of ``team``, opted in by its label, ready for pods."""
        name = self.name(base)
        self.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": name, "labels": {RUN_LABEL: self.id, keys.TEAM_LABEL: team}}})
        self._namespaces.append(name)
        eventually(lambda: self.cluster.kubectl("get", "serviceaccount", "default", "-n", name,
                                                check=False).returncode == 0,
                   f"the default service account of namespace {name}")
        return name

    # --- pods -----------------------------------------------------------------------------

    def pod(self, namespace: str, name: str, queue: str, *, gpus: int = 1, seconds: float = 2.0,
            labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
            node_selector: Mapping[str, str] | None = None) -> Obj:
        """A GPU pod that kwok runs for ``seconds`` once it is bound."""
        resources = {"limits": {keys.GPU_RESOURCE: str(gpus)}} if gpus else {}
        spec: Obj = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": IMAGE, "resources": resources}]}
        if node_selector:
            spec["nodeSelector"] = dict(node_selector)
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "namespace": namespace,
                "labels": {RUN_LABEL: self.id, keys.QUEUE_LABEL: queue, **(labels or {})},
                "annotations": {KWOK_DELAY_ANNOTATION: f"{seconds:g}s", **(annotations or {})},
            },
            "spec": spec,
        }

    def pods(self, namespace: str, queue: str, count: int, *, prefix: str = "p", start: int = 0,
             **kw: Any) -> list[str]:
        """Create ``count`` pods in one request of kubectl; their names."""
        names = [f"{prefix}{i:02d}" for i in range(start, start + count)]
        self.create(*(self.pod(namespace, n, queue, **kw) for n in names))
        return names

    def finish(self, namespace: str, *pods: str) -> None:
        """End these pods now: kwok plans a pod's completion again when its delay annotation
        changes, so a running pod succeeds at once (one not running yet, as soon as it runs)."""
        self.kubectl("annotate", "pod", "-n", namespace, *pods, f"{KWOK_DELAY_ANNOTATION}=0s", "--overwrite")

    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        where = ("-n", namespace) if namespace else ()
        data: Obj = json.loads(self.kubectl("get", kind, name, *where, "-o", "json"))
        return data

    def condition(self, namespace: str, pod: str) -> Obj | None:
        """The pod's sluicegate.dev/Dispatched condition, if it has one."""
        for c in self.get("pod", pod, namespace).get("status", {}).get("conditions", []):
            if c.get("type") == keys.CONDITION:
                found: Obj = c
                return found
        return None

    def wait_reason(self, namespace: str, pods: Iterable[str], reason: str) -> None:
        """Until each pod's condition carries ``reason`` (the controller has seen it waiting)."""
        for pod in pods:
            self.wait_condition(namespace, pod, lambda c: c.get("reason") == reason, f"reason {reason}")

    def wait_condition(self, namespace: str, pod: str, holds: Callable[[Obj], bool], what: str) -> Obj:
        """The pod's Dispatched condition, once ``holds`` is true of it."""

        def probe() -> Obj | None:
            found = self.condition(namespace, pod)
            return found if found is not None and holds(found) else None

        return eventually(probe, f"the Dispatched condition of {namespace}/{pod}: {what}")

    def queue_status(self, name: str) -> Obj:
        status: Obj = self.get("queue", name).get("status") or {}
        return status

    # --- cleaning up ----------------------------------------------------------------------

    # --- nodes ----------------------------------------------------------------------------

    def node(self, base: str, gpus: int, *, cordoned: bool = False) -> str:
        """A kwok node of ``gpus`` GPUs that this scene owns (deleted at cleanup), in the scene's
        own pool: labelled ``POOL_LABEL=<scene id>``, which no other node carries."""
        node = gpu_node(0, gpus, {POOL_LABEL: self.id})
        name = node["metadata"]["name"] = self.name(base)
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        if cordoned:
            node["spec"]["unschedulable"] = True
        self.kubectl("create", "-f", "-", input=json.dumps(node))
        self._cluster_objects.append(("node", name))
        return name

    def pool(self) -> dict[str, Any]:
        """The node pool of the scene's own nodes, for a queue's ``nodePool``."""
        return {"matchLabels": {POOL_LABEL: self.id}}

    def cleanup(self) -> None:
        for name in self._namespaces:
            self.kubectl("delete", "namespace", name, "--wait=false", check=False)
        for plural, name in reversed(self._cluster_objects):
            self.kubectl("delete", plural, name, "--wait=false", "--ignore-not-found", check=False)


# --- reading the record ---------------------------------------------------------------------


def wait_finished(recorder: Recorder, keep: Callable[[PodInfo], bool], count: int, seconds: float) -> Record:
    """The record, once ``count`` of the pods ``keep`` accepts have finished (for a recorder
    that watches more pods than the test's own)."""

    def probe() -> Record | None:
        record = recorder.snapshot().select(keep)
        done = {e.uid for e in record.events if e.kind in TERMINAL}
        return record if len(done) >= count else None

    return eventually(probe, f"{count} pods to finish", seconds)


def only(record: Record, namespace: str, name: str) -> PodInfo:
    (pod,) = record.find(namespace, name)
    return pod


def first(record: Record, pod: PodInfo, kind: Kind) -> Event:
    """The pod's first event of ``kind``; fails the test when it never happened."""
    for event in record.history(pod.uid):
        if event.kind is kind:
            return event
    seen = [e.kind.value for e in record.history(pod.uid)]
    raise AssertionError(f"{pod.key} was never {kind.value}: {seen}")


def releases(record: Record, after: float = 0.0) -> list[tuple[float, PodInfo]]:
    """Every release (UNGATED event) after the monotonic instant ``after``, in order."""
    return [(e.at, record.pods[e.uid]) for e in record.events if e.kind is Kind.UNGATED and e.at > after]


def now() -> float:
    """The recorder's clock (monotonic), for marking instants between kubectl calls."""
    return time.monotonic()
