"""The security invariant of admission, over generated pods, creators, namespaces and catalogs:

    No pod that asks for a managed resource in an opted-in namespace is admitted ungated or with
    a key it wrote under ``sluicegate.dev/``, whoever creates it, unless it is a real mirror pod.

Spelled out for every admitted pod: a real mirror pod (created by its own node) is admitted
unchanged; any other pod that is managed afterwards (it asks for a managed resource, or names a
queue or presets) carries the gate and admission's mark, so dispatch counts it; every key only
Sluicegate writes says what Sluicegate would write (the namespace's team, the creator or the
stamp a trusted Job controller passes on, a fresh admission stamp), and a pod admission does not
manage carries none of them, so dispatch never counts it.

And admission never fails in any other way than its own error: shapes no API server sends raise
``MalformedReview`` (the webhook's 400), everything else is a decision.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from policy import keys, marks
from policy.catalog import Catalog
from policy.creators import honours_stamp
from policy.judging import is_managed
from policy.model import Namespace
from policy.patching import apply
from policy.pods import Pod, Submitter
from policy.reviews import JOB, POD, Admit, Deny, MalformedReview, Operation, Request
from tests.admission_world import run, vision_ml
from tests.builders import NOW, MakeJob, MakeNamespace
from tests.property.pod_shapes import pods
from tests.property.worlds import CREATORS, Creator, catalogs, creators, hostile_pods, namespaces

# Examples are expensive to generate (a catalog and a pod each); these counts keep the file
# within about half a minute and still reach every kind of creator, pod and catalog.
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEWER = settings(SETTINGS, max_examples=100)


def sluicegate_only(meta: dict[str, Any]) -> dict[str, str]:
    """The labels and annotations under sluicegate.dev/ that users may not write."""
    out = {}
    for field, user_keys in (("labels", keys.USER_LABELS), ("annotations", keys.USER_ANNOTATIONS)):
        for key, value in (meta.get(field) or {}).items():
            if key.startswith(keys.PREFIX) and key not in user_keys:
                out[key] = value
    return out


def is_real_mirror(pod: dict[str, Any], creator: Creator) -> bool:
    return (
        keys.NODES_GROUP in creator.groups
        and creator.user == keys.NODE_USER_PREFIX + str(pod["spec"].get("nodeName"))
        and keys.MIRROR_POD_ANNOTATION in (pod["metadata"].get("annotations") or {})
    )


def allowed_submitters(pod: dict[str, Any], creator: Creator, catalog: Catalog) -> set[Submitter]:
    """The creator, and the stamp when a trusted controller of the claimed owner passes it on."""
    out = {creator.submitter}
    request = Request(Operation.CREATE, POD, creator.user, frozenset(creator.groups), pod)
    if honours_stamp(request, pod["metadata"], catalog.policy) is not None:
        stamped = Submitter.from_annotation(
            (pod["metadata"].get("annotations") or {}).get(keys.SUBMITTER_ANNOTATION, "")
        )
        if stamped is not None:
            out.add(stamped)
    return out


@SETTINGS
@given(creators, namespaces(), catalogs(), st.data())
def test_no_managed_pod_is_admitted_ungated_or_with_a_key_it_wrote(
    creator: Creator, namespace: Namespace, catalog: Catalog, data: st.DataObject
) -> None:
    pod = data.draw(hostile_pods(creator, namespace), "pod")
    decision = run(create_as(pod, creator), namespace, catalog)
    if not isinstance(decision, Admit):
        event("refused")
        return
    check_admitted(pod, apply(pod, decision.patch), creator, namespace, catalog)


USERS = [c for c in CREATORS if not c.user.startswith("system:") or c.user.endswith(":default")]


@SETTINGS
@given(st.sampled_from(USERS), namespaces(), catalogs(), st.data())
def test_an_honest_pod_in_an_open_queue_is_admitted_gated_and_marked(
    creator: Creator, namespace: Namespace, catalog: Catalog, data: st.DataObject
) -> None:
    """The same invariant where admission must say yes: anyone may use queue "open", and the
    pod plays no tricks (with presets only when every merge keeps it valid)."""
    namespace = replace(namespace, default_queue="open", allowed_queues=None, default_presets=())
    pod = data.draw(hostile_pods(creator, namespace, tricks=False), "pod")
    pod["metadata"]["labels"][keys.QUEUE_LABEL] = "open"
    pod["metadata"]["annotations"].pop(keys.PRESETS_ANNOTATION, None)
    decision = run(create_as(pod, creator), namespace, catalog)
    if catalog.closed is not None and is_managed(pod, catalog):
        assert isinstance(decision, Deny) and catalog.closed in decision.message
        return
    assert isinstance(decision, Admit), decision
    check_admitted(pod, apply(pod, decision.patch), creator, namespace, catalog)


def check_admitted(
    pod: dict[str, Any], result: dict[str, Any], creator: Creator, namespace: Namespace, catalog: Catalog
) -> None:
    """The invariant for one admitted pod: ``pod`` as it came, ``result`` as admission left it."""
    if is_real_mirror(pod, creator):
        event("a real mirror pod")
        assert result == pod
        assert not [k for k in _metadata_keys(result) if k.startswith(keys.PREFIX)]
        return
    managed = is_managed(result, catalog)
    event("admitted, managed" if managed else "admitted, not managed")
    written = sluicegate_only(result["metadata"])
    assert keys.DISPATCHED_AT_ANNOTATION not in written
    assert set(written) <= {
        keys.TEAM_LABEL,
        keys.SUBMITTER_ANNOTATION,
        keys.APPLIED_PRESETS_ANNOTATION,
        keys.ADMITTED_AT_ANNOTATION,
        keys.SEAL_ANNOTATION,
    }, written
    if keys.SUBMITTER_ANNOTATION in written:
        submitter = Submitter.from_annotation(written[keys.SUBMITTER_ANNOTATION])
        assert submitter in allowed_submitters(pod, creator, catalog)
    if managed:
        assert {"name": keys.GATE} in result["spec"]["schedulingGates"]
        assert written[keys.TEAM_LABEL] == namespace.team
        assert marks.fresh(written[keys.ADMITTED_AT_ANNOTATION], NOW)
        assert marks.counts_for_dispatch(Pod.parse(result))
        meta = result["metadata"]  # sealed as stored: the final check is skipped for it
        assert written[keys.SEAL_ANNOTATION] == marks.seal(
            meta.get("labels") or {}, meta["annotations"],
            [g["name"] for g in result["spec"]["schedulingGates"]])
        assert keys.MIRROR_POD_ANNOTATION not in (result["metadata"].get("annotations") or {})
        assert not result["spec"].get("nodeName")
    else:
        assert set(written) <= {keys.SUBMITTER_ANNOTATION}, written
        assert not marks.counts_for_dispatch(Pod.parse(result))


def _metadata_keys(pod: dict[str, Any]) -> list[str]:
    meta = pod["metadata"]
    return [*(meta.get("labels") or {}), *(meta.get("annotations") or {})]


@SETTINGS
@given(creators, namespaces(), catalogs(), st.data())
def test_where_sluicegate_manages_nothing_a_pod_still_carries_no_mark_it_wrote(
    creator: Creator, namespace: Namespace, catalog: Catalog, data: st.DataObject
) -> None:
    """A namespace not opted in (yet): whatever a pod is admitted with would count once the
    namespace opts in, so it carries none of the keys only Sluicegate writes (but a stamp a
    trusted controller passes on) and no sluicegate.dev/ gate; it is admitted unchanged."""
    pod = data.draw(hostile_pods(creator, namespace), "pod")
    elsewhere = replace(namespace, team=None)
    decision = run(create_as(pod, creator), elsewhere, catalog)
    if isinstance(decision, Deny):
        event("refused where nothing is managed")
        return
    event("admitted where nothing is managed")
    assert decision.patch == ()
    written = sluicegate_only(pod["metadata"])
    assert set(written) <= {keys.SUBMITTER_ANNOTATION}, written
    if written:
        stamped = Submitter.from_annotation(written[keys.SUBMITTER_ANNOTATION])
        assert stamped in allowed_submitters(pod, creator, catalog)
    assert not [g for g in pod["spec"].get("schedulingGates") or [] if g["name"].startswith(keys.PREFIX)]
    assert not marks.counts_for_dispatch(Pod.parse(pod))


def create_as(pod: dict[str, Any], creator: Creator) -> Request:
    return Request(Operation.CREATE, POD, creator.user, frozenset(creator.groups), pod)


@FEWER
@given(creators, namespaces(), catalogs(), st.data())
def test_a_job_never_passes_on_a_submitter_other_than_its_creator(
    creator: Creator, namespace: Namespace, catalog: Catalog, data: st.DataObject
) -> None:
    template = data.draw(hostile_pods(creator, namespace), "template")
    job = MakeJob({k: template[k] for k in ("metadata", "spec")}).obj()
    opted_in = data.draw(st.booleans(), "namespace opted in")
    where = namespace if opted_in else MakeNamespace("vision-ml").model()
    request = Request(Operation.CREATE, JOB, creator.user, frozenset(creator.groups), job)
    decision = run(request, where, catalog)
    if not isinstance(decision, Admit):
        return
    notes = apply(job, decision.patch)["spec"]["template"]["metadata"].get("annotations") or {}
    if keys.SUBMITTER_ANNOTATION in notes:
        assert Submitter.from_annotation(notes[keys.SUBMITTER_ANNOTATION]) == creator.submitter
    if opted_in:
        # Outside, only the stamp matters: the rest is judged at each pod's CREATE once it is.
        # Inside, the template may carry only what Sluicegate writes on the Job's pods.
        written = sluicegate_only(job["spec"]["template"]["metadata"])
        assert set(written) <= {keys.SUBMITTER_ANNOTATION, keys.TEAM_LABEL, keys.APPLIED_PRESETS_ANNOTATION}
        assert written.get(keys.TEAM_LABEL, namespace.team) == namespace.team


# --- admission never fails but with its own error ---------------------------------------------

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from(["", "a", "2", "1e999999", "9" * 5000, "nvidia.com/gpu"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["name", "a", "limits"]), inner, max_size=3)
    ),
    max_leaves=8,
)
PATHS = [
    ("metadata",),
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("metadata", "ownerReferences"),
    ("spec",),
    ("spec", "containers"),
    ("spec", "initContainers"),
    ("spec", "nodeName"),
    ("spec", "schedulingGates"),
    ("spec", "tolerations"),
    ("spec", "volumes"),
    ("spec", "overhead"),
    ("spec", "priority"),
    ("spec", "affinity"),
    ("spec", "nodeSelector"),
]


@st.composite
def odd_pods(draw: st.DrawFn) -> dict[str, Any]:
    """A pod with one field, or one field of its first container, replaced by any JSON value."""
    pod = draw(pods())
    if draw(st.booleans()):
        container = pod["spec"]["containers"][0]
        field = draw(
            st.sampled_from(["resources", "env", "envFrom", "volumeMounts", "name", "restartPolicy"])
        )
        container[field] = draw(json_values)
    else:
        *steps, last = draw(st.sampled_from(PATHS))
        node = pod
        for step in steps:
            child = node.get(step)
            if not isinstance(child, dict):
                child = node[step] = {}
            node = child
        node[last] = draw(json_values)
    return pod


@FEWER
@given(odd_pods(), st.sampled_from(CREATORS), catalogs(), st.sampled_from(["pod", "job", "update"]))
def test_admission_answers_every_shape_with_a_decision_or_its_own_error(
    pod: dict[str, Any], creator: Creator, catalog: Catalog, what: str
) -> None:
    if what == "pod":
        request = create_as(pod, creator)
    elif what == "job":
        template = {k: pod[k] for k in ("metadata", "spec") if k in pod}
        job = MakeJob(template).obj()
        request = Request(Operation.CREATE, JOB, creator.user, frozenset(creator.groups), job)
    else:
        old = copy.deepcopy(pod)
        old["spec"] = (
            {**old.get("spec", {}), "schedulingGates": [{"name": keys.GATE}]}
            if isinstance(old.get("spec"), dict)
            else old.get("spec")
        )
        request = Request(Operation.UPDATE, POD, creator.user, frozenset(creator.groups), pod, old)
    try:
        decision = run(request, vision_ml().model(), catalog, may_release=True)
    except MalformedReview:
        return
    assert isinstance(decision, Admit | Deny)


@SETTINGS
@given(
    st.dictionaries(
        st.sampled_from(["operation", "kind", "userInfo", "object", "oldObject", "subResource"]),
        json_values | st.sampled_from(["CREATE", "UPDATE"]),
        max_size=6,
    )
)
def test_any_admission_request_is_read_and_decided_or_refused_with_the_policys_own_error(
    raw: dict[str, Any],
) -> None:
    try:
        decision = run(Request.from_review(raw))  # type: ignore[arg-type]
    except MalformedReview:
        return
    assert isinstance(decision, Admit | Deny)
