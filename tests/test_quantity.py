"""Tests for scorer.quantity: exact Kubernetes quantity parsing."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scorer.errors import InputError, QuantityError
from scorer.quantity import (
    BINARY_SUFFIXES,
    DECIMAL_EXPONENTS,
    format_quantity,
    int_value,
    milli_value,
    parse_quantity,
    resource_value,
)

F = Fraction
KI, MI, GI = 1 << 10, 1 << 20, 1 << 30

ALL_SUFFIXES: dict[str, Fraction] = {
    **{suffix: Fraction(m) for suffix, m in BINARY_SUFFIXES.items()},
    **{suffix: Fraction(10) ** e for suffix, e in DECIMAL_EXPONENTS.items()},
}


def ceil_away(q: Fraction) -> int:
    """Oracle for Kubernetes rounding: up in magnitude."""
    return math.ceil(q) if q >= 0 else -math.ceil(-q)


# --------------------------------------------------------------------------
# parse_quantity: valid forms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # plain numbers
        ("0", F(0)),
        ("1", F(1)),
        ("007", F(7)),
        ("1.5", F(3, 2)),
        (".5", F(1, 2)),
        ("5.", F(5)),
        ("0.0", F(0)),
        ("123456789012345678", F(123456789012345678)),
        # signs
        ("+1", F(1)),
        ("-1", F(-1)),
        ("-.5", F(-1, 2)),
        ("+5.", F(5)),
        # binary SI
        ("1Ki", F(KI)),
        ("1Mi", F(MI)),
        ("1Gi", F(GI)),
        ("1Ti", F(1 << 40)),
        ("1Pi", F(1 << 50)),
        ("1Ei", F(1 << 60)),
        ("1.5Gi", F(3 * GI, 2)),
        (".5Ki", F(512)),
        ("128Mi", F(128 * MI)),
        # decimal SI
        ("1n", F(1, 10**9)),
        ("1u", F(1, 10**6)),
        ("100m", F(1, 10)),
        ("250m", F(1, 4)),
        ("1k", F(1000)),
        ("1M", F(10**6)),
        ("1G", F(10**9)),
        ("1T", F(10**12)),
        ("1P", F(10**15)),
        ("1E", F(10**18)),  # bare E is exa, not an exponent
        ("1.5k", F(1500)),
        ("5.G", F(5 * 10**9)),  # Kubernetes accepts an empty fraction before a suffix
        # decimal exponent
        ("1e3", F(1000)),
        ("1E3", F(1000)),
        ("1E-3", F(1, 1000)),
        ("12e+6", F(12 * 10**6)),
        ("129e6", F(129 * 10**6)),
        ("1.5e2", F(150)),
        ("-2e0", F(-2)),
        ("1e-9", F(1, 10**9)),
        # whitespace around (the API server trims when decoding JSON)
        (" 100m ", F(1, 10)),
        ("\t1Gi\n", F(GI)),
    ],
)
def test_parse_valid_forms(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Finer than a nano unit: rounded up in magnitude to the next nano unit.
        ("1e-12", F(1, 10**9)),
        ("0.0000000001", F(1, 10**9)),
        ("1.5n", F(2, 10**9)),
        ("1.000000001n", F(2, 10**9)),
        ("-1e-12", F(-1, 10**9)),
        ("-1.5n", F(-2, 10**9)),
        ("1e-1000", F(1, 10**9)),
        ("0e-1000", F(0)),
    ],
)
def test_parse_rounds_up_to_nano_units(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, F(0)),
        (5, F(5)),
        (-3, F(-3)),
        (2**70, F(2**70)),
        (0.5, F(1, 2)),
        (0.1, F(1, 10)),  # exact via repr, not the binary float 0.1000000000000000055...
        (2.5, F(5, 2)),
        (1e-05, F(1, 100000)),
        (1e16, F(10**16)),
        (-0.25, F(-1, 4)),
    ],
)
def test_parse_numbers(value: int | float, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


# --------------------------------------------------------------------------
# parse_quantity: invalid input


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "1 m",
        "1 Gi",
        "1.2.3",
        "5ki",
        "5KiB",
        "5kI",
        "--1",
        "+-1",
        "1-",
        ".",
        "+",
        "-",
        "Ki",
        "m",
        "e3",
        "1e",
        "1e+",
        "1e1.5",
        "1E3Ki",
        "1Kii",
        "0x10",
        "1_000",
        "abc",
        "1,5",
        "١",  # Arabic-Indic digit one: only ASCII digits are allowed
        "inf",
        "NaN",
        "1e1001",
        "1" * 300,
    ],
)
def test_parse_rejects_malformed_strings(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    message = str(info.value)
    assert message.startswith("invalid quantity ")
    assert text[:20].strip() in message  # the message quotes the bad value


def test_error_message_quotes_value_and_lists_expected_forms() -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity("5KiB")
    message = str(info.value)
    assert message.startswith('invalid quantity "5KiB": expected')
    for form in ("Ki", "Mi", "Gi", "k", "M", "G", "e3", '"500m"'):
        assert form in message


def test_error_is_an_input_error() -> None:
    assert issubclass(QuantityError, InputError)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, "boolean true"),
        (False, "boolean false"),
        (None, "null"),
        ([1], "list"),
        ({"a": 1}, "object"),
        (b"1", "bytes"),
        (Fraction(1, 2), "Fraction"),
        (float("nan"), "number nan"),
        (float("inf"), "number inf"),
        (float("-inf"), "number -inf"),
    ],
)
def test_parse_rejects_other_types(value: object, shown: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(value)  # type: ignore[arg-type]
    assert str(info.value).startswith(f"invalid quantity {shown}")
    assert "expected" in str(info.value)


# --------------------------------------------------------------------------
# milli_value, int_value


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        ("0", 0, 0),
        ("1", 1000, 1),
        ("100m", 100, 1),
        ("0.1", 100, 1),
        ("1.5", 1500, 2),
        ("0.5m", 1, 1),  # MilliValue rounds up
        ("1n", 1, 1),
        ("1001m", 1001, 2),
        ("1Ki", 1024000, 1024),
        ("2.0000001", 2001, 3),
        # negative: Kubernetes rounds away from zero
        ("-0.5m", -1, -1),
        ("-1.5", -1500, -2),
        ("-100m", -100, -1),
    ],
)
def test_milli_and_int_value(text: str, milli: int, whole: int) -> None:
    q = parse_quantity(text)
    assert milli_value(q) == milli
    assert int_value(q) == whole


# --------------------------------------------------------------------------
# resource_value


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        # cpu in millicores
        ("cpu", "100m", 100),
        ("cpu", "0.1", 100),
        ("cpu", "1", 1000),
        ("cpu", 1, 1000),
        ("cpu", 0.5, 500),
        ("cpu", "1.5", 1500),
        ("cpu", "0.0001", 1),  # rounds up to 1m
        ("cpu", "2500u", 3),
        ("cpu", "1e-3", 1),
        # memory and other resources in units, rounded up
        ("memory", "1Gi", GI),
        ("memory", "1G", 10**9),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129000000),
        ("memory", "123Mi", 123 * MI),
        ("memory", 1073741824, GI),
        ("memory", "0.5", 1),
        ("memory", "1m", 1),
        ("memory", "1.5Ki", 1536),
        ("ephemeral-storage", "10Gi", 10 * GI),
        ("pods", "110", 110),
        ("pods", 110, 110),
        ("hugepages-2Mi", "1Gi", GI),
        ("nvidia.com/gpu", "2", 2),
        ("example.com/foo", "500m", 1),
        ("memory", "7Ei", 7 << 60),
        ("memory", "0", 0),
    ],
)
def test_resource_value(resource: str, value: str | int | float, expected: int) -> None:
    assert resource_value(resource, value) == expected


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("memory", "8Ei"),  # 2^63
        ("memory", "10E"),
        ("memory", 2**63),
        ("cpu", "1e16"),  # 1e19 millicores
        ("cpu", "9223372036854776"),
    ],
)
def test_resource_value_rejects_values_beyond_int64(resource: str, value: str | int) -> None:
    with pytest.raises(QuantityError, match="out of range"):
        resource_value(resource, value)


def test_resource_value_largest_int64() -> None:
    assert resource_value("memory", "9223372036854775807") == 2**63 - 1
    assert resource_value("cpu", "9223372036854775.807") == 2**63 - 1


@pytest.mark.parametrize("value", ["abc", "", True, None, [1], float("nan")])
def test_resource_value_rejects_malformed(value: object) -> None:
    with pytest.raises(QuantityError, match="invalid quantity"):
        resource_value("cpu", value)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# format_quantity


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", 250, "250m"),
        ("cpu", 2000, "2"),
        ("cpu", 0, "0"),
        ("cpu", 1500, "1500m"),
        ("cpu", 1, "1m"),
        ("memory", GI, "1Gi"),
        ("memory", 3 * GI, "3Gi"),
        ("memory", 512 * MI, "512Mi"),
        ("memory", 1536 * MI, "1536Mi"),
        ("memory", 4 * KI, "4Ki"),
        ("memory", 1 << 40, "1Ti"),
        ("memory", 1000, "1000"),
        ("memory", 10**9, "1000000000"),
        ("memory", 0, "0"),
        ("ephemeral-storage", 20 * GI, "20Gi"),
        ("hugepages-2Mi", 2 * MI, "2Mi"),
        ("pods", 110, "110"),
        ("pods", 1024, "1024"),  # counts stay plain
        ("nvidia.com/gpu", 2, "2"),
    ],
)
def test_format_quantity(resource: str, value: int, expected: str) -> None:
    assert format_quantity(resource, value) == expected


# --------------------------------------------------------------------------
# Properties

small_ints = st.integers(min_value=-(10**12), max_value=10**12)


@given(n=small_ints, suffix=st.sampled_from(sorted(ALL_SUFFIXES)))
def test_integer_with_suffix_is_exact(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}") == n * ALL_SUFFIXES[suffix]


@given(n=small_ints, exponent=st.integers(min_value=-9, max_value=30), letter=st.sampled_from("eE"))
def test_integer_with_exponent_is_exact(n: int, exponent: int, letter: str) -> None:
    assert parse_quantity(f"{n}{letter}{exponent}") == n * Fraction(10) ** exponent
    if exponent >= 0:
        assert parse_quantity(f"{n}{letter}+{exponent}") == n * 10**exponent


digits = st.text(alphabet="0123456789", max_size=12)


@given(
    whole=digits,
    frac=digits,
    dot=st.booleans(),
    suffix=st.sampled_from(sorted(ALL_SUFFIXES)),
)
@example(whole="0", frac="0001", dot=True, suffix="")
@example(whole="", frac="5", dot=True, suffix="m")
def test_milli_value_is_ceiling_of_exact_value(
    whole: str, frac: str, dot: bool, suffix: str
) -> None:
    if not whole and not (dot and frac):
        return
    text = f"{whole}.{frac}{suffix}" if dot else f"{whole}{suffix}"
    exact = Fraction(f"{whole or 0}.{(frac if dot else '') or 0}") * ALL_SUFFIXES[suffix]
    q = parse_quantity(text)
    assert milli_value(q) == math.ceil(exact * 1000)
    assert int_value(q) == math.ceil(exact)
    if exact * 1000 <= 2**63 - 1:
        assert resource_value("cpu", text) == math.ceil(exact * 1000)
    # the negative quantity rounds away from zero
    assert milli_value(parse_quantity("-" + text)) == -math.ceil(exact * 1000)


quantity_strings = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.text(alphabet="0123456789", min_size=1, max_size=10),
    st.sampled_from(["", "."])
    | st.text(alphabet="0123456789", max_size=12).map(lambda digits: "." + digits),
    st.sampled_from(sorted(ALL_SUFFIXES))
    | st.builds("{}{}".format, st.sampled_from(["e", "E", "e+", "e-", "E-"]), st.integers(0, 25)),
)


@given(text=quantity_strings, resource=st.sampled_from(["cpu", "memory", "pods"]))
def test_resource_value_agrees_with_exact_parse(text: str, resource: str) -> None:
    """resource_value's integer-only path equals rounding the exact Fraction."""
    q = parse_quantity(text)
    expected = milli_value(q) if resource == "cpu" else int_value(q)
    if -(2**63) <= expected < 2**63:
        assert resource_value(resource, text) == expected
    else:
        with pytest.raises(QuantityError, match="out of range"):
            resource_value(resource, text)


