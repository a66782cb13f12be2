"""Kubernetes resource quantities, parsed exactly.

A quantity is held as an integer count of thousandths ("milli-units"), the finest precision
Kubernetes itself keeps for resource requests: ``"500m"`` is 500, ``"2"`` is 2000, ``"16Gi"``
is 16 * 2**30 * 1000. Integers keep the sums used by quotas exact and fast.

Parsing accepts what apimachinery's ``ParseQuantity`` accepts and refuses what it refuses:
ASCII digits only (``"١"`` and ``"１"`` are not numbers to Kubernetes), no surrounding spaces,
a decimal or binary suffix or a decimal exponent. Every refusal is a ``QuantityError``.
Amounts are capped at 2**63 - 1 units, the bound Kubernetes puts on binary quantities and the
most its int64 accounting can count; above it every amount is "more than any cluster has".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, Context, Decimal, localcontext
from types import MappingProxyType
from typing import Final

Resources = Mapping[str, int]
"""Resource name -> amount in milli-units."""

EMPTY: Resources = MappingProxyType({})

MAX_UNITS: Final = 2**63 - 1
MAX_MILLI: Final = MAX_UNITS * 1000
"""The largest amount a quantity parses to, in milli-units."""

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of two
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?:[eE](?P<exponent>[+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)",
    re.ASCII,
)
_BIG: Final = 40  # decimal digits: any amount of 10**_BIG milli-units or more is over the cap
_TINY: Final = -40  # any positive amount under 10**_TINY milli-units rounds up to one


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity."""


def parse(value: str | int | float) -> int:
    """Parse a quantity into milli-units, rounding up as Kubernetes does for requests."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or a string, not {value!r}")
    if isinstance(value, int):
        return max(-MAX_MILLI, min(MAX_MILLI, value * 1000))
    text = value if isinstance(value, str) else repr(value)
    match = _QUANTITY.fullmatch(text)
    if match is None or not (match["whole"] or match["fraction"]):
        raise QuantityError(f"{value!r} is not a quantity (examples: 2, 500m, 16Gi, 1e3)")
    fraction = match["fraction"] or ""
    digits = (match["whole"] + fraction).lstrip("0")
    if not digits:
        return 0
    negative = match["sign"] == "-"
    two = _BINARY.get(match["suffix"] or "", 0)
    exponent = _exponent(match["exponent"]) if match["exponent"] else _DECIMAL.get(match["suffix"] or "", 0)
    # The amount is int(digits) * 10**scale * 2**two milli-units.
    scale = exponent - len(fraction) + 3
    magnitude = len(digits) + scale  # int(digits) * 10**scale < 10**magnitude
    if magnitude > _BIG:
        milli = MAX_MILLI
    elif magnitude < _TINY:
        milli = 1
    else:
        # Exact: the precision holds every digit of the product, and the result is bounded.
        context = Context(prec=len(digits) + 40, Emax=MAX_EMAX, Emin=MIN_EMIN)
        with localcontext(context):
            amount = Decimal(f"{digits}e{scale}") * (1 << two)
            milli = min(MAX_MILLI, int(amount.to_integral_value(rounding=ROUND_CEILING)))
    return -milli if negative else milli


def _exponent(text: str) -> int:
    """A decimal exponent, without reading an absurd one as a number (it is only ever too big
    or too small, whatever its exact value)."""
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 18:
        return sign * 10**18
    return sign * int(digits)


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


# --- amounts as people read them ------------------------------------------------------------

_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})
_BINARY_DOWN = sorted(_BINARY.items(), key=lambda item: -item[1])
_DECIMAL_DOWN = [(s, p) for s, p in sorted(_DECIMAL.items(), key=lambda item: -item[1]) if p > 0]


def counts_bytes(resource: str) -> bool:
    """Whether ``resource`` is measured in bytes (memory, storage, huge pages)."""
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def format_amount(milli: int, resource: str = "") -> str:
    """Render milli-units the way a person writes them.

    Bytes (memory, storage, huge pages) in binary units when exact (``16Gi``), else in
    decimal ones when exact (``500M``), else approximately (``~1.93Gi``); everything else,
    CPU included, as Kubernetes writes it: whole units (``2``) or milli-units (``500m``).
    """
    if milli % 1000:
        return f"{milli}m"
    units = milli // 1000
    if not counts_bytes(resource) or units == 0:
        return str(units)
    size = abs(units)
    for suffix, power in _BINARY_DOWN:
        if size % (1 << power) == 0:
            return f"{units >> power}{suffix}"
    for suffix, power in _DECIMAL_DOWN:
        if size % 10**power == 0:
            return f"{units // 10**power}{suffix}"
    for suffix, power in _BINARY_DOWN:
        if size >= 1 << power:
            rounded = f"{units / (1 << power):.2f}".rstrip("0").rstrip(".")
            return f"~{rounded}{suffix}"
    return str(units)
