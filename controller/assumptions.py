"""Releases counted before the watch confirms them (kube-scheduler's assumed pods).

The moment a cycle decides to release a pod, the pod is *assumed* released: every later cycle
sees it ungated, and so counts it as running, even while the patch is in flight or retrying
and before the watch brings the ungated pod back. Without this a slow watch would let the
next cycle release the same slot again. An assumption ends when the watch confirms it (the
cached pod has lost its gate), when the pod leaves the cache (deleted, or finished), or when
the release failed for good (``forget``), after which the pod is pending again and a later
cycle decides anew. A pod is assumed at most once at a time, so retries never count twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from controller.managed import ManagedPod
from policy.pods import Pod


class Assumptions:
    def __init__(self) -> None:
        self._assumed: dict[str, float] = {}  # uid -> when (monotonic) the release was decided
        self._overlaid: dict[str, tuple[Pod, Pod]] = {}  # uid -> (cached pod, its ungated copy)
        self.confirmed = 0
        """Assumptions the watch confirmed, in all (a counter for metrics and tests)."""

    def __len__(self) -> int:
        return len(self._assumed)

    def __contains__(self, uid: object) -> bool:
        return uid in self._assumed

    def __iter__(self) -> Iterator[str]:
        return iter(self._assumed)

    def assume(self, uid: str, at: float) -> bool:
        """Count ``uid`` as released; False if it already was (nothing changes)."""
        if uid in self._assumed:
            return False
        self._assumed[uid] = at
        return True

    def forget(self, uid: str) -> None:
        self._assumed.pop(uid, None)
        self._overlaid.pop(uid, None)

    def clear(self) -> None:
        self._assumed.clear()
        self._overlaid.clear()

    def since(self, uid: str) -> float | None:
        return self._assumed.get(uid)

    def apply(self, pods: Iterable[ManagedPod]) -> list[Pod]:
        """The pods as dispatch must see them: assumed ones ungated.

        Assumptions that the cache now confirms (the pod has lost its gate), and those whose
        pod has left the cache, are forgotten on the way.
        """
        seen: set[str] = set()
        out = self.overlay(pods, seen)
        self.expire(seen)
        return out

    def overlay(self, pods: Iterable[ManagedPod], seen: set[str]) -> list[Pod]:
        """``apply`` for some of the pods (a batch); the uids of assumed ones go into ``seen``.
        Call ``expire`` with ``seen`` once every pod has been through."""
        assumed = self._assumed
        out: list[Pod] = []
        if not assumed:
            out.extend(m.pod for m in pods)
            return out
        overlaid = self._overlaid
        for managed in pods:
            pod = managed.pod
            uid = pod.uid
            if uid in assumed:
                seen.add(uid)
                if pod.gated:
                    # The same cached pod gets the same copy, so later steps can tell it is unchanged.
                    cached = overlaid.get(uid)
                    if cached is None or cached[0] is not pod:
                        cached = overlaid[uid] = (pod, replace(pod, gated=False))
                    pod = cached[1]
                else:
                    del assumed[uid]
                    overlaid.pop(uid, None)
                    self.confirmed += 1
            out.append(pod)
        return out

    def expire(self, seen: set[str]) -> None:
        """Forget the assumptions whose pod was not among those just seen: it left the cache."""
        assumed = self._assumed
        for uid in [u for u in assumed if u not in seen]:
            del assumed[uid]
            self._overlaid.pop(uid, None)
