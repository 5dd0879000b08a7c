"""Tests for scorer.inputs.describe: how values and paths are named in messages."""

from __future__ import annotations

import datetime

import pytest

from scorer.inputs.describe import MAX_QUOTED, describe_value, expected, join_path, printable, quote


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("web", '"web"'),
        ('say "hi"\\', '"say \\"hi\\"\\\\"'),
        ("a\nb\tc\r", '"a\\nb\\tc\\r"'),
        ("\x1b[31mred", '"\\x1b[31mred"'),
        ("\u202eevil", '"\\u202eevil"'),  # a bidi override is a format character
        ("caf\xe9 \u4e2d", '"caf\xe9 \u4e2d"'),  # printable non-ASCII stays
        (True, "true"),
        (None, "null"),
        (-5, "-5"),
        (1.5, "1.5"),
        pytest.param(10**150, "(about 151 digits)", id="huge"),
        (10**50, str(10**50)),
    ],
)
def test_quote(value: object, shown: str) -> None:
    assert quote(value) == shown


def test_quote_shortens_long_strings() -> None:
    shown = quote("x" * 1000)
    assert shown == '"' + "x" * (MAX_QUOTED - 3) + '..."'


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "null"),
        (False, "boolean false"),
        (16, "integer 16"),
        (0.5, "number 0.5"),
        (float("nan"), "number nan"),
        ("16", 'string "16"'),
        ({"a": 1}, "object"),
        ([1], "list"),
        ((1,), "list"),
        (datetime.date(2024, 1, 2), "timestamp 2024-01-02"),
        (b"x", "bytes"),
        pytest.param(-(10**5000), "integer -(about 5001 digits)", id="past-the-digit-limit"),
    ],
)
def test_describe_value(value: object, shown: str) -> None:
    assert describe_value(value) == shown


def test_expected_hints_at_quoting_yaml_scalars_where_a_string_is_expected() -> None:
    assert expected("a string", True) == "expected a string, got boolean true (quote it in YAML)"
    assert expected("a string", 5) == "expected a string, got integer 5 (quote it in YAML)"
    assert expected("a string", [1]) == "expected a string, got list"
    assert expected("an integer", "5") == 'expected an integer, got string "5"'


def test_join_path_and_printable() -> None:
    assert join_path("", "spec") == "spec"
    assert join_path("spec", "containers") == "spec.containers"
    assert join_path("spec.containers", "[0]") == "spec.containers[0]"
    assert join_path("spec", "") == "spec"
    assert join_path("labels", "a\nb") == "labels.a\\nb"
    assert printable("web\x1b[2J") == "web\\x1b[2J"
    assert printable('ok "name"') == 'ok "name"'
