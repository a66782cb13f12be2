"""What each pod's Dispatched condition should say after a cycle, and when to have it written.

After each decision the gate controller walks its pods once (in steps, ``controller.pacing``)
and asks the ``Explainer`` for a write only where the condition must change:

* a gated pod whose namespace left the team admission stamped on it: ``NamespaceLeftTeam``;
* a pending pod whose reason changed (its message's numbers go stale on purpose), once it has
  waited ``explain_after`` seconds;
* a released pod: dispatched, released by hand (with a Warning event), or, once kube-scheduler
  has refused it for ``unplaceable_after`` seconds, dispatched but waiting for Kubernetes (its
  Warning event at most once per ``event_interval``).

The ``Describer`` keeps the per-pod clocks those delays and intervals run on; the Explainer
compares each wish with what the pod carries, so a pod already saying the right thing is not
written again. Split out of ``controller.controlling``, which decides and releases.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from controller import conditions
from controller.explaining import Explainer
from controller.managed import ManagedPod
from controller.pacing import FEW, Steps
from controller.releasing import Releaser
from controller.settings import Settings
from policy import keys
from policy.model import Workload
from policy.waiting import Waiting


class Describer:
    def __init__(self, settings: Settings, explainer: Explainer, releaser: Releaser) -> None:
        self.settings = settings
        self.explainer = explainer
        self.releaser = releaser
        self._first_pending: dict[str, float] = {}
        self._unplaceable_since: dict[str, float] = {}
        self._event_at: dict[str, float] = {}

    def clear(self) -> None:
        """Leadership lost: the next term starts every clock anew."""
        self._first_pending.clear()
        self._unplaceable_since.clear()
        self._event_at.clear()

    def strays(self, strays: Iterable[ManagedPod]) -> Steps[Counter[tuple[str, str]]]:
        """Gated pods whose namespace left their team: they say so (written once, not per cycle:
        ``Explainer.want`` skips a pod that already carries the condition); the count by queue
        and reason, for the waiting gauge, so an alert can see them."""
        counts: Counter[tuple[str, str]] = Counter()
        for n, stray in enumerate(strays):
            if n % FEW == 0:
                yield None
            counts[(stray.pod.queue, keys.Reason.NAMESPACE_LEFT_TEAM.value)] += 1
            self.explainer.want(stray, conditions.outside_team(stray.pod))
        return counts

    def pending(
        self, pending: Mapping[str, Workload], waiting: Waiting, managed: Mapping[str, ManagedPod],
        mono: float,
    ) -> Steps[tuple[dict[tuple[str, str], int], float]]:
        """Conditions of pending pods whose reason changed; the waiting count by queue and reason,
        and when the next pod becomes due for an explanation."""
        counts: Counter[tuple[str, str]] = Counter()
        first_seen: dict[str, float] = {}
        after = self.settings.explain_after_seconds
        due = math.inf
        for n, (key, reason, never) in enumerate(waiting.answers()):
            if n % FEW == 0:
                yield None
            w = pending.get(key)
            if w is None:
                continue
            counts[(w.queue, reason.value)] += 1
            answer: tuple[keys.Reason, str] | None = None  # worked out once, when first needed
            for pod in w.pods:
                first = first_seen[pod.uid] = self._first_pending.get(pod.uid, mono)
                found = managed.get(pod.uid)
                if found is None or not pod.gated:
                    continue
                # QueuePaused covers a paused queue and a missing one: its message (no numbers)
                # is rewritten when it changes between the two.
                if self.explainer.shows(found, "False", reason.value, never=never):
                    if reason is not keys.Reason.QUEUE_PAUSED:
                        continue
                    answer = answer or waiting.answer(key)
                    if self.explainer.says(found, answer[1]):
                        continue
                if mono < first + after:
                    due = min(due, first + after)
                    continue
                answer = answer or waiting.answer(key)
                wanted = conditions.waiting(*answer)
                self.explainer.want(found, wanted)  # its words go in the held annotation, no event
        self._first_pending = first_seen
        return dict(counts), due

    def released(
        self, managed: Mapping[str, ManagedPod], mono: float
    ) -> Steps[tuple[Counter[str], float]]:
        """Conditions of released pods: dispatched, or waiting for Kubernetes to place them."""
        unplaceable: Counter[str] = Counter()
        since_seen: dict[str, float] = {}
        after = self.settings.unplaceable_after_seconds
        interval = self.settings.event_interval_seconds
        due = math.inf
        for n, (uid, found) in enumerate(managed.items()):
            if n % FEW == 0:
                yield None
            pod = found.pod
            if pod.gated or uid in self.releaser or not found.marked:  # unmarked: never gated by us
                continue
            if pod.node_name or not pod.unschedulable:  # placed, or not refused by the scheduler
                if not self.explainer.shows_dispatched(found):
                    wanted = conditions.for_released(found)
                    by_hand = not found.dispatched_by_sluicegate and not self.explainer.shows(
                        found, "True", wanted.reason)
                    event = conditions.released_outside_dispatch(pod, wanted) if by_hand else None
                    self.explainer.want(found, wanted, event=event)
                continue
            wanted = conditions.for_released(found)
            current = self.explainer.current(found)
            unplaceable[pod.queue] += 1
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
        self._event_at = {uid: at for uid, at in self._event_at.items() if uid in managed}
        return unplaceable, due
