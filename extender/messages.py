"""kube-scheduler's extender wire format (k8s.io/kube-scheduler/extender/v1), as TypedDicts.

The envelope's keys are capitalised (Go field names without JSON tags): ``Pod``, ``Nodes``,
``NodeNames``, ``FailedNodes``, ``FailedAndUnresolvableNodes``, ``Error``, ``Host``, ``Score``.
What they carry (the Pod, the NodeList) is ordinary Kubernetes JSON with lower-case keys.

With ``nodeCacheCapable: true`` the scheduler sends ``NodeNames`` and reads ``NodeNames`` back;
otherwise it sends whole Nodes in ``Nodes`` and reads ``Nodes`` back. A filter answer that
carries neither means "no node passes", so an answer always carries the one that was asked.
``Error`` in a filter answer makes the scheduler treat the call as failed (an ignorable
extender is then skipped). A prioritize answer is a bare list with no place for an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypedDict

JSON = dict[str, Any]

MIN_SCORE: Final = 0
MAX_SCORE: Final = 10


class NodeList(TypedDict, total=False):
    items: list[JSON]


class ExtenderArgs(TypedDict, total=False):
    """What the scheduler posts to ``filter`` and ``prioritize``."""

    Pod: JSON
    Nodes: NodeList | None  # only when the extender is not nodeCacheCapable
    NodeNames: list[str] | None  # only when it is


class ExtenderFilterResult(TypedDict, total=False):
    """The answer to ``filter``."""

    Nodes: NodeList | None
    NodeNames: list[str] | None
    FailedNodes: dict[str, str]  # preemption of pods there might make room
    FailedAndUnresolvableNodes: dict[str, str]  # preemption would not help
    Error: str


class HostPriority(TypedDict):
    """One entry of the answer to ``prioritize`` (a list of them), Score 0..10."""

    Host: str
    Score: int


class ErrorAnswer(TypedDict):
    """What ``prioritize`` answers, with a non-200 status, when it cannot score."""

    Error: str


class BadArgs(ValueError):
    """The request is not ExtenderArgs; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class Args:
    """ExtenderArgs, checked: the pod, and either the candidate names or the candidate Nodes."""

    pod: JSON
    names: tuple[str, ...] | None  # NodeNames, when the scheduler sent them
    nodes: tuple[JSON, ...] | None  # Nodes.items, when it sent whole nodes instead


def _node_name(node: Mapping[str, Any]) -> str:
    meta = node.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def read_args(body: bytes) -> Args:
    """Parse and check a request body; ``BadArgs`` says what is wrong with it."""
    try:
        raw = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadArgs(f"the body is not JSON: {e}") from e
    if not isinstance(raw, dict):
        raise BadArgs(f"expected an ExtenderArgs object, got {type(raw).__name__}")
    pod = raw.get("Pod")
    if not isinstance(pod, dict):
        raise BadArgs("Pod is missing or not an object")
    names = raw.get("NodeNames")
    nodes = raw.get("Nodes")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise BadArgs("NodeNames must be a list of node names")
        return Args(pod, tuple(names), None)
    if nodes is not None:
        items = nodes.get("items") if isinstance(nodes, dict) else None
        if items is None and isinstance(nodes, dict):
            items = []  # an empty NodeList leaves out its items
        if not isinstance(items, list) or not all(isinstance(n, dict) and _node_name(n) for n in items):
            raise BadArgs("Nodes must be a NodeList whose items are named Nodes")
        return Args(pod, None, tuple(items))
    raise BadArgs("neither NodeNames nor Nodes was sent")
