"""The lean front: kube-scheduler's extender requests served without aiohttp's request objects.

kube-scheduler calls its extender twice per pod, one request at a time on a
kept-alive connection. aiohttp's web stack (a request object, routing, a
response object, its headers) costs about 0.04 ms of CPU per request more
than this protocol (a filter and a prioritize of 500 names: 0.28 against
0.20 ms, ``bench/README.md``), so the service's listener puts this protocol
in front of aiohttp's: each connection starts here, and a request
that is exactly what kube-scheduler sends is answered here, by the same
``ExtenderVerbs`` the aiohttp routes call (the same answers, metrics and
limits). Anything else is handed to aiohttp with the bytes read so far, and
the connection is aiohttp's from then on: ``/metrics``, the probes, a request
with a query string or another HTTP version, a chunked body, ``Expect``, a
header line that is not ``name: value``, a bare LF, a body over ``MAX_BODY``
(aiohttp answers 413 from its Content-Length), a head over ``MAX_HEAD`` bytes;
every request where the extender's prefix is not plain (``PLAIN_PREFIX``:
letters, digits, ``/._~-``, no dot segment), whose path aiohttp would decode.

Served here: ``POST <prefix>/filter HTTP/1.1`` or ``/prioritize``, CRLF line
ends, at most ``MAX_HEADERS`` header lines, one ``Content-Length``, no
``Transfer-Encoding`` and no ``Expect``. The answer is HTTP/1.1 with
``Content-Type: application/json``, ``Content-Length`` and ``Date``; the
connection is kept unless the request said ``Connection: close``.

The bounds of ``scorer.service.run`` hold here too (``timeout`` is the
service's ``http_timeout``):

* a connection that has not sent a whole request head within ``timeout`` of
  opening, or of the previous answer on it, is closed (a head handed to aiohttp
  unfinished, over ``MAX_HEAD`` bytes, gets aiohttp's own ``timeout`` from
  then: at most twice in all);
* a body must arrive within ``timeout`` of its head, else 408;
* the bodies being read count against ``MAX_BODIES_READING`` with the aiohttp
  route's (``ExtenderVerbs.bodies``, ``RequestBodies.reserve``); over it, 503;
* after a 408 or 503 the rest of the body is read and dropped for at most
  ``lingering`` seconds (aiohttp's ``lingering_time``: the client gets to read
  the answer), then the connection is closed;
* while the client does not read its answers (the transport's write buffer is
  full), nothing more is read from it.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from collections.abc import Callable
from typing import cast

import orjson

from scorer.extender.http import FILTER, MAX_BODY, PRIORITIZE, Answer, BodyRefused, ExtenderVerbs

#: A request head (request line and headers) longer than this is handed to aiohttp (kube-scheduler's are
#: about 200 bytes); aiohttp's own limits are 8190 bytes a line, 128 headers.
MAX_HEAD = 16 * 1024
#: More header lines than this: handed to aiohttp (which refuses more than 128).
MAX_HEADERS = 64
#: A prefix the front serves under: its request path is the same bytes as aiohttp's decoded one.
PLAIN_PREFIX = re.compile(r"(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)*/?")
_REASONS = {200: b"OK", 400: b"Bad Request", 408: b"Request Timeout", 500: b"Internal Server Error",
            503: b"Service Unavailable"}


class _Date:
    """The ``Date`` header's value, made again once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second, self._value = now, email.utils.formatdate(now, usegmt=True).encode()
        return self._value


