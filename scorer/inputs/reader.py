"""One guarded reader for every YAML and JSON input scorer takes.

Cluster files (``--cluster``), KubeSchedulerConfiguration files
(``--config``) and metrics snapshots (``--metrics``) all come through here::

    documents = read_documents("cluster.yaml", limits=CLUSTER_LIMITS)
    for document in documents:      # Document(data, number, source)
        ... document.data, document.origin  # "document 3 of cluster.yaml"

``parse_documents(text, source, ...)`` does the same for text in memory and
``single_document`` picks the one document of a configuration. Every
failure is a ``ReadError`` (an ``InputError``) with one line of text naming
the input; nothing else escapes, whatever the bytes.

Strict, as kube's decoders are
-------------------------------
- A key given twice in one mapping is an error naming the field path, the
  document and (in YAML) the line of the repeat, for YAML and JSON alike.
  Keys from a YAML merge (``<<: *base``) may be overridden; that is not a
  repeat.
- Only UTF-8 text is read (a UTF-8 byte order mark is accepted): another
  encoding or a binary file is refused naming the first bad byte and its
  offset (``not UTF-8 text: byte 0xff at offset 12``).
- Numbers that cannot be represented are refused with their path: ``NaN``
  and infinities (``.nan``, ``.inf``, ``1e999`` in YAML; ``NaN``,
  ``Infinity``, ``1e999`` in JSON), and integer literals longer than
  Python's limit of 4,300 digits.
- A YAML document whose aliases refer to themselves (a cycle) is refused.
- Keys are kept as parsed (YAML may have integer or boolean keys); the
  decoders check that names are strings where they expect names.
- Text starting with ``{`` or ``[`` is read as JSON, falling back to YAML
  (JSON-looking flow-style YAML); the configuration reader goes by file
  extension (``.json`` is JSON, anything else YAML).

Limits, checked before the C parser can be hurt
------------------------------------------------
(The depth and alias guards are in ``scorer.inputs.yamlguards``.)
``Limits(max_bytes, max_depth, max_alias_nodes)``; the defaults per input:

===================  ==========  =========  ==============
input                max_bytes   max_depth  max_alias_nodes
===================  ==========  =========  ==============
cluster file         1 GiB       200        10,000,000
metrics snapshot     256 MiB     200        1,000,000
configuration        16 MiB      200        100,000
===================  ==========  =========  ==============

- **Size**: at most ``max_bytes`` bytes are read (a file that is larger is
  refused from its size before reading; a pipe or device at the first byte
  past the limit, so ``--cluster /dev/zero`` stops at once). A 100,000-node
  cluster file in kubectl's YAML is about 360 MB. The environment variable
  ``SCORER_MAX_INPUT_BYTES`` (bytes, or a quantity such as ``4Gi``) replaces
  the size limit of every input.
- **Nesting depth**: mappings and lists nested more than ``max_depth``
  levels are refused (kube objects nest about 20 levels; the deepest, CRD
  schemas, well under 200). libyaml's C composer recurses once per level
  and overflows the C stack past some 20,000 levels, so before it runs the
  text gets a cheap upper bound of its depth (flow brackets that can open a
  collection, per document, plus twice the longest run of indentation and
  block indicators at a line start); only text whose bound passes 1,000
  levels is scanned exactly (libyaml's event parser, which does not
  recurse) before it is composed.
- **Aliases**: a document whose aliases repeat more than
  ``max_alias_nodes`` nodes in all (each alias counting the whole subtree it
  repeats, nested aliases multiplied out) is refused, which stops "billion
  laughs" documents before anything walks them; ordinary anchors keep
  working. Only documents that contain both ``&`` and ``*`` are walked for
  this.

Speed: YAML goes through libyaml (``CSafeLoader``) with a constructor that
records duplicate keys and bad numbers as it builds mappings; JSON through
the standard library's C decoder with a pairs hook (orjson cannot report a
repeated key). The guards add a few percent to the load time of a cluster.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable, Iterator
from typing import Any, Literal

import attrs
import yaml
import yaml.constructor
import yaml.nodes

from scorer.errors import QuantityError, ReadError
from scorer.inputs.describe import expected, join_path, quote
from scorer.inputs.yamlguards import (
    _SCALAR,
    MAX_DEPTH_CEILING,
    SAFE_COMPOSE_DEPTH,
    _check_aliases,
    _depth_bound,
    _depth_message,
    _has_aliases,
    _scan_depth,
)
from scorer.quantity import int_value, parse_quantity

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

ENV_MAX_BYTES = "SCORER_MAX_INPUT_BYTES"
DEFAULT_MAX_DEPTH = 200
MAX_INT_DIGITS = 4300
# How long a named pipe may wait for its writer to connect (process substitution has one already).
PIPE_WRITER_WAIT = 3

Syntax = Literal["auto", "yaml", "json"]


@attrs.frozen(slots=True)
class Limits:
    """Bounds on one input (see the module docstring)."""

    max_bytes: int
    max_depth: int = DEFAULT_MAX_DEPTH
    max_alias_nodes: int = 1_000_000


CLUSTER_LIMITS = Limits(max_bytes=GiB, max_alias_nodes=10_000_000)
SNAPSHOT_LIMITS = Limits(max_bytes=256 * MiB)
CONFIG_LIMITS = Limits(max_bytes=16 * MiB, max_alias_nodes=100_000)


@attrs.frozen(slots=True)
class Document:
    """One decoded YAML document (or the JSON value) of an input.

    ``number`` is its 1-based position in the stream as written (empty
    documents count), ``source`` names the input. ``item`` is set by callers
    that split a ``kind: List`` into its items. ``problems`` holds
    ``(field path, message)`` pairs (duplicate keys, unrepresentable
    numbers) when the document was read with ``strict=False``.
    """

    data: Any
    number: int
    source: str
    item: int | None = None
    problems: tuple[tuple[str, str], ...] = ()

    @property
    def origin(self) -> str:
        """``document 3 of cluster.yaml`` (``..., items[4]`` for a list item)."""
        where = f"document {self.number} of {self.source}"
        return where if self.item is None else f"{where}, items[{self.item}]"


# -- entry points ---------------------------------------------------------------------------


def read_documents(
    path: str | os.PathLike[str],
    *,
    limits: Limits,
    syntax: Syntax = "auto",
    strict: bool = True,
) -> list[Document]:
    """The documents of a YAML or JSON file; ``ReadError`` naming the file.

    With ``strict`` (the default) the first problem of a document (a
    duplicate key, a number that cannot be represented) is raised; without,
    problems are left in ``Document.problems`` for the caller to report with
    its own (all at once, as the configuration does).
    """
    source = os.fspath(path)
    return parse_documents(
        read_text(source, limits=limits), source, limits=limits, syntax=syntax, strict=strict
    )


def read_text(path: str | os.PathLike[str], *, limits: Limits) -> str:
    """A file's text: at most the size limit, UTF-8 (a byte order mark is dropped)."""
    source = os.fspath(path)
    max_bytes = max_input_bytes(limits)
    try:
        # Non-blocking, so a named pipe with no writer cannot hang open(); reads block again below.
        stream = os.fdopen(os.open(source, os.O_RDONLY | os.O_NONBLOCK), "rb")
    except FileNotFoundError:
        raise ReadError(source, "no such file") from None
    except IsADirectoryError:
        raise ReadError(source, "is a directory, not a file") from None
    except OSError as error:
        raise ReadError(source, f"cannot read: {error.strerror or error}") from None
    try:
        with stream:
            info = os.fstat(stream.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise ReadError(source, "is a directory, not a file")
            if stat.S_ISREG(info.st_mode):
                if info.st_size > max_bytes:
                    raise ReadError(source, _too_large(max_bytes, info.st_size))
                data = stream.read(info.st_size + 1)
                if len(data) > info.st_size:  # grown since, or a /proc file (size 0)
                    data += stream.read(max_bytes + 1 - len(data))
                return _decode(data, source, max_bytes)
            first = _first_bytes_of_pipe(stream.fileno(), source) if stat.S_ISFIFO(info.st_mode) else b""
            os.set_blocking(stream.fileno(), True)
            return _read_stream(stream, source, max_bytes, first)
    except OSError as error:
        raise ReadError(source, f"cannot read: {error.strerror or error}") from None


def _first_bytes_of_pipe(fd: int, source: str) -> bytes:
    """What a pipe holds already, waiting up to ``PIPE_WRITER_WAIT`` seconds for a writer to
    connect (a named pipe nobody writes to would block ``open`` forever)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.poll(PIPE_WRITER_WAIT * 1000)
    try:
        first = os.read(fd, MiB)
    except BlockingIOError:  # a writer is connected; its data comes later
        return b""
    if not first:
        raise ReadError(source, f"a named pipe with no writer (none came within {PIPE_WRITER_WAIT}s): "
                                "nothing to read")
    return first


def parse_documents(
    text: str | bytes,
    source: str = "<input>",
    *,
    limits: Limits,
    syntax: Syntax = "auto",
    strict: bool = True,
) -> list[Document]:
    """Like ``read_documents`` for text (or bytes, which must be UTF-8) in memory."""
    max_bytes = max_input_bytes(limits)
    if isinstance(text, bytes):
        text = _decode(text, source, max_bytes)
    elif len(text) > max_bytes:
        raise ReadError(source, _too_large(max_bytes, len(text)))
    text = text.removeprefix("\ufeff")
    if syntax == "json" or (syntax == "auto" and _looks_like_json(text)):
        try:
            documents = [_json_document(text, source, limits)]
        except _SyntaxProblem as json_error:
            if syntax == "json":
                raise
            try:  # flow-style YAML is not always JSON
                documents = _yaml_documents(text, source, limits)
            except _SyntaxProblem:
                raise json_error from None
    else:
        documents = _yaml_documents(text, source, limits)
    if strict:
        for document in documents:
            if document.problems:
                path, message = document.problems[0]
                detail = f"{path}: {message}" if path else message
                raise ReadError(source, detail, origin=document.origin)
    return documents


def single_document(documents: list[Document], source: str) -> Document | None:
    """The one non-empty document of a configuration (None if there is none)."""
    present = [document for document in documents if document.data is not None]
    if len(present) > 1:
        raise ReadError(source, f"expected one YAML document, found {len(present)}")
    return present[0] if present else None


def max_input_bytes(limits: Limits) -> int:
    """``limits.max_bytes``, or ``SCORER_MAX_INPUT_BYTES`` when set."""
    raw = os.environ.get(ENV_MAX_BYTES, "").strip()
    if not raw:
        return limits.max_bytes
    try:
        value = int_value(parse_quantity(raw))
    except QuantityError:
        value = 0
    if value <= 0:
        raise ReadError(
            ENV_MAX_BYTES, f"expected a positive size such as 4Gi or 500000000, got {quote(raw)}"
        )
    return value


# -- bytes to text --------------------------------------------------------------------------


def _too_large(max_bytes: int, size: int | None = None) -> str:
    what = f"{size} bytes, " if size is not None else ""
    return (
        f"{what}larger than the input size limit of {max_bytes} bytes; "
        f"set {ENV_MAX_BYTES} (e.g. {ENV_MAX_BYTES}=4Gi) to raise it"
    )


def _read_stream(stream: Any, source: str, max_bytes: int, first: bytes = b"") -> str:
    """A pipe or device, chunk by chunk (``first``, already read, then the rest), stopping at the
    first bad byte."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    offset = 0
    while True:
        chunk, first = (first, b"") if first else (stream.read(min(MiB, max_bytes + 1 - offset)), b"")
        if not chunk:
            break
        nul = chunk.find(b"\0")
        try:
            part = decoder.decode(chunk)
        except UnicodeDecodeError as error:
            seen = error.object  # the bytes of a character split by the last chunk, then this one
            base = offset - (len(seen) - len(chunk))
            start = error.start if nul < 0 else min(error.start, nul + len(seen) - len(chunk))
            raise ReadError(source, _not_utf8(seen[start], base + start)) from None
        if nul >= 0:
            raise ReadError(source, _not_utf8(0, offset + nul))
        parts.append(part)
        offset += len(chunk)
        if offset > max_bytes:
            raise ReadError(source, _too_large(max_bytes))
    try:
        parts.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError:
        raise ReadError(source, f"not UTF-8 text: the text ends inside a character at offset {offset}") from None
    return "".join(parts).removeprefix("\ufeff")


def _decode(data: bytes, source: str, max_bytes: int) -> str:
    if len(data) > max_bytes:
        raise ReadError(source, _too_large(max_bytes))
    nul = data.find(b"\0")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        start = error.start if nul < 0 else min(error.start, nul)
        raise ReadError(source, _not_utf8(data[start], start)) from None
    if nul >= 0:
        raise ReadError(source, _not_utf8(0, nul))
    return text.removeprefix("\ufeff")


def _not_utf8(byte: int, offset: int) -> str:
    what = " (NUL, as in binary files)" if byte == 0 else ""
    return f"not UTF-8 text: byte 0x{byte:02x}{what} at offset {offset}"


# -- problems found while decoding ------------------------------------------------------------


class _SyntaxProblem(ReadError):
    """Malformed text (as opposed to well-formed text with a bad value)."""


class _TooLongInteger:
    """Stands for an integer literal past Python's digit limit until it is reported."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _too_long_message(digits: int) -> str:
    return f"integer literal of {digits} digits is too long (at most {MAX_INT_DIGITS} digits)"


class _Problems:
    """Duplicate keys (by mapping) and bad values (by object) of one document,
    located by field path once the document is built."""

    __slots__ = ("duplicates", "bad", "keep")

    def __init__(self) -> None:
        self.duplicates: dict[int, list[tuple[Any, int | None]]] = {}
        self.bad: dict[int, str] = {}
        self.keep: list[Any] = []  # keeps ids valid until located

    def __bool__(self) -> bool:
        return bool(self.duplicates or self.bad)

    def duplicate(self, mapping: dict[Any, Any], key: Any, line: int | None) -> None:
        self.duplicates.setdefault(id(mapping), []).append((key, line))
        self.keep.append(mapping)

    def bad_value(self, value: Any, message: str) -> None:
        self.bad[id(value)] = message
        self.keep.append(value)

    def locate(self, root: Any) -> tuple[tuple[str, str], ...]:
        """(path, message) for each problem, in document order. A bad value is
        replaced by null where it is found, so that a caller reading on
        (``strict=False``) reports it once."""
        found: list[tuple[str, str]] = []
        if id(root) in self.bad:
            return (("", self.bad[id(root)]),)
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [("", root)]
        while stack:
            path, value = stack.pop()
            if id(value) in seen:
                continue
            seen.add(id(value))
            children: list[tuple[str, Any]] = []
            if isinstance(value, dict):
                for key, line in self.duplicates.get(id(value), ()):
                    again = f" (again at line {line})" if line is not None else ""
                    found.append((join_path(path, _key_text(key)), f"duplicate field {quote(key)}{again}"))
                for key, item in value.items():
                    if id(key) in self.bad:
                        found.append((path, f"a key: {self.bad[id(key)]}"))
                    children.append((join_path(path, _key_text(key)), item))
            else:
                children = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
            below = []
            for index, (child_path, item) in enumerate(children):
                message = self.bad.get(id(item))
                if message is not None:
                    found.append((child_path, message))
                    if isinstance(value, dict):
                        value[list(value)[index]] = None
                    else:
                        value[index] = None
                elif isinstance(item, (dict, list)):
                    below.append((child_path, item))
            stack.extend(reversed(below))
        if not found:  # e.g. inside a value a repeated key replaced: still an error
            found.append(("", next(iter(self.bad.values()), "duplicate field")))
        return tuple(found)


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else f"[{quote(key)}]"


# -- JSON ---------------------------------------------------------------------------------------

_LEADING_SPACE = re.compile(r"[ \t\r\n]*")


def _looks_like_json(text: str) -> bool:
    start = _LEADING_SPACE.match(text)
    position = start.end() if start else 0
    return text[position : position + 1] in ("{", "[")


def _json_document(text: str, source: str, limits: Limits) -> Document:
    problems = _Problems()

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping = dict(pairs)
        if len(mapping) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    problems.duplicate(mapping, key, None)
                seen.add(key)
        return mapping

    def guarded_int(literal: str) -> Any:
        digits = len(literal.lstrip("-"))
        if digits <= MAX_INT_DIGITS:
            return int(literal)
        marker = _TooLongInteger(digits)
        problems.bad_value(marker, _too_long_message(digits))
        return marker

    try:
        try:
            data = json.loads(text, object_pairs_hook=pairs_hook)
        except json.JSONDecodeError:
            raise
        except ValueError:  # an integer past the digit limit: read again to find it
            problems = _Problems()
            data = json.loads(text, object_pairs_hook=pairs_hook, parse_int=guarded_int)
    except json.JSONDecodeError as error:
        raise _SyntaxProblem(
            source, f"line {error.lineno}, column {error.colno}: invalid JSON: {error.msg}"
        ) from None
    except RecursionError:
        raise ReadError(source, _depth_message(limits.max_depth)) from None
    _check_json_values(data, source, limits, problems)
    if (type(data) is dict or type(data) is list) and _SURROGATE_ESCAPE.search(text):
        _check_json_strings(data, problems)
    return Document(data, 1, source, problems=problems.locate(data) if problems else ())


def _check_json_values(data: Any, source: str, limits: Limits, problems: _Problems) -> None:
    """Depth and non-finite numbers, in one pass over the containers, level by level."""
    if type(data) is float and data - data != 0:
        problems.bad_value(data, expected("a finite number", data))
    level = [data] if type(data) is dict or type(data) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limits.max_depth:
            raise ReadError(source, _depth_message(limits.max_depth))
        below: list[Any] = []
        add = below.append
        for value in level:
            for item in value.values() if type(value) is dict else value:
                kind = type(item)
                if kind is dict or kind is list:
                    add(item)
                elif kind is float and item - item != 0:  # inf or nan
                    problems.bad_value(item, expected("a finite number", item))
        level = below


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_json_strings(data: Any, problems: _Problems) -> None:
    """Strings (keys too) with a lone surrogate (``"\\ud800"``): not text."""
    stack = [data]
    while stack:
        value = stack.pop()
        items = value.items() if type(value) is dict else enumerate(value)
        for key, item in items:
            for text in (key, item):
                if type(text) is str and not text.isascii() and not _encodable(text):
                    problems.bad_value(text, "a lone surrogate escape (\\ud800-\\udfff), not a character")
            if type(item) is dict or type(item) is list:
                stack.append(item)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- YAML ---------------------------------------------------------------------------------------

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.CSafeLoader):  # type: ignore[misc]
    """libyaml's parser and composer with a constructor that records
    duplicate keys and bad numbers (``_Problems``) and bounds the depth."""

    def __init__(self, text: str, max_depth: int) -> None:
        super().__init__(text)
        self.may_merge = "<<" in text
        self.max_depth = max_depth
        self.problems = _Problems()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """YAML's merge keys (PyYAML 6.0.3's ``flatten_mapping``, kept here: 6.0.4 drops a merged
        key whose name was merged before, so ``{<<: *b}`` lost the keys ``b`` itself overrides).
        The merged pairs go first, later sources first, then the mapping's own: the last pair of
        a key wins when the mapping is built."""
        # Count the keys written in the mapping itself before merged keys join
        # them: only those can be repeats.
        if not hasattr(node, "explicit_keys"):
            node.explicit_keys = sum(1 for key, _ in node.value if key.tag != _MERGE_TAG)
        merge: list[tuple[yaml.Node, yaml.Node]] = []
        index = 0
        while index < len(node.value):
            key_node, value_node = node.value[index]
            if key_node.tag == _MERGE_TAG:
                del node.value[index]
                if isinstance(value_node, yaml.MappingNode):
                    self.flatten_mapping(value_node)
                    merge.extend(value_node.value)
                elif isinstance(value_node, yaml.SequenceNode):
                    sources = []
                    for source in value_node.value:
                        if not isinstance(source, yaml.MappingNode):
                            raise yaml.constructor.ConstructorError(
                                "while constructing a mapping", node.start_mark,
                                f"expected a mapping for merging, but found {source.id}", source.start_mark)
                        self.flatten_mapping(source)
                        sources.append(source.value)
                    for pairs in reversed(sources):
                        merge.extend(pairs)
                else:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"expected a mapping or list of mappings for merging, but found {value_node.id}",
                        value_node.start_mark)
            else:
                if key_node.tag == "tag:yaml.org,2002:value":
                    key_node.tag = "tag:yaml.org,2002:str"
                index += 1
        if merge:
            node.value = merge + node.value

    def nest(self, child: yaml.Node, depth: int) -> None:
        """Record the depth of a collection about to be built; refuse it past the limit."""
        if depth > self.max_depth:
            mark = child.start_mark
            raise _LimitProblem(
                f"line {mark.line + 1}, column {mark.column + 1}: {_depth_message(self.max_depth)}"
            )
        child.depth = depth


class _LimitProblem(Exception):
    """A limit exceeded while building a document (becomes a ReadError)."""


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
    data: dict[Any, Any] = {}
    yield data
    _expect_node(node, yaml.MappingNode, "mapping")
    depth = getattr(node, "depth", 1) + 1  # of the collections in it
    pairs = node.value
    explicit_from = 0
    if loader.may_merge:
        loader.flatten_mapping(node)
        pairs = node.value
        explicit_from = len(pairs) - getattr(node, "explicit_keys", len(pairs))
    construct = loader.construct_object
    explicit: set[Any] | None = set() if explicit_from else None
    for index, (key_node, value_node) in enumerate(pairs):
        key = construct(key_node)
        try:
            if explicit is None:
                repeated = key in data
            elif index >= explicit_from:
                repeated = key in explicit
                explicit.add(key)
            else:
                repeated = False
                hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                "found a mapping key that is not a string",
                key_node.start_mark,
            ) from None
        if repeated:
            loader.problems.duplicate(data, key, key_node.start_mark.line + 1)
        if value_node.__class__ is not _SCALAR:
            loader.nest(value_node, depth)
        data[key] = construct(value_node)


def _construct_seq(loader: _Loader, node: yaml.SequenceNode) -> Iterator[list[Any]]:
    data: list[Any] = []
    yield data
    _expect_node(node, yaml.SequenceNode, "sequence")
    depth = getattr(node, "depth", 1) + 1
    construct = loader.construct_object
    for child in node.value:
        if child.__class__ is not _SCALAR:
            loader.nest(child, depth)
        data.append(construct(child))


# What PyYAML's scalar constructors raise for text that matched a type's
# pattern (or was tagged with it) but is no value of that type.
_NOT_A_VALUE = (ValueError, IndexError, KeyError, AttributeError, OverflowError, TypeError)


def _expect_node(node: yaml.Node, kind: type[yaml.Node], name: str) -> None:
    """A tag (``!!map``) on a node of another kind is an error, as in PyYAML."""
    if not isinstance(node, kind):
        raise yaml.constructor.ConstructorError(
            None, None, f"expected a {name} node, but found {node.id}", node.start_mark
        )


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except _NOT_A_VALUE:
        digits = sum(1 for ch in node.value if ch.isdigit())
        if digits <= MAX_INT_DIGITS:  # "0b_": matched the int pattern, is no number
            return loader.construct_scalar(node)
        marker = _TooLongInteger(digits)
        loader.problems.bad_value(marker, _too_long_message(digits))
        return marker


def _construct_float(loader: _Loader, node: yaml.ScalarNode) -> Any:
    try:
        value = yaml.constructor.SafeConstructor.construct_yaml_float(loader, node)
    except _NOT_A_VALUE:
        return loader.construct_scalar(node)
    if value - value != 0:  # inf or nan
        loader.problems.bad_value(value, expected("a finite number", value))
    return value


def _text_on_error(
    construct: Callable[[Any, yaml.ScalarNode], Any],
) -> Callable[[_Loader, yaml.ScalarNode], Any]:
    """A scalar that matched a YAML type's pattern but is no valid value of it
    (``2024-02-30``, ``!!bool maybe``) stays the string it is."""

    def constructor(loader: _Loader, node: yaml.ScalarNode) -> Any:
        try:
            return construct(loader, node)
        except _NOT_A_VALUE:
            return loader.construct_scalar(node)

    return constructor


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Loader.add_constructor(
    "tag:yaml.org,2002:bool", _text_on_error(yaml.constructor.SafeConstructor.construct_yaml_bool)
)
_Loader.add_constructor(
    "tag:yaml.org,2002:timestamp",
    _text_on_error(yaml.constructor.SafeConstructor.construct_yaml_timestamp),
)


def _yaml_documents(text: str, source: str, limits: Limits) -> list[Document]:
    max_depth = min(limits.max_depth, MAX_DEPTH_CEILING)
    # libyaml may refuse deep text itself (PyYAML >= 6.0.4 bundles a nesting limit of 1,000 levels),
    # with a message of its own, and older ones overflow the C stack: text that may nest that deep is
    # scanned first, without composing. Shallower text past max_depth is refused as it is built
    # (_Loader.nest); scanning all text would parse every YAML input twice, once in pure Python.
    if _depth_bound(text) > SAFE_COMPOSE_DEPTH:
        _scan_depth(text, source, max_depth)
    check_aliases = "&" in text and "*" in text
    loader: _Loader | None = None
    documents: list[Document] = []
    try:
        loader = _Loader(text, max_depth)
        while loader.check_node():
            node = loader.get_node()
            if check_aliases and _has_aliases(text, node):
                _check_aliases(node, source, len(documents) + 1, max_alias_nodes=limits.max_alias_nodes,
                                   max_depth=limits.max_depth)
            data = loader.construct_document(node)
            problems = loader.problems
            if problems:
                loader.problems = _Problems()
            documents.append(
                Document(data, len(documents) + 1, source, problems=problems.locate(data) if problems else ())
            )
    except yaml.constructor.ConstructorError as error:
        raise ReadError(source, _yaml_message(error)) from None
    except yaml.MarkedYAMLError as error:
        raise _SyntaxProblem(source, _yaml_message(error)) from None
    except yaml.reader.ReaderError as error:
        raise _SyntaxProblem(source, _reader_message(text, error)) from None
    except yaml.YAMLError as error:
        raise _SyntaxProblem(source, f"invalid YAML: {' '.join(str(error).split())}") from None
    except _LimitProblem as error:
        raise ReadError(source, str(error)) from None
    except UnicodeEncodeError as error:
        raise ReadError(
            source, f"not UTF-8 text: a lone surrogate (U+{ord(error.object[error.start]):04X}) "
            f"at character {error.start}"
        ) from None
    except RecursionError:
        raise ReadError(source, _depth_message(limits.max_depth)) from None
    finally:
        if loader is not None:
            loader.dispose()
    return documents


def _yaml_message(error: yaml.MarkedYAMLError) -> str:
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = error.problem or error.context or "syntax error"
    return f"{where}invalid YAML: {problem}"


def _reader_message(text: str, error: yaml.reader.ReaderError) -> str:
    character = error.character
    code = ord(character) if isinstance(character, str) else int(character)
    position = text.find(chr(code)) if 0 <= code <= sys.maxunicode else -1
    if position < 0:
        return f"invalid YAML: {error.reason} (#x{code:04x})"
    line = text.count("\n", 0, position) + 1
    column = position - text.rfind("\n", 0, position)
    return f"line {line}, column {column}: invalid YAML: {error.reason} (#x{code:04x})"


__all__ = [
    "CLUSTER_LIMITS",
    "CONFIG_LIMITS",
    "DEFAULT_MAX_DEPTH",
    "ENV_MAX_BYTES",
    "SNAPSHOT_LIMITS",
    "Document",
    "Limits",
    "max_input_bytes",
    "parse_documents",
    "read_documents",
    "read_text",
    "single_document",
]
