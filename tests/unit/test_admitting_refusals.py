"""Admission refusals, word for word: each says what was wrong and what is allowed instead.

They run in the vision world of ``tests.admission_world``.
"""

from __future__ import annotations

import pytest
from _pytest.mark import ParameterSet

from kube.writing import MESSAGE_CHARACTERS
from policy import keys, patching
from policy.admitting import ANNOTATION_BYTES, ANNOTATION_BYTES_ADMITTED
from policy.catalog import Catalog
from policy.model import Namespace
from policy.reviews import Admit, Deny
from tests.admission_world import (
    ALL_PRESETS,
    CATALOG,
    NODE_NAME_REFUSED,
    NS,
    VISION_QUEUES,
    run,
    vision_catalog,
    vision_ml,
    written_by_sluicegate,
)
from tests.builders import MakePod, MakePolicy, MakePreset, create

# --- refusals -------------------------------------------------------------------------------

BROKEN_QUEUE = {"metadata": {"name": "broken"}, "spec": {"maxRunning": -1}}


def refused(
    pod: MakePod, message: str, *, id: str, user: str = "alice", namespace: Namespace = NS,
    catalog: Catalog = CATALOG,
) -> ParameterSet:
    """A case: ``user`` creates ``pod`` in ``namespace`` (alice in vision-ml unless it says
    otherwise) and is refused with exactly ``message``."""
    return pytest.param(pod, user, namespace, catalog, message, id=id)


