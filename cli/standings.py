"""Where every queue and every pending pod stands: the controller's own decision, taken again.

The CLI reads what the controller reads (the Queues, Teams, Presets, the Policy, the opted-in
namespaces, the managed pods that are not finished: ``policy.marks``' selectors, and the Nodes,
for the node inventory, when the reader may list them), sorts the
pods by the controller's own rule (``policy.membership``: a released pod counts toward the team
admission stamped on it whatever its namespace says now; a gated pod whose namespace left that
team is held with ``NamespaceLeftTeam``; pods admission never marked count for nothing), builds
the Snapshot from the pods that count (``policy.workloads.build_workloads``, which the
controller's incremental building equals) and calls ``policy.dispatching.dispatch``. So a pod's
position and reason are the ones the controller works out; only the round-robin turn between
queues of equal priority is unknown here (it lives in the leader's memory), so the CLI starts
from the first queue by name, as a restarted controller does. A property test holds the two
equal (tests/property/test_standing_properties.py).

Pure: no I/O. ``cli.clusters`` reads the objects; the commands render the answers. Only
``policy`` is used: the CLI imports nothing of the controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from policy import fields, keys
from policy.catalog import Catalog
from policy.dispatching import Decision, dispatch
from policy.fields import InvalidObject, Obj
from policy.inventory import Inventory
from policy.marks import counts_for_dispatch
from policy.membership import Membership, held_for_claims, left_team_message, membership
from policy.model import Namespace, Snapshot, State, Workload
from policy.placing import Node
from policy.pods import Pod
from policy.quantities import QuantityError
from policy.usage import display, tally
from policy.workloads import build_workloads

HELD = "held"
RELEASING = "releasing"
UNPLACEABLE_STATE = "unplaceable"
RELEASING_MESSAGE = "fits now: the controller releases it on its next cycle"


@dataclass(frozen=True, slots=True)
class Observation:
    """What was read from the API server, as it came (raw JSON), and when."""

    queues: Sequence[Obj] = ()
    teams: Sequence[Obj] = ()
    presets: Sequence[Obj] = ()
    policy: Obj | None = None
    namespaces: Sequence[Obj] = ()
    pods: Sequence[Obj] = ()
    now: float = 0.0
    nodes: Sequence[Obj] | None = None
    """The Nodes; None when not read (then the nodes are not known: every pod fits one)."""


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    priority: int | None  # None: pods name a queue that does not exist
    running: str  # "3/8", "3/-"
    pending: int
    gpus: str  # "12/16", "12/-"
    oldest_wait: float | None  # seconds the oldest pending workload has waited
    paused: bool
    ordering: str
    never: int | None  # pending workloads that can never run under the current limits (None: unknown)
    unplaceable: int | None  # released pods kube-scheduler cannot place (None: unknown)


@dataclass(frozen=True, slots=True)
class Expected:
    """When a waiting pod is expected to start, as the visibility API serves it: seconds from its
    list's ``now`` (``p90`` None: beyond the estimate's horizon), or why nobody can say."""

    p10: float | None = None
    p50: float | None = None
    p90: float | None = None
    unknown: str = ""  # the reason, when it is unknown

    def as_json(self) -> dict[str, float | str]:
        if self.p50 is None:
            return {"unknown": self.unknown}
        out: dict[str, float | str] = {"p50Seconds": self.p50}
        if self.p10 is not None:
            out["p10Seconds"] = self.p10
        if self.p90 is not None:
            out["p90Seconds"] = self.p90
        return out


@dataclass(frozen=True, slots=True)
class Entry:
    """One pending pod: held by Sluicegate, about to be released, or released but unplaceable."""

    namespace: str
    name: str
    queue: str
    team: str
    state: str  # HELD | RELEASING | UNPLACEABLE_STATE
    reason: str  # the Dispatched condition's reason ("Dispatched" once released)
    message: str
    position: int | None  # 1-based among the workloads still waiting in its queue
    waited: float
    gpus: int
    priority: int
    workflow: str
    workload: str
    ahead: int | None = None
    """Workloads of its queue that go first (the visibility API's ``workloadsAhead``); None: not read."""
    expected: Expected | None = None
    """When it is expected to start; None: the visibility API did not say."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Standing:
    snapshot: Snapshot
    decision: Decision
    catalog: Catalog
    entries: tuple[Entry, ...]  # in dispatch order; then those held outside it; the unplaceable last
    unreadable: tuple[str, ...] = ()  # pods that could not be read, and why
    running: Mapping[str, tuple[Workload, ...]] = field(default_factory=dict)  # queue -> running

    def lineup(self, *, queue: str = "", namespace: str = "") -> list[Entry]:
        return [e for e in self.entries
                if (not queue or e.queue == queue) and (not namespace or e.namespace == namespace)]

    def entry(self, namespace: str, name: str) -> Entry | None:
        for e in self.entries:
            if e.namespace == namespace and e.name == name:
                return e
        return None

    def ahead_of(self, entry: Entry) -> list[Entry]:
        """The pods of workloads before ``entry``'s in its queue (releasing ones first)."""
        if entry.position is None:
            return []
        return [e for e in self.entries if e.queue == entry.queue and e.workload != entry.workload
                and (e.state == RELEASING or (e.position is not None and e.position < entry.position))]

    def queue_rows(self) -> list[QueueRow]:
        # The cluster as it is: a pod that fits now is still gated, so pending, not running
        # (the decision's usage counts it as released already).
        snapshot = self.snapshot
        usage = tally(snapshot.workloads, snapshot.queues)
        managed = snapshot.policy.managed_resources
        never = self.decision.waiting.impossible()
        unplaceable: dict[str, int] = {}
        for e in self.entries:
            if e.state == UNPLACEABLE_STATE:
                unplaceable[e.queue] = unplaceable.get(e.queue, 0) + 1
        names = set(snapshot.queues) | {w.queue for w in snapshot.workloads if w.state is not State.FINISHED}
        rows = []
        for name in sorted(names):
            q = usage.queue(name)
            queue = snapshot.queues.get(name)
            shown = display(q.running, queue.max_running if queue else None, q.requests,
                            queue.quota if queue else {}, managed)
            oldest = None if q.oldest_pending is None else max(0.0, snapshot.now - q.oldest_pending)
            rows.append(QueueRow(
                name=name, priority=queue.priority if queue else None, running=shown["running"],
                pending=q.pending, gpus=shown["gpus"], oldest_wait=oldest,
                paused=bool(queue and queue.paused), ordering=str(queue.ordering) if queue else "-",
                never=never.get(name, 0), unplaceable=unplaceable.get(name, 0),
            ))
        rows.sort(key=lambda r: (-(r.priority if r.priority is not None else -(2**63)), r.name))
        return rows


def namespace_teams(namespaces: Iterable[Obj]) -> dict[str, str]:
    """Namespace -> the team it opts in to, for the opted-in namespaces."""
    out = {}
    for obj in namespaces:
        try:
            ns = Namespace.parse(obj)
        except InvalidObject:
            continue
        if ns.team:
            out[ns.name] = ns.team
    return out


@dataclass(frozen=True, slots=True)
class Sorted:
    """The live pods that were read, by ``policy.membership``: those that count (the controller's
    snapshot holds exactly these), the gated ones whose namespace left their team, and the pods
    that could not be read."""

    counting: tuple[Pod, ...]
    left_team: tuple[Pod, ...]
    unreadable: tuple[str, ...] = ()
    claims_changed: tuple[tuple[Pod, str], ...] = ()
    """Gated pods the controller holds because their DRA claims changed, with its message."""


def sort_pods(pods: Iterable[Obj], teams: Mapping[str, str]) -> Sorted:
    """Sort what was read as the controller sorts its pods (``policy.membership``), given each
    opted-in namespace's team; finished pods are left out, as the controller's watch leaves them."""
    counting: list[Pod] = []
    left: list[Pod] = []
    unreadable: list[str] = []
    changed: list[tuple[Pod, str]] = []
    for obj in pods:
        try:
            pod = Pod.parse(obj)
        except (InvalidObject, QuantityError) as e:
            unreadable.append(str(e))
            continue
        if pod.terminal:
            continue
        standing = membership(pod, teams.get(pod.namespace), marked=counts_for_dispatch(pod))
        if standing is Membership.COUNTS and held_for_claims(pod):
            changed.append((pod, (_dispatched(obj) or ("", "", ""))[2]))
        elif standing is Membership.COUNTS:
            counting.append(pod)
        elif standing is Membership.LEFT_TEAM:
            left.append(pod)
    return Sorted(tuple(counting), tuple(left), tuple(unreadable), tuple(changed))


def stand(seen: Observation) -> Standing:
    """Take the controller's decision on what was seen."""
    catalog = Catalog.from_objects(queues=seen.queues, teams=seen.teams, presets=seen.presets,
                                   policy=seen.policy)
    pods = sort_pods(seen.pods, namespace_teams(seen.namespaces))
    snapshot = Snapshot(catalog.queues, catalog.teams, catalog.policy, build_workloads(pods.counting),
                        seen.now, inventory(seen.nodes), refusals(seen.pods))
    decision = dispatch(snapshot)
    return Standing(snapshot, decision, catalog, _entries(snapshot, decision, pods), pods.unreadable,
                    _running(snapshot))


def refusals(pods: Iterable[Obj]) -> dict[str, str]:
    """The gated pods whose release the API server refused, as the controller says on each
    (``ReleaseRefused``): only the controller saw the refusal, so its condition is the record."""
    out: dict[str, str] = {}
    for obj in pods:
        found = _dispatched(obj)
        if found is None or found[:2] != ("False", keys.Reason.RELEASE_REFUSED.value):
            continue
        uid = str(fields.obj(obj.get("metadata")).get("uid") or "")
        if uid:
            out[uid] = found[2]
    return out


def inventory(nodes: Sequence[Obj] | None) -> Inventory | None:
    """The node inventory the controller decides with (``policy.inventory``), from the Nodes
    read; a Node that does not parse is left out, as the controller's reflector leaves it."""
    if nodes is None:
        return None
    parsed = []
    for obj in nodes:
        try:
            parsed.append(Node.parse(obj))
        except InvalidObject:
            continue
    return Inventory(parsed)


UNDECIDED: Final = "not yet decided by the controller"
LIMITED_NOTE: Final = ("from the pods' Dispatched conditions: positions unknown (not allowed to read "
                       "every namespace's pods)")
STATUS_NOTE: Final = ("from the Queue status the controller writes (not allowed to read every "
                      "namespace's pods)")


def from_conditions(seen: Observation) -> tuple[Entry, ...]:
    """The pending pods of what was seen (one namespace's), as their Dispatched condition says:
    the fallback when the controller's decision cannot be taken again for want of every
    namespace's pods. No position: that needs the whole queue."""
    catalog = Catalog.from_objects(queues=seen.queues, teams=seen.teams, presets=seen.presets,
                                   policy=seen.policy)
    resources = catalog.policy.managed_resources
    conditions = {_key(obj): _dispatched(obj) for obj in seen.pods}
    pods = sort_pods(seen.pods, namespace_teams(seen.namespaces))
    held: list[Entry] = []
    unplaceable: list[Entry] = []
    for pod in (*pods.counting, *pods.left_team, *(p for p, _ in pods.claims_changed)):
        gpus = sum(pod.requests.get(r, 0) for r in resources) // 1000
        workflow = f"{pod.namespace}/{pod.workflow}" if pod.workflow else ""
        waited = max(0.0, seen.now - pod.created)
        if pod.gated:
            c = conditions.get(pod.key)
            decided = c is not None and c[0] == "False"
            reason, message = (c[1], c[2]) if c is not None and decided else ("", UNDECIDED)
            held.append(Entry(pod.namespace, pod.name, pod.queue, pod.team, HELD, reason, message, None,
                              waited, gpus, pod.priority, workflow, pod.key))
        elif not pod.node_name and pod.unschedulable:
            unplaceable.append(Entry(pod.namespace, pod.name, pod.queue, pod.team, UNPLACEABLE_STATE,
                                     keys.DISPATCHED_REASON, keys.UNPLACEABLE + pod.unschedulable, None,
                                     waited, gpus, pod.priority, workflow, pod.key))
    held.sort(key=lambda e: (e.queue, -e.priority, -e.waited, e.name))
    unplaceable.sort(key=lambda e: e.key)
    return (*held, *unplaceable)


VISIBLE_NOTE: Final = ("from the visibility API (visibility.sluicegate.dev): positions as the controller "
                        "works them out")


def from_visibility(items: Sequence[Obj], seen: Observation) -> tuple[Entry, ...]:
    """The pending pods the visibility API serves for a namespace, in its order (the queue's),
    each with its position, the workloads ahead and the expected start; what the API does not
    say (GPUs, pod priority, workflow) comes from the pods read, as ``from_conditions`` has it."""
    known = {e.key: e for e in from_conditions(seen)}
    out: list[Entry] = []
    for item in items:
        meta = fields.obj(item.get("metadata"))
        key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        base = known.get(key)
        if base is None or base.state != HELD:  # released meanwhile, or not a pod this reader read
            continue
        position, ahead = item.get("position"), item.get("workloadsAhead")
        reason = str(item.get("reason") or "")
        out.append(replace(
            base, queue=str(item.get("queue") or base.queue), reason=reason,
            message=str(item.get("message") or ""), state=HELD if reason else RELEASING,
            position=position if isinstance(position, int) else None,
            ahead=ahead if isinstance(ahead, int) else None, expected=expected_of(item)))
    return tuple(out)


def expected_of(item: Obj) -> Expected | None:
    start = fields.obj(item.get("expectedStart"))
    unknown = start.get("unknown")
    if isinstance(unknown, str) and unknown:
        return Expected(unknown=unknown)
    p10, p50, p90 = (start.get(f"p{n}Seconds") for n in (10, 50, 90))
    if not isinstance(p50, int | float):
        return None
    return Expected(float(p10) if isinstance(p10, int | float) else None, float(p50),
                    float(p90) if isinstance(p90, int | float) else None)


def expected_start(expected: Expected | None) -> str:
    """``~14m (9–31m)``: the wait until it is expected to start, and the band it starts within
    eight times in ten (p10 to p90; ``>1d`` beyond the estimate's horizon); ``unknown`` when
    nobody can say (``expected_words`` says why)."""
    if expected is None or expected.p50 is None:
        return "unknown"
    if expected.p50 < 1:
        return "now"
    low = expected.p10 if expected.p10 is not None else expected.p50
    return f"~{_duration(expected.p50)} ({_band(low, expected.p90)})"


def expected_words(expected: Expected | None) -> str:
    """The line ``explain`` says: ``expected to start in about 14m (9–31m)``, or why not."""
    if expected is None:
        return ""
    if expected.p50 is None:
        return f"start time unknown: {expected.unknown}"
    if expected.p50 < 1:
        return "expected to start now"
    low = expected.p10 if expected.p10 is not None else expected.p50
    return f"expected to start in about {_duration(expected.p50)} ({_band(low, expected.p90)})"


def _band(low: float, high: float | None) -> str:
    """``9–31m``; ``40m–2h`` across units; ``9m–>1d`` when the top is beyond the horizon."""
    if high is None:
        return f"{_duration(low)}–>1d"
    a, b = _duration(low), _duration(high)
    if a[-1] == b[-1] and a[-1] in "smh" and not a[-2].isalpha():
        return f"{a[:-1]}–{b}"
    return f"{a}–{b}"


def _duration(seconds: float) -> str:
    if seconds >= 5400:
        return f"{round(seconds / 3600)}h"
    if seconds >= 90:
        return f"{round(seconds / 60)}m"
    return f"{round(seconds)}s"


def _key(obj: Obj) -> str:
    meta = fields.obj(obj.get("metadata"))
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _dispatched(obj: Obj) -> tuple[str, str, str] | None:
    """The pod's ``sluicegate.dev/Dispatched`` condition: status, reason, message."""
    for raw in fields.obj(obj.get("status")).get("conditions") or ():
        c = fields.obj(raw)
        if c.get("type") == keys.CONDITION:
            return str(c.get("status") or ""), str(c.get("reason") or ""), str(c.get("message") or "")
    return None


def status_rows(queues: Iterable[Obj], now: float) -> list[QueueRow]:
    """Every queue as the controller last wrote its status (what ``kubectl get queues`` prints):
    the fallback for a user who may not read every namespace's pods."""
    rows = []
    for obj in queues:
        meta, spec, status = (fields.obj(obj.get(k)) for k in ("metadata", "spec", "status"))
        shown = fields.obj(status.get("display"))
        try:
            oldest_at = fields.timestamp(status.get("oldestPendingTime"), "status.oldestPendingTime")
        except InvalidObject:
            oldest_at = 0.0
        priority = spec.get("priority")
        pending = status.get("pending")
        rows.append(QueueRow(
            name=str(meta.get("name") or ""), priority=priority if isinstance(priority, int) else 0,
            running=str(shown.get("running") or "-"), pending=pending if isinstance(pending, int) else 0,
            gpus=str(shown.get("gpus") or "-"), oldest_wait=max(0.0, now - oldest_at) if oldest_at else None,
            paused=spec.get("paused") is True, ordering=str(spec.get("ordering") or "-"),
            never=None, unplaceable=None,
        ))
    rows.sort(key=lambda r: (-(r.priority or 0), r.name))
    return rows


def _running(snapshot: Snapshot) -> dict[str, tuple[Workload, ...]]:
    out: dict[str, list[Workload]] = {}
    for w in snapshot.workloads:
        if w.state is State.RUNNING:
            out.setdefault(w.queue, []).append(w)
    return {q: tuple(sorted(ws, key=lambda w: (w.created, w.key))) for q, ws in out.items()}


def _gpus(w: Workload, managed: Sequence[str]) -> int:
    return sum(w.requests.get(r, 0) for r in managed) // 1000


def _entries(snapshot: Snapshot, decision: Decision, pods: Sorted) -> tuple[Entry, ...]:
    resources = snapshot.policy.managed_resources
    now = snapshot.now
    by_key = {w.key: w for w in snapshot.workloads}

    def entries_of(w: Workload, state: str, reason: str, message: str, position: int | None) -> list[Entry]:
        return [Entry(p.namespace, p.name, w.queue, w.team, state, reason, message, position,
                      max(0.0, now - w.created), _gpus(w, resources), w.priority, w.workflow, w.key)
                for p in sorted(w.pods, key=lambda p: p.name) if p.gated]

    def alone(pod: Pod, state: str, reason: str, message: str) -> Entry:
        gpus = sum(pod.requests.get(r, 0) for r in resources) // 1000
        return Entry(pod.namespace, pod.name, pod.queue, pod.team, state, reason, message, None,
                     max(0.0, now - pod.created), gpus, pod.priority,
                     f"{pod.namespace}/{pod.workflow}" if pod.workflow else "", pod.key)

    releasing = [e for w in decision.release for e in entries_of(w, RELEASING, "", RELEASING_MESSAGE, None)]
    held: list[tuple[tuple[int, int, str], list[Entry]]] = []
    for key, wait in decision.waiting.items():
        w = by_key[key]
        queue = snapshot.queues.get(w.queue)
        level = queue.priority if queue is not None else 0
        held.append(((-level, wait.position, w.queue),
                     entries_of(w, HELD, wait.reason.value, wait.message, wait.position)))
    held.sort(key=lambda pair: pair[0])
    # Held before dispatch, so without a position: their namespace left the team they count for.
    left = [alone(pod, HELD, keys.Reason.NAMESPACE_LEFT_TEAM.value, left_team_message(pod))
            for pod in sorted(pods.left_team, key=lambda p: p.key)]
    left += [alone(pod, HELD, keys.Reason.CLAIMS_CHANGED.value, message)
             for pod, message in sorted(pods.claims_changed, key=lambda pair: pair[0].key)]
    unplaceable = [alone(pod, UNPLACEABLE_STATE, keys.DISPATCHED_REASON, keys.UNPLACEABLE + pod.unschedulable)
                   for pod in sorted(pods.counting, key=lambda p: p.key)
                   if not pod.gated and not pod.node_name and pod.unschedulable]
    return (*releasing, *(e for _, group in held for e in group), *left, *unplaceable)
