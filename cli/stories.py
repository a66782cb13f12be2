"""One pod's story, told from the pod itself and, while it waits, from the controller's decision.

From the pod: who submitted it and which presets admission applied (its annotations), when it
was admitted and gated, the ``sluicegate.dev/Dispatched`` condition (reason, message, time),
when the controller removed the gate, what kube-scheduler says (``PodScheduled``: placed on a
node, or ``Unschedulable`` with its words), the phase and how its containers ended, and the
pod's events. From the decision (``cli.standings``), for a pod still gated: the limit that holds
it with the numbers as they are now, its position, what is ahead of it in its queue, and what
runs there.

The first line says which of the kinds of waiting (or not waiting) it is, and they never read
alike: *held by Sluicegate* (gated, with a reason), *dispatched, waiting for Kubernetes to
place it* (released; the scheduler's words), *running*, *finished*. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from cli.standings import HELD, RELEASING, UNPLACEABLE_STATE, Entry, Standing, expected_of, expected_words
from policy import fields, keys
from policy.devices import Devices, requests_with_devices
from policy.fields import InvalidObject
from policy.pods import Submitter, pod_requests
from policy.quantities import QuantityError, format_amount

SHOWN_AHEAD = 10

# A story's state: HELD or UNPLACEABLE_STATE, the words of a standing (cli.standings), or one of these.
SCHEDULING = "scheduling"
STARTING = "starting"
RUNNING = "running"
FINISHED = "finished"
UNMANAGED = "unmanaged"


@dataclass(frozen=True, slots=True)
class Moment:
    at: float | None
    what: str


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a gated pod waits now, by the controller's own decision."""

    reason: str
    message: str
    position: int | None
    waiting_in_queue: int
    ahead: tuple[str, ...]  # "ns/name (Reason)" of the workloads before it, the first few
    ahead_count: int
    running: tuple[str, ...]  # workloads running in its queue, the first few
    running_count: int
    queue_figures: str  # "running 1/1, GPUs 1/-, pending 2"; "" from the visibility API alone
    queue: str = ""
    expected: str = ""  # "expected to start in about 14m (9–31m)", or why unknown; "" when not said


@dataclass(frozen=True, slots=True)
class Story:
    pod: str
    state: str
    headline: str
    facts: tuple[tuple[str, str], ...]
    timeline: tuple[Moment, ...]
    hold: Hold | None
    events: tuple[Moment, ...]
    notes: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        hold = None
        if self.hold is not None:
            h = self.hold
            hold = {"reason": h.reason, "message": h.message, "position": h.position,
                    "waitingInQueue": h.waiting_in_queue, "ahead": list(h.ahead), "aheadCount": h.ahead_count,
                    "running": list(h.running), "runningCount": h.running_count, "queue": h.queue_figures,
                    "expectedStart": h.expected or None}
        return {
            "pod": self.pod, "state": self.state, "headline": self.headline,
            "facts": {k.lower().replace(" ", "_"): v for k, v in self.facts},  # stable keys: "queue", "node"
            "timeline": [{"time": when(m.at), "what": m.what} for m in self.timeline],
            "hold": hold,
            "events": [{"time": when(m.at), "what": m.what} for m in self.events],
            "notes": list(self.notes),
        }


def when(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _instant(raw: object) -> float | None:
    return fields.instant(raw) if isinstance(raw, str) and raw else None


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in map(fields.obj, status.get("conditions") or ())}


def _requests(spec: Mapping[str, Any], notes: Mapping[str, Any]) -> str:
    """What the pod asks for, as quotas count it: as kube-scheduler counts its containers, and
    what admission found its DRA claims count as (``policy.devices``), said apart."""
    raw = notes.get(keys.DEVICES_ANNOTATION)
    try:
        devices = Devices.from_annotation(raw if isinstance(raw, str) else None, keys.DEVICES_ANNOTATION)
        asked = requests_with_devices(pod_requests(spec), devices)
    except (InvalidObject, QuantityError):
        return "unreadable"
    said = ", ".join(f"{format_amount(v, k)} {k}" for k, v in sorted(asked.items()) if v) or "nothing"
    claimed = devices.total
    if claimed:
        said += " (" + ", ".join(f"{format_amount(v, k)} {k}" for k, v in sorted(claimed.items())) + \
            " through DRA claims)"
    return said


