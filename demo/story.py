"""The seed story as data: who submits what, to which namespace, and when.

The setup is ``manifests/samples`` as shipped (teams vision and nlp, their queues and presets)
on four fake nodes of 8 GPUs; two of them are labelled ``pool=spot``, the node pool of the
``sweeps`` queue, and one ``pool=reserved``, cordoned for maintenance. Then, within a quarter
of a minute:

* alice launches a hyperparameter sweep of 16 one-GPU trials (preset ``sweep-trial``: queue
  ``sweeps``, at most 4 trials of a workflow running), so 12 trials wait with ``WorkflowLimit``;
* dmitri submits a pretraining pod asking for 16 GPUs, more than any node has: it is never
  released (``NoNodeFits``, with the numbers), so it holds none of team nlp's quota;
* dmitri submits a fine-tuning pod for the reserved node: some node could hold it, so policy
  lets it go, and kube-scheduler cannot place it while that node is cordoned;
* bob opens notebooks one after another in ``vision-notebooks`` (preset ``notebook``: one GPU,
  queue ``notebooks``): they flow through their own queue while the sweep waits;
* carol of the on-call group submits an urgent retraining Job to ``urgent-retrain``
  (priority 100): it goes before every trial still waiting;
* bob tries the urgent queue too, and admission refuses him, saying why.

Runs are short (kwok completes a pod after the delay in its annotation) so the story ends in
about half a minute once everything is submitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from audit.loading import IMAGE, KWOK_DELAY_ANNOTATION
from policy import keys

Obj = dict[str, Any]

SPOT_LABEL: Final = ("pool", "spot")
SPOT_NODES: Final = ("gpu-node-2", "gpu-node-3")
RESERVED_LABEL: Final = ("pool", "reserved")
RESERVED_NODE: Final = "gpu-node-1"
"""Cordoned for the whole story: the node pods selecting ``pool=reserved`` wait for."""

SWEEP: Final = "lr-sweep"
SWEEP_TRIALS: Final = 16
TRIAL_SECONDS: Final = 6
NOTEBOOKS: Final = 5
NOTEBOOK_EVERY: Final = 3.0
NOTEBOOK_SECONDS: Final = 8
URGENT_JOB: Final = "retrain-detector"
URGENT_QUEUE: Final = "urgent-retrain"
URGENT_GPUS: Final = 2
URGENT_SECONDS: Final = 8
GIANT: Final = "llm-pretrain"
GIANT_GPUS: Final = 16
FINETUNE: Final = "llm-finetune"
FINETUNE_GPUS: Final = 8
REFUSED: Final = "bob-urgent"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...]

    def impersonation(self) -> tuple[str, ...]:
        """kubectl's flags to act as this user (the admin kubeconfig may impersonate)."""
        return (f"--as={self.name}", *(f"--as-group={g}" for g in self.groups))


ALICE: Final = User("alice", ("vision-devs",))
BOB: Final = User("bob", ("vision-devs",))
CAROL: Final = User("carol", ("ml-oncall",))
DMITRI: Final = User("dmitri", ("nlp-devs",))


@dataclass(frozen=True, slots=True)
class Submission:
    """Objects one user creates with one ``kubectl create`` at ``at`` seconds into the story."""

    at: float
    user: User
    namespace: str
    objects: tuple[Obj, ...]
    says: str
    """What the view tells when it is submitted."""
    refused: bool = False
    """The story expects admission to refuse it."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o["metadata"]["name"] for o in self.objects)


def _gpus(count: int) -> Obj:
    amount = {keys.GPU_RESOURCE: str(count)}
    return {"requests": amount, "limits": amount}


def _pod(name: str, seconds: int, *, labels: Obj | None = None, annotations: Obj | None = None,
         gpus: int | None = None, container: str = "main", node_selector: Obj | None = None) -> Obj:
    main: Obj = {"name": container, "image": IMAGE}
    if gpus is not None:
        main["resources"] = _gpus(gpus)
    spec: Obj = {"restartPolicy": "Never", "containers": [main]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {}),
                     "annotations": {KWOK_DELAY_ANNOTATION: f"{seconds}s", **(annotations or {})}},
        "spec": spec,
    }


def trial(index: int) -> Obj:
    return _pod(f"{SWEEP}-trial-{index:02d}", TRIAL_SECONDS, container="trial",
                labels={keys.WORKFLOW_LABEL: SWEEP, keys.QUEUE_LABEL: "sweeps"},
                annotations={keys.PRESETS_ANNOTATION: "sweep-trial"})


def notebook(index: int) -> Obj:
    # The preset notebook gives one GPU and the queue notebooks (the namespace's default too).
    return _pod(f"notebook-bob-{index}", NOTEBOOK_SECONDS, container="jupyter",
                annotations={keys.PRESETS_ANNOTATION: "notebook"})


def urgent_job() -> Obj:
    template = _pod("template", URGENT_SECONDS, container="retrain", gpus=URGENT_GPUS,
                    labels={keys.QUEUE_LABEL: URGENT_QUEUE})
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": URGENT_JOB},
        "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 0,
                 "template": {"metadata": {k: v for k, v in template["metadata"].items() if k != "name"},
                              "spec": template["spec"]}},
    }


def giant() -> Obj:
    return _pod(GIANT, 60, container="pretrain", gpus=GIANT_GPUS, labels={keys.QUEUE_LABEL: "nlp-train"})


def finetune() -> Obj:
    return _pod(FINETUNE, 60, container="finetune", gpus=FINETUNE_GPUS,
                labels={keys.QUEUE_LABEL: "nlp-train"}, node_selector=dict([RESERVED_LABEL]))


def refused() -> Obj:
    return _pod(REFUSED, 5, gpus=1, labels={keys.QUEUE_LABEL: URGENT_QUEUE})


def story() -> tuple[Submission, ...]:
    """Every submission, in the order of ``at``."""
    plays = [
        Submission(0.0, ALICE, "vision-research", tuple(trial(i) for i in range(SWEEP_TRIALS)),
                   f"alice launches sweep {SWEEP}: {SWEEP_TRIALS} trials of 1 GPU, at most 4 at once "
                   "(preset sweep-trial, queue sweeps)"),
        Submission(2.0, DMITRI, "nlp-research", (giant(),),
                   f"dmitri submits {GIANT}, asking for {GIANT_GPUS} GPUs on one pod (nodes have 8)"),
        Submission(3.0, DMITRI, "nlp-research", (finetune(),),
                   f"dmitri submits {FINETUNE}, {FINETUNE_GPUS} GPUs on the reserved node (cordoned)"),
        Submission(5.0, CAROL, "vision-research", (urgent_job(),),
                   f"carol (on call) submits Job {URGENT_JOB} to queue {URGENT_QUEUE} (priority 100)"),
        Submission(7.0, BOB, "vision-research", (refused(),),
                   f"bob tries queue {URGENT_QUEUE} too", refused=True),
    ]
    plays += [
        Submission(1.0 + i * NOTEBOOK_EVERY, BOB, "vision-notebooks", (notebook(i),),
                   f"bob opens notebook-bob-{i} (preset notebook: 1 GPU, queue notebooks)")
        for i in range(NOTEBOOKS)
    ]
    return tuple(sorted(plays, key=lambda s: s.at))


NAMESPACES: Final = ("vision-research", "vision-notebooks", "nlp-research")
