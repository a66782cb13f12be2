"""Reading fields out of Kubernetes JSON: the one place that knows how.

Two kinds of readers. The strict ones (``where`` argument) read admin-owned specs and raise
``InvalidObject`` with the field's path when a value is of the wrong shape. The lenient ones
(``obj``, ``at``, ``string_map``, ``csv``) read what arrives with a request or a watch, where a
missing or odd value simply counts as empty.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

from policy.quantities import QuantityError, Resources, parse_resources

Obj = Mapping[str, Any]
"""A Kubernetes object or fragment as plain JSON data."""

EMPTY_OBJ: Final[Obj] = MappingProxyType({})
NO_STRINGS: Final[Mapping[str, str]] = MappingProxyType({})
MAX_COUNT: Final = 2**31 - 1
"""The largest count a user may write (a workflow's limit, a group's size): Kubernetes' own
counts (replicas, parallelism) are 32-bit too. Bounding the digits before ``int()`` keeps a
number of thousands of digits from reaching Python's conversion limit."""
_POSITIVE: Final = re.compile(r"\s*[0-9]{1,10}\s*", re.ASCII)


class InvalidObject(ValueError):
    """An object's spec cannot be used; the message says which field and why."""


# --- strict ---------------------------------------------------------------------------------


def mapping(raw: object, where: str) -> Obj:
    if raw is None:
        return EMPTY_OBJ
    if not isinstance(raw, Mapping):
        raise InvalidObject(f"{where}: expected an object, got {type(raw).__name__}")
    return raw


def strings(raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple) or not all(isinstance(s, str) for s in raw):
        raise InvalidObject(f"{where}: expected a list of strings, got {raw!r}")
    return tuple(raw)


def labels(raw: object, where: str) -> Mapping[str, str]:
    data = mapping(raw, where)
    if not data:
        return NO_STRINGS
    for key, value in data.items():
        if not isinstance(value, str):
            raise InvalidObject(f"{where}.{key}: expected a string, got {value!r}")
    return MappingProxyType(dict(data))


def whole(raw: object, where: str, default: int = 0) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise InvalidObject(f"{where}: expected a whole number, got {raw!r}")
    return raw


def limit(raw: object, where: str) -> int | None:
    """A count limit: absent is unlimited (None), 0 allows nothing, negative is refused."""
    if raw is None:
        return None
    value = whole(raw, where)
    if value < 0:
        raise InvalidObject(f"{where}: must not be negative, got {value}")
    return value


def positive(raw: object, where: str) -> int | None:
    if raw is None:
        return None
    value = whole(raw, where)
    if value < 1:
        raise InvalidObject(f"{where}: must be at least 1, got {value}")
    return value


def resources(raw: object, where: str) -> Resources:
    """A ``{resource: quantity}`` map. Any failure to read a quantity, including one too large
    to hold (``1e999999``, a number of thousands of digits), is an ``InvalidObject`` naming it."""
    data = mapping(raw, where)
    try:
        return parse_resources(data, where=where)
    except QuantityError as e:
        raise InvalidObject(str(e)) from e
    except (ValueError, ArithmeticError) as e:
        raise InvalidObject(_unreadable(data, where)) from e


def _unreadable(data: Obj, where: str) -> str:
    """Which entry of ``data`` cannot be read, found one entry at a time."""
    for key, value in data.items():
        try:
            parse_resources({key: value}, where=where)
        except (ValueError, ArithmeticError):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            return f"{where}.{key}: {shown} is not a quantity Sluicegate can hold"
    return f"{where}: a quantity cannot be read"


def name(obj: Obj, kind: str) -> str:
    value = mapping(obj.get("metadata"), f"{kind}.metadata").get("name")
    if not isinstance(value, str) or not value:
        raise InvalidObject(f"{kind}: metadata.name is missing")
    return value


def timestamp(raw: object, where: str) -> float:
    """An RFC 3339 timestamp as seconds since the epoch (0.0 when absent)."""
    if not raw:
        return 0.0
    if isinstance(raw, datetime):
        return raw.timestamp()
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()
    except ValueError as e:
        raise InvalidObject(f"{where}: {raw!r} is not an RFC 3339 time") from e


# --- lenient --------------------------------------------------------------------------------


def obj(raw: object) -> Obj:
    """``raw`` when it is an object, else an empty one."""
    return raw if isinstance(raw, Mapping) else EMPTY_OBJ


def at(root: Obj, path: tuple[str, ...]) -> Obj:
    """The object at ``path`` below ``root``; empty where any step is missing."""
    for step in path:
        root = obj(root.get(step))
    return root


def string_map(raw: object) -> Mapping[str, str]:
    """The string-valued entries of a labels or annotations map."""
    if not isinstance(raw, Mapping):
        return NO_STRINGS
    return {str(k): v for k, v in raw.items() if isinstance(v, str)}


def csv(raw: str | None) -> tuple[str, ...]:
    """A comma-separated list of names, trimmed, without blanks or repeats, in order."""
    names = (p.strip() for p in (raw or "").split(","))
    return tuple(dict.fromkeys(n for n in names if n))


def instant(raw: str) -> float | None:
    """An RFC 3339 time with a zone (``2026-11-30T10:04:30.123456Z``) as seconds since the
    epoch, or None when it is not one."""
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()


def positive_int(raw: str) -> int | None:
    """An annotation's value as a positive integer no larger than ``MAX_COUNT``, or None."""
    if not _POSITIVE.fullmatch(raw):
        return None
    value = int(raw)
    return value if 1 <= value <= MAX_COUNT else None


def shown(raw: str, width: int = 40) -> str:
    """A user's value quoted for a message, cut short when it is long."""
    return f'"{raw}"' if len(raw) <= width else f'"{raw[:width - 3]}..." ({len(raw)} characters)'

