"""The extender's node view: each pod change moves its requests between node totals, so the
totals always equal the sum over the pods that are bound and have not ended."""

from __future__ import annotations

from extender.nodes import Bound, Usage, bound_pod
from kube.reflecting import Change
from tests.builders import MakePod

GPU = "nvidia.com/gpu"


def bound(pod: MakePod) -> Bound:
    return bound_pod(pod.obj())


def added(new: Bound) -> Change[Bound]:
    return Change("ADDED", "u", "ml/p", None, new)


def modified(old: Bound, new: Bound) -> Change[Bound]:
    return Change("MODIFIED", "u", "ml/p", old, new)


def deleted(old: Bound) -> Change[Bound]:
    return Change("DELETED", "u", "ml/p", old, None)


def test_a_bound_pod_counts_its_requests_on_its_node() -> None:
    usage = Usage()
    usage.changed(added(bound(MakePod("ml", "p").gpus(2).requests(cpu="500m").running("n1"))))
    usage.changed(added(bound(MakePod("ml", "q").gpus(3).running("n1"))))

    assert dict(usage.of("n1")) == {GPU: 5000, "cpu": 500}
    assert dict(usage.of("n2")) == {}


def test_a_pod_that_ends_or_is_deleted_frees_what_it_held() -> None:
    usage = Usage()
    running = bound(MakePod("ml", "p").gpus(2).running("n1"))
    other = bound(MakePod("ml", "q").gpus(1).running("n1"))
    usage.changed(added(running))
    usage.changed(added(other))

    ended = bound(MakePod("ml", "p").gpus(2).running("n1").finished("Failed"))
    usage.changed(modified(running, ended))
    assert dict(usage.of("n1")) == {GPU: 1000}

    usage.changed(deleted(other))
    assert dict(usage.of("n1")) == {}
    assert len(usage) == 0, "a node with nothing bound keeps no entry"


def test_a_pod_modified_without_a_change_of_node_counts_once() -> None:
    usage = Usage()
    first = bound(MakePod("ml", "p").gpus(2).running("n1"))
    usage.changed(added(first))
    usage.changed(modified(first, bound(MakePod("ml", "p").gpus(2).running("n1").label("a", "b"))))

    assert dict(usage.of("n1")) == {GPU: 2000}


def test_the_totals_read_are_copies_that_later_changes_do_not_touch() -> None:
    usage = Usage()
    pod = bound(MakePod("ml", "p").gpus(2).running("n1"))
    usage.changed(added(pod))
    before = usage.of("n1")
    usage.changed(deleted(pod))

    assert dict(before) == {GPU: 2000}


def test_an_unbound_pod_holds_nothing() -> None:
    assert bound(MakePod("ml", "p").gpus(2)).node == ""
    usage = Usage()
    usage.changed(added(bound(MakePod("ml", "p").gpus(2))))
    assert len(usage) == 0
