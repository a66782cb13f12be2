"""The trace: run records as JSON Lines, one workload per line (docs/records.md is the schema).

``Record`` is one workload's life as the recorder saw it: when it was submitted, released,
bound and finished, and what it asked for. Times are seconds since the epoch as floats (the
policy model's clock); on the wire they are RFC 3339 UTC with microseconds. A float keeps a
microsecond exactly for any date this century, so a trace reads back as it was written.

A pod group's record lists the pods it released (``pods``: ``PodRun``), each with its own
requests and times, so that what the group used is summed pod by pod (``Record.runs``); a
single pod's record is its own run. Traces without ``pods`` (older recorders, ``records
synth``) read as before: the workload is one run.

Reading validates every line and raises ``TraceError`` naming the line and the field; unknown
fields are ignored, so an older reader accepts a newer recorder's export.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import IO, Any, NotRequired, TypedDict

from policy import keys
from policy.quantities import EMPTY, QuantityError, Resources, add, format_amount, parse_resources


class Phase(StrEnum):
    """Where a workload's life stood when the record was taken."""

    PENDING = "Pending"  # still gated
    RUNNING = "Running"  # released, not finished
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    DELETED = "Deleted"  # gone before it reached Succeeded or Failed (released or not)

    @property
    def ended(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED, Phase.DELETED)


def placed_at(bound: float | None, released: float | None, phase: Phase) -> float | None:
    """When a run began on a node, the start of its GPU time: its binding. A released pod that
    was never bound held its quota but no GPU (None). A run that ended ``Succeeded`` or
    ``Failed`` ran on a node even when its record has no binding (a trace written without
    ``bound``, by hand or by another tool): it reads as such traces always did, placed at its
    release."""
    if bound is not None:
        return bound
    return released if phase in (Phase.SUCCEEDED, Phase.FAILED) else None


@dataclass(frozen=True, slots=True)
class PodRun:
    """One pod a group released: what it asked for, and when it was released, bound and ended."""

    name: str
    released: float
    requests: Resources = field(default_factory=lambda: EMPTY)  # milli-units, as the scheduler counts
    bound: float | None = None
    node: str = ""
    finished: float | None = None

    @property
    def started(self) -> float | None:
        """When it began to use its GPUs: when it was bound (None: never placed)."""
        return self.bound

    def amount(self, resource: str = keys.GPU_RESOURCE) -> float:
        """How much of ``resource`` it asked for, in units (2 GPUs -> 2.0)."""
        return self.requests.get(resource, 0) / 1000


@dataclass(frozen=True, slots=True)
class Record:
    """One workload (a pod, or a pod group) from submission to its end."""

    namespace: str
    name: str  # the pod's name; for a group, the name of its first pod
    queue: str
    submitted: float
    phase: Phase = Phase.PENDING
    team: str = ""
    workflow: str = ""  # the workflow label's value, as on the pod (not namespace-qualified)
    workflow_max_running: int | None = None
    group: str = ""
    group_size: int = 1
    submitter: str = ""
    priority: int = 0
    requests: Resources = field(default_factory=lambda: EMPTY)  # summed over the pods it released
    released: float | None = None
    bound: float | None = None
    node: str = ""
    finished: float | None = None
    again: int = 0
    """How many earlier workloads had this one's name (or group) in its namespace: a name used
    again once its pod was deleted, a group name used again once its run had ended."""
    pods: tuple[PodRun, ...] = ()
    """A group's released pods, in order of release (empty for a single pod, a group not yet
    released, and traces written without them)."""

    @property
    def key(self) -> str:
        """The workload's key, as policy names it: ``ns/pod`` or ``ns/group:<name>``; with
        ``#<again>`` after it for a name used again, so that a key is one workload."""
        key = f"{self.namespace}/group:{self.group}" if self.group else f"{self.namespace}/{self.name}"
        return f"{key}#{self.again}" if self.again else key

    @property
    def started(self) -> float | None:
        """When it began to run on a node (``placed_at``); None when it never did."""
        return placed_at(self.bound, self.released, self.phase)

    @property
    def runs(self) -> tuple[PodRun, ...]:
        """What it ran, pod by pod: a group's ``pods``; else the workload as one run (a single
        pod, or a group from a trace without ``pods``, bound when ``placed_at`` says it was);
        nothing when it was never released."""
        if self.pods:
            return self.pods
        if self.released is None:
            return ()
        return (PodRun(self.name, self.released, self.requests, self.started, self.node, self.finished),)

    @property
    def wait(self) -> float | None:
        """Seconds from submission to release; None while it waits."""
        return None if self.released is None else self.released - self.submitted

    @property
    def duration(self) -> float | None:
        """Seconds it ran on a node: finished − ``started``; None unless it was placed and ended."""
        started = self.started
        if started is None or self.finished is None:
            return None
        return self.finished - started

    def amount(self, resource: str = keys.GPU_RESOURCE) -> float:
        """How much of ``resource`` it asked for, in units (2 GPUs -> 2.0)."""
        return self.requests.get(resource, 0) / 1000


