"""The catalog: the admin-owned objects admission decides against.

Built from the watch caches of Queues, Teams, Presets and the Policy. An object whose spec
cannot be parsed is not dropped silently: ``invalid`` keeps why, so a pod that names it is
refused with the object's own error instead of a puzzling "does not exist".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from policy import keys
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
        parsed_queues: dict[str, Queue] = {}
        for obj in queues:
            try:
                queue = Queue.parse(obj)
            except InvalidObject as e:
                invalid[f"Queue/{_name(obj)}"] = str(e)
            else:
                parsed_queues[queue.name] = queue
        parsed_teams: dict[str, Team] = {}
        for obj in teams:
            try:
                team = Team.parse(obj)
            except InvalidObject as e:
                invalid[f"Team/{_name(obj)}"] = str(e)
            else:
                parsed_teams[team.name] = team
        parsed_presets: dict[str, Preset] = {}
        for obj in presets:
            try:
                preset = Preset.parse(obj)
            except InvalidObject as e:
                invalid[f"Preset/{_name(obj)}"] = str(e)
            else:
                parsed_presets[preset.name] = preset
        parsed_policy = Policy()
        if policy is not None:
            try:
                parsed_policy = Policy.parse(policy)
            except InvalidObject as e:
                invalid[f"Policy/{keys.POLICY_NAME}"] = str(e)
        return cls(
            queues=MappingProxyType(parsed_queues),
            teams=MappingProxyType(parsed_teams),
            presets=MappingProxyType(parsed_presets),
            policy=parsed_policy,
            invalid=MappingProxyType(invalid),
        )


def _name(obj: Obj) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return str(name or "")
