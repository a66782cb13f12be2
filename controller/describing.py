"""What each pod's Dispatched condition should say after a cycle, and when to have it written.

After each decision the gate controller walks its pods once (in steps, ``controller.pacing``)
and asks the ``Explainer`` for a write only where the condition must change:

* a gated pod whose namespace left the team admission stamped on it: ``NamespaceLeftTeam``; one
  whose DRA claims ask for more than admission counted: ``ClaimsChanged``;
* a pending pod whose reason changed (its message's numbers go stale on purpose), once it has
  waited ``explain_after`` seconds;
* a released pod: dispatched, released by hand (with a Warning event), or, once kube-scheduler
  has refused it for ``unplaceable_after`` seconds, dispatched but waiting for Kubernetes (its
  Warning event at most once per ``event_interval``).

The ``Describer`` keeps the per-pod clocks those delays and intervals run on; the Explainer
compares each wish with what the pod carries, so a pod already saying the right thing is not
written again. Split out of ``controller.controlling``, which decides and releases.

Pending pods are looked at incrementally: a workload whose pods all say (or are being written
to say) what they should is remembered as *settled*, with its reason and the ``ManagedPod``
objects it had. The next cycle passes it over, without looking at its pods, while its reason is
the same and each pod is the very object the watch delivered then (a changed pod is a new
object) and no write for it was dropped (``Explainer.forgotten``). Only ``QueuePaused``, whose
message changes without its reason, is looked at every time; a ``NoNodeFits`` workload is
looked at again when the node inventory or its queue's node pool is a new object (a node came,
went or changed; the Queue changed), and its message is rewritten when it no longer matches.
So a cycle's cost in pods is that of what changed, not of every pending pod;
``incremental=False`` looks at every pod, and a property test holds the two equal.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from controller import conditions
from controller.explaining import Explainer
from controller.managed import ManagedPod
from controller.pacing import FEW, Steps
from controller.releasing import Releaser
from controller.settings import Settings
from kube.writing import Condition
from policy import keys
from policy.model import Snapshot, Workload
from policy.waiting import Waiting
from policy.workloads import group_key


@dataclass(frozen=True, slots=True)
class Held:
    """Pending workloads by (queue, reason): how many, and the creation time of the oldest; and
    those that can never run under what exists now by (queue, team, reason)."""

    counts: dict[tuple[str, str], int]
    oldest: dict[tuple[str, str], float]
    never_runs: dict[tuple[str, str, str], int]


@dataclass(frozen=True, slots=True)
class Unplaced:
    """Released pods that wait for Kubernetes to place them, by queue, and their workloads."""

    pods: Counter[str]
    workloads: Counter[str]


@dataclass(frozen=True, slots=True)
class _Settled:
    """A pending workload whose pods all said what they should, as they were then."""

    reason: keys.Reason
    never: bool
    pods: tuple[ManagedPod | None, ...]
    nodes: object = None
    """For ``NoNodeFits``: the node inventory and the queue's node pool its words were worked
    out from (compared by identity: a change of either is a new object)."""
    pool: object = None


class Describer:
    def __init__(
        self, settings: Settings, explainer: Explainer, releaser: Releaser, *, incremental: bool = True
    ) -> None:
        self.settings = settings
        self.explainer = explainer
        self.releaser = releaser
        self.incremental = incremental
        self._first_pending: dict[str, float] = {}
        self._members: dict[str, tuple[str, ...]] = {}
        """Each pending workload's pods, for letting their clocks go when it leaves."""
        self._owner: dict[str, str] = {}
        """Each pod's workload, as last looked at (a pod that moved keeps its clock)."""
        self._settled: dict[str, _Settled] = {}
        self._unplaceable_since: dict[str, float] = {}
        self._unscheduled_since: dict[str, float] = {}
        self._event_at: dict[str, float] = {}
        self.looked_at = 0
        """Pending pods looked at, in all (the incremental walk's work, for tests and benchmarks)."""

    def clear(self) -> None:
        """Leadership lost: the next term starts every clock anew."""
        self._first_pending.clear()
        self._members.clear()
        self._owner.clear()
        self._settled.clear()
        self._unplaceable_since.clear()
        self._unscheduled_since.clear()
        self._event_at.clear()

    def strays(
        self, strays: Iterable[tuple[ManagedPod, Condition]]
    ) -> Steps[tuple[Counter[tuple[str, str]], dict[tuple[str, str], float]]]:
        """Gated pods held before dispatch, each with its condition (its namespace left its team,
        or its claims changed): they say so (written once, not per cycle: ``Explainer.want``
        skips a pod that already carries the condition); the count by queue and reason, and the
        creation time of the oldest, for the waiting gauges, so an alert can see them."""
        counts: Counter[tuple[str, str]] = Counter()
        oldest: dict[tuple[str, str], float] = {}
        for n, (stray, condition) in enumerate(strays):
            if n % FEW == 0:
                yield None
            labels = (stray.pod.queue, condition.reason)
            counts[labels] += 1
            oldest[labels] = min(oldest.get(labels, stray.pod.created), stray.pod.created)
            self.explainer.want(stray, condition)
        return counts, oldest

    def pending(
        self, pending: Mapping[str, Workload], waiting: Waiting, managed: Mapping[str, ManagedPod],
        mono: float, snapshot: Snapshot | None = None,
    ) -> Steps[tuple[Held, float]]:
        """Conditions of pending pods whose reason changed; what waits (``Held``), and when the
        next pod becomes due for an explanation."""
        counts: Counter[tuple[str, str]] = Counter()
        oldest: dict[tuple[str, str], float] = {}
        never_runs: Counter[tuple[str, str, str]] = Counter()
        after = self.settings.explain_after_seconds
        due = math.inf
        first_pending, members, owner = self._first_pending, self._members, self._owner
        settled = self._settled
        current: dict[str, _Settled | None] = {}
        forgotten = self.explainer.take_forgotten()
        for n, (key, reason, never) in enumerate(waiting.answers()):
            if n % FEW == 0:
                yield None
            w = pending.get(key)
            if w is None:
                continue
            labels = (w.queue, reason.value)
            counts[labels] += 1
            oldest[labels] = min(oldest.get(labels, w.created), w.created)
            if never or reason in (keys.Reason.NO_NODE_FITS, keys.Reason.RELEASE_REFUSED):
                never_runs[(w.queue, w.team, reason.value)] += 1
            was = settled.get(key)
            nodes, pool = _basis(reason, w, snapshot)
            if (self.incremental and was is not None and was.reason is reason and was.never == never
                    and was.nodes is nodes and was.pool is pool
                    and reason is not keys.Reason.QUEUE_PAUSED and _same(w, was, managed, forgotten)):
                current[key] = was
                continue
            uids = tuple(pod.uid for pod in w.pods)
            for gone in set(members.get(key, ())).difference(uids):
                _forget(gone, key, owner, first_pending)
            members[key] = uids
            answer: tuple[keys.Reason, str] | None = None  # worked out once, when first needed
            done = True
            for pod in w.pods:
                self.looked_at += 1
                owner[pod.uid] = key
                first = first_pending.setdefault(pod.uid, mono)
                found = managed.get(pod.uid)
                if found is None or not pod.gated:
                    continue
                # QueuePaused covers a paused queue and a missing one, NoNodeFits the nodes and
                # the node pool as they are now: their messages (no counts that go stale on
                # purpose) are rewritten when they change without the reason.
                if self.explainer.shows(found, "False", reason.value, never=never):
                    if reason not in _WORDED:
                        continue
                    answer = answer or waiting.answer(key)
                    if self.explainer.says(found, answer[1]):
                        continue
                if mono < first + after:
                    due = min(due, first + after)
                    done = False
                    continue
                answer = answer or waiting.answer(key)
                wanted = conditions.waiting(*answer)
                self.explainer.want(found, wanted)  # its words go in the held annotation, no event
            pods = tuple(managed.get(u) for u in uids)
            current[key] = _Settled(reason, never, pods, nodes, pool) if done else None
        for left in members.keys() - current.keys():  # released, deleted, or regrouped
            for uid in members.pop(left):
                _forget(uid, left, owner, first_pending)
        self._settled = {k: s for k, s in current.items() if s is not None}
        return Held(dict(counts), oldest, dict(never_runs)), due

    def released(
        self, managed: Mapping[str, ManagedPod], mono: float
    ) -> Steps[tuple[Unplaced, float]]:
        """Conditions of released pods: dispatched, or waiting for Kubernetes to place them (the
        scheduler reports it cannot, or no scheduler has looked at the pod for
        ``unscheduled_after_seconds``); the unplaced pods and workloads by queue."""
        unplaceable: Counter[str] = Counter()
        workloads: dict[str, set[str]] = {}
        since_seen: dict[str, float] = {}
        unscheduled_seen: dict[str, float] = {}
        after = self.settings.unplaceable_after_seconds
        unscheduled_after = self.settings.unscheduled_after_seconds
        interval = self.settings.event_interval_seconds
        due = math.inf
        for n, (uid, found) in enumerate(managed.items()):
            if n % FEW == 0:
                yield None
            pod = found.pod
            if pod.gated or uid in self.releaser or not found.marked:  # unmarked: never gated by us
                continue
            refused = ""
            if not pod.node_name and not pod.unschedulable and pod.unscheduled:
                looked_for = unscheduled_seen[uid] = self._unscheduled_since.get(uid, mono)
                if mono >= looked_for + unscheduled_after:
                    refused = conditions.unscheduled(pod.unscheduled, mono - looked_for)
                else:
                    due = min(due, looked_for + unscheduled_after)
            if pod.node_name or not (pod.unschedulable or refused):  # placed, or not refused
                if not self.explainer.shows_dispatched(found):
                    wanted = conditions.for_released(found)
                    by_hand = not found.dispatched_by_sluicegate and not self.explainer.shows(
                        found, "True", wanted.reason)
                    event = conditions.released_outside_dispatch(pod, wanted) if by_hand else None
                    self.explainer.want(found, wanted, event=event)
                continue
            wanted = conditions.for_released(found, refused)
            current = self.explainer.current(found)
            unplaceable[pod.queue] += 1
            workloads.setdefault(pod.queue, set()).add(group_key(pod) if pod.group else pod.key)
            since = since_seen[uid] = self._unplaceable_since.get(uid, mono)
            if current == wanted:
                continue
            if mono < since + after:
                due = min(due, since + after)
                continue
            event = None
            last = self._event_at.get(uid)
            if last is None or mono - last >= interval:
                self._event_at[uid] = mono
                event = conditions.waiting_for_placement(pod, wanted)
            self.explainer.want(found, wanted, event=event)
        self._unplaceable_since = since_seen
        self._unscheduled_since = unscheduled_seen
        self._event_at = {uid: at for uid, at in self._event_at.items() if uid in managed}
        return Unplaced(unplaceable, Counter({q: len(keys_) for q, keys_ in workloads.items()})), due


