"""PromQL templates of metric-driven plugins: their placeholders, checked at config load and filled once.

A plugin's query is a template. ``{by}`` becomes the labels the node mapping
reads (``NodeMapping.group_labels``), so an aggregation keeps what finds the
node; a plugin may offer more placeholders (NetworkTraffic ``{device}`` and
``{range}``, LoadAware ``{range}``). Every other brace is PromQL's: label
matchers (``{mode="idle"}``) and, inside string literals, regular
expressions (``"eth{0,1}"``, ``"\\p{L}"``).

``template_errors`` reports what would otherwise reach Prometheus as is and
fail there, or worse, match nothing: a ``{name}`` that is not a placeholder
of the plugin (a typo such as ``{rnage}``), a ``{`` or ``}`` outside string
literals without its partner, and a string literal left open. ``fill_query``
turns a checked template into the PromQL a source runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import timedelta

from scorer.sources.args import SourceArgs

BY = "by"
DEVICE = "device"
RANGE = "range"

# ``{name}`` (spaces inside are a typo too), except after \p or \P: a Unicode class of a regex.
_PLACEHOLDER = re.compile(r"(?<!\\[pP])\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}")
_QUOTES = "\"'`"


def template_errors(template: str, placeholders: Iterable[str]) -> list[str]:
    """Why ``template`` is not a valid query template with ``placeholders``; [] if it is."""
    allowed = tuple(placeholders)
    supported = ", ".join("{" + name + "}" for name in allowed)
    errors: list[str] = []
    for match in _PLACEHOLDER.finditer(template):
        if match.group(0)[1:-1] not in allowed:
            message = f"unknown placeholder {match.group(0)!r} (supported: {supported})"
            if message not in errors:
                errors.append(message)
    # Placeholders (known or not) are not PromQL braces: blank them before counting.
    errors.extend(_brace_errors(_PLACEHOLDER.sub(lambda m: " " * len(m.group(0)), template)))
    return errors


def _brace_errors(text: str) -> list[str]:
    """Unbalanced braces outside string literals, and an unterminated literal (positions 1-based)."""
    open_at: list[int] = []
    quote = ""
    quote_at = 0
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and quote != "`":  # PromQL raw strings (`...`) have no escapes
                i += 2
                continue
            if char == quote:
                quote = ""
        elif char in _QUOTES:
            quote, quote_at = char, i
        elif char == "{":
            open_at.append(i)
        elif char == "}":
            if not open_at:
                return [f'unbalanced "}}" at character {i + 1}']
            open_at.pop()
        i += 1
    if quote:
        return [f"unterminated string literal: {quote} at character {quote_at + 1} is never closed"]
    if open_at:
        return [f'unbalanced "{{" at character {open_at[0] + 1}']
    return []


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` of ``values`` replaced, in one pass (a value is never re-read)."""
    if not values:
        return template
    pattern = re.compile(r"\{(" + "|".join(re.escape(name) for name in values) + r")\}")
    return pattern.sub(lambda m: values[m.group(1)], template)


def fill_query(template: str, source: SourceArgs, **values: str) -> str:
    """A plugin's query template as the PromQL its source runs: ``{by}`` becomes the labels
    ``source.nodeMapping`` finds nodes by (``node, kubernetes_node, nodename, instance`` with
    ``by: auto``), so an aggregation keeps them; each other ``{name}`` becomes ``values[name]``
    (``fill_query(t, args.source, range=promql_duration(args.time_range))``). Every other brace is
    PromQL's and stays as written."""
    return fill_template(template, {BY: source.node_mapping.mapping().group_labels(), **values})


def promql_duration(window: timedelta) -> str:
    """A PromQL range: whole seconds (``60s``), else milliseconds (``1500ms``), never truncated."""
    millis = round(window.total_seconds() * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"
