"""Fluent builders for admission tests: pods, Jobs, presets, queues, teams and requests.

``make_pod().queue("vision-train").gpus(2).obj()`` reads like the pod it builds; every builder
returns plain dicts shaped like what the API server sends, except ``make_namespace`` which
returns the parsed ``Namespace`` admission takes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Self

from policy import keys, marks, patching
from policy.admitting import review
from policy.catalog import Catalog
from policy.model import Namespace
from policy.pods import Submitter
from policy.priorities import PriorityClasses
from policy.reviews import JOB, POD, Admit, Decision, Kind, Operation, Request

JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
SLUICEGATE = "system:serviceaccount:sluicegate-system:sluicegate"
ARGO = "system:serviceaccount:argo:argo-workflow-controller"
NODE = "system:node:gpu-node-1"
NODES = "system:nodes"

NOW = datetime(2026, 11, 30, 10, 4, 30, 123456, tzinfo=UTC)
"""The clock of every admission test: requests are reviewed at this instant."""
STAMP = marks.admitted_at(NOW)
"""The admission stamp a pod admitted at ``NOW`` carries: ``2026-11-30T10:04:30.123456Z``."""


class PodBuilder:
    def __init__(self, name: str = "train-0", namespace: str = "vision-ml") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "trainer:1"}]},
        }

    # metadata
    def label(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def queue(self, name: str) -> Self:
        return self.label(keys.QUEUE_LABEL, name)

    def presets(self, *names: str) -> Self:
        return self.annotation(keys.PRESETS_ANNOTATION, ",".join(names))

    def workflow(self, name: str, max_running: int | None = None) -> Self:
        self.label(keys.WORKFLOW_LABEL, name)
        if max_running is not None:
            self.annotation(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, str(max_running))
        return self

    def group(self, name: str, size: int | None = None) -> Self:
        self.label(keys.GROUP_LABEL, name)
        if size is not None:
            self.annotation(keys.GROUP_SIZE_ANNOTATION, str(size))
        return self

    def submitter(self, user: str, *groups: str) -> Self:
        return self.annotation(keys.SUBMITTER_ANNOTATION, Submitter(user, frozenset(groups)).to_annotation())

    def owned_by(self, kind: Kind, name: str = "train", *, controller: bool = True) -> Self:
        self._obj["metadata"].setdefault("ownerReferences", []).append(
            {"apiVersion": kind.api_version, "kind": kind.kind, "name": name, "uid": f"uid-{name}",
             "controller": controller}
        )
        return self

    def stamped(self, value: str = STAMP) -> Self:
        """The admission stamp, as admission at ``NOW`` writes it unless ``value`` is given."""
        return self.annotation(keys.ADMITTED_AT_ANNOTATION, value)

    def mirror(self, node: str = "gpu-node-1") -> Self:
        """A mirror pod's marks: the kubelet's annotation and the node it runs on."""
        return self.annotation(keys.MIRROR_POD_ANNOTATION, "hash-of-the-static-pod").node_name(node)

    def no_labels(self) -> Self:
        self._obj["metadata"].pop("labels", None)
        return self

    # spec
    def spec(self, field: str, value: Any) -> Self:
        self._obj["spec"][field] = copy.deepcopy(value)
        return self

    def node_name(self, node: str) -> Self:
        return self.spec("nodeName", node)

    def gated(self) -> Self:
        self._obj["spec"].setdefault("schedulingGates", []).append({"name": keys.GATE})
        return self

    def container(self, name: str, **fields: Any) -> Self:
        self._obj["spec"]["containers"].append({"name": name, "image": "sidecar:1", **fields})
        return self

    def main(self, field: str, value: Any, index: int = 0) -> Self:
        self._obj["spec"]["containers"][index][field] = copy.deepcopy(value)
        return self

    def gpus(self, count: int, resource: str = keys.GPU_RESOURCE) -> Self:
        resources = self._obj["spec"]["containers"][0].setdefault("resources", {})
        resources.setdefault("limits", {})[resource] = str(count)
        return self

    def requests(self, **amounts: str) -> Self:
        resources = self._obj["spec"]["containers"][0].setdefault("resources", {})
        resources.setdefault("requests", {}).update(amounts)
        return self

    def env(self, name: str, value: str) -> Self:
        self._obj["spec"]["containers"][0].setdefault("env", []).append({"name": name, "value": value})
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def template(self) -> dict[str, Any]:
        """The pod as a pod template: metadata and spec, no name."""
        obj = self.obj()
        meta = obj["metadata"]
        meta.pop("name", None)
        meta.pop("namespace", None)
        if not meta:
            obj.pop("metadata")
        return {k: obj[k] for k in ("metadata", "spec") if k in obj}


def make_pod(name: str = "train-0", namespace: str = "vision-ml") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_job(template: dict[str, Any], name: str = "train", namespace: str = "vision-ml") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"backoffLimit": 2, "template": copy.deepcopy(template)},
    }


class PresetBuilder:
    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {"apiVersion": keys.API_VERSION, "kind": "Preset",
                                     "metadata": {"name": name}, "spec": {}}

    def strategy(self, name: str) -> Self:
        self._obj["spec"]["patchStrategy"] = name
        return self

    def queue(self, name: str) -> Self:
        self._obj["spec"]["queue"] = name
        return self

    def workflow_max_running(self, limit: Any) -> Self:
        self._obj["spec"]["workflowMaxRunning"] = limit
        return self

    def label(self, key: str, value: str) -> Self:
        self._obj["spec"].setdefault("metadata", {}).setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._obj["spec"].setdefault("metadata", {}).setdefault("annotations", {})[key] = value
        return self

    def pod(self, field: str, value: Any) -> Self:
        self._obj["spec"].setdefault("pod", {})[field] = copy.deepcopy(value)
        return self

    def container(self, field: str, value: Any) -> Self:
        self._obj["spec"].setdefault("container", {})[field] = copy.deepcopy(value)
        return self

    def requests(self, **amounts: Any) -> Self:
        resources = self._obj["spec"].setdefault("container", {}).setdefault("resources", {})
        resources.setdefault("requests", {}).update(_resource_names(amounts))
        return self

    def limits(self, **amounts: Any) -> Self:
        resources = self._obj["spec"].setdefault("container", {}).setdefault("resources", {})
        resources.setdefault("limits", {}).update(_resource_names(amounts))
        return self

    def gpus(self, count: int) -> Self:
        return self.requests(gpu=str(count)).limits(gpu=str(count))

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


def _resource_names(amounts: dict[str, Any]) -> dict[str, Any]:
    """``gpu=1`` is ``nvidia.com/gpu: 1``; other keyword names are taken as they are."""
    return {keys.GPU_RESOURCE if k == "gpu" else k: v for k, v in amounts.items()}


def make_preset(name: str) -> PresetBuilder:
    return PresetBuilder(name)


def make_queue(
    name: str, *, teams: Iterable[str] = (), users: Iterable[str] = (), groups: Iterable[str] = (),
    max_running: int | None = None,
) -> dict[str, Any]:
    access = {"teams": list(teams), "users": list(users), "groups": list(groups)}
    spec: dict[str, Any] = {"priority": 10, "access": {k: v for k, v in access.items() if v}}
    if max_running is not None:
        spec["maxRunning"] = max_running
    return {"apiVersion": keys.API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def make_team(name: str, *, users: Iterable[str] = (), groups: Iterable[str] = ()) -> dict[str, Any]:
    members = {"users": list(users), "groups": list(groups)}
    return {"apiVersion": keys.API_VERSION, "kind": "Team", "metadata": {"name": name},
            "spec": {"members": {k: v for k, v in members.items() if v}}}


def make_policy(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": keys.API_VERSION, "kind": "Policy", "metadata": {"name": keys.POLICY_NAME},
            "spec": spec}


def make_namespace(
    name: str = "vision-ml",
    team: str | None = "vision",
    *,
    default_queue: str = "",
    allowed_queues: Iterable[str] | None = None,
    default_presets: Iterable[str] = (),
    allowed_presets: Iterable[str] | None = None,
) -> Namespace:
    return Namespace(
        name=name,
        team=team,
        default_queue=default_queue,
        allowed_queues=None if allowed_queues is None else frozenset(allowed_queues),
        default_presets=tuple(default_presets),
        allowed_presets=None if allowed_presets is None else frozenset(allowed_presets),
    )


def make_catalog(
    *,
    queues: Iterable[dict[str, Any]] = (),
    teams: Iterable[dict[str, Any]] = (),
    presets: Iterable[dict[str, Any]] = (),
    policy: dict[str, Any] | None = None,
    previous: Catalog | None = None,
) -> Catalog:
    return Catalog.from_objects(
        queues=queues, teams=teams, presets=presets, policy=policy, previous=previous
    )


def create(
    obj: dict[str, Any], user: str = "alice", *groups: str, kind: Kind = POD
) -> Request:
    return Request(Operation.CREATE, kind, user, frozenset(groups), obj)


def create_job(job: dict[str, Any], user: str = "alice", *groups: str) -> Request:
    return create(job, user, *groups, kind=JOB)


def update(
    old: dict[str, Any], new: dict[str, Any], user: str = "alice", *groups: str, kind: Kind = POD
) -> Request:
    return Request(Operation.UPDATE, kind, user, frozenset(groups), new, old)


# --- the world most admission tests live in -------------------------------------------------
#
# Team vision (alice, group vision-devs) owns namespace vision-ml and may use vision-train and
# vision-interactive; prod-train belongs to team prod (pat) and group sre; research is bob's.


def vision_queues() -> list[dict[str, Any]]:
    return [
        make_queue("vision-train", teams=["vision"]),
        make_queue("vision-interactive", teams=["vision"]),
        make_queue("prod-train", teams=["prod"], groups=["sre"]),
        make_queue("research", users=["bob"]),
    ]


def vision_teams() -> list[dict[str, Any]]:
    return [
        make_team("vision", users=["alice"], groups=["vision-devs"]),
        make_team("prod", users=["pat"]),
    ]


def vision_presets() -> list[dict[str, Any]]:
    return [
        make_preset("single-gpu").queue("vision-train").gpus(1).obj(),
        make_preset("connections").strategy("post_merge")
        .container("env", [{"name": "DATA_URL", "value": "s3://vision"}])
        .pod("volumes", [{"name": "scratch", "emptyDir": {}}])
        .container("volumeMounts", [{"name": "scratch", "mountPath": "/scratch"}]).obj(),
        make_preset("prod-shape").queue("prod-train").pod("priorityClassName", "prod").obj(),
        make_preset("sweep").workflow_max_running(4).obj(),
    ]


def vision_catalog(
    *,
    queues: Iterable[dict[str, Any]] = (),
    teams: Iterable[dict[str, Any]] = (),
    presets: Iterable[dict[str, Any]] = (),
    policy: dict[str, Any] | None = None,
    previous: Catalog | None = None,
) -> Catalog:
    """The vision world, with ``queues``/``teams``/``presets`` added (or replaced by name)."""

    def merged(base: list[dict[str, Any]], extra: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        by_name = {o["metadata"]["name"]: o for o in base}
        by_name.update({o["metadata"]["name"]: o for o in extra})
        return list(by_name.values())

    return make_catalog(
        queues=merged(vision_queues(), queues),
        teams=merged(vision_teams(), teams),
        presets=merged(vision_presets(), presets),
        policy=policy,
        previous=previous,
    )


# --- running admission ----------------------------------------------------------------------

USER_KEYS = (
    "users may set labels sluicegate.dev/group, sluicegate.dev/queue, sluicegate.dev/workflow and "
    "annotations sluicegate.dev/group-size, sluicegate.dev/presets, sluicegate.dev/workflow-max-running"
)
VISION_QUEUES = "this namespace may use: vision-interactive, vision-train"
ALL_PRESETS = "this namespace may use presets: connections, prod-shape, single-gpu, sweep"
NODE_NAME_REFUSED = (
    "spec.nodeName is set: pods that Sluicegate manages are placed by kube-scheduler once dispatched; "
    "remove spec.nodeName (a nodeSelector or a preset can choose nodes)"
)


def written_by_sluicegate(what: str, key: str) -> str:
    """The refusal of a hand-written Sluicegate key."""
    return f"{what} {key} is written by Sluicegate and cannot be set by users ({USER_KEYS})"


def run(
    request: Request,
    namespace: Namespace | None = None,
    catalog: Catalog | None = None,
    *,
    now: datetime = NOW,
    may_release: bool = False,
    owner_creator: Submitter | None = None,
    classes: PriorityClasses = MappingProxyType({}),
) -> Decision:
    """Review ``request`` in the vision world (or the namespace and catalog given) at ``now``,
    with the cluster's PriorityClasses ``classes`` (none by default)."""
    return review(
        request,
        make_namespace() if namespace is None else namespace,
        vision_catalog() if catalog is None else catalog,
        controller=SLUICEGATE,
        now=now,
        may_release=may_release,
        owner_creator=owner_creator,
        classes=classes,
    )


def admit(
    pod: dict[str, Any],
    namespace: Namespace | None = None,
    catalog: Catalog | None = None,
    user: str = "alice",
    *groups: str,
) -> tuple[dict[str, Any], Admit]:
    """The pod as admission leaves it, and the decision; fails the test on a denial."""
    decision = run(create(pod, user, *groups), namespace, catalog)
    assert isinstance(decision, Admit), decision
    return patching.apply(pod, decision.patch), decision


def admitted(
    pod: dict[str, Any],
    namespace: Namespace | None = None,
    catalog: Catalog | None = None,
    user: str = "alice",
    *groups: str,
) -> dict[str, Any]:
    return admit(pod, namespace, catalog, user, *groups)[0]
