"""Forged identities: mirror pods only nodes create, and stamps only the right controller carries.

They run in the vision world of ``tests.admission_world``, where Mallory is nobody's member.
"""

from __future__ import annotations

import pytest

from policy import keys
from policy.catalog import Catalog
from policy.model import Namespace
from policy.patching import apply
from policy.pods import Submitter
from policy.reviews import JOB, Admit, Deny, Request
from tests.admission_world import (
    ARGO,
    CATALOG,
    JOB_CONTROLLER,
    NODE,
    NODES,
    NS,
    run,
    vision_catalog,
    written_by_sluicegate,
)
from tests.builders import MakeJob, MakeNamespace, MakePod, MakePolicy, create, create_job

FORGED_SUBMITTER = written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION)
FORGED_MIRROR = (
    "annotation kubernetes.io/config.mirror marks a mirror pod, which only a node creates for a "
    "static pod it runs; remove the annotation"
)
TRUSTS_ARGO = vision_catalog(policy=MakePolicy().set(trustedControllers=[JOB_CONTROLLER, ARGO]).obj())

# A GPU pod dressed as a mirror pod: bound to a node, in a queue alice may not use, with a team
# label of the team that owns that queue.
DRESSED_AS_MIRROR = MakePod.submitted().gpus(8).queue("prod-train").label(keys.TEAM_LABEL, "prod").mirror()


# --- 1. mirror pods -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "user", "groups", "outcome"),
    [
        pytest.param(
            MakePod.submitted().gpus(8).mirror(),
            NODE,
            (NODES,),
            Admit(),
            id="a node's mirror pod is the record of a static pod it runs and is left unchanged",
        ),
        pytest.param(
            DRESSED_AS_MIRROR,
            NODE,
            (NODES,),
            Deny(
                "label sluicegate.dev/queue cannot be set on a mirror pod: Sluicegate does not "
                "manage static pods, so a mirror pod carries no sluicegate.dev/ labels or "
                "annotations; remove it from the static pod's manifest"
            ),
            id="a node's mirror pod that carries a queue and a team is refused, not counted for them",
        ),
        pytest.param(
            MakePod.submitted().gpus(8).mirror().stamped(),
            NODE,
            (NODES,),
            Deny(
                "annotation sluicegate.dev/admitted-at cannot be set on a mirror pod: Sluicegate "
                "does not manage static pods, so a mirror pod carries no sluicegate.dev/ labels or "
                "annotations; remove it from the static pod's manifest"
            ),
            id="so is one that carries admission's stamp",
        ),
        pytest.param(
            DRESSED_AS_MIRROR,
            "alice",
            ("vision-devs",),
            Deny(FORGED_MIRROR),
            id="a user's pod dressed as a mirror pod is refused, not waved through ungated",
        ),
        pytest.param(
            DRESSED_AS_MIRROR,
            "system:serviceaccount:vision-ml:default",
            ("system:serviceaccounts",),
            Deny(FORGED_MIRROR),
            id="so is a service account's",
        ),
        pytest.param(
            DRESSED_AS_MIRROR,
            NODE,
            (),
            Deny(FORGED_MIRROR),
            id="a node's user name without the system:nodes group is no node",
        ),
        pytest.param(
            MakePod.submitted().gpus(8).queue("prod-train").mirror("gpu-node-2"),
            NODE,
            (NODES,),
            Deny(FORGED_MIRROR),
            id="a node creates mirror pods only for itself",
        ),
        pytest.param(
            MakePod.submitted().requests(cpu="1").mirror(),
            "alice",
            (),
            Admit(),
            id="a CPU pod with the annotation is none of Sluicegate's business",
        ),
    ],
)
def test_only_a_node_creates_mirror_pods(
    pod: MakePod, user: str, groups: tuple[str, ...], outcome: Admit | Deny
) -> None:
    assert run(create(pod.obj(), user, *groups)) == outcome


# --- 3. a stamp counts only from the controller that really owns the kind --------------------


CLAIMS_A_JOB_OWNER = {
    "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "x", "uid": "u", "controller": True}
    ]
}


