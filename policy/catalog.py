"""The catalog: the admin-owned objects admission decides against.

Built from the watch caches of Queues, Teams, Presets and the Policy. An object whose spec
cannot be parsed is not dropped silently: ``invalid`` keeps why, so a pod that names it is
refused with the object's own error instead of a puzzling "does not exist".
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


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Catalog:
    queues: Mapping[str, Queue] = field(default_factory=_empty)
    teams: Mapping[str, Team] = field(default_factory=_empty)
    presets: Mapping[str, Preset] = field(default_factory=_empty)
    policy: Policy = field(default_factory=Policy)
    invalid: Mapping[str, str] = field(default_factory=_empty)
    """``"Kind/name"`` (``"Queue/a"``, ``"Preset/b"``, ``"Policy/cluster"``) -> why it is unusable."""

    def problem(self, kind: str, name: str) -> str | None:
        return self.invalid.get(f"{kind}/{name}")

    @classmethod
    def from_objects(
        cls,
        *,
        queues: Iterable[Obj] = (),
        teams: Iterable[Obj] = (),
        presets: Iterable[Obj] = (),
        policy: Obj | None = None,
    ) -> Catalog:
        """Parse raw objects; the ones that fail land in ``invalid``. No Policy means defaults."""
        invalid: dict[str, str] = {}
        parsed_policy = Policy()
        if policy is not None:
            try:
                parsed_policy = Policy.parse(policy)
            except InvalidObject as e:
                invalid[f"Policy/{keys.POLICY_NAME}"] = str(e)
        return cls(
            queues=_parse_all("Queue", Queue.parse, queues, invalid),
            teams=_parse_all("Team", Team.parse, teams, invalid),
            presets=_parse_all("Preset", Preset.parse, presets, invalid),
            policy=parsed_policy,
            invalid=MappingProxyType(invalid),
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
        except InvalidObject as e:
            name = fields.obj(obj.get("metadata")).get("name") or ""
            invalid[f"{kind}/{name}"] = str(e)
        else:
            parsed[item.name] = item
    return MappingProxyType(parsed)