@pytest.mark.parametrize(
    ("pod", "user", "namespace", "catalog", "message"),
    [
        refused(
            MakePod.submitted().gpus(1),
            "no queue for this pod: it has no label sluicegate.dev/queue, and neither its presets, "
            f"namespace vision-ml nor the Policy name a default; {VISION_QUEUES}",
            id="no queue anywhere",
        ),
        refused(
            MakePod.submitted().queue("vision-trian"),
            f'queue "vision-trian" is not open to user alice (team vision); {VISION_QUEUES}',
            id="a queue that does not exist reads as one not open to the user, with the ones to use",
        ),
        refused(
            MakePod.submitted().queue("vision-trian"),
            f'queue "vision-trian" does not exist; {VISION_QUEUES}',
            namespace=vision_ml().allowed_queues(["vision-train", "vision-interactive", "vision-trian"])
            .model(),
            id="a queue the namespace's own list names but that does not exist is said to be missing",
        ),
        refused(
            MakePod.submitted().queue("prod-train"),
            f'queue "prod-train" is not open to user alice (team vision); {VISION_QUEUES}',
            id="a queue closed to the user and their team",
        ),
        refused(
            MakePod.submitted().queue("vision-interactive"),
            'queue "vision-interactive" is not allowed in namespace vision-ml; '
            "this namespace may use: vision-train",
            namespace=vision_ml().allowed_queues(["vision-train"]).model(),
            id="a queue the namespace does not allow",
        ),
        refused(
            MakePod.submitted().queue("vision-train"),
            'queue "vision-train" is not open to user carol (no team); '
            "no queue this namespace may use is open to user carol",
            user="carol",
            id="a user with no usable queue at all is told so plainly",
        ),
        refused(
            MakePod.submitted().queue("research"),
            'queue "research" is not open to user pat (team prod); this namespace may use: prod-train',
            user="pat",
            id="the alternatives are the queues open to this user, not to the namespace's team",
        ),
        refused(
            MakePod.submitted().presets("prod-shape"),
            f'queue "prod-train" (from preset "prod-shape") is not open to user alice (team vision); '
            f"{VISION_QUEUES}",
            id="a preset's queue is checked like the pod's own",
        ),
        refused(
            MakePod.submitted().gpus(1),
            f'queue "gone" (the default queue of namespace vision-ml) does not exist; {VISION_QUEUES}',
            namespace=vision_ml().default_queue("gone").model(),
            id="a namespace default that does not exist",
        ),
        refused(
            MakePod.submitted().gpus(1),
            f'queue "prod-train" (the Policy\'s default queue) is not open to user alice (team vision); '
            f"{VISION_QUEUES}",
            catalog=vision_catalog(policy=MakePolicy().set(defaultQueue="prod-train").obj()),
            id="the Policy's default is checked too",
        ),
        refused(
            MakePod.submitted().queue("broken"),
            'queue "broken" is invalid (Queue broken: spec.maxRunning: must not be negative, got -1); '
            f"{VISION_QUEUES}",
            catalog=vision_catalog(queues=[BROKEN_QUEUE]),
            id="a queue whose spec is broken says why",
        ),
        refused(
            MakePod.submitted().gpus(1).presets("huge"),
            f'preset "huge" does not exist; {ALL_PRESETS}',
            id="a preset that does not exist",
        ),
        refused(
            MakePod.submitted().queue("vision-train").presets("connections"),
            'preset "connections" is not allowed in namespace vision-ml; '
            "this namespace may use presets: single-gpu",
            namespace=vision_ml().allowed_presets(["single-gpu"]).model(),
            id="a preset the namespace does not allow",
        ),
        refused(
            MakePod.submitted().queue("vision-train").presets("single-gpu"),
            'preset "single-gpu" is not allowed in namespace vision-ml; this namespace may use no presets',
            namespace=vision_ml().allowed_presets([]).model(),
            id="a namespace that allows no presets says so",
        ),
        refused(
            MakePod.submitted().queue("vision-train"),
            f'preset "gone" (a default of namespace vision-ml) does not exist; {ALL_PRESETS}',
            namespace=vision_ml().default_presets(["gone"]).model(),
            id="a namespace default preset that does not exist",
        ),
        refused(
            MakePod.submitted().queue("vision-train").presets("bad"),
            "preset \"bad\" is invalid (Preset bad: spec.patchStrategy: 'merge' is not one of replace, "
            "isnull, "
            f"post_merge, pre_merge); {ALL_PRESETS}",
            catalog=vision_catalog(presets=[MakePreset("bad").strategy("merge").obj()]),
            id="a preset whose spec is broken says why",
        ),
        refused(
            MakePod.submitted().queue("vision-train").node("gpu-node-1"),
            "spec.nodeName is set: pods that Sluicegate manages are placed by kube-scheduler once "
            "dispatched; remove spec.nodeName (a nodeSelector or a preset can choose nodes)",
            id="a managed pod may not pick its own node",
        ),
        refused(
            MakePod.submitted().queue("vision-train").label(keys.TEAM_LABEL, "prod"),
            written_by_sluicegate("label", keys.TEAM_LABEL),
            id="a hand-written team label that differs from the namespace's",
        ),
        refused(
            MakePod.submitted().queue("vision-train").label("sluicegate.dev/priority", "high"),
            written_by_sluicegate("label", "sluicegate.dev/priority"),
            id="any other sluicegate.dev label",
        ),
        refused(
            MakePod.submitted().queue("vision-train").submitter("pat"),
            written_by_sluicegate("annotation", keys.SUBMITTER_ANNOTATION),
            id="a hand-written submitter",
        ),
        refused(
            MakePod.submitted()
            .queue("vision-train")
            .annotation(keys.DISPATCHED_AT_ANNOTATION, "2026-01-01T00:00:00Z"),
            written_by_sluicegate("annotation", keys.DISPATCHED_AT_ANNOTATION),
            id="a hand-written dispatch time",
        ),
        refused(
            MakePod.submitted().queue("vision-train")
            .annotation(keys.APPLIED_PRESETS_ANNOTATION, "single-gpu"),
            written_by_sluicegate("annotation", keys.APPLIED_PRESETS_ANNOTATION),
            id="applied presets that were not applied",
        ),
        refused(
            MakePod.submitted().queue("vision-train").group("ring"),
            "label sluicegate.dev/group needs annotation sluicegate.dev/group-size: "
            "the number of pods in the group, a positive integer",
            id="a pod group without its size",
        ),
        refused(
            MakePod.submitted().queue("vision-train").group("ring", 0),
            "annotation sluicegate.dev/group-size must be a positive integer "
            "no larger than 2147483647, "
            'got "0"',
            id="a pod group of zero pods",
        ),
        refused(
            MakePod.submitted()
            .queue("vision-train")
            .workflow("sweep")
            .annotation(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, "many"),
            "annotation sluicegate.dev/workflow-max-running must be a positive integer "
            "no larger than 2147483647, "
            'got "many"',
            id="a workflow limit that is not a number",
        ),
        refused(
            MakePod.submitted().queue("vision-train").workflow("sweep", -2),
            "annotation sluicegate.dev/workflow-max-running must be a positive integer "
            "no larger than 2147483647, "
            'got "-2"',
            id="a negative workflow limit",
        ),
        refused(
            MakePod.submitted()
            .queue("vision-train")
            .workflow("sweep")
            .annotation(keys.WORKFLOW_MAX_RUNNING_ANNOTATION, "9" * 5000),
            "annotation sluicegate.dev/workflow-max-running must be a positive integer no larger "
            f'than 2147483647, got "{"9" * 37}..." (5000 characters)',
            id="a workflow limit of five thousand digits is refused, not a crash",
        ),
        refused(
            MakePod.submitted().queue("vision-train").group("ring", 2**31),
            "annotation sluicegate.dev/group-size must be a positive integer no larger "
            'than 2147483647, got "2147483648"',
            id="a group larger than Kubernetes counts is refused",
        ),
        refused(
            MakePod.submitted().main("resources", {"limits": {keys.GPU_RESOURCE: "2x"}}),
            "spec.containers[0].resources.limits.nvidia.com/gpu: '2x' is not a quantity "
            "(examples: 2, 500m, 16Gi, 1e3)",
            id="a quantity that cannot be read",
        ),
        refused(
            MakePod.submitted().queue("prod-train").node("n1"),
            NODE_NAME_REFUSED,
            id="a bypass is refused before access is even looked at",
        ),
    ],
)
def test_refusals_say_what_was_wrong_and_what_is_allowed(
    pod: MakePod, user: str, namespace: Namespace, catalog: Catalog, message: str
) -> None:
    assert run(create(pod.obj(), user), namespace, catalog) == Deny(message)



