"""The gate controller's writes: removing the gate, the Dispatched condition, Events, status.

Each write is one request shaped so that it cannot undo someone else's change:

* the gate goes with a JSON patch whose first operation is a ``test`` of the pod's whole
  ``schedulingGates`` list as the controller last saw it, so a list that changed meanwhile
  (another gate added or removed, the pod released by someone else) fails the test instead of
  being overwritten; ``remove_gate`` then reads the pod once and decides again;
* the condition goes to ``pods/status`` as a strategic merge patch, which merges
  ``status.conditions`` by ``type``: the scheduler's ``PodScheduled`` is never touched;
* Queue, Team and Policy status go to the ``status`` subresource as a JSON patch that replaces
  the whole status, so a figure that no longer applies (a resource no longer used) disappears
  without a read, and so does whatever another writer put there (server-side apply could not
  remove a field that another manager owns).

Expected outcomes are values (``Ungate``, ``False`` for a pod that is gone); failures worth a
retry raise ``ApiError`` (``retriable`` or ``conflict``) or ``Unreachable``.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Literal

from kube.connecting import JSON, JSON_PATCH, ApiError, Connection
from kube.resources import EVENTS, PODS, Resource
from policy import keys
from policy.patching import escape

STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
GATES_PATH: Final = "/spec/schedulingGates"
# A test of the gate list can fail because the list changed; after this many fresh reads and
# retries in a row the pod is left for the next cycle.
TEST_ATTEMPTS: Final = 3
# events.k8s.io/v1 refuses a note over 1 kB; a condition message has no such limit, but a
# scheduler message for a large cluster can be long, and describe output should stay readable.
NOTE_BYTES: Final = 1024
MESSAGE_CHARACTERS: Final = 2048


def micro_time(epoch: float) -> str:
    """RFC 3339 with microseconds, as Kubernetes writes ``MicroTime`` fields."""
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(epoch: float) -> str:
    """RFC 3339 to the second, as Kubernetes writes ``Time`` fields."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the gate -------------------------------------------------------------------------------


class Ungate(StrEnum):
    """What became of a request to remove the gate."""

    RELEASED = "released"
    """This request removed it."""
    ALREADY = "already"
    """The gate was gone already: someone else released the pod."""
    GONE = "gone"
    """The pod no longer exists."""
    CHANGING = "changing"
    """The gate list kept changing under the test; try again in a later cycle."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The API server refused the release patch as invalid though its test held (the gate list
    and the annotations map were as tested): the pod as it is cannot be released, and trying
    again changes nothing until the pod does. ``message``: the API server's words."""

    message: str


def _stamp_ops(stamp: Mapping[str, str], has_annotations: bool) -> list[JSON]:
    if not stamp:
        return []
    if not has_annotations:
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(stamp)}]
    return [{"op": "add", "path": f"/metadata/annotations/{escape(k)}", "value": v} for k, v in stamp.items()]


def release_patch(gates: Sequence[str], stamp: Mapping[str, str], has_annotations: bool) -> list[JSON]:
    """The JSON patch that removes Sluicegate's gate from a pod whose gate list is ``gates``,
    guarded by a test of that list, and stamps the annotations ``stamp`` on the pod."""
    ops: list[JSON] = [{"op": "test", "path": GATES_PATH, "value": [{"name": g} for g in gates]}]
    remaining = [{"name": g} for g in gates if g != keys.GATE]
    if remaining:
        ops.append({"op": "replace", "path": GATES_PATH, "value": remaining})
    else:
        ops.append({"op": "remove", "path": GATES_PATH})
    return ops + _stamp_ops(stamp, has_annotations)


def _gates_of(pod: JSON) -> list[str]:
    spec = pod.get("spec")
    raw = spec.get("schedulingGates") if isinstance(spec, dict) else None
    return [str(g.get("name") or "") for g in raw or () if isinstance(g, dict)]


def _has_annotations(pod: JSON) -> bool:
    meta = pod.get("metadata")
    return isinstance(meta, dict) and isinstance(meta.get("annotations"), dict)


def _carries(pod: JSON, stamp: Mapping[str, str]) -> bool:
    """Whether the pod carries every annotation of ``stamp`` (a release's own, to the microsecond)."""
    meta = pod.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    return bool(stamp) and isinstance(notes, dict) and all(notes.get(k) == v for k, v in stamp.items())


async def remove_gate(
    connection: Connection,
    namespace: str,
    name: str,
    gates: Sequence[str],
    *,
    stamp: Mapping[str, str],
    has_annotations: bool,
) -> Ungate | Refused:
    """Remove Sluicegate's gate from the pod, if its gate list is still ``gates``.

    When the test fails, the pod is read once and the patch rebuilt from what it carries now:
    a pod without the gate was released by someone else (``ALREADY``), unless it carries this
    release's own ``stamp``: then an earlier attempt whose answer was lost removed it
    (``RELEASED``: the caller counts each of its releases once, whatever the network did).
    A 422 whose test held (the pod still has the gate list and annotations map the patch was
    built for) is the API server refusing the pod itself, e.g. annotations grown past its 256
    KiB with the stamp: ``Refused``, with its words. Raises ``ApiError`` or ``Unreachable`` for
    failures worth retrying later (throttling, the server's trouble).
    """
    path = PODS.path(name, namespace=namespace)
    current = list(gates)
    stamped = False
    for _ in range(TEST_ATTEMPTS):
        if keys.GATE not in current:
            return Ungate.RELEASED if stamped else Ungate.ALREADY
        try:
            await connection.request("PATCH", path, body=release_patch(current, stamp, has_annotations),
                                     content_type=JSON_PATCH)
            return Ungate.RELEASED
        except ApiError as e:
            if e.not_found:
                return Ungate.GONE
            # 422: the test failed (or the annotations map vanished), or the pod is invalid;
            # 409: a write raced ours.
            if e.status not in (409, 422):
                raise
            invalid = e.detail if e.status == 422 else None
        try:
            pod = await connection.get(path)
        except ApiError as e:
            if e.not_found:
                return Ungate.GONE
            raise
        tested = (current, has_annotations)
        current, has_annotations = _gates_of(pod), _has_annotations(pod)
        stamped = _carries(pod, stamp)
        if invalid is not None and (current, has_annotations) == tested and not stamped:
            return Refused(invalid)
    return Ungate.CHANGING


