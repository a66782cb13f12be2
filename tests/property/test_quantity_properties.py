"""Quantities: any text parses to an amount or is refused with ``QuantityError``, nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.quantities import MAX_MILLI, QuantityError, parse

quantity_like = st.from_regex(
    r"[+-]?[0-9\u0660-\u0669\uff10-\uff19]{0,30}(\.[0-9]{0,30})?([eE][+-]?[0-9]{1,30}|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?",
    fullmatch=True,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=40), quantity_like, st.floats(), st.integers()))
def test_a_quantity_parses_within_bounds_or_is_refused_as_a_quantity(value: str | float | int) -> None:
    try:
        amount = parse(value)
    except QuantityError:
        return
    assert -MAX_MILLI <= amount <= MAX_MILLI
    if isinstance(value, str):
        assert value.isascii() and value == value.strip()


SCALE = {"": 1000, "m": 1, "k": 10**6, "M": 10**9, "Ki": 2**10 * 1000, "Mi": 2**20 * 1000, "Gi": 2**30 * 1000}


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(sorted(SCALE)))
def test_ascii_quantities_keep_their_value(number: int, suffix: str) -> None:
    assert parse(f"{number}{suffix}") == number * SCALE[suffix]
