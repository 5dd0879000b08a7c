"""A LIST answer decoded item by item as it arrives (``read_list``), not once the whole body is in.

kube-apiserver writes a list as ``{"kind":...,"apiVersion":...,"metadata":{...},"items":[{...},{...}]}``,
compact, each item an object whose first key is the same (``"metadata"``: list items carry no ``kind``).
1.20 encodes a page whole before it writes it (20 MB for 15,000 nodes take it about 0.5 s on a busy 2-core
machine), then the body arrives in chunks. A reader that waits for the last byte and then parses the
whole body decodes nothing while it arrives; this one parses each item as soon as its bytes are in
(``ListSplitter``), so decoding overlaps the transfer (and, for the answers asked for while scorer loads,
``scorer.kube.early``, the rest of the start-up), and no more than one item's bytes and one chunk are
held at a time.

How items are found without a JSON scanner in Python: between two items the body holds ``},`` followed by
the first item's opening up to its first key (``{"metadata":``). That sequence cannot be inside a string
(a string's quotes are escaped), so a match is either the boundary between two items or a boundary deeper
inside an item (an array of objects whose first key is the same). A piece that parses as one JSON object
starting where an item starts is a whole item; a piece cut inside a nested array does not parse (its
brackets are open), and the search goes on to the next match with the piece growing. What is left at the
end (the last item, ``]`` and anything after the items) is parsed with a ``{"items":[`` before it, so keys
after the items (other servers' order) are read too.

Any other shape (no ``"items":[`` in the body, pretty-printed JSON, a head that is not an object's start)
keeps the whole body and parses it in one piece at the end: the same items, the same errors as a reader
of the whole body.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import orjson

DEFAULT_PAGE_SIZE = 500  # items per page of a LIST from etcd (client-go's pager)

# Boundaries found inside one item (arrays of objects whose first key is the items' first key, such as a
# StatefulSet's volumeClaimTemplates) before the rest of the body is kept and parsed in one piece at the end.
MAX_MISSES = 16

_ITEMS = b'"items":['
_EMPTY_ITEMS = b'"items":[]}'


def list_params(limit: int, token: str = "", *, from_cache: bool = False) -> dict[str, str]:
    """The query of a LIST page: ``limit`` (none when 0), the ``continue`` token of the page before, or for a
    first page from the API server's watch cache ``resourceVersion=0`` (the server then ignores the limit
    and answers in one page)."""
    params = {"limit": str(limit)} if limit > 0 else {}
    if token:
        params["continue"] = token
    elif from_cache:
        params["resourceVersion"] = "0"
    return params


class ChunkSource(Protocol):
    """What ``read_list`` reads: a response body in chunks, ``b""`` at its end (``ApiStream``)."""

    def readchunk(self) -> Awaitable[bytes]: ...


class ListSplitter:
    """A list body fed in chunks (``feed``): the items whole so far, parsed; ``finish()`` the rest.

    ``feed`` returns the items (dicts) whose bytes are complete. ``finish()``
    returns the envelope without its items (``kind``, ``metadata``...; any
    JSON value for a body that is not an object) and the items not returned
    yet, as the body has them (any JSON value, None when it has none); it
    raises ``orjson.JSONDecodeError`` for a body that is not JSON. ``whole``
    is True once the body is known not to have the usual shape: it is then
    kept, and ``finish()`` parses all of it at once. ``rest_whole`` is True
    once an item held more than ``MAX_MISSES`` boundaries: from that item on,
    the body is kept and ``finish()`` parses it in one piece, so that no item
    is parsed more than ``MAX_MISSES`` + 1 times whatever it holds.
    """

    def __init__(self, digest: Callable[[Any, memoryview], bytes | None] | None = None) -> None:
        self.digest = digest  # called with each item parsed from its own bytes, and those bytes
        self.digests: list[bytes | None] = []  # ``digest``'s answers for the items ``feed`` returned last
        self._buffer = bytearray()
        self._head: dict[str, Any] | None = None  # the envelope before the items, once they are found
        self._separator = b""  # b"}," + the first item's opening up to its first key
        self._scan = 0  # where in the buffer the next search for the separator starts
        self._misses = 0  # boundaries found inside the item at the buffer's start
        self.whole = False
        self.rest_whole = False

    def feed(self, chunk: bytes) -> list[Any]:
        buffer = self._buffer
        buffer += chunk
        self.digests = []
        if self.rest_whole or (self._head is None and (self.whole or not self._start(buffer))):
            return []
        if not self._separator:
            colon = buffer.find(b":")
            if colon < 0 or not buffer.startswith(b'{"'):
                return []
            self._separator = b"}," + bytes(buffer[:colon + 1])
        items: list[Any] = []
        separator, start, scan = self._separator, 0, self._scan
        with memoryview(buffer) as view:
            while (at := buffer.find(separator, scan)) >= 0:
                scan = at + 1
                try:
                    item = orjson.loads(view[start:at + 1])
                except orjson.JSONDecodeError:
                    item = None  # a boundary inside an item: the piece grows to the next one
                if type(item) is dict:
                    items.append(item)
                    if self.digest is not None:
                        self.digests.append(self.digest(item, view[start:at + 1]))
                    start, self._misses = at + 2, 0
                    continue
                self._misses += 1
                if self._misses > MAX_MISSES:
                    self.rest_whole = True
                    break
        self._scan = max(scan, len(buffer) - len(separator) + 1, start) - start
        del buffer[:start]
        return items

    def _start(self, buffer: bytearray) -> bool:
        """Read the envelope before ``"items":[`` in ``buffer`` and drop it from there: True; False when it is
        not there yet, or will not be (``whole``)."""
        at = buffer.find(_ITEMS)
        if at < 0:
            return False
        try:
            head = orjson.loads(bytes(buffer[:at]) + _EMPTY_ITEMS)
        except orjson.JSONDecodeError:
            head = None
        if type(head) is not dict:
            self.whole = True
            return False
        del head["items"]
        self._head = head
        del buffer[:at + len(_ITEMS)]
        return True

    def finish(self) -> tuple[Any, Any]:
        buffer, self._buffer = self._buffer, bytearray()
        if self._head is None:
            self.whole = True
            body = orjson.loads(buffer)
            if not isinstance(body, Mapping):
                return body, None
            return {k: v for k, v in body.items() if k != "items"}, body.get("items")
        buffer[:0] = b'{"items":['
        tail = orjson.loads(buffer)
        return {**self._head, **{k: v for k, v in tail.items() if k != "items"}}, tail["items"]


async def read_list(stream: ChunkSource, take: Callable[[Any, bytes | None], None],
                    digest: Callable[[Any, memoryview], bytes | None] | None = None) -> Any:
    """Read a LIST answer's body from ``stream``, calling ``take(item, made)`` with each item (any JSON value,
    as the body has it) as soon as it is parsed; returns the envelope without its items (any JSON value for a
    body that is not an object: the caller says what is wrong). A body that is not JSON raises
    ``orjson.JSONDecodeError``; items that are not a list are no items. ``made``: with ``digest``,
    ``digest(item, the item's JSON)`` for an item parsed from its own bytes; None for the others (the last
    item of a body, read with its end; a body of another shape) and without ``digest``."""
    splitter = ListSplitter(digest)
    while chunk := await stream.readchunk():
        items = splitter.feed(chunk)  # (then ``splitter.digests``: one per item with ``digest``, else none)
        for item, made in itertools.zip_longest(items, splitter.digests):
            take(item, made)
    envelope, rest = splitter.finish()
    for item in rest if isinstance(rest, list) else ():
        take(item, None)
    return envelope