# --- the condition --------------------------------------------------------------------------


Status = Literal["True", "False"]


@dataclass(frozen=True, slots=True)
class Condition:
    """The ``sluicegate.dev/Dispatched`` condition as the controller wants it on a pod."""

    status: Status
    reason: str
    message: str

    @property
    def held(self) -> str | None:
        """The ``sluicegate.dev/held`` annotation written with a ``False`` condition: its reason
        and message, so ``kubectl describe pod`` shows them."""
        return f"{self.reason}: {self.message}"[:MESSAGE_CHARACTERS] if self.status == "False" else None

    def to_json(self, transition_at: float | None) -> JSON:
        """The condition for a strategic merge patch; ``transition_at`` when the status changes
        (or the pod has no such condition yet), else the pod keeps its lastTransitionTime."""
        out: JSON = {
            "type": keys.CONDITION,
            "status": self.status,
            "reason": self.reason,
            "message": self.message[:MESSAGE_CHARACTERS],
        }
        if transition_at is not None:
            out["lastTransitionTime"] = rfc3339(transition_at)
        return out


async def write_condition(
    connection: Connection, namespace: str, name: str, condition: Condition, transition_at: float | None
) -> bool:
    """Set the condition on the pod's status, and for a ``False`` one the ``held`` annotation in
    the same request (pods/status writes metadata too); False when the pod is gone."""
    body: JSON = {"status": {"conditions": [condition.to_json(transition_at)]}}
    path = PODS.path(name, namespace=namespace, subresource="status")
    if condition.held is not None:
        body["metadata"] = {"annotations": {keys.HELD_ANNOTATION: condition.held}}
    try:
        await connection.request("PATCH", path, body=body, content_type=STRATEGIC_MERGE_PATCH)
    except ApiError as e:
        if e.not_found:
            return False
        if e.status != 422 or "metadata" not in body:
            raise
        # The pod's annotations leave no room for the held annotation (they grew after
        # admission): the condition alone still says why it waits.
        del body["metadata"]
        try:
            await connection.request("PATCH", path, body=body, content_type=STRATEGIC_MERGE_PATCH)
        except ApiError as again:
            if again.not_found:
                return False
            raise
    return True


# --- events ---------------------------------------------------------------------------------


EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class PodEvent:
    """An event about one pod, as ``kubectl describe pod`` lists it."""

    namespace: str
    name: str
    uid: str
    type: EventType
    reason: str
    action: str
    note: str


def event_body(event: PodEvent, controller: str, instance: str, at: float) -> JSON:
    note = event.note.encode()[:NOTE_BYTES].decode(errors="ignore")
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        # Named as client-go names events: the object's name and the time in hex nanoseconds.
        "metadata": {"name": f"{event.name}.{int(at * 1e9):x}", "namespace": event.namespace},
        "eventTime": micro_time(at),
        "reportingController": controller,
        "reportingInstance": instance[:128],
        "action": event.action,
        "reason": event.reason,
        "type": event.type,
        "note": note,
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": event.namespace,
                      "name": event.name, "uid": event.uid},
    }


async def emit(connection: Connection, event: PodEvent, *, controller: str, instance: str, at: float) -> None:
    """Create the event. A namespace going away (404, 403 while terminating) or an event of the
    same name and nanosecond (409) is not worth an error."""
    try:
        await connection.request("POST", EVENTS.path(namespace=event.namespace),
                                 body=event_body(event, controller, instance, at))
    except ApiError as e:
        if e.not_found or e.conflict or (e.status == 403 and "being terminated" in e.message):
            return
        raise


# --- status of Queues, Teams and the Policy -------------------------------------------------


def status_patch(status: Mapping[str, Any]) -> list[JSON]:
    """A JSON patch that makes the object's status exactly ``status``: ``add`` replaces the
    member whole when it exists, so what anyone else put there goes too."""
    return [{"op": "add", "path": "/status", "value": dict(status)}]


async def write_status(
    connection: Connection, resource: Resource, name: str, status: Mapping[str, Any], *, manager: str
) -> bool:
    """Replace the object's status (the ``status`` subresource) by ``status``; False when it is gone."""
    try:
        await connection.request(
            "PATCH", resource.path(name, subresource="status"),
            query={"fieldManager": manager}, body=status_patch(status), content_type=JSON_PATCH,
        )
    except ApiError as e:
        if e.not_found:
            return False
        raise
    return True
