"""Kubernetes quantities, parsed exactly into milli-units."""

from __future__ import annotations

import pytest

from policy.quantities import MAX_MILLI, QuantityError, exceeded, format_amount, parse, parse_resources, total

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
    ("a float", 0.1, 100),
    ("an explicit plus", "+1", 1000),
    ("a trailing dot", "1.", 1000),
    ("a trailing dot before a suffix", "1.G", 10**12),
    ("a decimal exponent with a sign", "1.3E+6", 1_300_000_000),
    ("a negative exponent", "1E-3", 1),
    ("fractional binary amounts are exact", "100.035Ki", 102_435_840),
    ("half a mebibyte", "0.5Mi", 2**19 * 1000),
    ("far below a milli-unit still rounds up to one", "0.0000000001", 1),
    ("a binary amount past 2^63 - 1 is capped, as Kubernetes caps it", "9Ei", MAX_MILLI),
    ("the largest binary amount", "9223372036854775807Ki", MAX_MILLI),
    ("a decimal amount past the cap is capped too", "12E", MAX_MILLI),
    ("an absurd exponent is capped, not an overflow", "1e99999999999999999999999", MAX_MILLI),
    ("an absurd negative exponent is the smallest amount", "1e-999999999999", 1),
    ("five thousand digits and an exponent that brings them back", "1" + "0" * 5000 + "e-4998", 100_000),
    ("a tiny binary amount written at length", "0." + "0" * 6000 + "1Ki", 1),
    ("a huge int", 10**30, MAX_MILLI),
]


@pytest.mark.parametrize(("text", "milli"), [p[1:] for p in PARSED], ids=[p[0] for p in PARSED])
def test_parse(text: str | int | float, milli: int) -> None:
    assert parse(text) == milli


NOT_QUANTITIES = [
    "", "two", "2 Gi", "1e3m", "--1", True,
    # digits Kubernetes does not read: Arabic-Indic, fullwidth, superscript, Devanagari
    "\u0661", "\uff11", "1\u0660", "\u00b2", "\u0663Gi", "1e\u0661", "\u0968",
    # Kubernetes forbids surrounding whitespace, and so a trailing newline
    " 4 ", " 1", "1 ", "1\n", "\u30001",
    # apimachinery's own refusals
    "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
    # no digits at all
    "Ki", ".", "+", "e3",
    float("nan"), float("inf"),
]  # fmt: skip


@pytest.mark.parametrize("bad", NOT_QUANTITIES, ids=repr)
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


FORMATTED = [
    ("memory in binary units", "10Gi", "memory", "10Gi"),
    ("memory in the largest binary unit that is exact", "1536Mi", "memory", "1536Mi"),
    ("memory written in decimal units stays decimal", "500M", "memory", "500M"),
    ("memory that is neither, near a binary unit", "2073741824", "memory", "~1.93Gi"),
    ("a few bytes", "512", "memory", "512"),
    ("ephemeral storage in binary units", "20Gi", "ephemeral-storage", "20Gi"),
    ("huge pages in binary units", "2Mi", "hugepages-2Mi", "2Mi"),
    ("CPU in cores", "2", "cpu", "2"),
    ("CPU in millicores, as Kubernetes writes 1.5 cores", "1.5", "cpu", "1500m"),
    ("GPUs as a count", "16", "nvidia.com/gpu", "16"),
    ("no memory", "0", "memory", "0"),
]


@pytest.mark.parametrize(
    ("quantity", "resource", "written"), [f[1:] for f in FORMATTED], ids=[f[0] for f in FORMATTED]
)
def test_messages_write_amounts_in_units_a_person_reads(quantity: str, resource: str, written: str) -> None:
    assert format_amount(parse(quantity), resource) == written
