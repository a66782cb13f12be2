"""Kubernetes quantities, parsed exactly into milli-units."""

from __future__ import annotations

import pytest

from policy.quantities import QuantityError, exceeded, format_amount, parse, parse_resources, total

PARSED = [
    ("a whole number", "2", 2000),
    ("a plain int", 3, 3000),
    ("milli-units", "500m", 500),
    ("a decimal fraction", "0.5", 500),
    ("a leading dot", ".25", 250),
    ("binary suffixes", "16Gi", 16 * 2**30 * 1000),
    ("decimal suffixes", "2k", 2_000_000),
    ("an exponent", "1e3", 1_000_000),
    ("exa, not an exponent", "1E", 10**18 * 1000),
    ("nano rounds up to one milli, as requests do", "1n", 1),
    ("surrounding spaces", " 4 ", 4000),
    ("a float", 0.1, 100),
]


@pytest.mark.parametrize(("text", "milli"), [p[1:] for p in PARSED], ids=[p[0] for p in PARSED])
def test_parse(text: str | int | float, milli: int) -> None:
    assert parse(text) == milli


@pytest.mark.parametrize("bad", ["", "two", "2 Gi", "1e3m", "--1", True], ids=repr)
def test_not_a_quantity(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse(bad)  # type: ignore[arg-type]


def test_resources_name_the_field_that_is_wrong() -> None:
    with pytest.raises(QuantityError, match=r"spec\.quota\.cpu: '-1' is negative"):
        parse_resources({"cpu": "-1"}, where="spec.quota")
    with pytest.raises(QuantityError, match=r"spec\.quota\.gpu: \[1\] is not a quantity"):
        parse_resources({"gpu": [1]}, where="spec.quota")
    assert dict(parse_resources({"cpu": "1", "memory": "1Ki"}, where="x")) == {"cpu": 1000, "memory": 1024000}


def test_exceeded_names_only_resources_the_quota_caps_and_the_workload_asks() -> None:
    quota = {"gpu": 8000, "cpu": 4000}
    assert exceeded({"gpu": 6000}, {"gpu": 4000}, quota) == "gpu"
    assert exceeded({"gpu": 6000}, {"gpu": 2000}, quota) is None
    assert exceeded({"gpu": 9000}, {"cpu": 1000}, quota) is None  # over on gpu, but asks none
    assert exceeded({}, {"memory": 10**12}, quota) is None


def test_amounts_read_as_people_write_them() -> None:
    assert [format_amount(m) for m in (0, 2000, 500, 1500)] == ["0", "2", "500m", "1500m"]
    assert dict(total([{"a": 1}, {"a": 2, "b": 3}])) == {"a": 3, "b": 3}