@pytest.mark.parametrize(
    ("submitted", "catalog"),
    [
        pytest.param(
            create(MakePod.submitted().queue("vision-train").owned_by(JOB).submitter("pat").obj(), ARGO),
            TRUSTS_ARGO,
            id="a trusted Argo creating a pod that claims a Job owner cannot pass on a stamp",
        ),
        pytest.param(
            create_job(
                MakeJob(MakePod.submitted().queue("prod-train").submitter("pat").template()).obj()
                | {"metadata": {"name": "train", "namespace": "vision-ml", **CLAIMS_A_JOB_OWNER}},
                ARGO,
            ),
            TRUSTS_ARGO,
            id="a Job is judged as whoever creates it: a stamp on its own template never counts",
        ),
        pytest.param(
            create_job(MakeJob(MakePod.submitted().queue("prod-train").submitter("pat").template()).obj(),
                       JOB_CONTROLLER),
            CATALOG,
            id="not even when the Job controller itself creates the Job",
        ),
    ],
)
def test_a_claimed_owner_is_not_trusted(submitted: Request, catalog: Catalog) -> None:
    assert run(submitted, NS, catalog) == Deny(FORGED_SUBMITTER)


# --- 7. stamps are checked wherever admission sees them ----------------------------------------


@pytest.mark.parametrize(
    ("job", "namespace", "outcome"),
    [
        pytest.param(
            MakeJob(MakePod.submitted().gpus(8).queue("prod-train").submitter("pat").template()).obj(),
            MakeNamespace("vision-ml").model(),
            Deny(FORGED_SUBMITTER),
            id="a Job stamped with someone else's name is refused in a namespace not yet opted in",
        ),
        pytest.param(
            MakeJob(MakePod.submitted().gpus(8).submitter("alice").template()).obj(),
            MakeNamespace("vision-ml").model(),
            Admit(),
            id="the creator's own stamp there is accepted and nothing is added",
        ),
        pytest.param(
            MakeJob(MakePod.submitted().gpus(8).template()).obj(),
            MakeNamespace("vision-ml").model(),
            Admit(),
            id="an unstamped Job there is left alone",
        ),
    ],
)
def test_a_stamp_is_checked_in_every_namespace(
    job: dict[str, object], namespace: Namespace, outcome: Admit
) -> None:
    assert run(create_job(job), namespace) == outcome


def job_pod() -> MakePod:
    """A GPU pod the Job controller creates for a Job."""
    return MakePod.submitted().queue("vision-train").gpus(1).owned_by(JOB)


@pytest.mark.parametrize(
    ("pod", "creator", "outcome"),
    [
        pytest.param(
            job_pod().submitter("alice"),
            Submitter("mallory"),
            "annotation sluicegate.dev/submitter names user alice, but the Job that owns this pod "
            "was created by user mallory",
            id="a stamp that does not name the Job's known creator is refused",
        ),
        pytest.param(
            job_pod().submitter("alice", "sre"),
            Submitter("alice", frozenset({"vision-devs"})),
            "annotation sluicegate.dev/submitter names user alice in groups sre, but the Job that owns "
            "this pod was created by user alice in groups vision-devs",
            id="a stamp that gives the Job's known creator other groups is refused, naming both",
        ),
        pytest.param(
            job_pod().submitter("alice"),
            Submitter("alice"),
            "alice",
            id="a stamp naming the known creator counts",
        ),
        pytest.param(
            job_pod(),
            Submitter("dave", frozenset({"vision-devs"})),
            "dave",
            id="an unstamped pod of a Job whose creator is known is judged as that creator",
        ),
    ],
)
def test_a_stamp_is_judged_against_the_owners_known_creator(
    pod: MakePod, creator: Submitter, outcome: str
) -> None:
    decision = run(create(pod.obj(), JOB_CONTROLLER), NS, CATALOG, owner_creator=creator)
    if isinstance(decision, Deny):
        assert decision.message == outcome
        return
    notes = apply(pod.obj(), decision.patch)["metadata"]["annotations"]
    submitter = Submitter.from_annotation(notes[keys.SUBMITTER_ANNOTATION])
    assert submitter is not None and submitter.user == outcome


def test_a_known_owner_creator_means_nothing_for_a_pod_a_user_creates_directly() -> None:
    pod = MakePod.submitted().queue("vision-train").gpus(1).owned_by(JOB).obj()
    decision = run(create(pod, "alice"), NS, CATALOG, owner_creator=Submitter("pat"))
    assert isinstance(decision, Admit)
    notes = apply(pod, decision.patch)["metadata"]["annotations"]
    assert Submitter.from_annotation(notes[keys.SUBMITTER_ANNOTATION]) == Submitter("alice")