@given(value=st.integers(min_value=0, max_value=2**63 - 1))
def test_format_then_parse_round_trips_bytes(value: int) -> None:
    assert resource_value("memory", format_quantity("memory", value)) == value


@given(
    k=st.integers(min_value=1, max_value=10**5),
    suffix=st.sampled_from(["Ki", "Mi", "Gi", "Ti"]),
)
def test_exact_binary_values_format_with_a_suffix(k: int, suffix: str) -> None:
    value = k * BINARY_SUFFIXES[suffix]
    text = format_quantity("memory", value)
    assert re.fullmatch(r"[0-9]+[KMGTPE]i", text)
    assert resource_value("memory", text) == value


@given(value=st.integers(min_value=0, max_value=2**63 - 1))
def test_format_then_parse_round_trips_cpu(value: int) -> None:
    assert resource_value("cpu", format_quantity("cpu", value)) == value


@given(value=st.floats(allow_nan=False, allow_infinity=False))
def test_float_parses_like_its_repr(value: float) -> None:
    assert parse_quantity(value) == parse_quantity(repr(value))


quantity_alphabet = "0123456789.+-eEKMGTPEinumk \t"


@given(text=st.one_of(st.text(), st.text(alphabet=quantity_alphabet, max_size=12)))
def test_garbage_raises_only_quantity_error(text: str) -> None:
    try:
        result = parse_quantity(text)
    except QuantityError as error:
        assert str(error).startswith("invalid quantity ")
    else:
        assert isinstance(result, Fraction)
        assert any(c.isdigit() for c in text)


