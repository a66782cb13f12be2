"""Building each cycle's Snapshot from the cache without redoing what did not change.

A cycle sees every managed pod, but between two cycles only a few change. The reflector
converts a pod once per change, so an unchanged pod is the very same object in the next cycle;
its single-pod workload is kept and reused as long as that holds (released pods that are still
assumed are overlaid once, and their overlay reused the same way), and so is its copy under its
workflow's one limit while the limit stays. Pod groups are few and are rebuilt every cycle, from
all their pods. The result is the same as ``policy.workloads.build_workloads`` over the
overlaid pods (a property test holds them equal); only the work differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controller.assumptions import Assumptions
from controller.managed import ManagedPod
from controller.pacing import Steps, batches, run_through
from policy.catalog import Catalog
from policy.model import Nodes, Snapshot, Workload
from policy.pods import Pod
from policy.workloads import group_key, group_workloads, limited, workflow_limits, workload_of


class SnapshotBuilder:
    def __init__(self, assumed: Assumptions) -> None:
        self.assumed = assumed
        self._singles: dict[str, tuple[Pod, Workload]] = {}  # uid -> (the pod it was built from, it)
        self._limited: dict[str, tuple[Workload, int, Workload]] = {}
        """uid -> (a kept single-pod workload, its workflow's limit, the workload under it)."""
        self.reused = 0
        """Workloads taken from the previous cycles, in all (for tests and profiling)."""
        self.built = 0
        """Single-pod workloads the last build made anew (what the garbage collector sees as new)."""

    def clear(self) -> None:
        self._singles.clear()
        self._limited.clear()

    def build(
        self, pods: Iterable[ManagedPod], catalog: Catalog, now: float, nodes: Nodes | None = None
    ) -> Snapshot:
        return run_through(self.building(list(pods), catalog, now, nodes))

    def building(
        self, pods: Sequence[ManagedPod], catalog: Catalog, now: float, nodes: Nodes | None = None,
        refusals: Mapping[str, str] | None = None,
    ) -> Steps[Snapshot]:
        """``build`` in steps (``controller.pacing``), a batch of pods at a time; ``nodes`` is
        the node inventory (None: not known, every pod is taken to fit a node); ``refusals``
        the pods whose release the API server refused, by uid."""
        workloads = yield from self._workloads(pods)
        return Snapshot(catalog.queues, catalog.teams, catalog.policy, workloads, now, nodes,
                        refusals if refusals is not None else {})

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
                    groups.setdefault(group_key(pod), []).append(pod)
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
        for key, members in groups.items():
            out.extend(group_workloads(key, members))
        limits: dict[str, int] = {}
        for part in batches(out):
            yield None
            for key, limit in workflow_limits(part).items():
                if limit < limits.get(key, limit + 1):
                    limits[key] = limit
        if not limits:
            self._limited = {}
            return out
        before: dict[str, tuple[Workload, int, Workload]] = self._limited
        after: dict[str, tuple[Workload, int, Workload]] = {}
        made: list[Workload] = []
        for part in batches(out):
            yield None
            made.extend(self._under_limits(part, limits, before, after))
        self._limited = after
        return made

    @staticmethod
    def _under_limits(
        workloads: Sequence[Workload], limits: dict[str, int],
        before: dict[str, tuple[Workload, int, Workload]], after: dict[str, tuple[Workload, int, Workload]],
    ) -> list[Workload]:
        """Each workload under its workflow's one limit, reusing last cycle's copy (``before``)
        of a kept single-pod workload while its limit stays, so kept orders see the same
        object; what it made goes into ``after``."""
        out = []
        for w in workloads:
            made = limited(w, limits)
            if made is not w and len(w.pods) == 1 and not w.pods[0].group:
                uid = w.pods[0].uid
                cached = before.get(uid)
                if cached is not None and cached[0] is w and cached[1] == limits[w.workflow]:
                    made = cached[2]
                after[uid] = (w, limits[w.workflow], made)
            out.append(made)
        return out
