"""A pod's own node constraints and a node's taints, read as kube-scheduler reads them."""

from __future__ import annotations

import pytest

from policy.affinity import NO_PLACEMENT, Placement, Taint, Toleration
from policy.fields import InvalidObject
from policy.pods import Pod
from tests.builders import MakeNode, MakePod

LABELS = {"pool": "a100", "gpus": "8"}


def placement(**spec: object) -> Placement:
    return Pod.parse(MakePod("ml", "p").spec(**spec).obj()).placement


def required(*terms: object) -> dict[str, object]:
    terms_ = {"nodeSelectorTerms": list(terms)}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms_}}


@pytest.mark.parametrize(
    ("expression", "selects"),
    [
        ({"key": "pool", "operator": "In", "values": ["a100", "h100"]}, True),
        ({"key": "pool", "operator": "NotIn", "values": ["a100"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, True),
        ({"key": "pool", "operator": "Exists"}, True),
        ({"key": "pool", "operator": "DoesNotExist"}, False),
        ({"key": "gpus", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "gpus", "operator": "Lt", "values": ["4"]}, False),
        ({"key": "pool", "operator": "Gt", "values": ["4"]}, False),  # not a number: no match
    ],
)
def test_required_node_affinity_operators(expression: dict[str, object], selects: bool) -> None:
    assert placement(affinity=required({"matchExpressions": [expression]})).selects("n1", LABELS) is selects


def test_terms_are_alternatives_and_an_empty_term_matches_nothing() -> None:
    by_label = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]}
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    either = placement(affinity=required(by_label, by_name))
    assert either.selects("n1", LABELS) and not either.selects("n2", LABELS)
    assert not placement(affinity=required({})).selects("n1", LABELS)


def test_the_node_selector_must_match_every_label() -> None:
    assert placement(nodeSelector={"pool": "a100"}).selects("n1", LABELS)
    assert not placement(nodeSelector={"pool": "a100", "zone": "a"}).selects("n1", LABELS)


def test_a_pod_without_constraints_shares_one_placement() -> None:
    assert Pod.parse(MakePod("ml", "p").gpus(1).obj()).placement is NO_PLACEMENT


@pytest.mark.parametrize(
    ("toleration", "tolerates"),
    [
        (Toleration("gpu", "Equal", "only", "NoSchedule"), True),
        (Toleration("gpu", "Equal", "other"), False),
        (Toleration("gpu", "Exists"), True),
        (Toleration("", "Exists"), True),  # every key
        (Toleration("gpu", "Exists", effect="NoExecute"), False),
    ],
)
def test_tolerations(toleration: Toleration, tolerates: bool) -> None:
    assert toleration.tolerates(Taint("gpu", "only", "NoSchedule")) is tolerates


def test_a_cordon_and_a_soft_taint_keep_no_pod_off_a_node_for_good() -> None:
    node = MakeNode("n1").cordoned().taint("gpu", "only", "PreferNoSchedule").taint("team", "x").model()
    assert [str(t) for t in node.taints] == [
        "node.kubernetes.io/unschedulable:NoSchedule", "gpu=only:PreferNoSchedule", "team=x:NoSchedule"]
    assert NO_PLACEMENT.refused_by(node.taints) == Taint("team", "x", "NoSchedule")
    tolerant = placement(tolerations=[{"key": "team", "operator": "Equal", "value": "x"}])
    assert tolerant.refused_by(node.taints) is None


def test_a_taint_an_admin_sets_under_the_kubernetes_prefix_keeps_pods_off_for_good() -> None:
    """``node.kubernetes.io/out-of-service`` (or any key of that prefix Kubernetes does not set
    for a passing condition) is the node's shape, as a cordon or not-ready is not."""
    lasting = Taint("node.kubernetes.io/out-of-service", "nodeshutdown", "NoExecute")
    passing = Taint("node.kubernetes.io/not-ready", "", "NoExecute")
    assert NO_PLACEMENT.refused_by((passing,)) is None
    assert NO_PLACEMENT.refused_by((lasting,)) == lasting
    custom = Taint("node.kubernetes.io/foo", "bar")
    assert NO_PLACEMENT.refused_by((custom,)) == custom


def test_a_bad_operator_is_refused_naming_the_field_and_a_pod_carrying_one_still_parses() -> None:
    """The API server refuses such a pod after mutating admission has seen it: admission must
    still read it (and say what it says of the rest), so the pod reads as setting none."""
    bad = MakePod("ml", "p").spec(tolerations=[{"key": "gpu", "operator": "Maybe"}]).obj()
    with pytest.raises(InvalidObject, match=r"tolerations\[0\]\.operator"):
        Placement.parse(bad["spec"], "spec")
    with pytest.raises(InvalidObject, match=r"matchExpressions\[0\]\.operator"):
        near = required({"matchExpressions": [{"key": "a", "operator": "Near"}]})
        Placement.parse({"affinity": near}, "spec")
    assert Pod.parse(bad).placement is NO_PLACEMENT