class FrontFactory:
    """The listener's protocol factory: an ``ExtenderFront`` per connection, over ``fallback`` (aiohttp's
    protocol factory, ``web.AppRunner.server``) and ``verbs`` under ``prefix``. ``close_all`` closes the
    connections still served here (the shutdown: aiohttp closes its own)."""

    def __init__(self, fallback: Callable[[], asyncio.Protocol], verbs: ExtenderVerbs, prefix: str,
                 timeout: float, lingering: float) -> None:
        self.fallback = fallback
        self.verbs = verbs
        self.timeout = timeout
        self.lingering = lingering
        base = prefix.rstrip("/")
        # the request lines served here (none for a prefix that is not plain: every request goes to aiohttp)
        self.lines = {f"POST {base}/{verb} HTTP/1.1".encode(): verb for verb in (FILTER, PRIORITIZE)} \
            if PLAIN_PREFIX.fullmatch(prefix) else {}
        self.date = _Date()
        self.fronts: set[ExtenderFront] = set()

    def __call__(self) -> ExtenderFront:
        return ExtenderFront(self)

    def close_all(self) -> None:
        for front in list(self.fronts):
            front.close()


class ExtenderFront(asyncio.Protocol):
    """One connection: extender requests answered here until one is not (module docstring)."""

    def __init__(self, factory: FrontFactory) -> None:
        self.factory = factory
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.loop = asyncio.get_running_loop()
        self.timer: asyncio.TimerHandle | None = None
        self.reading_body = False  # the head is read, the body not all
        self.verb = ""
        self.start = 0.0  # when the request's head was read (perf_counter)
        self.body_at = 0  # where the body starts in ``buffer``
        self.counted = 0  # the body's Content-Length while it is read: counted in the bodies being read
        self.keep_alive = True
        self.paused = False  # the client does not read its answers: nothing more is read from it
        self.unread: int | None = None  # refused: the bytes of its body still to come, read and dropped

    # -- the connection ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (an asyncio.Transport in kind: uvloop's transports do not derive from asyncio's classes)
        self.transport = cast(asyncio.Transport, transport)
        self.factory.fronts.add(self)
        self._arm(self._head_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.reading_body:  # (a body cut off: counted as the aiohttp route counts it, a bad request)
            self.factory.verbs.refused(self.verb, self.start)
        self._release()
        self.factory.fronts.discard(self)
        self.transport = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def pause_writing(self) -> None:
        self.paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
            self._serve()

    def data_received(self, data: bytes) -> None:
        if self.unread is not None:  # (lingering after a refusal)
            self.unread -= len(data)
            if self.unread <= 0:
                self.close()
            return
        self.buffer += data
        if not self.paused:
            self._serve()

    def eof_received(self) -> bool | None:
        return None  # (the transport closes itself; a request cut off is dropped)

    # -- requests ----------------------------------------------------------------------
    def _serve(self) -> None:
        """Answer every whole request the buffer holds; hand the connection to aiohttp at the first that is
        not served here."""
        while self.transport is not None and not self.transport.is_closing() and not self.paused:
            if not self.reading_body:
                head_end = self.buffer.find(b"\r\n\r\n")
                if head_end < 0:
                    if len(self.buffer) > MAX_HEAD or not self._may_be_served():
                        self._hand_over()
                    return
                if not self._read_head(head_end):
                    self._hand_over()
                    return
                if not self.reading_body:
                    return  # (refused: 503)
                if len(self.buffer) < self.body_at + self.counted:
                    self._arm(self._body_late)  # (the body within ``timeout`` of its head)
            end = self.body_at + self.counted
            if len(self.buffer) < end:
                return
            if len(self.buffer) == end:  # (as a rule: the buffer is this request; taken, not copied)
                body, self.buffer = self.buffer, bytearray()
                del body[:self.body_at]  # (from the front of a bytearray: no copy)
            else:
                body = self.buffer[self.body_at:end]
                del self.buffer[:end]
            self._release()
            self._disarm()
            self._answer(self.factory.verbs.answer(self.verb, body, self.start), close=not self.keep_alive)
            if not self.keep_alive:
                self.transport.close()
                return
            self._arm(self._head_late)

    def _may_be_served(self) -> bool:
        """Whether the unfinished head in the buffer may still be one served here: its request line is, or
        begins, one of the verbs', and its lines end in CRLF."""
        buffer = self.buffer
        line_end = buffer.find(b"\r\n")
        if line_end < 0:
            line = bytes(buffer).rstrip(b"\r")
            return b"\n" not in line and any(known.startswith(line) for known in self.factory.lines)
        if bytes(buffer[:line_end]) not in self.factory.lines:
            return False
        return buffer.count(b"\n") == buffer.count(b"\r\n")

    def _read_head(self, head_end: int) -> bool:
        """Read the head ending at ``head_end``; False when it is not one served here (nothing changed)."""
        head = bytes(self.buffer[:head_end])
        lines = head.split(b"\r\n")
        verb = self.factory.lines.get(lines[0])
        if verb is None or len(lines) > MAX_HEADERS + 1 or head.count(b"\n") != len(lines) - 1 \
                or head.count(b"\r") != len(lines) - 1:
            return False  # (another request, too many headers, a bare LF or CR)
        length: int | None = None
        keep_alive = True
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip() or b" " in name or b"\t" in name:
                return False  # (not a header line, or obsolete line folding: aiohttp answers 400)
            name = name.lower()
            if name == b"content-length":
                value = value.strip(b" \t")
                if length is not None or not value.isdigit() or len(value) > 18:
                    return False
                length = int(value)
            elif name in (b"transfer-encoding", b"expect"):
                return False
            elif name == b"connection":
                keep_alive = b"close" not in [token.strip(b" \t").lower() for token in value.split(b",")]
        if length is None or length > MAX_BODY:
            return False  # (aiohttp reads a body without Content-Length as empty, refuses one over MAX_BODY)
        self.verb, self.keep_alive, self.body_at = verb, keep_alive, head_end + 4
        self.start = time.perf_counter()
        try:
            self.factory.verbs.bodies.reserve(length)
        except BodyRefused as refused:  # (503)
            self.factory.verbs.refused(verb, self.start)
            self._refuse(refused, length)
            return True
        self.counted, self.reading_body = length, True
        return True

    def _release(self) -> None:
        """The body no longer counts in the bodies being read (read, refused, or the connection gone)."""
        self.factory.verbs.bodies.release(self.counted)
        self.counted, self.reading_body = 0, False

    def _answer(self, answer: Answer, close: bool) -> None:
        transport = self.transport
        assert transport is not None
        transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nDate: %s\r\n%s\r\n"
                        % (answer.status, _REASONS.get(answer.status, b"Unknown"), len(answer.body),
                           self.factory.date(), b"Connection: close\r\n" if close else b"")
                        + answer.body)
        if answer.then is not None:
            self.loop.call_soon(answer.then)

    def _refuse(self, refused: BodyRefused, length: int) -> None:
        """Answer ``refused`` (its status and message), the request's body of ``length`` bytes not read; what of it
        still comes is read and dropped for at most ``lingering`` seconds (so the client reads the answer,
        as aiohttp does), then the connection is closed."""
        self._release()
        self._disarm()
        self._answer(Answer(refused.status, orjson.dumps({"Error": str(refused)})), close=True)
        self.unread = length - (len(self.buffer) - self.body_at)
        self.buffer = bytearray()
        if self.unread <= 0:
            self.close()
        else:
            self.timer = self.loop.call_later(self.factory.lingering, self.close)

    # -- timers --------------------------------------------------------------------------
    def _arm(self, late: Callable[[], None]) -> None:
        self._disarm()
        self.timer = self.loop.call_later(self.factory.timeout, late)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _head_late(self) -> None:
        """No whole head within ``timeout`` of opening or of the previous answer: closed, unanswered."""
        self.timer = None
        if not self.reading_body:
            self.close()

    def _body_late(self) -> None:
        self.timer = None
        if self.reading_body:
            self.factory.verbs.refused(self.verb, self.start)
            self._refuse(BodyRefused.late(self.factory.timeout), self.counted)

    # -- aiohttp -------------------------------------------------------------------------
    def _hand_over(self) -> None:
        """The connection is aiohttp's from now on, with what the buffer holds."""
        transport = self.transport
        assert transport is not None
        self._disarm()
        self.factory.fronts.discard(self)
        self.transport = None
        protocol = self.factory.fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self.buffer:
            data, self.buffer = bytes(self.buffer), bytearray()
            protocol.data_received(data)
