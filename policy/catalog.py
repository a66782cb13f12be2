"""The catalog: the admin-owned objects admission decides against.

Built from the watch caches of Queues, Teams, Presets and the Policy. An object whose spec
cannot be parsed is not dropped silently: ``invalid`` keeps why, so a pod that names it is
refused with the object's own error instead of a puzzling "does not exist".

A broken Policy fails closed. The cache that builds catalogs passes the one it built last as
``previous``: when the new Policy does not parse, the Policy in force stays the last valid one.
With none known (a process started while the Policy was broken), ``closed`` says why and
``policy`` is a closed stand-in: global ``maxRunning`` 0, so dispatch releases nothing, and
admission refuses every pod it would otherwise manage until the Policy is fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from policy import fields, keys
from policy.fields import InvalidObject, Obj
from policy.model import Policy, Queue, Team
from policy.presets import Preset
from policy.quantities import QuantityError

POLICY_KEY = f"Policy/{keys.POLICY_NAME}"


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Catalog:
    queues: Mapping[str, Queue] = field(default_factory=_empty)
    teams: Mapping[str, Team] = field(default_factory=_empty)
    presets: Mapping[str, Preset] = field(default_factory=_empty)
    policy: Policy = field(default_factory=Policy)
    """The Policy in force: the valid one, else the last valid one, else a closed stand-in."""
    invalid: Mapping[str, str] = field(default_factory=_empty)
    """``"Kind/name"`` (``"Queue/a"``, ``"Preset/b"``, ``"Policy/cluster"``) -> why it is unusable."""
    closed: str | None = None
    """Set when the Policy is invalid and no valid one was known before: the Policy's error."""

    def problem(self, kind: str, name: str) -> str | None:
        return self.invalid.get(f"{kind}/{name}")

    def manages(self, resource: str) -> bool:
        """Whether asking for ``resource`` makes a pod managed.

        The Policy's ``managedResources``; while the catalog is closed, every extended resource
        too (``vendor.example/...``), since the broken Policy may have named any of them.
        """
        if resource in self.policy.managed_resources:
            return True
        return self.closed is not None and extended(resource)

    @classmethod
    def from_objects(
        cls,
        *,
        queues: Iterable[Obj] = (),
        teams: Iterable[Obj] = (),
        presets: Iterable[Obj] = (),
        policy: Obj | None = None,
        previous: Catalog | None = None,
    ) -> Catalog:
        """Parse raw objects; the ones that fail land in ``invalid``. No Policy means defaults.

        ``previous`` is the catalog built before this one, if any: its Policy stays in force
        when ``policy`` does not parse.
        """
        invalid: dict[str, str] = {}
        parsed_policy = Policy()
        closed = None
        if policy is not None:
            try:
                parsed_policy = Policy.parse(policy)
            except UNREADABLE as e:
                invalid[POLICY_KEY] = problem_of("Policy", policy, e)
                if previous is not None and previous.closed is None:
                    parsed_policy = previous.policy
                else:
                    closed = invalid[POLICY_KEY]
                    parsed_policy = closed_policy(policy)
        return cls(
            queues=_parse_all("Queue", Queue.parse, queues, invalid),
            teams=_parse_all("Team", Team.parse, teams, invalid),
            presets=_parse_all("Preset", Preset.parse, presets, invalid),
            policy=parsed_policy,
            invalid=MappingProxyType(invalid),
            closed=closed,
        )


UNREADABLE = (InvalidObject, QuantityError, ValueError, ArithmeticError)
"""What parsing an admin's object may raise: our own errors, and defensively anything a number
too large or too odd raises on its way through ``decimal`` or ``int``."""


def extended(resource: str) -> bool:
    """An extended resource (a GPU, a MIG slice): a qualified name outside kubernetes.io."""
    return "/" in resource and "kubernetes.io/" not in resource


def closed_policy(raw: Obj) -> Policy:
    """What stands in for a broken Policy when no valid one is known: it releases nothing and
    trusts no controller; it manages the defaults plus whatever names the broken Policy's
    ``managedResources`` still yields."""
    spec = fields.obj(raw.get("spec"))
    listed = spec.get("managedResources")
    names = [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []
    return Policy(
        max_running=0,
        managed_resources=tuple(dict.fromkeys((*keys.DEFAULT_MANAGED_RESOURCES, *names))),
        trusted_controllers=(),
        operator_accounts=fields.NO_STRINGS,
    )


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_T = TypeVar("_T", bound=_Named)


def _parse_all(
    kind: str, parse: Callable[[Obj], _T], objects: Iterable[Obj], invalid: dict[str, str]
) -> Mapping[str, _T]:
    """Parse every object of one kind by name; record the ones that fail in ``invalid``."""
    parsed: dict[str, _T] = {}
    for obj in objects:
        try:
            item = parse(obj)
        except UNREADABLE as e:
            name = fields.obj(obj.get("metadata")).get("name") or ""
            invalid[f"{kind}/{name}"] = problem_of(kind, obj, e)
        else:
            parsed[item.name] = item
    return MappingProxyType(parsed)


def problem_of(kind: str, obj: Obj, error: Exception) -> str:
    """The error as the object's problem; our own errors already name the object and field."""
    if isinstance(error, InvalidObject):
        return str(error)
    name = fields.obj(obj.get("metadata")).get("name") or ""
    return f"{kind} {name}: spec holds a value Sluicegate cannot read ({type(error).__name__})"
