"""Sluicegate's own keys: refused on every pod of an opted-in namespace when written by hand, the
admission stamp on every managed pod, and dispatch counting only pods admission marked.

They run in the vision world of ``tests.admission_world``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from policy import keys, marks
from policy.dispatching import dispatch
from policy.model import Policy, Queue, Snapshot
from policy.pods import Pod
from policy.reviews import JOB, Admit, Deny
from policy.workloads import build_workloads
from tests.admission_world import JOB_CONTROLLER, admitted, run, written_by_sluicegate
from tests.builders import NOW, STAMP, MakeJob, MakePod, create, create_job

# --- 2. hand-written keys on pods Sluicegate does not manage ---------------------------------

FORGED_GROUP_MEMBER = (
    MakePod.submitted(name="helper")
    .requests(cpu="1")
    .label(keys.TEAM_LABEL, "vision")
    .group("ring", 2)
    .queue("")
    .submitter("alice")
)


@pytest.mark.parametrize(
    ("pod", "outcome"),
    [
        pytest.param(
            FORGED_GROUP_MEMBER,
            Deny(written_by_sluicegate("label", keys.TEAM_LABEL)),
            id="a CPU pod posing as a member of a GPU pod group is refused",
        ),
        pytest.param(
            MakePod.submitted().requests(cpu="1").submitter("alice"),
            Admit(),
            id="the creator's own submitter is what Sluicegate would write, so it stays",
        ),
        pytest.param(
            MakePod.submitted().requests(cpu="1").submitter("pat"),
            Deny(written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION)),
            id="someone else's submitter is refused on a pod Sluicegate does not manage",
        ),
        pytest.param(
            MakePod.submitted().requests(cpu="1").stamped(),
            Deny(written_by_sluicegate("annotation", keys.ADMITTED_AT_ANNOTATION)),
            id="an admission stamp on a pod admission does not manage is refused",
        ),
        pytest.param(
            MakePod.submitted().requests(cpu="1").annotation(keys.DISPATCHED_AT_ANNOTATION, STAMP),
            Deny(written_by_sluicegate("annotation", keys.DISPATCHED_AT_ANNOTATION)),
            id="a dispatch time written by hand is refused",
        ),
        pytest.param(
            MakePod.submitted().requests(cpu="1").label("sluicegate.dev/anything", "x"),
            Deny(written_by_sluicegate("label", "sluicegate.dev/anything")),
            id="any other sluicegate.dev label is refused",
        ),
        pytest.param(
            MakePod.submitted().requests(cpu="1").group("ring", 2),
            Admit(
                warnings=(
                    "label sluicegate.dev/group has no effect: Sluicegate does not manage this pod (it names "
                    "no queue or presets and asks for no managed resource), so it is no member of the group",
                )
            ),
            id="a group label alone is the user's to set, and is told it does nothing",
        ),
        pytest.param(MakePod.submitted().requests(cpu="1").queue(""), Admit(),
                     id="an empty queue label is harmless"),
    ],
)
def test_keys_only_sluicegate_writes_are_refused_on_pods_it_does_not_manage(
    pod: MakePod, outcome: Admit | Deny
) -> None:
    assert run(create(pod.obj())) == outcome


def test_a_cpu_pod_of_a_job_keeps_the_stamp_its_template_carries() -> None:
    pod = MakePod.submitted().requests(cpu="1").owned_by(JOB).submitter("alice").obj()
    assert run(create(pod, JOB_CONTROLLER, "system:serviceaccounts")) == Admit()


def test_a_cpu_job_with_sluicegate_keys_in_its_template_is_refused() -> None:
    job = MakeJob(MakePod.submitted().requests(cpu="1").label(keys.TEAM_LABEL, "vision").template()).obj()
    assert run(create_job(job)) == Deny(written_by_sluicegate("label", keys.TEAM_LABEL))


# --- the admission stamp ----------------------------------------------------------------------


def stamp_of(pod: dict[str, Any]) -> str:
    value: str = pod["metadata"]["annotations"][keys.ADMITTED_AT_ANNOTATION]
    return value


def test_a_managed_pod_is_stamped_with_the_moment_of_admission_in_utc_microseconds() -> None:
    pod = MakePod.submitted().queue("vision-train").obj()
    assert stamp_of(admitted(pod)) == "2026-11-30T10:04:30.123456Z"


@pytest.mark.parametrize(
    ("stamp", "seconds_later", "kept"),
    [
        pytest.param(STAMP, 0, True, id="a reinvocation in the same instant keeps the stamp"),
        pytest.param(STAMP, 29, True, id="a reinvocation within the same request keeps the stamp"),
        pytest.param(
            marks.admitted_at(NOW + timedelta(seconds=3)),
            0,
            True,
            id="a replica whose clock runs a little ahead wrote it: kept",
        ),
        pytest.param("2026-11-29T10:04:30.123456Z", 0, False, id="yesterday's stamp was written by hand"),
        pytest.param(
            marks.admitted_at(NOW + timedelta(minutes=5)), 0, False, id="a stamp from the future too"
        ),
        pytest.param("2026-11-30T10:04:30Z", 0, False, id="a stamp not written as admission writes it"),
    ],
)
def test_an_existing_stamp_is_kept_only_when_admission_just_wrote_it(
    stamp: str, seconds_later: int, kept: bool
) -> None:
    pod = MakePod.submitted().queue("vision-train").stamped(stamp).obj()
    decision = run(create(pod), now=NOW + timedelta(seconds=seconds_later))
    if kept:
        assert isinstance(decision, Admit)
        assert decision.patch and stamp_of(pod) == stamp
        assert all(op["path"] != "/metadata/annotations/sluicegate.dev~1admitted-at" for op in decision.patch)
    else:
        assert decision == Deny(written_by_sluicegate("annotation", keys.ADMITTED_AT_ANNOTATION))


def test_a_job_template_never_carries_a_stamp() -> None:
    job = MakeJob(MakePod.submitted().queue("vision-train").gpus(1).stamped().template()).obj()
    assert run(create_job(job)) == Deny(written_by_sluicegate("annotation", keys.ADMITTED_AT_ANNOTATION))


# --- dispatch counts only what admission marked ------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "counts"),
    [
        pytest.param(
            admitted(MakePod.submitted().queue("vision-train").gpus(1).obj()), True,
                     id="a pod admission marked"
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").label(keys.TEAM_LABEL, "vision").gpus(1).obj(),
            False,
            id="queue and team without the stamp",
        ),
        pytest.param(
            MakePod.submitted().queue("vision-train").label(keys.TEAM_LABEL, "vision")
            .stamped("yesterday").obj(),
            False,
            id="a stamp that is no time",
        ),
        pytest.param(MakePod.submitted().queue("vision-train").stamped().obj(), False,
                     id="a stamp without a team"),
        pytest.param(
            MakePod.submitted().gpus(8).queue("prod-train").label(keys.TEAM_LABEL, "prod").mirror().obj(),
            False,
            id="a mirror pod, whatever labels its node gave it",
        ),
    ],
)
def test_dispatch_counts_a_pod_only_when_admission_marked_it(pod: dict[str, Any], counts: bool) -> None:
    assert marks.counts_for_dispatch(Pod.parse(pod)) is counts


def test_a_forged_group_member_never_makes_a_gated_group_running() -> None:
    """Had the forged CPU pod got in (say, before the namespace was opted in), it would make the
    GPU pod's group "running" and dispatch would hand the gated pod back past a paused, full
    queue; counted only when marked, it is not part of the group at all."""
    gpu = admitted(MakePod.submitted(name="trainer").queue("vision-train").gpus(8).group("ring", 2).obj())
    assert run(create(FORGED_GROUP_MEMBER.obj())) == Deny(written_by_sluicegate("label", keys.TEAM_LABEL))
    forged = FORGED_GROUP_MEMBER.obj()
    pods = [Pod.parse(p) for p in (gpu, forged)]
    queue = Queue("vision-train", max_running=0, paused=True)
    snapshot = Snapshot(
        queues={queue.name: queue},
        teams={},
        policy=Policy(),
        workloads=build_workloads(p for p in pods if marks.counts_for_dispatch(p)),
    )
    decision = dispatch(snapshot)
    assert decision.release == ()
    assert list(decision.waiting) == ["vision-ml/group:ring"]
