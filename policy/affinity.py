"""Where a pod may go by its own spec, and what a node refuses: node selector, required node
affinity, tolerations and taints, as kube-scheduler reads them.

Only the hard constraints count (``requiredDuringSchedulingIgnoredDuringExecution``, the
``NoSchedule`` and ``NoExecute`` taints); preferences change where a pod goes, never whether
it can go somewhere. Taints that Kubernetes puts on a node for a passing condition
(``keys.CONDITION_TAINTS``: cordoned, not ready, under pressure) are not the node's shape: a
pod that waits for them waits for Kubernetes (``policy.inventory``). Any other taint is, even
under ``node.kubernetes.io/`` (``out-of-service``, which an admin sets).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policy import fields, keys
from policy.fields import InvalidObject, Obj

_HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    @property
    def hard(self) -> bool:
        """Whether it keeps off the pods that do not tolerate it (``PreferNoSchedule`` does not)."""
        return self.effect in _HARD_EFFECTS

    @property
    def passing(self) -> bool:
        """Set by Kubernetes for a passing condition of the node (cordoned, not ready, under
        pressure: ``keys.CONDITION_TAINTS``): not its shape."""
        return self.key in keys.CONDITION_TAINTS

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty with Exists: every key
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty: every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """One ``matchExpressions`` (on labels) or ``matchFields`` (``metadata.name``) entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if value is None or len(self.values) != 1:
            return False
        try:
            have, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound


@dataclass(frozen=True, slots=True)
class NodeTerm:
    """A node selector term: every expression and field must hold."""

    expressions: tuple[NodeRequirement, ...] = ()
    fields: tuple[NodeRequirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False  # Kubernetes: an empty term matches no node
        return all(r.matches(labels.get(r.key)) for r in self.expressions) and all(
            r.matches(name if r.key == "metadata.name" else None) for r in self.fields
        )


@dataclass(frozen=True, slots=True)
class Placement:
    """A pod's own hard constraints on its node. ``Placement()`` is a pod that sets none."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[NodeTerm, ...] | None = None  # None: no required node affinity
    tolerations: tuple[Toleration, ...] = ()

    def selects(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether the node selector and the required node affinity (any term) allow the node."""
        if not all(labels.get(k) == v for k, v in self.node_selector):
            return False
        return self.terms is None or any(t.matches(name, labels) for t in self.terms)

    def refused_by(self, taints: tuple[Taint, ...]) -> Taint | None:
        """The first of a node's lasting hard taints that the pod does not tolerate."""
        for taint in taints:
            if taint.hard and not taint.passing and not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None

    def describe(self) -> str:
        """The pod's constraints as a reader would name them, for a message."""
        parts = [f"{k}={v}" for k, v in self.node_selector]
        if self.terms is not None:
            parts.append("its required node affinity")
        return " and ".join(parts)

    @classmethod
    def parse(cls, spec: Obj, where: str) -> Placement:
        selector = fields.labels(spec.get("nodeSelector"), f"{where}.nodeSelector")
        affinity = fields.mapping(spec.get("affinity"), f"{where}.affinity")
        node = fields.mapping(affinity.get("nodeAffinity"), f"{where}.affinity.nodeAffinity")
        at = f"{where}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        terms = None
        if required is not None:
            raw = fields.mapping(required, at).get("nodeSelectorTerms") or ()
            terms = tuple(_term(fields.obj(t), f"{at}.nodeSelectorTerms[{i}]") for i, t in enumerate(raw))
        tolerations = tuple(
            _toleration(fields.obj(t), f"{where}.tolerations[{i}]")
            for i, t in enumerate(spec.get("tolerations") or ())
        )
        if not selector and terms is None and not tolerations:
            return NO_PLACEMENT
        return cls(tuple(sorted(selector.items())), terms, tolerations)


NO_PLACEMENT = Placement()


def parse_taints(spec: Obj, where: str) -> tuple[Taint, ...]:
    """A Node's ``spec.taints``."""
    out = []
    for i, raw in enumerate(spec.get("taints") or ()):
        t = fields.obj(raw)
        key = t.get("key")
        if not isinstance(key, str) or not key:
            raise InvalidObject(f"{where}.taints[{i}].key is missing")
        out.append(Taint(key, str(t.get("value") or ""), str(t.get("effect") or "NoSchedule")))
    return tuple(out)


def _requirements(raw: object, where: str) -> tuple[NodeRequirement, ...]:
    out = []
    for i, r in enumerate(raw if isinstance(raw, list | tuple) else ()):
        e = fields.obj(r)
        op = e.get("operator")
        if op not in _OPERATORS:
            raise InvalidObject(f"{where}[{i}].operator: {op!r} is not a node selector operator")
        values = fields.strings(e.get("values"), f"{where}[{i}]")
        out.append(NodeRequirement(str(e.get("key") or ""), op, values))
    return tuple(out)


def _term(raw: Obj, where: str) -> NodeTerm:
    return NodeTerm(_requirements(raw.get("matchExpressions"), f"{where}.matchExpressions"),
                    _requirements(raw.get("matchFields"), f"{where}.matchFields"))


def _toleration(raw: Obj, where: str) -> Toleration:
    op = raw.get("operator") or "Equal"
    if op not in ("Equal", "Exists"):
        raise InvalidObject(f"{where}.operator: {op!r} is not Equal or Exists")
    key, value, effect = (str(raw.get(name) or "") for name in ("key", "value", "effect"))
    return Toleration(key, op, value, effect)
