"""UPDATE: once admitted, a pod's gate and Sluicegate's keys belong to Sluicegate's controller."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from policy import keys
from policy.admitting import review
from policy.guarding import release_queue
from policy.reviews import JOB, Admit, Decision, Deny, Kind, Release, Request
from tests.admission_world import SLUICEGATE, vision_catalog, vision_ml
from tests.builders import NOW, MakeJob, MakePod, update

ADMITTED = (
    MakePod.submitted().queue("vision-train").label(keys.TEAM_LABEL, "vision").submitter("alice").gpus(1)
            .gated()
)


def run(request: Request) -> Decision:
    return review(request, vision_ml().model(), vision_catalog(),
                  controller=SLUICEGATE, now=NOW)


def changed(builder: MakePod, change: Any) -> dict[str, Any]:
    pod = builder.obj()
    change(pod)
    return pod


def ungate(pod: dict[str, Any]) -> None:
    pod["spec"]["schedulingGates"] = []


def relabel(pod: dict[str, Any]) -> None:
    pod["metadata"]["labels"][keys.QUEUE_LABEL] = "prod-train"


def unlabel(pod: dict[str, Any]) -> None:
    del pod["metadata"]["labels"][keys.TEAM_LABEL]


def claim_group(pod: dict[str, Any]) -> None:
    pod["metadata"]["labels"][keys.GROUP_LABEL] = "ring"


def restamp(pod: dict[str, Any]) -> None:
    pod["metadata"]["annotations"][keys.SUBMITTER_ANNOTATION] = '{"user":"pat","groups":[]}'


def touch_own_label(pod: dict[str, Any]) -> None:
    pod["metadata"]["labels"]["app"] = "train"


def dispatch(pod: dict[str, Any]) -> None:
    ungate(pod)
    pod["metadata"]["annotations"][keys.DISPATCHED_AT_ANNOTATION] = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("change", "user", "message"),
    [
        pytest.param(
            ungate,
            "alice",
            "only Sluicegate's controller may remove the scheduling gate "
            "sluicegate.dev/dispatch; the pod starts when its queue dispatches it",
            id="a user may not remove the gate",
        ),
        pytest.param(
            ungate,
            "system:admin",
            "only Sluicegate's controller may remove the scheduling gate "
            "sluicegate.dev/dispatch; the pod starts when its queue dispatches it",
            id="nor may any other account",
        ),
        pytest.param(
            relabel,
            "alice",
            "label sluicegate.dev/queue cannot be changed on a pod once it exists: "
            "only Sluicegate's controller may change sluicegate.dev/ labels and annotations",
            id="moving a pod to another queue",
        ),
        pytest.param(
            unlabel,
            "alice",
            "label sluicegate.dev/team cannot be removed from a pod once it exists: "
            "only Sluicegate's controller may change sluicegate.dev/ labels and annotations",
            id="dropping the team label",
        ),
        pytest.param(
            claim_group,
            "alice",
            "label sluicegate.dev/group cannot be added to a pod once it exists: "
            "only Sluicegate's controller may change sluicegate.dev/ labels and annotations",
            id="joining a pod group late",
        ),
        pytest.param(
            restamp,
            "alice",
            "annotation sluicegate.dev/submitter cannot be changed on a pod once it "
            "exists: only Sluicegate's controller may change sluicegate.dev/ labels and annotations",
            id="claiming another submitter",
        ),
        pytest.param(touch_own_label, "alice", None, id="a user's own labels stay theirs"),
        pytest.param(dispatch, SLUICEGATE, None, id="the controller dispatches"),
        pytest.param(relabel, SLUICEGATE, None, id="the controller may change Sluicegate's keys"),
    ],
)
def test_only_the_controller_touches_the_gate_and_sluicegates_keys(
    change: Any, user: str, message: str | None
) -> None:
    decision = run(update(ADMITTED.obj(), changed(ADMITTED, change), user))
    assert decision == (Admit() if message is None else Deny(message))


def test_a_suspended_jobs_template_keeps_its_stamp() -> None:
    old = MakeJob(MakePod.submitted().queue("vision-train").submitter("alice").template()).obj()
    new = MakeJob(MakePod.submitted().queue("vision-train").submitter("pat").template()).obj()
    assert run(update(old, new, "alice", kind=JOB)) == Deny(
        "annotation sluicegate.dev/submitter cannot be changed on the pod template of a Job once it exists: "
        "only Sluicegate's controller may change sluicegate.dev/ labels and annotations"
    )


def test_other_kinds_are_not_guarded() -> None:
    deployment = Kind("apps", "v1", "Deployment")
    old = {"metadata": {"labels": {keys.QUEUE_LABEL: "a"}}}
    new = {"metadata": {"labels": {keys.QUEUE_LABEL: "b"}}}
    assert run(update(old, new, "alice", kind=deployment)) == Admit()


# --- 13. break glass: removing the gate by hand, for those allowed to release the queue -------

BREAK_GLASS = "oncall"


def ungate_and(change: Any) -> Any:
    def both(pod: dict[str, Any]) -> None:
        ungate(pod)
        change(pod)

    return both


@pytest.mark.parametrize(
    ("change", "may_release", "outcome"),
    [
        pytest.param(
            ungate,
            True,
            Admit(release=Release("vision-ml/train-0", "vision-train", BREAK_GLASS)),
            id="someone allowed to release the queue removes the gate, and the release is reported",
        ),
        pytest.param(
            ungate,
            False,
            Deny(
                "only Sluicegate's controller may remove the scheduling gate sluicegate.dev/dispatch; "
                "the pod starts when its queue dispatches it"
            ),
            id="everyone else still may not",
        ),
        pytest.param(
            ungate_and(relabel),
            True,
            Deny(
                "label sluicegate.dev/queue cannot be changed on a pod once it exists: only Sluicegate's "
                "controller may change sluicegate.dev/ labels and annotations"
            ),
            id="releasing by hand does not open Sluicegate's keys",
        ),
        pytest.param(touch_own_label, True, Admit(), id="a change that keeps the gate is no release"),
    ],
)
def test_break_glass(change: Any, may_release: bool, outcome: Admit | Deny) -> None:
    request = update(ADMITTED.obj(), changed(ADMITTED, change), BREAK_GLASS)
    decision = review(
        request, vision_ml().model(), vision_catalog(), controller=SLUICEGATE,
                      now=NOW, may_release=may_release
    )
    assert decision == outcome


def test_a_release_by_hand_says_who_and_which_queue() -> None:
    release = Release("vision-ml/train-0", "vision-train", BREAK_GLASS)
    assert release.message == (
        "oncall removed the scheduling gate sluicegate.dev/dispatch by hand (allowed to release queue "
        "vision-train); the pod counts as running in its queue"
    )


@pytest.mark.parametrize(
    ("request_of", "queue"),
    [
        pytest.param(
            lambda: update(ADMITTED.obj(), changed(ADMITTED, ungate), BREAK_GLASS),
            "vision-train",
            id="removing the gate needs release on the pod's queue",
        ),
        pytest.param(
            lambda: update(ADMITTED.obj(), changed(ADMITTED, touch_own_label), BREAK_GLASS),
            None,
            id="a change that keeps the gate needs nothing",
        ),
        pytest.param(
            lambda: update(ADMITTED.obj(), changed(ADMITTED, ungate), SLUICEGATE),
            None,
            id="the controller needs nothing",
        ),
        pytest.param(
            lambda: replace(
                update(ADMITTED.obj(), changed(ADMITTED, ungate), BREAK_GLASS), subresource="status"
            ),
            None,
            id="a subresource needs nothing",
        ),
        pytest.param(
            lambda: update(MakePod.submitted().gated().obj(), MakePod.submitted().obj(), BREAK_GLASS),
            None,
            id="a gated pod without a queue cannot be released by hand",
        ),
    ],
)
def test_which_queue_the_webhook_asks_about(request_of: Any, queue: str | None) -> None:
    assert release_queue(request_of(), SLUICEGATE) == queue