def _hold(entry: Entry, standing: Standing) -> Hold:
    ahead = standing.ahead_of(entry)
    keys_ahead: list[str] = []
    for e in ahead:
        label = f"{e.workload} ({e.reason or 'releasing now'})"
        if label not in keys_ahead:
            keys_ahead.append(label)
    waiting = {e.workload for e in standing.entries
               if e.queue == entry.queue and e.state in (HELD, RELEASING)}
    running = standing.running.get(entry.queue, ())
    row = next((r for r in standing.queue_rows() if r.name == entry.queue), None)
    figures = f"running {row.running}, GPUs {row.gpus}, pending {row.pending}" if row else ""
    return Hold(entry.reason, entry.message, entry.position, len(waiting), tuple(keys_ahead[:SHOWN_AHEAD]),
                len(keys_ahead), tuple(w.key for w in running[:SHOWN_AHEAD]), len(running), figures,
                entry.queue)


RELEASING_WORDS = "fits now: the controller releases it on its next cycle"


def _visible_hold(item: Mapping[str, Any]) -> Hold:
    """The hold as the visibility API serves it: position, workloads ahead, expected start."""
    position, ahead = item.get("position"), item.get("workloadsAhead")
    expected = expected_words(expected_of(item))
    return Hold(str(item.get("reason") or ""), str(item.get("message") or ""),
                position if isinstance(position, int) else None, 0, (),
                ahead if isinstance(ahead, int) else 0, (), 0, "", str(item.get("queue") or ""), expected)


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the story reads of the pod, read once."""

    namespace: str
    name: str
    labels: Mapping[str, Any]
    notes: Mapping[str, Any]
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    queue: str
    team: str
    dispatched: Mapping[str, Any] | None
    scheduled: Mapping[str, Any] | None
    gated: bool
    node: str
    phase: str
    created: float | None
    admitted: float | None
    released: float | None
    submitter: Submitter | None
    presets: str

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> _Facts:
        meta, spec, status = (fields.obj(pod.get(k)) for k in ("metadata", "spec", "status"))
        labels, notes = fields.obj(meta.get("labels")), fields.obj(meta.get("annotations"))
        conditions = _conditions(status)
        return cls(
            namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
            labels=labels, notes=notes, spec=spec, status=status,
            queue=str(labels.get(keys.QUEUE_LABEL) or ""), team=str(labels.get(keys.TEAM_LABEL) or ""),
            dispatched=conditions.get(keys.CONDITION), scheduled=conditions.get("PodScheduled"),
            gated=any(fields.obj(g).get("name") == keys.GATE for g in spec.get("schedulingGates") or ()),
            node=str(spec.get("nodeName") or ""), phase=str(status.get("phase") or "Pending"),
            created=_instant(meta.get("creationTimestamp")),
            admitted=_instant(notes.get(keys.ADMITTED_AT_ANNOTATION)),
            released=_instant(notes.get(keys.DISPATCHED_AT_ANNOTATION)),
            submitter=Submitter.from_annotation(str(notes.get(keys.SUBMITTER_ANNOTATION) or "")),
            presets=", ".join(fields.csv(str(notes.get(keys.APPLIED_PRESETS_ANNOTATION) or ""))),
        )

    @property
    def managed(self) -> bool:
        return bool(self.queue and self.team)

    @property
    def unschedulable(self) -> bool:
        return self.scheduled is not None and self.scheduled.get("reason") == "Unschedulable"


def _facts(f: _Facts) -> list[tuple[str, str]]:
    who = "-"
    if f.submitter is not None:
        groups = ", ".join(sorted(g for g in f.submitter.groups if g != "system:authenticated"))
        who = f.submitter.user + (f" (groups: {groups})" if groups else "")
    out = [("Pod", f"{f.namespace}/{f.name}"), ("Submitter", who), ("Queue", f.queue or "-"),
           ("Team", f.team or "-"), ("Presets", f.presets or "none"),
           ("Requests", _requests(f.spec, f.notes))]
    workflow = f.labels.get(keys.WORKFLOW_LABEL)
    if workflow:
        limit = f.notes.get(keys.WORKFLOW_MAX_RUNNING_ANNOTATION)
        out.append(("Workflow", f"{workflow}" + (f" (at most {limit} running)" if limit else "")))
    group = f.labels.get(keys.GROUP_LABEL)
    if group:
        out.append(("Group", f"{group} of {f.notes.get(keys.GROUP_SIZE_ANNOTATION) or '?'} pods"))
    return [*out, ("Node", f.node or "-"), ("Phase", f.phase)]


def _holds(events: Sequence[Mapping[str, Any]]) -> list[Moment]:
    """Every hold the controller evented (``Hold``, with the condition's reason and message),
    in time order: the condition keeps only the last, and is overwritten on release."""
    reasons = {r.value for r in keys.Reason}
    out = []
    for e in events:
        if e.get("action") == "Hold" or e.get("reason") in reasons:
            at = (_instant(e.get("eventTime")) or _instant(e.get("firstTimestamp"))
                  or _instant(fields.obj(e.get("metadata")).get("creationTimestamp")))
            out.append(Moment(at, f"held: {e.get('reason')}: {e.get('message') or ''}"))
    out.sort(key=lambda m: (m.at is None, m.at or 0.0))
    return out


def _timeline(f: _Facts, events: Sequence[Mapping[str, Any]] = ()) -> list[Moment]:
    """In the order of a pod's life, which is causal; ``in_time_order`` puts it on one clock.
    Why it was held comes from events (a controller before ``sluicegate.dev/held`` evented each
    hold), from its condition while held, and from the held annotation once released."""
    said = f"submitted by {f.submitter.user}" if f.submitter else "created"
    out = [Moment(f.created, f"{said} in namespace {f.namespace}")]
    if f.managed:
        applied = f"; presets applied: {f.presets}" if f.presets else "; no presets"
        out.append(Moment(f.admitted or f.created,
                          f"admitted to queue {f.queue} (team {f.team}){applied}; gate {keys.GATE} added"))
    holds = _holds(events)
    out += holds
    if f.dispatched is not None and f.dispatched.get("status") == "False":
        line = f"held: {f.dispatched.get('reason')}: {f.dispatched.get('message')}"
        if all(m.what != line for m in holds):
            out.append(Moment(_instant(f.dispatched.get("lastTransitionTime")), line))
    elif f.notes.get(keys.HELD_ANNOTATION):  # released: why it was last held, from the annotation
        line = f"held: {f.notes[keys.HELD_ANNOTATION]}"
        if all(m.what != line for m in holds):
            out.append(Moment(None, line))
    if not f.gated and f.managed:
        if f.released is not None:
            since = f.admitted or f.created
            waited = f" after waiting {f.released - since:.1f}s" if since is not None else ""
            said = f"released by queue {f.queue}{waited}: the controller removed the gate"
            out.append(Moment(f.released, said))
        else:
            out.append(Moment(None, "the gate was removed outside dispatch (break glass)"))
    if f.scheduled is not None:
        at = _instant(f.scheduled.get("lastTransitionTime"))
        if f.scheduled.get("status") == "True" and f.node:
            out.append(Moment(at, f"scheduled on node {f.node} by kube-scheduler"))
        elif f.unschedulable:
            at = _unplaced_since(events, f.released, at)
            out.append(Moment(at, f"kube-scheduler cannot place it: {f.scheduled.get('message') or ''}"))
    started = _instant(f.status.get("startTime"))
    if f.phase != "Pending" and started is not None:
        out.append(Moment(started, f"started on node {f.node}" if f.node else "started"))
    for cs in map(fields.obj, f.status.get("containerStatuses") or ()):
        ended = fields.obj(fields.obj(cs.get("state")).get("terminated"))
        if ended:
            how = f"{ended.get('reason') or 'Terminated'}, exit code {ended.get('exitCode')}"
            out.append(Moment(_instant(ended.get("finishedAt")), f"container {cs.get('name')} ended: {how}"))
    return in_time_order(out)


def _unplaced_since(
    events: Sequence[Mapping[str, Any]], released: float | None, said: float | None
) -> float | None:
    """When kube-scheduler first said it cannot place the pod after its release: its first
    ``FailedScheduling`` event from then on, else the condition's time. A gated pod's
    PodScheduled condition is False from creation (SchedulingGated), and a False that turns
    Unschedulable keeps that older ``lastTransitionTime``: never before the release, then."""
    since = math.floor(released) if released is not None else None
    tried = sorted(at for e in events if e.get("reason") == "FailedScheduling"
                   and (at := _event_time(e, first=True)) is not None and (since is None or at >= since))
    if tried:
        return tried[0]
    if said is not None and released is not None and said < released:
        return released
    return said


def _event_time(e: Mapping[str, Any], *, first: bool = False) -> float | None:
    """An event's first time (``eventTime``, microseconds, events.k8s.io; else ``firstTimestamp``,
    whole seconds, core/v1) or its last (``lastTimestamp`` first), else when it was created."""
    if first:
        at = _instant(e.get("eventTime")) or _instant(e.get("firstTimestamp"))
    else:
        at = _instant(e.get("lastTimestamp")) or _instant(e.get("eventTime"))
    return at or _instant(fields.obj(e.get("metadata")).get("creationTimestamp"))


def in_time_order(moments: Sequence[Moment]) -> list[Moment]:
    """``moments``, given in causal order (a pod's life), on one clock.

    The sources differ in precision: the controller's stamps (admission, release) and new-style
    events (``eventTime``) have microseconds; ``creationTimestamp``, conditions'
    ``lastTransitionTime``, container times and old-style events (``firstTimestamp``,
    ``lastTimestamp``) have whole seconds, truncated. Compared by value, a whole-second time
    sorts before a microsecond time of the same second even when it came after it (the
    scheduler's "cannot place it" after the release that let it try). So the whole second
    orders, and within one second the causal order given stands: the only order every source
    can tell. Every line is printed at that common precision, the whole second (``when``). A
    moment with no time keeps its place after the one before it.
    """
    keyed = []
    second = -math.inf
    for rank, m in enumerate(moments):
        if m.at is not None:
            second = math.floor(m.at)
        keyed.append((second, rank, m))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [m for _, _, m in keyed]


def _held(f: _Facts, standing: Standing | None, forbidden: str,
          stalled: str, visible: Mapping[str, Any] | None = None) -> tuple[str, Hold | None, list[str]]:
    """The headline, the hold and the notes of a gated pod."""
    entry = standing.entry(f.namespace, f.name) if standing is not None else None
    if standing is None and visible is not None:
        hold = _visible_hold(visible)
        if not hold.reason:
            return f"held by Sluicegate, but it {RELEASING_WORDS}", hold, []
        return f"held by Sluicegate: {hold.reason}: {hold.message}", hold, []
    if standing is None or entry is None:
        notes = [f"position and what is ahead unknown: {forbidden}"] if standing is None else []
        if f.dispatched is not None:
            return (f"held by Sluicegate: {f.dispatched.get('reason')}: {f.dispatched.get('message')}",
                    None, notes)
        return "held by Sluicegate: not yet explained by the controller", None, notes
    hold = _hold(entry, standing)
    if entry.state == RELEASING:
        if stalled:
            return f"held by Sluicegate: it fits now, but {stalled}", replace(hold, message=stalled), []
        return f"held by Sluicegate, but it {RELEASING_WORDS}", hold, []
    return f"held by Sluicegate: {entry.reason}: {entry.message}", hold, []


def tell(pod: Mapping[str, Any], events: Sequence[Mapping[str, Any]], standing: Standing | None,
         forbidden: str = "", *, stalled: str = "", connected: bool | None = None,
         visible: Mapping[str, Any] | None = None) -> Story:
    """The story of ``pod``; ``standing`` is the decision on the whole cluster (None when the
    user may not read it, ``forbidden`` saying why); ``visible``: the pod as the visibility API
    serves it (its position without the whole cluster), when it was read."""
    f = _Facts.of(pod)
    timeline = _timeline(f, events)
    notes: list[str] = []
    hold = None
    if connected is False:
        state = UNMANAGED
        headline = f"namespace {f.namespace} is not connected to Sluicegate (no {keys.TEAM_LABEL} label)"
        facts = [(k, f"{v} (label ignored)" if k in ("Queue", "Team") and v != "-" else v)
                 for k, v in _facts(f)]
        return Story(f"{f.namespace}/{f.name}", state, headline, tuple(facts),
                     tuple(m for m in timeline if not m.what.startswith("admitted to queue")), None,
                     _event_moments(events), ())
    if not f.managed:
        state, headline = UNMANAGED, "not managed by Sluicegate (no queue and team labels)"
    elif f.phase in ("Succeeded", "Failed"):
        ended_at = max((m.at for m in timeline if m.at is not None), default=None)
        ran = f", ran on node {f.node}" if f.node else ""
        state, headline = FINISHED, f"finished: {f.phase}{_why_failed(f)} at {when(ended_at) or '?'}{ran}"
    elif f.gated:
        state = HELD
        headline, hold, notes = _held(f, standing, forbidden, stalled, visible)
        if hold is not None and not hold.expected and visible is not None:
            hold = replace(hold, expected=_visible_hold(visible).expected)
        if stalled and stalled not in headline:
            notes = [*notes, stalled]
    elif not f.node and f.unschedulable:
        assert f.scheduled is not None
        state = UNPLACEABLE_STATE
        headline = keys.UNPLACEABLE + str(f.scheduled.get("message") or "Unschedulable")
        notes = [f"Sluicegate has released it and it keeps its slot in queue {f.queue}; only Kubernetes "
                 "can place it now (no node has room for what it asks, or its queue's node pool has none)"]
    elif not f.node:
        state, headline = SCHEDULING, f"released by queue {f.queue}; kube-scheduler is placing it"
    elif f.phase == "Running":
        started = when(_instant(f.status.get("startTime"))) or "?"
        state, headline = RUNNING, f"running on node {f.node} since {started}"
    else:
        state, headline = STARTING, f"placed on node {f.node}; starting"
    return Story(f"{f.namespace}/{f.name}", state, headline, tuple(_facts(f)), tuple(timeline), hold,
                 _event_moments(events), tuple(notes))


def _why_failed(f: _Facts) -> str:
    """`` (OOMKilled, exit code 137: boom)`` for a failed pod: its containers' ends that were not
    clean, and the pod's own reason and message; "" for a pod that succeeded."""
    if f.phase != "Failed":
        return ""
    why = []
    for cs in map(fields.obj, f.status.get("containerStatuses") or ()):
        ended = fields.obj(fields.obj(cs.get("state")).get("terminated"))
        if ended and ended.get("exitCode") != 0:
            why.append(f"{ended.get('reason') or 'Error'}, exit code {ended.get('exitCode')}")
    reason, message = f.status.get("reason"), f.status.get("message")
    if reason and all(str(reason) not in w for w in why):
        why.insert(0, str(reason))
    said = ", ".join(why)
    if message:
        said = f"{said}: {message}" if said else str(message)
    return f" ({said})" if said else ""


def _event_moments(events: Sequence[Mapping[str, Any]]) -> tuple[Moment, ...]:
    """The pod's events, on the story's clock (``in_time_order``): within one second, in the
    order the API server listed them (the order they were recorded)."""
    out = []
    for e in events:
        at = _event_time(e)
        source = fields.obj(e.get("source")).get("component") or e.get("reportingComponent") or ""
        count = e.get("count")
        times = f" (x{count})" if isinstance(count, int) and count > 1 else ""
        out.append(Moment(at, f"{e.get('type') or 'Normal'} {e.get('reason') or ''} from {source or '-'}: "
                              f"{e.get('message') or ''}{times}"))
    out.sort(key=lambda m: (m.at is None, math.floor(m.at or 0.0)))  # stable: listing order within a second
    return tuple(out)


def _more(shown: Sequence[str], count: int) -> str:
    return f" (and {count - len(shown)} more)" if count > len(shown) else ""


def render(story: Story) -> str:
    lines = [story.headline, ""]
    width = max(len(k) for k, _ in story.facts) + 1
    lines += [f"{(k + ':').ljust(width)}  {v}" for k, v in story.facts]
    if story.hold is not None:
        h = story.hold
        lines += ["", "Waiting:"]
        # A pod whose namespace left its team counts in no queue: it has no place in one.
        outside = h.reason == keys.Reason.NAMESPACE_LEFT_TEAM.value
        of = f" of {h.waiting_in_queue}" if h.waiting_in_queue else ""
        where = f"position {h.position}{of}" if h.position else "next"
        place = "no place in its queue's order" if outside else f"{where} in its queue"
        lines.append(f"  {place}; {h.queue_figures}" if h.queue_figures else f"  {place}")
        if h.queue and not outside:
            plural = "" if h.ahead_count == 1 else "s"
            lines.append(f"  after {h.ahead_count} workload{plural} ahead in queue {h.queue}")
        lines.append(f"  reason {h.reason}: {h.message}" if h.reason else f"  {h.message}")
        if h.expected:
            lines.append(f"  {h.expected}")
        if not h.queue_figures:  # from the visibility API alone: the rest of the queue is not read
            pass
        elif h.ahead and not outside:
            lines.append(f"  ahead of it{_more(h.ahead, h.ahead_count)}:")
            lines += [f"    {a}" for a in h.ahead]
        elif not outside:
            lines.append("  nothing is ahead of it in its queue")
        if h.running:
            lines.append(f"  running in its queue{_more(h.running, h.running_count)}: {', '.join(h.running)}")
    lines += ["", "Story:"]
    lines += [f"  {when(m.at) or '-':<20}  {m.what}" for m in story.timeline]
    lines += ["", "Events:" if story.events else "Events: none"]
    lines += [f"  {when(m.at) or '-':<20}  {m.what}" for m in story.events]
    if story.notes:
        lines += ["", *(f"Note: {n}" for n in story.notes)]
    return "\n".join(lines) + "\n"
