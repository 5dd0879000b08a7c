"""Kubernetes resource quantities (``resource.Quantity``), parsed exactly.

A quantity is ``<sign><number><suffix>``: an optional ``+``/``-``, digits
with an optional fraction (``1.5``, ``.5``, ``5.``) and one suffix out of

- binary SI: ``Ki Mi Gi Ti Pi Ei`` (powers of 1024),
- decimal SI: ``n u m`` (none) ``k M G T P E`` (powers of 1000),
- a decimal exponent: ``e`` or ``E`` and a signed integer (``1e3``, ``12E-3``).

Arithmetic uses ``Fraction`` and ``int`` only, never floats. Like Kubernetes,
a value finer than a nano unit is rounded up (away from zero) to the next
nano unit, so ``1e-12`` is ``1n``; leading and trailing whitespace is ignored
(the API server trims it when decoding JSON).

The scheduler works with canonical integers (``resource_value``): millicores
for cpu, plain units (bytes, counts) for everything else, both rounded up as
Kubernetes' ``MilliValue`` and ``Value`` do.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from scorer.errors import QuantityError
from scorer.inputs.describe import describe_value, quote
from scorer.inputs.numbers import INT64_MAX, INT64_MIN

BINARY_SUFFIXES: dict[str, int] = {
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}
# Decimal SI suffixes as powers of ten.
DECIMAL_EXPONENTS: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}

# Bounds that keep hostile input from costing huge integers; no real
# quantity comes near them (int64 tops out at 9.2e18).
_MAX_LENGTH = 256
_MAX_EXPONENT = 1000

_NANO = 10**9

# "1E" is exa, "1E3" is an exponent: the exponent branch needs digits, so
# the decimal branch catches a bare "E". [0-9], not \d: no Unicode digits.
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))"
)

_EXPECTED = (
    "expected a number with an optional sign, fraction and suffix "
    "(binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P E, or an exponent like e3 or E-3), "
    'e.g. "500m", "1.5Gi", "128974848", "129e6"'
)

# Resources displayed with binary suffixes.
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity into an exact ``Fraction``.

    Accepts a quantity string, an int, or a float (as JSON numbers arrive;
    converted exactly from its shortest decimal repr). Raises
    ``QuantityError`` quoting the value for anything else.
    """
    if isinstance(value, str):
        return _parse_string(value)
    if isinstance(value, bool):  # bool is an int subclass; True is not a quantity
        raise QuantityError(
            f'invalid quantity {describe_value(value)}: expected a string like "500m" or a number'
        )
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(
                f"invalid quantity {describe_value(value)}: expected a finite number"
            )
        return _round_to_nano(Fraction(repr(value)))
    raise QuantityError(
        f"invalid quantity {describe_value(value)}: "
        'expected a string like "500m" or "1Gi", or a number'
    )


@lru_cache(maxsize=4096)
def _parse_string(text: str) -> Fraction:
    mantissa, exponent = _decompose(text)
    if exponent >= 0:
        return Fraction(mantissa * 10**exponent)
    return _round_to_nano(Fraction(mantissa, 10**-exponent))


def _decompose(text: str) -> tuple[int, int]:
    """``(mantissa, exponent)`` with value = mantissa * 10**exponent, all ints."""
    stripped = text.strip()
    if len(stripped) > _MAX_LENGTH:
        raise QuantityError(
            f"invalid quantity {quote(text)}: longer than {_MAX_LENGTH} characters"
        )
    if not stripped:
        raise QuantityError(f"invalid quantity {quote(text)}: empty; {_EXPECTED}")
    match = _QUANTITY_RE.fullmatch(stripped)
    if match is None:
        raise QuantityError(f"invalid quantity {quote(text)}: {_EXPECTED}")
    whole = match["whole"]
    frac = match["frac"] or ""
    if not whole and not frac:
        raise QuantityError(f"invalid quantity {quote(text)}: no digits; {_EXPECTED}")
    mantissa = int(whole + frac)
    exponent = -len(frac)
    if match["binary"] is not None:
        mantissa *= BINARY_SUFFIXES[match["binary"]]
    elif match["exponent"] is not None:
        power = int(match["exponent"])
        if abs(power) > _MAX_EXPONENT:
            raise QuantityError(
                f"invalid quantity {quote(text)}: exponent out of range "
                f"(at most {_MAX_EXPONENT} in magnitude)"
            )
        exponent += power
    else:
        exponent += DECIMAL_EXPONENTS[match["decimal"]]
    if match["sign"] == "-":
        mantissa = -mantissa
    return mantissa, exponent


