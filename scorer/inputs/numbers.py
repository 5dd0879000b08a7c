"""Integer ranges of the Kubernetes API, and Go's integer parsing.

Kubernetes stores counts and resource amounts in int64 (some fields in
int32); scorer keeps them in int64 numpy columns. A value outside the range
is refused where it is read, never wrapped.
"""

from __future__ import annotations

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)


def parse_int64(text: str) -> int | None:
    """Go ``strconv.ParseInt(text, 10, 64)``: the value, or None if invalid."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    if len(digits.lstrip("0")) > 19:  # beyond int64, and int() of it may be costly
        return None
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else None


def int_range_error(
    value: int, bits: int = 64, low: int | None = None, high: int | None = None
) -> str | None:
    """Why ``value`` does not fit a signed ``bits``-bit integer narrowed to
    [``low``, ``high``] when given; None when it fits."""
    top = (1 << (bits - 1)) - 1 if high is None else high
    bottom = -(1 << (bits - 1)) if low is None else low
    if bottom <= value <= top:
        return None
    return f"out of range, expected an integer from {bottom} to {top}"
