"""Building each cycle's Snapshot from the cache without redoing what did not change.

A cycle sees every managed pod, but between two cycles only a few change. The reflector
converts a pod once per change, so an unchanged pod is the very same object in the next cycle;
its single-pod workload is kept and reused as long as that holds (released pods that are still
assumed are overlaid once, and their overlay reused the same way). Pod groups are few and are
rebuilt every cycle, from all their pods. The result is the same as
``policy.workloads.build_workloads`` over the overlaid pods; only the work differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from extender.assumptions import Assumptions
from extender.managed import ManagedPod
from extender.pacing import Steps, batches, run_through
from policy.catalog import Catalog
from policy.model import Snapshot, Workload
from policy.pods import Pod
from policy.workloads import workload_of


class SnapshotBuilder:
    def __init__(self, assumed: Assumptions) -> None:
        self.assumed = assumed
        self._singles: dict[str, tuple[Pod, Workload]] = {}  # uid -> (the pod it was built from, it)
        self.reused = 0
        """Workloads taken from the previous cycles, in all (for tests and profiling)."""
        self.built = 0
        """Single-pod workloads the last build made anew (what the garbage collector sees as new)."""

    def clear(self) -> None:
        self._singles.clear()

    def build(self, pods: Iterable[ManagedPod], catalog: Catalog, now: float) -> Snapshot:
        return run_through(self.building(list(pods), catalog, now))

    def building(self, pods: Sequence[ManagedPod], catalog: Catalog, now: float) -> Steps[Snapshot]:
        """``build`` in steps (``extender.pacing``), a batch of pods at a time."""
        workloads = yield from self._workloads(pods)
        return Snapshot(catalog.queues, catalog.teams, catalog.policy, workloads, now)

    def workloads(self, pods: Iterable[ManagedPod]) -> list[Workload]:
        return run_through(self._workloads(list(pods)))

    def _workloads(self, pods: Sequence[ManagedPod]) -> Steps[list[Workload]]:
        singles = self._singles
        kept: dict[str, tuple[Pod, Workload]] = {}
        groups: dict[str, list[Pod]] = {}
        out: list[Workload] = []
        seen: set[str] = set()
        overlay = self.assumed.overlay
        built = 0
        for batch in batches(pods):
            yield None
            for pod in overlay((p for p in batch if p.marked), seen):
                if pod.group:
                    groups.setdefault(f"{pod.namespace}/group:{pod.group}", []).append(pod)
                    continue
                uid = pod.uid
                cached = singles.get(uid)
                if cached is not None and cached[0] is pod:
                    self.reused += 1
                    kept[uid] = cached
                    out.append(cached[1])
                else:
                    w = workload_of(pod.key, (pod,))
                    built += 1
                    kept[uid] = (pod, w)
                    out.append(w)
        self.assumed.expire(seen)
        self._singles = kept
        self.built = built
        out.extend(workload_of(key, tuple(members)) for key, members in groups.items())
        return out
