"""The gate controller: a level-triggered loop that releases gated pods as policy allows.

Every change in the cache (a pod, a Queue, a Team, the Policy) kicks a coalescing queue; a
burst of kicks makes one *cycle*. A cycle runs only on the leader and does no I/O itself:

1. snapshot: the managed pods as the cache holds them, with the releases assumed but not yet
   confirmed counted as released (``assumptions``), grouped into workloads, and the Catalog;
2. decide: ``decide`` (the one call of ``policy.dispatching.dispatch``), with the round-robin
   turns the previous cycle left;
3. release: each released pod is assumed at once and handed to the ``Releaser``, which removes
   the gate beside the next cycles;
4. explain: conditions for pods whose reason changed, and for released pods kube-scheduler
   cannot place (``Describer`` decides which, ``Explainer`` writes them);
5. report: gauges now, Queue/Team/Policy status at a bounded rate (``Reporter``).

A cycle over a deep backlog is long (about a second of CPU at 100k pending pods), and the loop
it runs on also serves the watches, the gate removals and the scheduler extender. So the
process runs each cycle in steps (``controller.pacing``): the decision and the figures, which
are pure, in a worker thread; the rest on the loop, a batch at a time, pausing whenever it has
held the loop for ``SLICE_SECONDS``. Everything a cycle reads it copies at its start, or
tolerates changing between batches; a cycle that loses the lead stops at its next pause.
``cycle()`` runs the same steps at once (tests).

The first cycle of a term as leader waits until the cache has caught up with a fresh list
from the API server, so a standby that takes over never decides from a view older than what
the previous leader did. Losing the lead drops every assumption, queued write and turn: the
next term rebuilds from the API server, as a restarted controller does.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Final, Protocol

from controller import conditions, statuses
from controller.assumptions import Assumptions
from controller.coalescing import Coalescer
from controller.describing import Describer
from controller.explaining import Explainer
from controller.managed import FIELD_SELECTOR, LABEL_SELECTOR, ManagedPod
from controller.metrics import ControllerMetrics
from controller.pacing import Freezer, Offload, Steps, batches, run_paced, run_through
from controller.releasing import Release, Releaser
from controller.reporting import Reporter
from controller.settings import Settings
from controller.snapshots import SnapshotBuilder
from kube.connecting import Connection, KubeError
from kube.reflecting import Change
from kube.resources import PODS
from kube.writing import Condition, Refused, Ungate, micro_time
from policy import keys
from policy.admitting import release_crowded
from policy.catalog import Catalog
from policy.devices import claims_changed
from policy.dispatching import Decision, Orders, Turns, dispatch
from policy.fields import Obj
from policy.membership import Membership, membership
from policy.model import Nodes, Snapshot, State, Workload
from policy.usage import reported_resources

log = logging.getLogger(__name__)

# How long the first cycle of a term waits for the cache to catch up with a fresh list.
FENCE_SECONDS: Final = 5.0
# A release that failed for good is decided again after this pause, not at once.
RETRY_SECONDS: Final = 1.0
MAX_PAUSE_SECONDS: Final = 0.5
# A cycle holds the event loop at most about this long before it lets other work run.
SLICE_SECONDS: Final = 0.005
# From this many workloads on, a cycle's decision runs in a worker thread (below: on the loop).
OFFLOAD_WORKLOADS: Final = 2_000


class PodSource(Protocol):
    """The managed pods, converted (``kube.reflecting.Reflector[ManagedPod]``)."""

    @property
    def resource_version(self) -> str: ...

    def items(self) -> Iterator[tuple[str, ManagedPod]]: ...

    def values(self) -> Iterator[ManagedPod]: ...

    def get(self, uid: str) -> ManagedPod | None: ...

    def version(self, uid: str) -> str: ...


class Leadership(Protocol):
    @property
    def leading(self) -> bool: ...

    @property
    def identity(self) -> str: ...


def decide(snapshot: Snapshot, turns: Turns, orders: Orders | None = None) -> Decision:
    """The controller's one call of policy's dispatch decision."""
    return dispatch(snapshot, turns, orders)


def _think(
    snapshot: Snapshot, turns: Turns, orders: Orders
) -> tuple[Decision, statuses.Figures, dict[str, Workload]]:
    """The pure part of a cycle, off the loop: the decision, the figures it leaves, and the
    pending workloads by key; the look-up of waiting answers by key is worked out here too."""
    decision = decide(snapshot, turns, orders)
    decision.waiting.index()
    decision.waiting.impossible()  # works out, per queue, whether any of its work can never run
    figures = statuses.figures(snapshot, decision.usage, [w.key for w in decision.release])
    pending = {w.key: w for w in snapshot.workloads if w.state is State.PENDING}
    return decision, figures, pending


def _newer_or_same(have: str, want: str) -> bool:
    if not have:
        return False
    try:
        return int(have) >= int(want)
    except ValueError:  # resourceVersions are opaque; etcd's are integers, and equal is safe anyway
        return have == want


REFUSED: Final = "the API server refused to release it: "
"""How a ``ReleaseRefused`` message begins; the API server's words follow."""
CANNOT_RELEASE: Final = "the API server would refuse to release it: "
"""How a ``ReleaseRefused`` message begins when the controller knows the release cannot pass and
does not try (``policy.admitting.release_crowded``)."""


