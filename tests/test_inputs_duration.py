"""Go duration strings, as metav1.Duration reads and writes them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scorer.config import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
        ("15s", timedelta(seconds=15)),
        ("1m30s", timedelta(seconds=90)),
        ("100ms", timedelta(milliseconds=100)),
        ("1.5h", timedelta(minutes=90)),
        ("2h45m", timedelta(hours=2, minutes=45)),
        (".5s", timedelta(milliseconds=500)),
        ("1.s", timedelta(seconds=1)),
        ("+5s", timedelta(seconds=5)),
        ("-1m", timedelta(minutes=-1)),
        ("10us", timedelta(microseconds=10)),
        ("10\u00b5s", timedelta(microseconds=10)),
        ("10\u03bcs", timedelta(microseconds=10)),
        ("1500ns", timedelta(microseconds=1)),  # below 1µs is truncated
        ("1h1m1s1ms", timedelta(hours=1, minutes=1, seconds=1, milliseconds=1)),
    ],
)
def test_parse(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'invalid duration ""'),
        ("15", 'missing unit in duration "15"'),
        ("1x", 'unknown unit "x" in duration "1x"'),
        ("s", 'invalid duration "s"'),
        (".s", 'invalid duration ".s"'),
        ("1 s", 'unknown unit " s" in duration "1 s"'),
        ("3000000h", 'invalid duration "3000000h"'),  # beyond Go's int64 nanoseconds
        ("-", 'invalid duration "-"'),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(seconds=15), "15s"),
        (timedelta(seconds=90), "1m30s"),
        (timedelta(minutes=1), "1m0s"),
        (timedelta(hours=1), "1h0m0s"),
        (timedelta(milliseconds=100), "100ms"),
        (timedelta(milliseconds=1500), "1.5s"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(microseconds=3), "3\u00b5s"),
        (timedelta(seconds=-2), "-2s"),
        (timedelta(hours=26, seconds=0.25), "26h0m0.25s"),
    ],
)
def test_format(value, text):
    assert format_duration(value) == text
    assert parse_duration(text) == value


def test_a_duration_with_control_characters_is_quoted_with_escapes():
    # Go's time.ParseDuration quotes the input (%q): a message stays one line whatever the input.
    with pytest.raises(ValueError) as caught:
        parse_duration("\n")
    assert str(caught.value) == 'invalid duration "\\n"'
