"""How values and places in an input are named in error messages: one wording.

Every decoder of user input (Kubernetes objects, the configuration and
plugin args, metrics snapshots, quantities) says what it expected and what
it got with these helpers, so messages read the same everywhere::

    spec.priority: expected an integer, got string "high"
    metadata.labels.enabled: expected a string, got boolean true (quote it in YAML)

``quote`` escapes what a terminal would act on (newlines, escape sequences,
other control and format characters) and shortens long strings, so a hostile
value cannot forge lines in scorer's output.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

# Strings longer than this are shortened in messages (the start is kept).
MAX_QUOTED = 80
# Integers with more digits than this are shortened in messages.
_MAX_SHOWN_DIGITS = 100

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote(value: object) -> str:
    """A value inside a message: strings double-quoted with Go's ``%q``
    escapes (``"a\\nb"``, ``"\\x1b[31m"``) and shortened past ``MAX_QUOTED``
    characters; ``true``/``false``/``null``; numbers as written."""
    if isinstance(value, str):
        shown = value if len(value) <= MAX_QUOTED else value[: MAX_QUOTED - 3]
        body = shown if shown.isprintable() and '"' not in shown and "\\" not in shown else (
            "".join(_escape(ch) for ch in shown)
        )
        return f'"{body}"' if shown is value else f'"{body}..."'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return _int_text(value)
    return repr(value)


def printable(text: str) -> str:
    """``text`` with what a terminal would act on (newlines, escape sequences,
    other control and format characters) escaped as in ``quote``, without
    quotes: for names inside messages (``Pod default/web``)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    escaped = _ESCAPES.get(ch)
    if escaped is not None:
        return escaped
    if ch.isprintable():
        return ch
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _int_text(value: int) -> str:
    if abs(value) < 10**_MAX_SHOWN_DIGITS:
        return str(value)
    # str() of a huge int is slow, and raises past Python's digit limit.
    digits = int(abs(value).bit_length() * 0.30103) + 1
    return f"{'-' if value < 0 else ''}(about {digits} digits)"


def describe_value(value: Any) -> str:
    """How a decoded value is named after "got": ``string "16"``, ``integer 3``,
    ``boolean true``, ``number 0.5``, ``null``, ``object``, ``list``,
    ``timestamp 2024-01-02T03:04:05``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {quote(value)}"
    if isinstance(value, int):
        return f"integer {quote(value)}"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {quote(value)}"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return f"timestamp {value.isoformat()}"
    return type(value).__name__


def expected(what: str, value: Any) -> str:
    """``expected <what>, got <value>``; a YAML scalar where a string is
    expected gets the hint to quote it (``enabled: true`` is a boolean)."""
    hint = ""
    if what.startswith("a string") and isinstance(value, (bool, int, float, datetime.date)):
        hint = " (quote it in YAML)"
    return f"expected {what}, got {describe_value(value)}{hint}"


def join_path(path: str, child: str) -> str:
    """A field path: ``join_path("a.b", "c") == "a.b.c"``,
    ``join_path("a", "[0]") == "a[0]"``; ``""`` is the root. What a terminal
    would act on in ``child`` (a key from the input) is escaped."""
    if not child:
        return path
    if not child.isprintable():
        child = printable(child)
    if not path or child.startswith("["):
        return f"{path}{child}"
    return f"{path}.{child}"
