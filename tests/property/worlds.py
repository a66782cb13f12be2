"""Hypothesis strategies for the world admission decides in: namespaces, catalogs with broken
objects among the good, creators of every kind, and pods written by someone trying their luck.

Catalogs mix valid Queues, Teams, Presets and Policies with broken ones (a negative limit, a
quantity too large to hold, an unknown strategy, members that are not a list) and sometimes a
previous catalog whose Policy stays in force. Creators are users, service accounts, nodes (and a
user who only borrows a node's name), the Job controller, the controller manager, and Argo,
trusted or not. Pods carry every ``sluicegate.dev/`` key with values that are sometimes exactly
what Sluicegate writes and sometimes not, ask for NVIDIA, AMD or MIG GPUs or none, and may dress
up as mirror pods or claim a Job owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from policy import keys, marks
from policy.catalog import Catalog
from policy.model import Namespace
from policy.pods import Submitter
from tests.admission_world import ARGO, JOB_CONTROLLER, NODE, NODES
from tests.builders import NOW, MakePolicy, MakeQueue, MakeTeam
from tests.property.pod_shapes import pods, preset_specs

AMD = "amd.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"
QUEUES = ("vision-train", "prod-train", "open", "broken-queue", "huge-queue", "missing")
PRESETS = ("p0", "p1", "p2", "broken-preset", "huge-preset")
TEAMS = ("vision", "prod")


@dataclass(frozen=True)
class Creator:
    user: str
    groups: tuple[str, ...] = ()

    @property
    def submitter(self) -> Submitter:
        return Submitter(self.user, frozenset(self.groups))


CREATORS = (
    Creator("alice", ("vision-devs", "system:authenticated")),
    Creator("pat", ("system:authenticated",)),
    Creator("mallory", ("system:authenticated",)),
    Creator("system:serviceaccount:vision-ml:default", ("system:serviceaccounts",)),
    Creator(NODE, (NODES, "system:authenticated")),
    Creator(NODE, ("system:authenticated",)),  # a node's name without the nodes group
    Creator(JOB_CONTROLLER, ("system:serviceaccounts",)),
    Creator(keys.CONTROLLER_MANAGER, ()),
    Creator(ARGO, ("system:serviceaccounts",)),
)
creators = st.sampled_from(CREATORS)


@st.composite
def namespaces(draw: st.DrawFn) -> Namespace:
    """An opted-in namespace with what admins may set on it."""
    return Namespace(
        name="vision-ml",
        team=draw(st.sampled_from(TEAMS)),
        default_queue=draw(st.sampled_from(("open", "", "vision-train", *QUEUES))),
        allowed_queues=draw(st.none() | st.none() | st.frozensets(st.sampled_from(QUEUES), max_size=3)),
        default_presets=tuple(
            draw(st.lists(st.sampled_from(("p0", "p1", "p2")), max_size=2, unique=True))
            + draw(st.sampled_from([[], [], [], ["broken-preset"], ["huge-preset"]]))
        ),
        allowed_presets=draw(st.none() | st.none() | st.frozensets(st.sampled_from(PRESETS), max_size=3)),
    )


def _queues() -> list[dict[str, Any]]:
    return [
        MakeQueue("vision-train").priority(10).access(teams=["vision"]).obj(),
        MakeQueue("prod-train").priority(10).access(teams=["prod"], groups=["sre"]).obj(),
        MakeQueue("open").priority(10).access().obj(),
        {"metadata": {"name": "broken-queue"}, "spec": {"maxRunning": -1}},
        {"metadata": {"name": "huge-queue"}, "spec": {"quota": {keys.GPU_RESOURCE: "1e999999"}}},
    ]


POLICIES: tuple[dict[str, Any] | None, ...] = (
    None,
    MakePolicy().obj(),
    MakePolicy().set(managedResources=[keys.GPU_RESOURCE, AMD, MIG], defaultQueue="open").obj(),
    MakePolicy().set(trustedControllers=[JOB_CONTROLLER, ARGO, keys.CONTROLLER_MANAGER]).obj(),
    MakePolicy().set(managedResources=[keys.GPU_RESOURCE, AMD], maxRunning="many").obj(),  # broken
    MakePolicy().set(quota={AMD: "1e999999"}).obj(),  # broken: a quota too large to hold
)


@st.composite
def catalogs(draw: st.DrawFn) -> Catalog:
    presets = []
    for name in ("p0", "p1", "p2"):
        spec = draw(preset_specs())
        if draw(st.booleans()):
            spec["queue"] = draw(st.sampled_from(QUEUES))
        if draw(st.booleans()):
            spec["workflowMaxRunning"] = draw(st.integers(1, 5))
        presets.append({"metadata": {"name": name}, "spec": spec})
    presets.append({"metadata": {"name": "broken-preset"}, "spec": {"patchStrategy": "merge"}})
    presets.append(
        {
            "metadata": {"name": "huge-preset"},
            "spec": {"container": {"resources": {"limits": {AMD: "1e999999"}}}},
        }
    )
    vision = draw(
        st.sampled_from(
            [
                MakeTeam("vision").members(users=["alice"], groups=["vision-devs"]).obj(),
                MakeTeam("vision").members().obj(),
                {"metadata": {"name": "vision"}, "spec": {"members": {"users": "alice"}}},  # broken
            ]
        )
    )
    teams = [vision, MakeTeam("prod").members(users=["pat"]).obj()]
    previous = draw(st.sampled_from([None, *POLICIES[1:4]]))
    before = None if previous is None else Catalog.from_objects(policy=previous)
    return Catalog.from_objects(
        queues=_queues(),
        teams=teams,
        presets=presets,
        policy=draw(st.sampled_from(POLICIES)),
        previous=before,
    )


def _rarely(draw: st.DrawFn, one_in: int) -> bool:
    """True about once in ``one_in`` draws. (Integers lean towards 0 in hypothesis, so a
    sampled False first keeps "rarely" rare while still shrinking towards it.)"""
    return bool(draw(st.sampled_from([False] * (one_in - 1) + [True])))


FORGED_STAMPS = (
    Submitter("pat").to_annotation(),
    Submitter("alice", frozenset({"vision-devs"})).to_annotation(),
    "alice",
    '{"user":"alice","groups":"x"}',
)
USER_KEYS = {
    keys.QUEUE_LABEL: st.sampled_from(("open", "", *QUEUES)),
    keys.WORKFLOW_LABEL: st.just("sweep"),
}
USER_NOTES = {
    keys.PRESETS_ANNOTATION: st.lists(st.sampled_from(PRESETS), min_size=1, max_size=2).map(",".join),
    keys.WORKFLOW_MAX_RUNNING_ANNOTATION: st.sampled_from(["1", "1000"]),
}


@st.composite
def hostile_pods(
    draw: st.DrawFn, creator: Creator, namespace: Namespace, tricks: bool = True
) -> dict[str, Any]:
    """A pod written to slip past admission: the keys users may set, now and then, and up to
    two tricks: a key only Sluicegate writes (half the time with the very value Sluicegate
    would write, half the time not), a node name, the mirror annotation, a claimed owner, the
    gate already in place. Without ``tricks``, an honest pod: valid user keys only."""
    pod = draw(pods())
    meta, spec = pod["metadata"], pod["spec"]
    labels = meta.setdefault("labels", {})
    notes = meta.setdefault("annotations", {})
    main = spec["containers"][0]
    resource = draw(st.sampled_from([keys.GPU_RESOURCE, AMD, MIG, None]))
    if resource is not None:
        amounts = ["1", "8", "0", "1e999999", "9" * 5000] if tricks else ["1", "8", "0"]
        amount = draw(st.sampled_from(amounts))
        main.setdefault("resources", {}).setdefault("limits", {})[resource] = amount
    for target, options in ((labels, USER_KEYS), (notes, USER_NOTES)):
        for key, values in options.items():
            if _rarely(draw, 3):
                target[key] = draw(values)
    if _rarely(draw, 4):
        labels[keys.GROUP_LABEL] = "ring"
        size = draw(st.sampled_from(["2", "1", "0", None])) if tricks else "2"
        if size is not None:
            notes[keys.GROUP_SIZE_ANNOTATION] = size
    written: dict[str, tuple[dict[str, str], st.SearchStrategy[str], str]] = {
        keys.TEAM_LABEL: (labels, st.sampled_from(TEAMS), namespace.team or ""),
        "sluicegate.dev/priority": (labels, st.just("high"), "high"),
        keys.SUBMITTER_ANNOTATION: (notes, st.sampled_from(FORGED_STAMPS), creator.submitter.to_annotation()),
        keys.APPLIED_PRESETS_ANNOTATION: (notes, st.sampled_from(["p0", "p1,p2"]), "p0"),
        keys.ADMITTED_AT_ANNOTATION: (notes, st.sampled_from(STALE_STAMPS), marks.admitted_at(NOW)),
        keys.DISPATCHED_AT_ANNOTATION: (notes, st.just(marks.admitted_at(NOW)), marks.admitted_at(NOW)),
    }
    chosen = draw(st.lists(st.sampled_from([*written, "nodeName", "mirror", "owner", "gate"]), max_size=2))
    for trick in chosen if tricks else ():
        if trick in written:
            target, forged, honest = written[trick]
            target[trick] = draw(forged) if draw(st.booleans()) else honest
        elif trick == "nodeName":
            spec["nodeName"] = draw(st.sampled_from(["gpu-node-1", "gpu-node-2"]))
        elif trick == "mirror":
            notes[keys.MIRROR_POD_ANNOTATION] = "hash"
            spec["nodeName"] = draw(st.sampled_from(["gpu-node-1", "gpu-node-2"]))
        elif trick == "owner":
            api_version, kind = draw(st.sampled_from([("batch/v1", "Job"), ("apps/v1", "ReplicaSet")]))
            controller = draw(st.booleans())
            meta["ownerReferences"] = [
                {"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u", "controller": controller}
            ]
        else:
            spec["schedulingGates"] = [{"name": keys.GATE}]
    return pod


STALE_STAMPS = (
    marks.admitted_at(NOW - timedelta(days=1)),
    marks.admitted_at(NOW + timedelta(hours=1)),
    "2026-11-30T10:04:30Z",
)
