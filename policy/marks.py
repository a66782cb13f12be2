"""The mark admission leaves on every managed pod, and how dispatch recognises it.

At a managed pod's CREATE, admission writes the team label, the queue label, the submitter and
``sluicegate.dev/admitted-at``: the moment of admission, RFC 3339 in UTC with microseconds
(``2026-11-30T10:04:30.123456Z``), which orders work first-in first-out more finely than
``creationTimestamp``'s seconds. Users can write none of these: admission refuses them at CREATE
on every pod of an opted-in namespace, and on UPDATE from everyone but the controller.

So a pod that carries the mark went through Sluicegate's admission, and only such pods count
for dispatch (``counts_for_dispatch``): a pod admission left alone (an unmanaged pod, a mirror
pod) never makes a group "running", uses quota or fills a queue, whatever labels it carries.
Nor does a gated pod that is being deleted (a finalizer may keep it for a while): it has left
its queue, so it is never released and never counted.

Admission is reinvoked on its own output within the same request, a moment later: a stamp no
older than ``REINVOCATION_WINDOW`` (and no more than ``CLOCK_SKEW`` ahead, for webhook replicas
whose clocks differ) is taken as admission's own and kept; any other is refused as written by
hand. A stamp written by hand within that window is indistinguishable from admission's own;
it can move a pod ahead of work admitted at most that long before it.

Admission also seals what it wrote (``seal``, in ``sluicegate.dev/seal``): every other
``sluicegate.dev/`` label and annotation with its value, and Sluicegate's scheduling gates. The
API server recomputes the same string from the pod it is about to store, in CEL (the validating
pod webhook's condition ``sealed-as-admitted`` in ``manifests/admission/webhooks.yaml``), and
calls the final check only when the two differ: a pod no later webhook touched costs one
admission call. The format is that expression's, character for character: for each key, sorted,
``l<key>=<length>:<value>`` (labels) then ``a<key>=<length>:<value>`` (annotations), then
``g<name>;`` for each ``sluicegate.dev/`` gate in the pod's order. Lengths count code points
(CEL's ``size``), so no value can pass for another entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

from policy import keys
from policy.pods import Pod

ADMITTED_AT_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
REINVOCATION_WINDOW: Final = timedelta(seconds=30)
"""A webhook call lasts at most 30 s (the longest timeoutSeconds Kubernetes allows), and the API
server reinvokes within the same request, right after the other webhooks."""
CLOCK_SKEW: Final = timedelta(seconds=5)

LABEL_SELECTOR: Final = f"{keys.QUEUE_LABEL},{keys.TEAM_LABEL}"
"""The pods the controller watches, and the CLI reads to take its decision again: those with
both the queue and the team label (admission adds the team label to every pod it manages; a
queue label alone, on a pod of a namespace that has not opted in, is a user's label)."""
FIELD_SELECTOR: Final = "status.phase!=Succeeded,status.phase!=Failed"
"""Terminal pods are left out: a pod that finishes leaves the watch as if deleted, which frees
its slot."""


def utc(now: datetime) -> datetime:
    """``now`` in UTC; a naive time is taken to be UTC already."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def admitted_at(now: datetime) -> str:
    """The stamp for a pod admitted at ``now``."""
    return utc(now).strftime(ADMITTED_AT_FORMAT)


def parse_admitted_at(raw: str | None) -> datetime | None:
    """The time in a stamp written exactly as ``admitted_at`` writes it, else None."""
    if not raw:
        return None
    try:
        when = datetime.strptime(raw, ADMITTED_AT_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return when if admitted_at(when) == raw else None


def fresh(raw: str | None, now: datetime) -> bool:
    """A stamp admission itself wrote on this request: well-formed and close to ``now``."""
    when = parse_admitted_at(raw)
    if when is None:
        return False
    now = utc(now)
    return now - REINVOCATION_WINDOW <= when <= now + CLOCK_SKEW


def counts_for_dispatch(pod: Pod) -> bool:
    """Admission marked this pod (it has a team, a queue and a well-formed admission stamp) and
    it has not been withdrawn (deleted while gated: ``Pod.withdrawn``).

    The controller passes only such pods to ``workloads.build_workloads``.
    """
    return bool(
        not pod.withdrawn
        and pod.team
        and pod.queue
        and parse_admitted_at(pod.annotations.get(keys.ADMITTED_AT_ANNOTATION)) is not None
    )


def seal(labels: Mapping[str, str], annotations: Mapping[str, str], gates: Iterable[str]) -> str:
    """The seal of a pod with these labels, annotations and scheduling gate names (the seal's own
    annotation, if present, is left out)."""
    out = [f"l{k}={len(labels[k])}:{labels[k]}" for k in sorted(labels) if k.startswith(keys.PREFIX)]
    out += [f"a{k}={len(annotations[k])}:{annotations[k]}" for k in sorted(annotations)
            if k.startswith(keys.PREFIX) and k != keys.SEAL_ANNOTATION]
    out += [f"g{name};" for name in gates if name.startswith(keys.PREFIX)]
    return "".join(out)
