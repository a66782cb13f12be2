"""Scheduler-extender decisions: which nodes a pod may use, and which of them it should prefer.

kube-scheduler asks the extender twice per pod. ``filter_nodes`` keeps a queue's work on the
queue's node pool (every node passes for a pod that names no queue, or whose queue sets no pool,
or whose queue does not exist). ``prioritize`` packs GPUs: it scores each node 0..10, highest
for the node that the pod leaves with the fewest free GPUs, so that whole nodes stay free for
jobs that need all of a node's GPUs.

Scores, exactly (free GPUs counted in whole devices, of the GPU resources the pod asks for):

* a pod that asks for GPUs: 0 on a node without room for it; else ``10 - GPUs left free
  after it`` but at least 1 (so any node that fits beats one that does not);
* a pod that asks for no GPU: 10 on a node without GPUs; on a GPU node ``9 - free GPUs`` but
  at least 1, so CPU work goes to CPU nodes first and then to the GPU nodes with the least
  GPU capacity left to strand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from policy import keys
from policy.affinity import Taint, parse_taints
from policy.fields import InvalidObject, Obj
from policy.model import Queue, Selector
from policy.pods import Pod
from policy.quantities import EMPTY, QuantityError, Resources, parse_resources, total

MAX_SCORE = 10
_NO_LABELS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Node:
    """What placement needs to know of a node: its labels, capacity and what is bound to it."""

    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _NO_LABELS)
    allocatable: Resources = field(default_factory=lambda: EMPTY)
    requested: Resources = field(default_factory=lambda: EMPTY)  # by its pods that have not ended
    taints: tuple[Taint, ...] = ()

    def free(self, resource: str) -> int:
        """Milli-units of ``resource`` not yet requested (never below zero)."""
        return max(0, self.allocatable.get(resource, 0) - self.requested.get(resource, 0))

    @classmethod
    def parse(cls, node: Obj, pods: Iterable[Pod] = ()) -> Node:
        """A Kubernetes Node; ``pods`` may be all pods, only those bound here and not ended count."""
        meta = node.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidObject("Node: metadata.name is missing")
        labels = meta.get("labels") or {}
        if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
            raise InvalidObject(f"Node {name}: metadata.labels must map strings to strings")
        status = node.get("status") or {}
        try:
            allocatable = parse_resources(status.get("allocatable"), where=f"Node {name}: status.allocatable")
        except QuantityError as e:
            raise InvalidObject(str(e)) from e
        taints = parse_taints(node.get("spec") or {}, f"Node {name}: spec")
        bound = (p.requests for p in pods if p.node_name == name and not p.terminal)
        requested = MappingProxyType(dict(total(bound)))
        return cls(name, MappingProxyType(dict(labels)), allocatable, requested, taints)


@dataclass(frozen=True, slots=True)
class Filtered:
    """The nodes a pod may use, and for each other node why not (the extender's FailedNodes)."""

    nodes: tuple[Node, ...]
    failed: Mapping[str, str]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)


def describe_selector(selector: Selector) -> str:
    """A selector the way ``kubectl`` users write one: ``pool=a100,zone in (a,b),!spot``."""
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for r in selector.match_expressions:
        values = ",".join(sorted(r.values))
        parts.append(
            {
                "In": f"{r.key} in ({values})",
                "NotIn": f"{r.key} notin ({values})",
                "Exists": r.key,
            }.get(r.operator, f"!{r.key}")
        )
    return ",".join(parts) or "everything"


def filter_nodes(pod: Pod, queue: Queue | None, nodes: Sequence[Node]) -> Filtered:
    """Keep the nodes of the queue's node pool; every node when there is no pool to enforce."""
    pool = queue.node_pool if queue is not None and pod.queue else None
    if pool is None:
        return Filtered(tuple(nodes), MappingProxyType({}))
    kept, failed = [], {}
    why = f"not in the node pool of queue {queue.name if queue else ''} ({describe_selector(pool)})"
    for node in nodes:
        if pool.matches(node.labels):
            kept.append(node)
        else:
            failed[node.name] = why
    return Filtered(tuple(kept), MappingProxyType(failed))


def _whole(milli: int) -> int:
    return milli // 1000


def score(pod: Pod, node: Node, gpu_resources: Sequence[str] = keys.DEFAULT_MANAGED_RESOURCES) -> int:
    """The score of one node for one pod; see the module docstring."""
    asks = {r: pod.requests[r] for r in gpu_resources if pod.requests.get(r, 0) > 0}
    if asks:
        if any(node.free(r) < need for r, need in asks.items()):
            return 0
        left = sum(_whole(node.free(r) - need) for r, need in asks.items())
        return max(1, MAX_SCORE - left)
    if not any(node.allocatable.get(r, 0) for r in gpu_resources):
        return MAX_SCORE
    return max(1, MAX_SCORE - 1 - sum(_whole(node.free(r)) for r in gpu_resources))


def prioritize(
    pod: Pod, nodes: Sequence[Node], gpu_resources: Sequence[str] = keys.DEFAULT_MANAGED_RESOURCES
) -> dict[str, int]:
    """Node name -> score 0..10 for each of ``nodes``, in their order (the extender's HostPriorityList)."""
    return {node.name: score(pod, node, gpu_resources) for node in nodes}