class PodRunJSON(TypedDict):
    """One of a group's released pods, as JSON."""

    name: str
    released: str
    requests: NotRequired[dict[str, str]]
    bound: NotRequired[str | None]
    node: NotRequired[str | None]
    finished: NotRequired[str | None]


class RecordJSON(TypedDict):
    """One line of a trace, as JSON. Optional fields may also be null."""

    namespace: str
    name: str
    queue: str
    submitted: str
    phase: str
    team: NotRequired[str]
    workflow: NotRequired[str | None]
    workflowMaxRunning: NotRequired[int | None]
    group: NotRequired[str | None]
    groupSize: NotRequired[int]
    submitter: NotRequired[str]
    priority: NotRequired[int]
    requests: NotRequired[dict[str, str]]
    released: NotRequired[str | None]
    bound: NotRequired[str | None]
    node: NotRequired[str | None]
    finished: NotRequired[str | None]
    again: NotRequired[int]
    pods: NotRequired[list[PodRunJSON]]


class TraceError(ValueError):
    """A trace line that cannot be used; the message names the line and the field."""

    def __init__(self, line: int, field: str, problem: str, source: str = "trace") -> None:
        self.line = line
        self.field = field
        self.problem = problem
        where = f"{source} line {line}" + (f": {field}" if field else "")
        super().__init__(f"{where}: {problem}")


