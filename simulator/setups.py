"""A setup: the Queues, Teams, Policy and Nodes a simulation runs under, read from YAML objects.

The objects have the shapes of docs/concepts.md (``kubectl get queues,teams,policies -o yaml`` gives
them, as a ``List``). A directory is read whole: every ``*.yaml``, ``*.yml`` and ``*.json``
file, in name order, every document in it. Nodes (``kind: Node``, ``apiVersion: v1``: what
``kubectl get nodes -o yaml`` gives) make the node inventory dispatch decides with
(``policy.inventory``); a setup without Nodes knows none, and every pod is taken to fit some
node. Objects of other kinds (Presets, Namespaces) and of other API groups are skipped; an
object of ours (or a Node) that does not parse is an error naming the file and the field,
never skipped: a simulation under a policy the controller would refuse would answer the wrong
question.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import yaml

from policy import keys
from policy.fields import InvalidObject
from policy.model import Policy, Queue, Team
from policy.placing import Node

KINDS = ("Queue", "Team", "Policy")
SUFFIXES = (".yaml", ".yml", ".json")


class SetupError(ValueError):
    """The objects of a setup cannot be used; the message names the file and the object."""


@dataclass(frozen=True, slots=True)
class Setup:
    queues: Mapping[str, Queue]
    teams: Mapping[str, Team] = field(default_factory=lambda: MappingProxyType({}))
    policy: Policy = field(default_factory=Policy)
    source: str = ""  # where it was read from, for reports
    nodes: tuple[Node, ...] = ()  # the cluster's Nodes; none: not known, every pod fits


def _objects(document: object) -> Iterable[object]:
    """The objects of one YAML document: itself, or the items of a ``List``."""
    if isinstance(document, Mapping) and str(document.get("kind", "")).endswith("List"):
        yield from document.get("items") or ()
    elif document is not None:
        yield document


def parse_setup(documents: Iterable[tuple[str, object]], source: str = "") -> Setup:
    """Build a setup from decoded YAML documents, each with the name of the file it came from."""
    queues: dict[str, Queue] = {}
    teams: dict[str, Team] = {}
    policy: Policy | None = None
    nodes: list[Node] = []
    origin: dict[str, str] = {}
    for where, document in documents:
        for obj in _objects(document):
            if not isinstance(obj, Mapping):
                raise SetupError(f"{where}: expected a Kubernetes object, got {type(obj).__name__}")
            kind = obj.get("kind")
            if kind == "Node" and obj.get("apiVersion") == "v1":
                try:
                    nodes.append(Node.parse(obj))
                except InvalidObject as e:
                    raise SetupError(f"{where}: {e}") from e
                continue
            if kind not in KINDS or obj.get("apiVersion", keys.API_VERSION) not in keys.SERVED_API_VERSIONS:
                continue
            try:
                if kind == "Queue":
                    queue = Queue.parse(obj)
                    name = queue.name
                    queues[name] = queue
                elif kind == "Team":
                    team = Team.parse(obj)
                    name = team.name
                    teams[name] = team
                else:
                    policy = Policy.parse(obj)
                    name = keys.POLICY_NAME
            except InvalidObject as e:
                raise SetupError(f"{where}: {e}") from e
            seen = f"{kind}/{name}"
            if seen in origin:
                raise SetupError(f"{where}: {kind} {name} is defined twice (also in {origin[seen]})")
            origin[seen] = where
    if not queues:
        raise SetupError(
            f"{source or 'the setup'}: no Queue objects (kind: Queue, apiVersion: {keys.API_VERSION})"
        )
    return Setup(
        queues=MappingProxyType(dict(sorted(queues.items()))),
        teams=MappingProxyType(dict(sorted(teams.items()))),
        policy=policy or Policy(),
        source=source,
        nodes=tuple(nodes),
    )


def load_setup(path: Path) -> Setup:
    """Read a setup from a directory of YAML files (or from one file)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SUFFIXES)
        if not files:
            raise SetupError(f"{path}: no {', '.join(SUFFIXES)} files")
    elif path.is_file():
        files = [path]
    else:
        raise SetupError(f"{path}: no such file or directory")
    documents: list[tuple[str, object]] = []
    for file in files:
        try:
            documents.extend((str(file), d) for d in yaml.safe_load_all(file.read_text()))
        except yaml.YAMLError as e:
            raise SetupError(f"{file}: not YAML: {e}") from e
        except OSError as e:
            raise SetupError(f"{file}: {e.strerror}") from e
    return parse_setup(documents, str(path))