_WORDED: Final = frozenset({keys.Reason.QUEUE_PAUSED, keys.Reason.NO_NODE_FITS, keys.Reason.RELEASE_REFUSED})
"""Reasons whose message is compared too, not the reason alone."""


def _basis(reason: keys.Reason, w: Workload, snapshot: Snapshot | None) -> tuple[object, object]:
    """What a ``NoNodeFits`` message is worked out from besides the pods: the node inventory and
    the queue's node pool (None, None for any other reason, or without a snapshot)."""
    if reason is not keys.Reason.NO_NODE_FITS or snapshot is None:
        return None, None
    queue = snapshot.queues.get(w.queue)
    return snapshot.nodes, queue.node_pool if queue is not None else None


def _same(w: Workload, was: _Settled, managed: Mapping[str, ManagedPod], forgotten: frozenset[str]) -> bool:
    """The workload's pods are the very objects they were when it settled, and no write meant
    for one of them was dropped since."""
    if len(w.pods) != len(was.pods):
        return False
    for pod, then in zip(w.pods, was.pods, strict=True):
        found = managed.get(pod.uid)
        if found is not then or pod.uid in forgotten:
            return False
        if found is not None and found.pod is not pod:  # the same pod, seen anew by the snapshot
            return False
    return True


def _forget(uid: str, key: str, owner: dict[str, str], first_pending: dict[str, float]) -> None:
    """Let a pod's clock go as it leaves workload ``key``, unless it is in another one now."""
    if owner.get(uid, key) == key:
        owner.pop(uid, None)
        first_pending.pop(uid, None)