def _release_facts(managed: ManagedPod) -> tuple[object, ...]:
    """What decides whether the release patch can pass: the gates it tests and the annotations it
    adds to (but the held annotation, which only the controller writes, as it holds the pod)."""
    notes = managed.pod.annotations
    if keys.HELD_ANNOTATION in notes:
        notes = {k: v for k, v in notes.items() if k != keys.HELD_ANNOTATION}
    return managed.gates, managed.has_annotations, notes


def _facts(managed: ManagedPod, assumed: bool) -> tuple[object, ...]:
    """What a cycle reads of a pod, with a release this controller assumed counted as done: two
    versions of a pod with the same facts make the same decision and the same explanation."""
    pod = managed.pod
    notes = pod.annotations
    released = not pod.gated or assumed
    return (
        pod.labels, pod.requests, pod.priority, pod.created, pod.terminal, released,
        managed.gates if not released else (), managed.has_annotations or assumed,
        notes.get(keys.WORKFLOW_MAX_RUNNING_ANNOTATION), notes.get(keys.GROUP_SIZE_ANNOTATION),
        keys.DISPATCHED_AT_ANNOTATION in notes or assumed,
        "" if pod.node_name else pod.unschedulable,  # what the scheduler says of an unplaced pod
        managed.claims if not released else None,  # the claims Kubernetes made for it, by name
    )


@dataclass(frozen=True, slots=True)
class Parts:
    """The collaborators a GateController works with, built and wired by the process's
    composition root (``controller.serving.gate_controller``)."""

    queue: Coalescer
    """The work queue: a burst of kicks makes one cycle."""
    assumed: Assumptions
    snapshots: SnapshotBuilder
    releaser: Releaser
    explainer: Explainer
    describer: Describer
    reporter: Reporter
    freezer: Freezer


