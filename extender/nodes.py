"""The scheduler extender's own view of the nodes: labels, allocatable, and what is bound there.

With ``nodeCacheCapable: true`` kube-scheduler sends node names only, so the extender keeps
two reflectors on the shared cache: Nodes (converted once per change into ``placing.Node``
without usage), and every pod that is bound to a node and has not ended (a field selector, so
the server sends nothing else; a pod that ends leaves the selection and arrives as DELETED).
Each pod change moves its requests off its old node's total and onto its new one, so a
request reads a node's total, never sums its pods.

Both reflectors are quiet: node heartbeats and unmanaged pods never wake the dispatch loop.
The controller reads the same Nodes reflector as its node inventory (``NodeShapes``), so a
process that serves both keeps one copy of the nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Protocol

from kube.cache import Cache
from kube.connecting import JSON
from kube.reflecting import Change, Reflector
from kube.resources import NODES, PODS
from policy import fields
from policy.inventory import Inventory
from policy.placing import Node
from policy.pods import Phase, pod_requests
from policy.quantities import EMPTY, Resources

# Pods bound to a node that have not ended: what occupies a node, as kube-scheduler counts it.
BOUND_PODS: Final = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class NodeSource(Protocol):
    """What the extender's handlers read; ``ClusterNodes`` in a process, a fixed one in tests."""

    @property
    def synced(self) -> bool:
        """Everything the answers depend on has been listed at least once."""
        ...

    def node(self, name: str) -> Node | None:
        """The node with what is requested on it now; None when it is not known (yet)."""
        ...

    def requested(self, name: str) -> Resources:
        """What the pods bound to the node request, whether or not the node is known."""
        ...


@dataclass(frozen=True, slots=True)
class Bound:
    """A pod as the node view keeps it: where it is bound and what it requests there."""

    node: str
    requests: Resources


def bound_pod(obj: JSON) -> Bound:
    """The reflector's converter for bound pods; an ended pod requests nothing."""
    spec = fields.mapping(obj.get("spec"), "Pod.spec")
    status = fields.mapping(obj.get("status"), "Pod.status")
    node = str(spec.get("nodeName") or "")
    phase = status.get("phase")
    if not node or phase in (Phase.SUCCEEDED, Phase.FAILED):
        return Bound(node, EMPTY)
    return Bound(node, pod_requests(spec))


def node_shape(obj: JSON) -> Node:
    """The reflector's converter for Nodes: labels, allocatable and taints, usage filled in on read."""
    return Node.parse(obj)


def watch_nodes(cache: Cache) -> Reflector[Node]:
    """The quiet Nodes reflector that the extender and the controller's inventory share."""
    return cache.watch(NODES, node_shape, quiet=True)


class NodeShapes:
    """The nodes as dispatch reads them: an ``Inventory`` of their shapes, built again only
    when a node comes, goes, or changes its labels, allocatable or taints (not on heartbeats)."""

    def __init__(self, nodes: Reflector[Node]) -> None:
        self.nodes = nodes
        self._inventory: Inventory | None = None
        self._listeners: list[Callable[[], None]] = []
        nodes.add_listener(self._changed)

    def inventory(self) -> Inventory:
        if self._inventory is None:
            self._inventory = Inventory(self.nodes.values())
        return self._inventory

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when the inventory changes: a node that could hold waiting work
        may have come."""
        self._listeners.append(listener)

    def _changed(self, change: Change[Node]) -> None:
        if change.old is not None and change.new is not None and change.old == change.new:
            return
        self._inventory = None
        for listener in self._listeners:
            listener()


class Usage:
    """Requests per node, kept current from pod changes (added, moved, ended, deleted).

    A node's total is an immutable mapping replaced on each change to that node, so a read
    hands it out as is: calls read many nodes, changes touch one."""

    def __init__(self) -> None:
        self._by_node: dict[str, Resources] = {}

    def __len__(self) -> int:
        return len(self._by_node)

    def of(self, node: str) -> Resources:
        return self._by_node.get(node, EMPTY)

    def changed(self, change: Change[Bound]) -> None:
        if change.old is not None:
            self._add(change.old, -1)
        if change.new is not None:
            self._add(change.new, 1)

    def _add(self, pod: Bound, sign: int) -> None:
        if not pod.node or not pod.requests:
            return
        total = dict(self._by_node.get(pod.node, EMPTY))
        for resource, amount in pod.requests.items():
            left = total.get(resource, 0) + sign * amount
            if left:
                total[resource] = left
            else:
                total.pop(resource, None)
        if total:
            self._by_node[pod.node] = MappingProxyType(total)
        else:
            self._by_node.pop(pod.node, None)


class ClusterNodes:
    """The node view over the cache's reflectors (add it before the cache starts, or after:
    ``Cache.watch`` starts a late reflector at once); ``nodes``, when given, is the Nodes
    reflector (``watch_nodes``) another reader shares."""

    def __init__(self, cache: Cache, nodes: Reflector[Node] | None = None) -> None:
        self.nodes: Reflector[Node] = nodes if nodes is not None else watch_nodes(cache)
        self.pods: Reflector[Bound] = cache.watch(PODS, bound_pod, field_selector=BOUND_PODS, quiet=True)
        self.usage = Usage()
        self.pods.add_listener(self.usage.changed)
        # The answers also read Queues (node pools) and the Policy (which resources are GPUs).
        self._needs = (self.nodes, self.pods, cache.queues, cache.policies)

    @property
    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self._needs)

    def node(self, name: str) -> Node | None:
        shape = self.nodes.named(name)
        if shape is None:
            return None
        return Node(shape.name, shape.labels, shape.allocatable, self.usage.of(name), shape.taints)

    def requested(self, name: str) -> Resources:
        return self.usage.of(name)


def with_usage(node: Node, requested: Resources) -> Node:
    """A node sent whole by the scheduler, with the usage the view knows for it."""
    return Node(node.name, node.labels, node.allocatable, requested, node.taints)
