"""The cluster's nodes as dispatch sees them: could any node, if it were empty, hold this pod?

Releasing a pod is the step that cannot be undone (a scheduling gate is never put back), and a
released pod holds its slots and quota until it ends. So a workload is released only if, for
each of its pods, some node could hold it with nothing else on it: a node of its queue's node
pool, allowed by the pod's node selector and required node affinity, without a lasting hard
taint the pod does not tolerate (``policy.affinity``), whose allocatable covers every resource
the pod asks for. What is bound to a node now does not count, nor does a cordon or another
condition Kubernetes taints a node for: waiting for those is Kubernetes' waiting, after the
release. A workload that no node could hold waits with ``NoNodeFits``, holds nothing and
blocks nothing, like work over a quota (``limits.impossible``), until a node that could
hold it appears.

An inventory with no node at all says nothing: a control plane whose nodes have not
registered yet, or a replayed trace that lists none, is taken to fit everything.

The answer depends on the pod's shape only (queue, node constraints, requests), so it is
worked out once per distinct shape for the inventory's life, not per pod per cycle. The usual
case is cheaper still: a pool (or cluster) whose roomiest node has at least as much of every
resource as each of the others (nodes alike, or one size above the rest) answers a pod that
sets no node constraints by comparing its requests with that node's allocatable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policy.affinity import NO_PLACEMENT, Placement
from policy.model import Queue, Selector, Workload
from policy.placing import Node, describe_selector
from policy.pods import Pod
from policy.quantities import format_amount

_Shape = tuple[str, Placement, tuple[tuple[str, int], ...]]
_ROUTINE = ("cpu", "memory", "ephemeral-storage", "pods")


class Inventory:
    """The nodes of the cluster, by their shape (what is bound to them is ignored)."""

    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self._answers: dict[_Shape, str | None] = {}
        self._pools: dict[str, tuple[Selector | None, str, Mapping[str, int] | None]] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def refusal(self, w: Workload, queue: Queue | None) -> str | None:
        """Why no node could hold one of ``w``'s pods; None when each could go somewhere (or
        nothing is known of the nodes)."""
        if not self.nodes:
            return None
        pods = w.pods
        for pod in pods:
            why = self.pod_refusal(pod, queue)
            if why is not None:
                return why if len(pods) == 1 else f"pod {pod.name}: {why}"
        return None

    def pod_refusal(self, pod: Pod, queue: Queue | None) -> str | None:
        """Why no node, if it were empty, could hold ``pod`` of ``queue``; None when one could."""
        pool = queue.node_pool if queue is not None and pod.queue else None
        name = queue.name if pool is not None and queue is not None else ""
        scope, top = self._scope(name, pool)
        placement = pod.placement
        # Devices asked through DRA claims are no node's allocatable: kube-scheduler places
        # them from ResourceSlices, and a node's fit for them is Kubernetes' to judge.
        requests = pod.node_requests
        if top is not None and placement is NO_PLACEMENT:
            for resource, need in requests.items():
                if need > top.get(resource, 0):
                    break
            else:
                return None
        key = (name, placement, tuple(requests.items()))
        answers = self._answers
        if key in answers:
            return answers[key]
        why = answers[key] = _judge(self.nodes, pool, scope, placement, requests)
        return why

    def _scope(self, name: str, pool: Selector | None) -> tuple[str, Mapping[str, int] | None]:
        """How messages name where the pod may go, and the allocatable of the pool's roomiest
        node when it has at least as much of everything as each other one (None: no such node).
        A queue whose pool changed (a new catalog) forgets every answer, since they were worked
        out for the old one."""
        known = self._pools.get(name)
        if known is None or known[0] is not pool:
            if known is not None:
                self._answers.clear()
            words = "the cluster" if pool is None else f"queue {name}'s node pool ({describe_selector(pool)})"
            open_ = [n for n in self.nodes if (pool is None or pool.matches(n.labels))
                     and NO_PLACEMENT.refused_by(n.taints) is None]
            known = self._pools[name] = (pool, words, _roomiest(open_))
        return known[1], known[2]


def _roomiest(nodes: list[Node]) -> Mapping[str, int] | None:
    """The allocatable of a node with at least as much of every resource as each of ``nodes``;
    None when there is none (or no node)."""
    most: dict[str, int] = {}
    for node in nodes:
        for resource, amount in node.allocatable.items():
            if amount > most.get(resource, 0):
                most[resource] = amount
    for node in nodes:
        allocatable = node.allocatable
        if all(allocatable.get(r, 0) >= amount for r, amount in most.items()):
            return allocatable
    return None


def _judge(
    nodes: tuple[Node, ...], pool: Selector | None, scope: str, placement: Placement,
    requests: Mapping[str, int],
) -> str | None:
    in_pool = [n for n in nodes if pool is None or pool.matches(n.labels)]
    if not in_pool:
        return f"no node is in {scope}"
    chosen = [n for n in in_pool if placement.selects(n.name, n.labels)]
    if not chosen:
        return f"no node of {scope} matches {placement.describe()}"
    usable = [n for n in chosen if placement.refused_by(n.taints) is None]
    if not usable:
        taint = placement.refused_by(chosen[0].taints)
        return f"every node of {scope} it may use has a taint it does not tolerate ({taint})"
    asks = [(r, need) for r, need in requests.items() if need > 0]
    for node in usable:
        allocatable = node.allocatable
        if all(allocatable.get(r, 0) >= need for r, need in asks):
            return None
    asks.sort(key=lambda item: (item[0] in _ROUTINE, item[0]))
    for resource, need in asks:
        largest = max(n.allocatable.get(resource, 0) for n in usable)
        if need > largest:
            return (f"needs {format_amount(need, resource)} {resource} on one node; "
                    f"the largest node of {scope} has {format_amount(largest, resource)}")
    wanted = ", ".join(f"{format_amount(need, r)} {r}" for r, need in asks)
    return f"needs {wanted} on one node; no node of {scope} has all of them"