# --- times ----------------------------------------------------------------------------------

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?P<fraction>\.\d{1,9})?(?P<zone>[Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def format_time(seconds: float) -> str:
    """RFC 3339 in UTC with microseconds: ``2026-11-30T10:00:00.250000Z``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """An RFC 3339 time with a zone (``Z`` or an offset) as epoch seconds; ValueError otherwise.

    Fractions finer than a microsecond (Kubernetes' MicroTime has nanoseconds) are rounded.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not an RFC 3339 time with a zone (e.g. 2026-11-30T10:00:00.000000Z)")
    fraction = match["fraction"] or ""
    base = text[: match.start("fraction")] if fraction else text[: match.start("zone")]
    zone = match["zone"].upper().replace("Z", "+00:00")
    whole = datetime.fromisoformat(base + zone)
    micro = round(float("0" + fraction) * 1e6) if fraction else 0
    return (whole + timedelta(microseconds=micro)).timestamp()


# --- one line -------------------------------------------------------------------------------


class _Line:
    """Reads the fields of one decoded line, turning every problem into a ``TraceError``."""

    def __init__(self, data: Mapping[str, Any], line: int, source: str, prefix: str = "") -> None:
        self.data = data
        self.line = line
        self.source = source
        self.prefix = prefix  # where an object inside the line is: "pods[0]."

    def fail(self, name: str, problem: str) -> TraceError:
        return TraceError(self.line, self.prefix + name, problem, self.source)

    def text(self, name: str, *, required: bool = False) -> str:
        value = self.data.get(name)
        if value is None or value == "":
            if required:
                raise self.fail(name, "is missing")
            return ""
        if not isinstance(value, str):
            raise self.fail(name, f"expected a string, got {value!r}")
        return value

    def integer(self, name: str, default: int | None, minimum: int | None = None) -> int | None:
        value = self.data.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(name, f"expected a whole number, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(name, f"must be at least {minimum}, got {value}")
        return value

    def time(self, name: str, *, required: bool = False) -> float | None:
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.fail(name, "is missing")
            return None
        if not isinstance(value, str):
            raise self.fail(name, f"expected an RFC 3339 time, got {value!r}")
        try:
            return parse_time(value)
        except ValueError as e:
            raise self.fail(name, str(e)) from e

    def requests(self) -> Resources:
        raw = self.data.get("requests")
        if raw is None:
            return EMPTY
        if not isinstance(raw, Mapping):
            raise self.fail("requests", f"expected an object of resource to quantity, got {raw!r}")
        try:
            return parse_resources(raw, where="requests")
        except QuantityError as e:
            text = str(e)
            name, _, problem = text.partition(": ")
            raise self.fail(name, problem or text) from e

    def pods(self) -> tuple[PodRun, ...]:
        raw = self.data.get("pods")
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self.fail("pods", f"expected a list of the pods a group released, got {raw!r}")
        runs = []
        for i, item in enumerate(raw):
            where = f"{self.prefix}pods[{i}]"
            if not isinstance(item, Mapping):
                raise TraceError(self.line, where, f"expected a JSON object, got {item!r}", self.source)
            at = _Line(item, self.line, self.source, where + ".")
            released = at.time("released", required=True)
            assert released is not None
            run = PodRun(name=at.text("name", required=True), released=released, requests=at.requests(),
                         bound=at.time("bound"), node=at.text("node"), finished=at.time("finished"))
            _in_order(at, run, ("released", "bound", "finished"))
            runs.append(run)
        return tuple(runs)

    def phase(self) -> Phase:
        value = self.text("phase", required=True)
        try:
            return Phase(value)
        except ValueError as e:
            allowed = ", ".join(p.value for p in Phase)
            raise self.fail("phase", f"{value!r} is not one of {allowed}") from e


def _in_order(at: _Line, times: Record | PodRun, names: tuple[str, ...]) -> None:
    """The times ``names`` of ``times`` that are present run forward."""
    previous: float | None = None
    previous_name = ""
    for name in names:
        value = getattr(times, name)
        if value is None:
            continue
        if previous is not None and value < previous:
            raise at.fail(name, f"{format_time(value)} is before {previous_name} {format_time(previous)}")
        previous, previous_name = value, name


def _check_times(r: Record, at: _Line) -> None:
    """Times run forward, and the phase agrees with the times that are present."""
    _in_order(at, r, ("submitted", "released", "bound", "finished"))
    if r.bound is not None and r.released is None:
        raise at.fail("released", "is missing, but the workload was bound (only released pods are bound)")
    if r.phase.ended:
        if r.finished is None:
            raise at.fail("finished", f"is missing, but the phase is {r.phase.value}")
        if r.phase is not Phase.DELETED and r.released is None:
            raise at.fail("released", f"is missing, but the workload ran (phase {r.phase.value})")
        return
    if r.finished is not None:
        raise at.fail("finished", f"is set, but the phase is {r.phase.value}")
    if r.phase is Phase.RUNNING and r.released is None:
        raise at.fail("released", "is missing, but the phase is Running")
    if r.phase is Phase.PENDING and (r.released is not None or r.bound is not None):
        raise at.fail("released" if r.released is not None else "bound", "is set, but the phase is Pending")


def _check_pods(r: Record, at: _Line) -> None:
    """A group's pods fall inside its run and add up to its requests."""
    if not r.pods:
        return
    if not r.group:
        raise at.fail("pods", "is set, but the workload names no group")
    for i, run in enumerate(r.pods):
        where = f"pods[{i}]."
        if r.released is None or run.released < r.released:
            first = "missing" if r.released is None else format_time(r.released)
            raise at.fail(where + "released", f"{format_time(run.released)} is before the workload's "
                          f"released ({first})")
        if r.phase.ended and run.finished is None:
            raise at.fail(where + "finished", f"is missing, but the workload ended ({r.phase.value})")
        if r.finished is not None and run.finished is not None and run.finished > r.finished:
            raise at.fail(where + "finished", f"{format_time(run.finished)} is after the workload's "
                          f"finished {format_time(r.finished)}")
    total: Resources = EMPTY
    for run in r.pods:
        total = add(total, run.requests)
    if {k: v for k, v in total.items() if v} != {k: v for k, v in r.requests.items() if v}:
        raise at.fail("requests", f"{_shown(r.requests)}, but its pods ask for {_shown(total)} together")


def _shown(requests: Resources) -> str:
    return "{" + ", ".join(f"{k}: {format_amount(v)}" for k, v in sorted(requests.items())) + "}"


def parse_record(data: object, line: int = 1, source: str = "trace") -> Record:
    """One decoded JSON line as a ``Record``; ``TraceError`` when a field is wrong."""
    if not isinstance(data, Mapping):
        raise TraceError(line, "", f"expected a JSON object, got {type(data).__name__}", source)
    at = _Line(data, line, source)
    group = at.text("group")
    group_size = at.integer("groupSize", 1, minimum=1)
    assert group_size is not None
    if not group and group_size != 1:
        raise at.fail("groupSize", f"is {group_size}, but the workload names no group")
    submitted = at.time("submitted", required=True)
    assert submitted is not None
    record = Record(
        namespace=at.text("namespace", required=True),
        name=at.text("name", required=True),
        queue=at.text("queue", required=True),
        submitted=submitted,
        phase=at.phase(),
        team=at.text("team"),
        workflow=at.text("workflow"),
        workflow_max_running=at.integer("workflowMaxRunning", None, minimum=1),
        group=group,
        group_size=group_size,
        submitter=at.text("submitter"),
        priority=at.integer("priority", 0) or 0,
        requests=at.requests(),
        released=at.time("released"),
        bound=at.time("bound"),
        node=at.text("node"),
        finished=at.time("finished"),
        again=at.integer("again", 0, minimum=0) or 0,
        pods=at.pods(),
    )
    if record.workflow_max_running is not None and not record.workflow:
        raise at.fail("workflowMaxRunning", "is set, but the workload names no workflow")
    _check_times(record, at)
    _check_pods(record, at)
    return record


def record_json(r: Record) -> RecordJSON:
    """``r`` as one trace line's object; fields at their defaults are left out."""
    out: RecordJSON = {
        "namespace": r.namespace,
        "name": r.name,
        "queue": r.queue,
        "submitted": format_time(r.submitted),
        "phase": r.phase.value,
    }
    if r.team:
        out["team"] = r.team
    if r.workflow:
        out["workflow"] = r.workflow
    if r.workflow_max_running is not None:
        out["workflowMaxRunning"] = r.workflow_max_running
    if r.group:
        out["group"] = r.group
        out["groupSize"] = r.group_size
    if r.submitter:
        out["submitter"] = r.submitter
    if r.priority:
        out["priority"] = r.priority
    if r.requests:
        out["requests"] = {name: format_amount(amount) for name, amount in sorted(r.requests.items())}
    if r.released is not None:
        out["released"] = format_time(r.released)
    if r.bound is not None:
        out["bound"] = format_time(r.bound)
    if r.finished is not None:
        out["finished"] = format_time(r.finished)
    if r.node:
        out["node"] = r.node
    if r.again:
        out["again"] = r.again
    if r.pods:
        out["pods"] = [_pod_json(run) for run in r.pods]
    return out


def _pod_json(run: PodRun) -> PodRunJSON:
    out: PodRunJSON = {"name": run.name, "released": format_time(run.released)}
    if run.requests:
        out["requests"] = {name: format_amount(amount) for name, amount in sorted(run.requests.items())}
    if run.bound is not None:
        out["bound"] = format_time(run.bound)
    if run.node:
        out["node"] = run.node
    if run.finished is not None:
        out["finished"] = format_time(run.finished)
    return out


# --- whole traces ---------------------------------------------------------------------------


def last_time(records: Iterable[Record]) -> float:
    """The last instant a trace knows about: its latest time of any kind (0 when empty)."""
    end = 0.0
    for r in records:
        for t in (r.submitted, r.released, r.bound, r.finished):
            if t is not None and t > end:
                end = t
    return end


def span(records: Iterable[Record]) -> tuple[float, float]:
    """The range a trace covers: its first submission to its latest time of any kind ((0, 0)
    when empty). A property of the trace alone, whatever is done with it."""
    listed = list(records)
    if not listed:
        return 0.0, 0.0
    return min(r.submitted for r in listed), last_time(listed)


def read(lines: Iterable[str], source: str = "trace") -> Iterator[Record]:
    """Records from JSON Lines; blank lines are skipped; a key seen twice is refused."""
    seen: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise TraceError(number, "", f"not JSON: {e.msg} at column {e.colno}", source) from e
        record = parse_record(data, number, source)
        first = seen.setdefault(record.key, number)
        if first != number:
            raise TraceError(
                number, "", f"workload {record.key} appears again (first at line {first})", source
            )
        yield record


def load(stream: IO[str], source: str = "trace") -> list[Record]:
    """Every record of an open trace file, in file order."""
    return list(read(stream, source))


def to_line(r: Record) -> str:
    """One trace line, without its newline."""
    return json.dumps(record_json(r), separators=(",", ":"), ensure_ascii=False)


def write(records: Iterable[Record], stream: IO[str]) -> int:
    """Write ``records`` as JSON Lines; returns how many were written."""
    count = 0
    for r in records:
        stream.write(to_line(r))
        stream.write("\n")
        count += 1
    return count
