"""Go ``time.Duration`` strings (``15s``, ``1m30s``, ``100ms``) <-> ``timedelta``.

kube-scheduler's configuration stores durations as ``metav1.Duration``, whose
JSON form is the string that Go's ``time.ParseDuration`` reads and
``Duration.String`` writes. ``timedelta`` keeps microseconds, so anything
finer than 1µs is truncated towards zero.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

from scorer.inputs.describe import quote

# Nanoseconds per unit, as in Go's time.unitMap (both micro signs are accepted).
_UNITS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_COMPONENT = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
_MAX_NS = 2**63 - 1


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string; raise ValueError with Go's wording on bad input."""
    orig = text
    sign = 1
    if text[:1] in ("-", "+"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return timedelta(0)
    if text == "":
        raise ValueError(f'invalid duration {quote(orig)}')
    total = Fraction(0)
    pos = 0
    while pos < len(text):
        match = _COMPONENT.match(text, pos)
        assert match is not None  # the pattern matches the empty string
        whole, frac, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not frac:
            raise ValueError(f'invalid duration {quote(orig)}')
        if not unit:
            raise ValueError(f'missing unit in duration {quote(orig)}')
        if unit not in _UNITS:
            raise ValueError(f'unknown unit {quote(unit)} in duration {quote(orig)}')
        value = Fraction(int(whole or "0"))
        if frac:
            value += Fraction(int(frac), 10 ** len(frac))
        total += value * _UNITS[unit]
        if total > _MAX_NS + (1 if sign < 0 else 0):
            raise ValueError(f'invalid duration {quote(orig)}')
        pos = match.end()
    return timedelta(microseconds=sign * (int(total) // 1000))


def format_duration(value: timedelta) -> str:
    """Format like Go's ``Duration.String``: ``0s``, ``100ms``, ``1m30s``, ``1h0m0s``."""
    ns = (value // timedelta(microseconds=1)) * 1000
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1_000_000_000:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{_fraction(u, 1_000)}\u00b5s"
        return f"{sign}{_fraction(u, 1_000_000)}ms"
    hours, rest = divmod(u, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = _fraction(rest, 1_000_000_000)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