def filled(room: int) -> MakePod:
    """A GPU pod with a filler annotation that leaves its annotations, once admitted, ``room``
    bytes under what admission allows (negative: over it)."""
    pod = MakePod.submitted().queue("vision-train").gpus(1)
    admitted = run(create(pod.obj()))
    assert isinstance(admitted, Admit), admitted
    stamps = patching.apply(pod.obj(), list(admitted.patch))["metadata"]["annotations"]
    used = sum(len(k.encode()) + len(v.encode()) for k, v in stamps.items())
    return pod.annotation("notes", "x" * (ANNOTATION_BYTES_ADMITTED - used - len("notes") - room))


def test_a_pod_whose_annotations_leave_the_controller_no_room_is_refused_saying_how_many_bytes() -> None:
    assert isinstance(run(create(filled(0).obj())), Admit)
    over = run(create(filled(-1).obj()))
    assert over == Deny(
        f"metadata.annotations: {ANNOTATION_BYTES_ADMITTED + 1} bytes with Sluicegate's stamps; at most "
        f"{ANNOTATION_BYTES_ADMITTED} are admitted, so that the gate controller can still write its own "
        "(Kubernetes allows 262144 in all): remove some annotations"
    )
    assert ANNOTATION_BYTES - ANNOTATION_BYTES_ADMITTED >= 4 * MESSAGE_CHARACTERS + 1024
