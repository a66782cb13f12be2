"""The world most admission tests live in, and admission run in it.

Team vision (alice, group vision-devs) owns namespace vision-ml (``NS``) and may use queues
vision-train and vision-interactive; prod-train belongs to team prod (pat) and group sre;
research is bob's. ``CATALOG`` holds those queues and teams and four presets. ``run`` reviews a
request there at ``NOW`` as Sluicegate's controller would be trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from types import MappingProxyType
from typing import Any

from policy import patching
from policy.admitting import NO_CLAIMS, Claims, review
from policy.catalog import Catalog
from policy.model import Namespace
from policy.pods import Submitter
from policy.priorities import PriorityClasses
from policy.reviews import Admit, Decision, Request
from tests.builders import NOW, MakeNamespace, MakePreset, MakeQueue, MakeTeam, Obj, create

JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
SLUICEGATE = "system:serviceaccount:sluicegate-system:sluicegate"
ARGO = "system:serviceaccount:argo:argo-workflow-controller"
NODE = "system:node:gpu-node-1"
NODES = "system:nodes"


def vision_queues() -> list[Obj]:
    return [
        MakeQueue("vision-train").priority(10).access(teams=["vision"]).obj(),
        MakeQueue("vision-interactive").priority(10).access(teams=["vision"]).obj(),
        MakeQueue("prod-train").priority(10).access(teams=["prod"], groups=["sre"]).obj(),
        MakeQueue("research").priority(10).access(users=["bob"]).obj(),
    ]


def vision_teams() -> list[Obj]:
    return [
        MakeTeam("vision").members(users=["alice"], groups=["vision-devs"]).obj(),
        MakeTeam("prod").members(users=["pat"]).obj(),
    ]


def vision_presets() -> list[Obj]:
    return [
        MakePreset("single-gpu").queue("vision-train").gpus(1).obj(),
        MakePreset("connections").strategy("post_merge")
        .container("env", [{"name": "DATA_URL", "value": "s3://vision"}])
        .pod("volumes", [{"name": "scratch", "emptyDir": {}}])
        .container("volumeMounts", [{"name": "scratch", "mountPath": "/scratch"}]).obj(),
        MakePreset("prod-shape").queue("prod-train").pod("priorityClassName", "prod").obj(),
        MakePreset("sweep").workflow_max_running(4).obj(),
    ]


def vision_catalog(
    *,
    queues: Iterable[Obj] = (),
    teams: Iterable[Obj] = (),
    presets: Iterable[Obj] = (),
    policy: Obj | None = None,
    previous: Catalog | None = None,
) -> Catalog:
    """The vision world, with ``queues``/``teams``/``presets`` added (or replaced by name)."""

    def merged(base: list[Obj], extra: Iterable[Obj]) -> list[Obj]:
        by_name = {o["metadata"]["name"]: o for o in base}
        by_name.update({o["metadata"]["name"]: o for o in extra})
        return list(by_name.values())

    return Catalog.from_objects(
        queues=merged(vision_queues(), queues),
        teams=merged(vision_teams(), teams),
        presets=merged(vision_presets(), presets),
        policy=policy,
        previous=previous,
    )


def vision_ml() -> MakeNamespace:
    """Namespace vision-ml, team vision's: ``vision_ml().default_queue("vision-train").model()``."""
    return MakeNamespace("vision-ml").team("vision")


NS = vision_ml().model()
CATALOG = vision_catalog()


# --- what admission says ----------------------------------------------------------------------

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


# --- running admission ------------------------------------------------------------------------


def run(
    request: Request,
    namespace: Namespace | None = None,
    catalog: Catalog | None = None,
    *,
    now: datetime = NOW,
    may_release: bool = False,
    owner_creator: Submitter | None = None,
    classes: PriorityClasses = MappingProxyType({}),
    claims: Claims = NO_CLAIMS,
) -> Decision:
    """Review ``request`` in the vision world (or the namespace and catalog given) at ``now``,
    with the cluster's PriorityClasses ``classes`` (none by default)."""
    return review(
        request,
        NS if namespace is None else namespace,
        CATALOG if catalog is None else catalog,
        controller=SLUICEGATE,
        now=now,
        may_release=may_release,
        owner_creator=owner_creator,
        classes=classes,
        claims=claims,
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