@given(
    value=st.one_of(
        st.none(),
        st.booleans(),
        st.lists(st.integers()),
        st.dictionaries(st.text(), st.integers()),
        st.binary(),
    )
)
def test_non_quantity_types_raise_quantity_error(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]
    with pytest.raises(QuantityError):
        resource_value("memory", value)  # type: ignore[arg-type]


hostile_quantities = st.one_of(
    st.text(),
    st.text(alphabet=quantity_alphabet, max_size=300),
    st.builds(
        "{}{}e{}{}".format,
        st.sampled_from(["", "-", "+"]),
        st.text(alphabet="0123456789", min_size=1, max_size=300),
        st.sampled_from(["", "+", "-"]),
        st.integers(0, 10**30),
    ),
    st.integers(0, 5000).map(lambda n: "9" * n + "Ei"),
    st.integers(),
    st.integers(300, 5000).map(lambda n: 10**n),
    st.floats(),
)


@settings(max_examples=300, deadline=None)
@given(value=hostile_quantities, resource=st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]))
def test_any_input_gives_a_value_or_a_one_line_quantity_error(value: object, resource: str) -> None:
    """Huge exponents, thousands of digits, control characters: an int64 value or a QuantityError."""
    try:
        result = resource_value(resource, value)  # type: ignore[arg-type]
    except QuantityError as error:
        text = str(error)
        assert "\n" not in text and "\x1b" not in text and len(text) < 600
    else:
        assert -(2**63) <= result < 2**63
