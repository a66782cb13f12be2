"""Pod priority and preemption: no pod in a team's namespace preempts.

kube-scheduler preempts for a pod whose ``spec.preemptionPolicy`` is ``PreemptLowerPriority``:
when no node fits it, it evicts running pods of lower ``spec.priority`` to make room, another
team's as readily as the pod's own. Sluicegate's queues already decide which work goes first,
so a pod it releases must never do that; and since any member of a team can create a pod that
Sluicegate does not manage (no queue, no GPU) in the team's namespace, such a pod must not
either, or it evicts another team's released work for them.

The API server's Priority admission plugin sets both fields at a pod's CREATE from the
PriorityClass the pod names (``priorityClassName``), else from the cluster's default class
(``globalDefault: true``), else to priority 0 and ``PreemptLowerPriority``. It runs before the
mutating webhooks and again after any of them changed the pod, and it refuses a pod whose
``preemptionPolicy`` is not its class's, so admission cannot turn a class's preemption off:
it can only refuse the class. The rule (``refusal``), for every pod of a namespace opted in to
a team, managed or not (a node's mirror pods aside):

- above priority 0, only a class whose ``preemptionPolicy`` is ``Never`` is admitted; one that
  preempts is refused, naming the classes that never preempt;
- at priority 0 a pod may keep ``PreemptLowerPriority``: that is what the API server gives
  every pod without a class, and nothing can change it. Such a pod could preempt only pods
  below priority 0, so
- below priority 0 no pod is admitted, whatever its preemptionPolicy.

So no pod of a team's namespace can ever preempt another one, and none above the default
priority preempts anything. Pods of namespaces that are not opted in (kube-system, ...) are the
administrators' and are not judged.

Priority and preemptionPolicy are immutable once a pod exists, so the rule holds at CREATE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from policy import fields
from policy.fields import Obj

NEVER: Final = "Never"
PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
DEFAULT_PRIORITY: Final = 0
"""The priority the API server gives a pod that names no PriorityClass when none is the
cluster's default."""


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A PriorityClass (``scheduling.k8s.io/v1``) as admission reads it."""

    name: str
    value: int
    preempts: bool = True
    default: bool = False
    """``globalDefault``: the class of every pod that names none."""

    @classmethod
    def parse(cls, obj: Obj) -> PriorityClass:
        """From the API object; an absent ``preemptionPolicy`` is the API's default, which
        preempts. Raises ``InvalidObject`` for a value of the wrong type."""
        name = fields.name(obj, "PriorityClass")
        value = fields.whole(obj.get("value"), f"PriorityClass {name}: value")
        return cls(name, value, obj.get("preemptionPolicy") != NEVER, obj.get("globalDefault") is True)


PriorityClasses = Mapping[str, PriorityClass]
"""The cluster's PriorityClasses by name."""


@dataclass(frozen=True, slots=True)
class Priority:
    """What kube-scheduler will read from a pod: its priority, whether it preempts, and the
    class that gave them ("" when none did)."""

    value: int
    preempts: bool
    class_name: str = ""
    default: bool = False
    """The class is the cluster's default (``globalDefault``)."""


def class_name(spec: Obj) -> str:
    """The PriorityClass a pod spec names ("" when none)."""
    name = spec.get("priorityClassName")
    return name if isinstance(name, str) else ""


def resolved(spec: Obj) -> Priority | None:
    """The priority the API server already set on a pod (its Priority plugin runs before the
    admission webhooks), or None when it set none (a pod template)."""
    value, policy = spec.get("priority"), spec.get("preemptionPolicy")
    if isinstance(value, bool) or not isinstance(value, int) or not isinstance(policy, str):
        return None
    return Priority(value, policy != NEVER, class_name(spec))


def resolve(spec: Obj, classes: PriorityClasses) -> Priority | None:
    """The priority the API server will give a pod of this spec, from its class; None when the
    spec names a class that ``classes`` does not hold."""
    name = class_name(spec)
    if name:
        known = classes.get(name)
        return None if known is None else Priority(known.value, known.preempts, name, known.default)
    default = next((c for c in classes.values() if c.default), None)
    if default is not None:
        return Priority(default.value, default.preempts, default.name, True)
    return Priority(DEFAULT_PRIORITY, True)


def of(spec: Obj, before: Obj, classes: PriorityClasses) -> Priority | None:
    """The priority of a pod spec that admission may have changed from ``before`` (a preset can
    set ``priorityClassName``): what the API server resolved, while the class is still the one
    it resolved it from; else what the class says. None when neither is known."""
    if class_name(spec) == class_name(before):
        found = resolved(before)
        if found is not None:
            known = classes.get(found.class_name)
            return Priority(found.value, found.preempts, found.class_name,
                            known is not None and known.default)
    return resolve(spec, classes)


def refusal(priority: Priority, classes: PriorityClasses, subject: str = "this pod") -> str | None:
    """Why a pod of this priority may not go into a team's namespace (see the module's rule),
    or None. ``subject`` names what is judged: "this pod", "the pods of this Job"."""
    whose = f'PriorityClass "{priority.class_name}" (value {priority.value}'
    whose += "; the cluster's default, for pods that name no class)" if priority.default else ")"
    if priority.value < DEFAULT_PRIORITY:
        return (
            f"{whose} is below priority {DEFAULT_PRIORITY}: pods at priority {DEFAULT_PRIORITY} (those "
            "that name no PriorityClass, where the cluster has no default class) may preempt pods "
            f"below them, so once running {subject} could be evicted for one of them, and "
            f"Sluicegate admits no pod below priority {DEFAULT_PRIORITY} in a team's namespace; "
            f"{_alternatives(classes)}"
        )
    if preempts(priority):
        return (
            f"{whose} has preemptionPolicy {PREEMPT_LOWER_PRIORITY}: to place {subject}, "
            "kube-scheduler would evict running pods of lower priority, other teams' too, and no pod "
            "in a team's namespace may preempt, whether Sluicegate manages it or not (queues decide "
            f"what goes first); {_alternatives(classes)}"
        )
    return None


def preempts(priority: Priority) -> bool:
    """kube-scheduler would evict pods of priority 0 (every pod without a class) for this one."""
    return priority.preempts and priority.value > DEFAULT_PRIORITY


def _alternatives(classes: PriorityClasses) -> str:
    advice = (
        "set priorityClassName to a PriorityClass whose preemptionPolicy is Never and whose value "
        f"is {DEFAULT_PRIORITY} or more, which orders work just the same but evicts nothing"
    )
    fit = sorted(c.name for c in classes.values() if not c.preempts and c.value >= DEFAULT_PRIORITY)
    advice += f" ({', '.join(fit)})" if fit else " (there is none yet: a platform administrator creates one)"
    default = resolve(fields.EMPTY_OBJ, classes)
    if default is not None and default.value >= DEFAULT_PRIORITY and not preempts(default):
        advice += ", or remove priorityClassName"
    return advice