def _round_to_nano(number: Fraction) -> Fraction:
    """Round away from zero to a whole number of nano units, as Kubernetes does."""
    scaled = number * _NANO
    if scaled.denominator == 1:
        return number
    return Fraction(_round_away_from_zero(scaled), _NANO)


def milli_value(q: Fraction) -> int:
    """``q`` in thousandths, rounded up (Kubernetes ``Quantity.MilliValue``).

    Like Kubernetes, "up" is away from zero: the ceiling for the non-negative
    values resources have, ``-1`` for ``-0.5m``.
    """
    return _round_away_from_zero(q * 1000)


def int_value(q: Fraction) -> int:
    """``q`` rounded up to an integer (Kubernetes ``Quantity.Value``), away
    from zero like ``milli_value``."""
    return _round_away_from_zero(q)


def _round_away_from_zero(q: Fraction) -> int:
    return math.ceil(q) if q >= 0 else -math.ceil(-q)


def resource_value(resource_name: str, value: str | int | float) -> int:
    """Canonical integer the scheduler uses for a resource quantity.

    cpu is in millicores (``milli_value``); every other resource (memory,
    ephemeral-storage, pods, hugepages-*, extended resources such as
    ``nvidia.com/gpu``) in plain units (``int_value``). Raises
    ``QuantityError`` if the value is malformed or outside int64.
    """
    if isinstance(value, str):
        return _string_resource_value(resource_name == "cpu", value)
    return _canonical(resource_name == "cpu", parse_quantity(value), value)


@lru_cache(maxsize=4096)
def _string_resource_value(is_cpu: bool, value: str) -> int:
    # Integer-only shortcut: rounding up to nano units first (as
    # parse_quantity does) cannot change the rounding to milli or whole units.
    mantissa, exponent = _decompose(value)
    if is_cpu:
        exponent += 3
    if exponent >= 0:
        result = mantissa * 10**exponent
    else:
        divisor = 10**-exponent
        # away from zero: the ceiling for positives, the floor for negatives
        result = -(-mantissa // divisor) if mantissa >= 0 else mantissa // divisor
    return _checked(is_cpu, result, value)


def _canonical(is_cpu: bool, q: Fraction, original: object) -> int:
    return _checked(is_cpu, milli_value(q) if is_cpu else int_value(q), original)


def _checked(is_cpu: bool, result: int, original: object) -> int:
    if not INT64_MIN <= result <= INT64_MAX:
        shown = quote(original)
        unit = "millicores" if is_cpu else "units"
        raise QuantityError(
            f"quantity {shown} out of range: beyond the int64 limit of {INT64_MAX} {unit}"
        )
    return result


def format_quantity(resource_name: str, value: int) -> str:
    """Display a canonical integer (see ``resource_value``) as a quantity.

    cpu: ``250m``, or ``2`` for whole cores. Byte resources (memory,
    ephemeral-storage, hugepages-*): the largest binary suffix that divides
    the value exactly (``512Mi``, ``3Gi``), else the plain integer. Anything
    else: the plain integer. ``resource_value`` of the result gives back
    ``value``.
    """
    if resource_name == "cpu":
        if value % 1000 == 0:
            return str(value // 1000)
        return f"{value}m"
    if value != 0 and (resource_name in _BYTE_RESOURCES or resource_name.startswith("hugepages-")):
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            multiplier = BINARY_SUFFIXES[suffix]
            if value % multiplier == 0:
                return f"{value // multiplier}{suffix}"
    return str(value)