class GateController:
    def __init__(
        self,
        settings: Settings,
        connection: Connection,
        pods: PodSource,
        catalog: Callable[[], Catalog],
        leadership: Leadership,
        metrics: ControllerMetrics,
        parts: Parts,
        *,
        team_of: Callable[[str], str | None] | None = None,
        nodes: Callable[[], Nodes | None] = lambda: None,
        claims: Callable[[str], Callable[[str], Obj | None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.connection = connection
        """Used for one thing: the fresh list that fences a new term's first cycle."""
        self.pods = pods
        self.catalog = catalog
        self.team_of = team_of
        """The team a namespace opts in to now (None: none), for ``policy.membership``; without
        it every namespace is taken to opt in to the team admission stamped on its pods."""
        self.nodes = nodes
        """The node inventory now (``policy.inventory``): dispatch releases no workload that no
        node could hold. None: the nodes are not known, and every pod is taken to fit."""
        self.claims = claims
        """The ResourceClaims of a namespace now, ``name -> spec`` (``kube.claims``): a gated pod
        whose claims ask for more than admission counted is not released
        (``policy.devices.claims_changed``). None: claims are taken to be as admission saw them."""
        self.leadership = leadership
        self.metrics = metrics
        self._clock = clock
        self._wall = wall
        self.queue = parts.queue
        self.assumed = parts.assumed
        self.snapshots = parts.snapshots
        self.releaser = parts.releaser
        self.explainer = parts.explainer
        self.describer = parts.describer
        self.reporter = parts.reporter
        self.freezer = parts.freezer
        self.turns = Turns()
        self.orders = Orders()
        """Each queue's pending work in order, as the last decision left it (policy.orders)."""
        self._term = 0  # counts changes of leadership: a cycle of an earlier term stops
        self._fence_needed = True
        self._attempted: dict[str, ManagedPod] = {}
        """uid -> the pod as it was when its release was handed to the releaser."""
        self.refusals: dict[str, tuple[ManagedPod, str]] = {}
        """uid -> the pod as it was when the API server refused its release, and the server's
        words: it waits with ``ReleaseRefused``, holding nothing, until its gates or annotations
        change (then it is tried again)."""
        self._stamps: dict[str, tuple[str, float]] = {}
        """uid -> the ``dispatched-at`` stamp this process's gate patch carried and how long the
        workload had waited then, until the watch shows the pod released (kept across terms: a
        patch cut short by a lost lead may still land)."""
        self.cycles = 0

    def leading(self) -> bool:
        return self.leadership.leading

    # --- the loop -------------------------------------------------------------------------

    def leadership_changed(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)
        self._term += 1
        self.orders = Orders()
        if leading:
            self._fence_needed = True
            self.turns = Turns()
            self.queue.kick()
            return
        self.releaser.cancel_all()
        self.assumed.clear()
        self.refusals.clear()
        self._attempted.clear()
        self.snapshots.clear()
        self.explainer.clear()
        self.reporter.clear()
        self.describer.clear()

    def pod_changed(self, change: Change[ManagedPod]) -> None:
        """A pod changed in the cache: kick a cycle, unless the change can alter no decision and
        no explanation (the watch confirming a release this controller assumed, a pod bound or
        starting to run, the condition this controller just wrote)."""
        old, new = change.old, change.new
        if new is not None:
            self.freezer.changed()
        self._count_release(old, new)
        if old is None or new is None:
            self.queue.kick()
            return
        assumed = new.uid in self.assumed
        if new.uid in self.refusals:
            self.queue.kick()  # it may have shrunk: the next cycle sees whether to try again
        elif _facts(old, assumed) != _facts(new, assumed):
            self.queue.kick()
        elif new.condition != old.condition and not self.explainer.expects(new):
            self.queue.kick()  # someone else changed the condition: the next cycle puts it right

    def _count_release(self, old: ManagedPod | None, new: ManagedPod | None) -> None:
        """Count a release when the watch shows the gate gone with this process's own stamp on
        the pod: once per pod, whether the patch's answer arrived, was lost, or was cut short
        by a lost lead; a pod released by another replica or by hand carries another stamp or
        none (``sluicegate_releases_total``)."""
        if new is None:
            if old is not None:
                self._stamps.pop(old.uid, None)
            return
        if old is None or not old.pod.gated or new.pod.gated:
            return
        sent = self._stamps.pop(new.uid, None)
        if sent is not None and new.pod.annotations.get(keys.DISPATCHED_AT_ANNOTATION) == sent[0]:
            self.metrics.released(new.pod.queue, sent[1])

    async def run(self) -> None:
        """Cycle whenever the queue says so, while leading, until cancelled."""
        self.queue.kick()
        while True:
            await self.queue.wait()
            if not self.leading():
                continue
            if self._fence_needed:
                await self._fence()
                self._fence_needed = False
                if not self.leading():
                    continue
            started = time.process_time()
            term = self._term
            try:
                await run_paced(self._cycle(), SLICE_SECONDS, partial(self._still, term))
            except Exception:  # a bug in one cycle must not stop dispatch for good
                log.exception("a dispatch cycle failed; trying again shortly")
                self.queue.kick_after(RETRY_SECONDS)
            self.queue.kick_after(self.settings.resync_seconds)
            # Cycles take at most half the process's CPU: the rest goes to the gate removals and
            # the watches, which a stream of back-to-back cycles would starve. (CPU time, not
            # wall time: on a busy machine a cycle's wall time is mostly waiting for a core.)
            await asyncio.sleep(min(time.process_time() - started, MAX_PAUSE_SECONDS))

    def _still(self, term: int) -> bool:
        """Whether a cycle begun in ``term`` may go on: this replica has led since."""
        return self._term == term and self.leading()

    async def _fence(self) -> None:
        """Wait until the cache holds every managed pod at least as new as a fresh list shows it."""
        try:
            listing = await self.connection.get(PODS.path(), {"labelSelector": LABEL_SELECTOR,
                                                              "fieldSelector": FIELD_SELECTOR})
        except KubeError as e:
            log.warning("could not list pods before the first cycle of this term: %s", e)
            return
        version = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        wanted = [(str(i["metadata"]["uid"]), str(i["metadata"].get("resourceVersion") or ""))
                  for i in listing.get("items") or () if isinstance(i, dict) and i.get("metadata")]
        deadline = self._clock() + FENCE_SECONDS
        while True:
            if version and _newer_or_same(self.pods.resource_version, version):
                return
            if all(_newer_or_same(self.pods.version(uid), rv) for uid, rv in wanted):
                return
            if self._clock() > deadline:
                log.warning("the pod cache has not caught up with the API server after %.0fs; "
                            "dispatching from it anyway", FENCE_SECONDS)
                return
            await asyncio.sleep(0.05)

    # --- one cycle ------------------------------------------------------------------------

    def cycle(self) -> Decision:
        """One whole cycle at once (the process runs the same steps paced, in ``run``)."""
        return run_through(self._cycle())

    def _cycle(self) -> Steps[Decision]:
        started = time.perf_counter()
        now, mono = self._wall(), self._clock()
        team_of = self.team_of
        # policy.membership: a released pod counts by the team admission stamped, whatever its
        # namespace says now; a gated one whose namespace left that team is not released (and
        # says so). Pods admission never marked go with the managed ones, where nothing counts
        # them (the snapshot leaves them out) but a released one's condition is still read. A
        # gated pod whose DRA claims now ask for more than admission counted is not released
        # either, and says so (policy.devices.claims_changed).
        catalog = self.catalog()
        classes = catalog.policy.device_classes
        live = self.claims if classes else None
        managed: dict[str, ManagedPod] = {}
        strays: dict[str, ManagedPod] = {}
        why: dict[str, Condition] = {}
        for batch in batches(list(self.pods.values())):  # no tuple per pod: less for the collector
            yield None
            for p in batch:
                pod = p.pod
                # Only a gated pod's namespace is read: a released pod counts by its stamp.
                now_in = team_of(pod.namespace) if team_of is not None and pod.gated else pod.team
                if membership(pod, now_in, marked=p.marked) is Membership.LEFT_TEAM:
                    strays[pod.uid] = p
                    why[pod.uid] = conditions.outside_team(pod)
                    continue
                if live is not None and p.claims is not None and pod.gated and p.marked:
                    changed = claims_changed(p.claims, live(pod.namespace), classes)
                    if changed is not None and pod.uid not in self.assumed:
                        strays[pod.uid] = p
                        why[pod.uid] = conditions.claims_changed(changed)
                        continue
                managed[pod.uid] = p
        big = len(managed) >= OFFLOAD_WORKLOADS
        if big:
            self.freezer.freeze()  # the cycle's own large containers: see ``pacing.Freezer``
        nodes = self.nodes()
        snapshot = yield from self.snapshots.building(list(managed.values()), catalog, now, nodes,
                                                      self._refused(managed))
        thought: tuple[Decision, statuses.Figures, dict[str, Workload]]
        think = partial(_think, snapshot, self.turns, self.orders)
        if len(snapshot.workloads) < OFFLOAD_WORKLOADS:
            thought = think()  # a few milliseconds: not worth a thread's hop
        else:
            thought = yield Offload(think)
        if big:
            self.freezer.freeze()
        decision, figures, pending = thought
        del thought, think  # the previous orders (100k references at 100k pending) go here, a step alone
        self.turns = decision.turns
        self.orders = decision.orders if decision.orders is not None else Orders()
        yield None
        released = self._release(decision, managed, now, mono)
        yield from self.explainer.confirming({**managed, **strays} if strays else managed)
        outside, outside_since = yield from self.describer.strays((p, why[uid]) for uid, p in strays.items())
        held, pending_due = yield from self.describer.pending(pending, decision.waiting, managed, mono,
                                                              snapshot)
        waiting, since = held.counts, held.oldest
        for labels, count in outside.items():
            waiting[labels] = waiting.get(labels, 0) + count
        for labels, created in outside_since.items():
            since[labels] = min(since.get(labels, created), created)
        unplaceable, placing_due = yield from self.describer.released(managed, mono)
        del pending  # the cycle's large containers are let go one per step, not all at its end
        yield None
        pods = len(managed)
        del managed, strays, why
        yield None
        self.reporter.update(figures, waiting, unplaceable.pods, now, decision.waiting.impossible(), since,
                             unplaceable.workloads, held.never_runs,
                             reported_resources(snapshot.queues.values(), snapshot.teams.values(),
                                                snapshot.policy))
        self._wake(figures, snapshot, now, min(pending_due, placing_due) - mono)
        self.metrics.assumed.set(len(self.assumed))
        self.freezer.changed(self.snapshots.built)
        seconds = time.perf_counter() - started
        self.metrics.cycle.observe(seconds)
        self.cycles += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("cycle %d: %d pods, %d workloads, %d released, %d waiting, %d assumed, %.1f ms",
                      self.cycles, pods, len(snapshot.workloads), len(released),
                      len(decision.waiting), len(self.assumed), seconds * 1000)
        return decision

    def _refused(self, managed: Mapping[str, ManagedPod]) -> dict[str, str]:
        """The refusals that still hold: the pod is there with the gates and annotations it had
        when the API server refused it (a change of its status, or of the held annotation, is
        not a change that could let the release pass)."""
        out: dict[str, str] = {}
        for uid, (was, words) in list(self.refusals.items()):
            now = managed.get(uid)
            if now is None or (now is not was and _release_facts(now) != _release_facts(was)):
                del self.refusals[uid]
                if now is not None:
                    log.info("trying again to release %s: it changed since the API server refused it",
                             now.key, extra={"fields": {"pod": now.key, "queue": now.pod.queue}})
                continue
            self.refusals[uid] = (now, words)
            out[uid] = words
        return out

    def _release(
        self, decision: Decision, managed: Mapping[str, ManagedPod], now: float, mono: float
    ) -> list[str]:
        stamp = MappingProxyType({keys.DISPATCHED_AT_ANNOTATION: micro_time(now)})
        released = []
        for w in decision.release:
            if len(w.pods) > 1 and self._crowded(w, managed, stamp):
                continue
            released.append(w.key)
            waited = now - w.created
            joins = " (pods joining their running group)" if w.joins else ""
            log.info("releasing %s%s: queue %s, waited %.1fs", w.key, joins, w.queue, waited,
                     extra={"fields": {"workload": w.key, "queue": w.queue, "team": w.team,
                                       "pods": len(w.pods), "waited": round(waited, 3)}})
            for pod in w.pods:
                found = managed.get(pod.uid)
                if pod.gated and found is not None:
                    self._submit(found, w, stamp, mono, waited)
        return released

    def _crowded(self, w: Workload, managed: Mapping[str, ManagedPod], stamp: Mapping[str, str]) -> bool:
        """Whether the API server would refuse to release one of the pods of ``w``, a group, its
        annotations grown since admission past the room for the stamp: then none of them is
        released (a group released in part holds its GPUs for peers that never come), and each
        such pod waits with ``ReleaseRefused`` until its annotations change. A workload of one pod
        is simply tried: the API server's refusal says the same (``settled``)."""
        crowded = False
        for pod in w.pods:
            found = managed.get(pod.uid)
            why = release_crowded(pod.annotations, stamp) if pod.gated and found is not None else None
            if found is None or why is None:
                continue
            crowded = True
            words = f"{CANNOT_RELEASE}{why}"
            if self.leading():
                self.refusals[pod.uid] = (found, words)
            log.warning("cannot release %s: %s; it waits until it changes", pod.key, words,
                        extra={"fields": {"pod": pod.key, "queue": w.queue, "workload": w.key}})
        if crowded:
            self.queue.kick()  # decide again at once: what it was given goes to others
        return crowded

    def _submit(
        self, found: ManagedPod, w: Workload, stamp: Mapping[str, str], mono: float, waited: float
    ) -> None:
        pod = found.pod
        if not self.assumed.assume(pod.uid, mono):
            return
        self._stamps[pod.uid] = (stamp[keys.DISPATCHED_AT_ANNOTATION], waited)
        self._attempted[pod.uid] = found
        self.releaser.submit(Release(
            uid=pod.uid, namespace=pod.namespace, name=pod.name, queue=pod.queue, workload=w.key,
            gates=found.gates, has_annotations=found.has_annotations, created=w.created, stamp=stamp,
        ))

    def settled(self, release: Release, outcome: Ungate | Refused | None) -> None:
        """A gate removal ended (``Releaser.on_settled``): explain a released pod, hold one the
        API server refused, or decide again about one that failed."""
        attempted = self._attempted.pop(release.uid, None)
        if isinstance(outcome, Refused):
            self.assumed.forget(release.uid)
            self._stamps.pop(release.uid, None)
            if attempted is not None and self.leading():
                words = f"{REFUSED}{outcome.message}"
                self.refusals[release.uid] = (attempted, words)
                log.warning("cannot release %s: %s; it waits until it changes", release.key, words,
                            extra={"fields": {"pod": release.key, "queue": release.queue,
                                              "workload": release.workload}})
            self.queue.kick()
            return
        if outcome is Ungate.RELEASED:
            found = self.pods.get(release.uid)
            if found is not None and self.leading():
                # No event: the condition, the dispatched-at stamp and the queue label say it, and
                # a released pod costs two requests (record 0042-two-requests-per-released-pod).
                self.explainer.want(found, conditions.dispatched(release.queue), urgent=True)
            return
        if outcome is Ungate.ALREADY:
            return  # released by someone else: the watch confirms it, and the cycle explains it
        self.assumed.forget(release.uid)
        if outcome is Ungate.GONE:
            self.queue.kick()
        else:
            self.queue.kick_after(RETRY_SECONDS)

    def _wake(self, figures: statuses.Figures, snapshot: Snapshot, now: float, due: float) -> None:
        """Ask for a cycle when a pending head starts starving, or a pod becomes due to explain."""
        starvation = snapshot.policy.starvation_seconds
        soonest = due
        for usage in figures.tally.queues.values():
            if usage.oldest_pending is not None:
                left = usage.oldest_pending + starvation - now
                if left > 0:
                    soonest = min(soonest, left)
        if soonest < math.inf:
            self.queue.kick_after(soonest + 0.01)

    # --- stopping -------------------------------------------------------------------------

    async def stop(self) -> None:
        """Let the gate removals in flight finish (up to ``shutdown_seconds``), then stop writing."""
        self.queue.close()
        await self.releaser.drain(self.settings.shutdown_seconds)
        await self.explainer.stop()
