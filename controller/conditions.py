"""What the ``sluicegate.dev/Dispatched`` condition of a pod should say, when to rewrite it, and
the Warning events that go with the writes that need one. ``kubectl describe pod`` lists a
pod's conditions without their messages: a ``False`` condition's reason and message go in the
``sluicegate.dev/held`` annotation in the same request (``kube.writing.write_condition``), which
``describe`` shows and which stays after the release; a release is shown by the condition, the
``dispatched-at`` stamp and the queue label. Only what goes wrong is evented: a pod Kubernetes
cannot place, a gate removed by hand.

Two kinds of waiting must never be confused, so they read differently:

* **held by Sluicegate** (the pod is gated): ``False``, with policy's reason and its message with
  numbers (``queue vision-train: 8/8 running``);
* **dispatched, waiting for Kubernetes** (released, and kube-scheduler reports it cannot place
  it): ``True``, reason ``Dispatched``, message ``dispatched, waiting for Kubernetes to place it:
  <the scheduler's message>``.

A pending pod's condition is rewritten only when its *reason* changes (the numbers in the
message go stale on purpose: rewriting them every cycle would flood the API server with a
deep queue's worth of writes). A released pod's condition is rewritten when its message
changes between "dispatched" and "waiting for Kubernetes" (or the scheduler's words change).
"""

from __future__ import annotations

from controller.managed import Dispatched, ManagedPod
from kube.writing import Condition, PodEvent
from policy import keys
from policy.devices import claims_changed_message
from policy.membership import left_team_message
from policy.pods import Pod


def waiting(reason: keys.Reason, message: str) -> Condition:
    """A gated pod's condition: policy's reason and message (``Waiting.answer``)."""
    return Condition("False", reason.value, message)


def outside_team(pod: Pod) -> Condition:
    """A gated pod whose namespace no longer opts in to the team admission stamped on it: it is
    not released until the namespace does again, or the pod is recreated (``policy.membership``)."""
    return Condition("False", keys.Reason.NAMESPACE_LEFT_TEAM.value, left_team_message(pod))


def claims_changed(why: str) -> Condition:
    """A gated pod whose DRA claims ask for more than admission counted (``why``,
    ``policy.devices.claims_changed``): it is not released while they do."""
    return Condition("False", keys.Reason.CLAIMS_CHANGED.value, claims_changed_message(why))


def dispatched(queue: str) -> Condition:
    return Condition("True", keys.DISPATCHED_REASON, f"dispatched by queue {queue}")


def released_by_hand(queue: str) -> Condition:
    return Condition(
        "True", keys.DISPATCHED_REASON,
        f"the gate was removed outside dispatch (break glass); counted as running in queue {queue}",
    )


def unscheduled(scheduler: str, seconds: float) -> str:
    """Why a released pod that no scheduler has looked at waits (``Pod.unscheduled``)."""
    return (f"no scheduler has looked at it for {seconds:.0f}s since its release: spec.schedulerName "
            f"{scheduler!r} names no running scheduler, or that scheduler is down")


def unplaceable(scheduler_message: str) -> Condition:
    return Condition("True", keys.DISPATCHED_REASON, keys.UNPLACEABLE + scheduler_message)


def for_released(managed: ManagedPod, refused: str = "") -> Condition:
    """What a released pod's condition should say now; ``refused`` is why it cannot be placed
    when the scheduler has not said so itself (no scheduler looks at it)."""
    pod = managed.pod
    if not pod.node_name and (pod.unschedulable or refused):
        return unplaceable(pod.unschedulable or refused)
    if managed.dispatched_by_sluicegate:
        return dispatched(pod.queue)
    return released_by_hand(pod.queue)


def as_written(found: Dispatched | None) -> Condition | None:
    if found is None or found.status not in ("True", "False"):
        return None
    return Condition("True" if found.status == "True" else "False", found.reason, found.message)


# --- the events that go with the writes that need one ----------------------------------------


def waiting_for_placement(pod: Pod, condition: Condition) -> PodEvent:
    return PodEvent(pod.namespace, pod.name, pod.uid, "Warning", "WaitingForPlacement", "Place",
                    condition.message)


def released_outside_dispatch(pod: Pod, condition: Condition) -> PodEvent:
    """Warning: someone removed the gate by hand (break glass, allowed by the webhook)."""
    return PodEvent(pod.namespace, pod.name, pod.uid, "Warning", "ReleasedOutsideDispatch", "Release",
                    condition.message)
