"""Kubernetes resource quantities, parsed exactly.

A quantity is held as an integer count of thousandths ("milli-units"), the finest precision
Kubernetes itself keeps for resource requests: ``"500m"`` is 500, ``"2"`` is 2000, ``"16Gi"``
is 16 * 2**30 * 1000. Integers keep the sums used by quotas exact and fast.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from types import MappingProxyType

Resources = Mapping[str, int]
"""Resource name -> amount in milli-units."""

EMPTY: Resources = MappingProxyType({})

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity."""


def parse(value: str | int | float) -> int:
    """Parse a quantity into milli-units, rounding up as Kubernetes does for requests."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or a string, not {value!r}")
    if isinstance(value, int):
        return value * 1000
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity (examples: 2, 500m, 16Gi, 1e3)")
    try:
        number = Decimal(match["number"])
    except InvalidOperation as e:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f"{value!r} is not a quantity") from e
    if match["exp"]:
        number *= Decimal(10) ** int(match["exp"][1:])
    else:
        suffix = match["suffix"] or ""
        number *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    milli = (number * 1000).to_integral_value(rounding=ROUND_CEILING)
    return int(milli)


def parse_resources(raw: Mapping[str, object] | None, *, where: str) -> Resources:
    """Parse a ``{resource: quantity}`` mapping; negative amounts are refused."""
    if not raw:
        return EMPTY
    if not isinstance(raw, Mapping):
        raise QuantityError(f"{where}: expected a mapping of resource to quantity, got {raw!r}")
    out: dict[str, int] = {}
    for name, value in raw.items():
        if not isinstance(value, str | int | float):
            raise QuantityError(f"{where}.{name}: {value!r} is not a quantity")
        try:
            amount = parse(value)
        except QuantityError as e:
            raise QuantityError(f"{where}.{name}: {e}") from e
        if amount < 0:
            raise QuantityError(f"{where}.{name}: {value!r} is negative")
        out[str(name)] = amount
    return MappingProxyType(out)


def add(a: Resources, b: Resources) -> Resources:
    if not b:
        return a
    if not a:
        return b
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Resources, b: Resources) -> Resources:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def maximum(a: Resources, b: Resources) -> Resources:
    out = dict(a)
    for name, amount in b.items():
        out[name] = max(out.get(name, 0), amount)
    return out


def total(items: Iterable[Resources]) -> Resources:
    out: dict[str, int] = {}
    for item in items:
        for name, amount in item.items():
            out[name] = out.get(name, 0) + amount
    return out


def exceeded(used: Resources, asking: Resources, quota: Resources) -> str | None:
    """The first resource named by ``quota`` that ``used + asking`` would exceed, if any."""
    for name, cap in quota.items():
        need = asking.get(name, 0)
        if need and used.get(name, 0) + need > cap:
            return name
    return None


def format_amount(milli: int) -> str:
    """Render milli-units the way a person writes them: 2000 -> "2", 500 -> "500m"."""
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"
