"""Guards that keep YAML from hurting the C parser (``scorer.inputs.reader`` says which and why): a cheap
upper bound of the nesting depth before composing, the exact depth from the event parser when that bound is
too high, and the check of what a document's aliases repeat once composed."""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml
import yaml.nodes

from scorer.errors import ReadError

# Nesting that libyaml's recursive C composer takes without risk on any
# thread stack (about 400 bytes per level); deeper text is scanned exactly.
SAFE_COMPOSE_DEPTH = 1000
# The most max_depth may be raised to (the composer then runs that deep).
MAX_DEPTH_CEILING = 10_000
_SCALAR = yaml.nodes.ScalarNode
_LINE_BREAKS = ("\x85", "\u2028", "\u2029")
_BLOCK_PREFIX_RUN = (SAFE_COMPOSE_DEPTH - 2) // 4
_LONG_FIRST_PREFIX = re.compile(rf"[ \t?:-]{{{_BLOCK_PREFIX_RUN}}}")
_LONG_PREFIX = re.compile(rf"\n[ \t?:-]{{{_BLOCK_PREFIX_RUN}}}")
# A flow collection starts after whitespace, a line start or one of [{,:?-;
# a bracket right after anything else is text (a quoted string, a plain scalar).
_FLOW_OPENER = re.compile(r"(?<![^\s\[{,:?\-])[\[{](?![\]}])")
# A flow collection in block context starts after whitespace (or at the start of the text): elsewhere a
# bracket there is text (kubectl's managedFields keys, ``k:{"type":"Ready"}``), or one the parser refuses
# before composing anything inside it. (The lookbehind follows the bracket: a regular expression
# that finds the bracket first runs some times faster.)
_OUTER_FLOW_OPENER = re.compile(r"[\[{](?<!\S.)(?![\]}])")


def _depth_message(max_depth: int) -> str:
    return f"nested more than {max_depth} levels deep (the nesting limit of inputs)"


# -- nesting depth before composing ---------------------------------------------------------


def _depth_bound(text: str) -> int:
    """An upper bound of the nesting depth of every document of ``text``, or
    more than ``SAFE_COMPOSE_DEPTH`` when a cheap bound cannot show it is below.

    Block collections nest only by indentation or compact indicators (at
    most two levels per column of a line's leading run of spaces and
    ``- ? :``); flow collections only by brackets that can open one, from
    the first that can open one in block context.
    """
    if any(brk in text for brk in _LINE_BREAKS) or (
        "\r" in text and text.count("\r") != text.count("\r\n")
    ):
        return SAFE_COMPOSE_DEPTH + 1  # line breaks the prefix search does not see
    if _LONG_FIRST_PREFIX.match(text) or _LONG_PREFIX.search(text):
        return SAFE_COMPOSE_DEPTH + 1
    block = 2 * _BLOCK_PREFIX_RUN + 2
    allowance = SAFE_COMPOSE_DEPTH - block - 1
    if text.count("[") + text.count("{") <= allowance:
        return SAFE_COMPOSE_DEPTH
    for start, end in _document_spans(text):
        openers = text.count("[", start, end) + text.count("{", start, end)
        if openers <= allowance:
            continue
        # Every flow collection is inside one that starts at an outer opener: count from the first.
        outer = _OUTER_FLOW_OPENER.search(text, start, end)
        if outer is None:
            continue
        start = outer.start()
        openers = text.count("[", start, end) + text.count("{", start, end)
        openers -= text.count("[]", start, end) + text.count("{}", start, end)
        if openers > allowance and len(_FLOW_OPENER.findall(text, start, end)) > allowance:
            return SAFE_COMPOSE_DEPTH + 1
    return SAFE_COMPOSE_DEPTH


def _document_spans(text: str) -> Iterator[tuple[int, int]]:
    """Spans between document markers (``---``/``...`` at a line start): a
    collection cannot stay open across one."""
    start = 0
    position = 0
    while True:
        dashes = text.find("\n---", position)
        dots = text.find("\n...", position)
        marks = [m for m in (dashes, dots) if m >= 0]
        if not marks:
            break
        mark = min(marks) + 1
        position = mark + 3
        if text[position : position + 1] not in ("", " ", "\t", "\r", "\n"):
            continue
        yield start, mark
        start = mark
    yield start, len(text)


def _scan_depth(text: str, source: str, max_depth: int) -> None:
    """The exact depth, from PyYAML's (non-recursive) event parser; stops at
    the first syntax error, which the composer will then report.

    The pure-Python parser: libyaml's scanner (PyYAML >= 6.0.4) refuses
    nesting past its own limit while it looks ahead for simple keys, before
    the events at our limit are out, and its message gives no position of ours."""
    try:
        loader = yaml.SafeLoader(text)
    except (UnicodeEncodeError, yaml.YAMLError):
        return  # the composer's loader reports it
    starts = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, starts):
                depth += 1
                if depth > max_depth:
                    mark = event.start_mark
                    raise ReadError(
                        source,
                        f"line {mark.line + 1}, column {mark.column + 1}: "
                        + _depth_message(max_depth),
                    )
            elif isinstance(event, ends):
                depth -= 1
    except yaml.YAMLError:
        return
    finally:
        loader.dispose()


# -- aliases ----------------------------------------------------------------------------------


def _has_aliases(text: str, node: yaml.Node) -> bool:
    start, end = node.start_mark.index, node.end_mark.index + 1
    return text.find("&", start, end) >= 0 and text.find("*", start, end) >= 0


def _check_aliases(root: yaml.Node, source: str, number: int, *, max_alias_nodes: int, max_depth: int) -> None:
    """Refuse cycles, and aliases that repeat more than ``max_alias_nodes``
    nodes or nest deeper than ``max_depth`` once expanded.

    Walks the composed node graph (an alias is the same node object reached
    twice) once per distinct node, computing each node's expanded size and
    height from its children's.
    """
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, Iterator[yaml.Node]]] = [(root, _children(root))]
    on_path.add(id(root))
    where = f"document {number} of {source}"
    while stack:
        node, children = stack[-1]
        for child in children:
            if id(child) in on_path:
                mark = child.start_mark
                raise ReadError(
                    source,
                    f"line {mark.line + 1}, column {mark.column + 1}: an alias refers to "
                    "a node that contains it (a cycle)",
                    origin=where,
                )
            if id(child) not in size:
                on_path.add(id(child))
                stack.append((child, _children(child)))
                break
        else:
            stack.pop()
            on_path.discard(id(node))
            if node.__class__ is _SCALAR:
                size[id(node)], height[id(node)] = 1, 0
                continue
            kids = list(_children(node))
            size[id(node)] = 1 + sum(size[id(kid)] for kid in kids)
            height[id(node)] = 1 + max((height[id(kid)] for kid in kids), default=0)
    repeated = size[id(root)] - len(size)
    if repeated > max_alias_nodes:
        raise ReadError(
            source,
            f"aliases repeat {repeated} nodes, more than the limit of "
            f"{max_alias_nodes} (an alias repeats the whole node it names)",
            origin=where,
        )
    if height[id(root)] > min(max_depth, MAX_DEPTH_CEILING):
        raise ReadError(source, _depth_message(max_depth) + " once aliases are expanded", origin=where)


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if node.__class__ is _SCALAR:
        return iter(())
    if isinstance(node, yaml.MappingNode):
        return (child for pair in node.value for child in pair)
    return iter(node.value)
