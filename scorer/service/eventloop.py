"""The event loop ``scorer run`` runs on: uvloop's where it is installed (a dependency of scorer), else asyncio's.

Outside its scheduling cycles the service's work per pod is mostly the event
loop's: the watches' reads, the bindings' and Events' requests over TLS, the
extender's two requests per pod. uvloop (libuv, in Cython) does the polling,
the transports' reads and writes, TLS and the timers in C where asyncio's own
loop does them in Python. Measured end to end (``bench/README.md``, "The event
loop"): 6-11% less CPU per bound pod for plain pods; little for the extender,
whose CPU is mostly its own Python.

``--event-loop`` chooses (``EVENT_LOOPS``): ``auto``, the default, is uvloop
when it can be imported and asyncio's loop otherwise; ``uvloop`` is an error
naming why when it cannot be; ``asyncio`` is the standard library's loop. The
service names the one it runs on in its ``serving ...`` line at start.
Nothing in scorer depends on which: the tests of the extender's front, the API
client's connections and the service's HTTP side run on both
(``tests/conftest.py``), the tests that start ``scorer run`` on its default;
the bench's stand-in extender runs on the same loop as scorer.

uvloop looks up host names, and even IP addresses given to ``create_server``
or ``sock_connect``, on libuv's thread pool (4 threads that stay once
started). scorer's uvloop loop (``NumericLoop``) answers an IP address in
place and binds a server's socket on one itself, so a service given IP
addresses stays one thread on uvloop too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from scorer.errors import InputError

AUTO, UVLOOP, ASYNCIO = "auto", "uvloop", "asyncio"
EVENT_LOOPS = (AUTO, UVLOOP, ASYNCIO)
DEFAULT_EVENT_LOOP = AUTO

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def choose(choice: str = DEFAULT_EVENT_LOOP) -> LoopFactory:
    """The factory of the loop ``--event-loop`` ``choice`` names. ``InputError`` naming the option when the
    choice is unknown, or ``uvloop`` when it cannot be imported."""
    if choice not in EVENT_LOOPS:
        raise InputError(f"--event-loop: expected one of {', '.join(EVENT_LOOPS)}, got {choice!r}")
    if choice != ASYNCIO:
        try:
            return _uvloop_class()
        except ImportError as exc:
            if choice == UVLOOP:
                raise InputError(f"--event-loop uvloop: uvloop cannot be imported ({exc}): install it "
                                 f"(pip install uvloop) or run on --event-loop asyncio") from None
    return asyncio.new_event_loop


def _uvloop_class() -> type[asyncio.AbstractEventLoop]:
    """uvloop's loop, with IP addresses looked up in place (``getaddrinfo``). ``ImportError`` without uvloop."""
    import uvloop

    class NumericLoop(uvloop.Loop):
        """uvloop looks up every address ``create_server`` and ``sock_connect`` are given (the service's
        listener; aiohttp's connector hands ``sock_connect`` the API server's IP address) on libuv's thread
        pool, which then stays: 4 threads that a process given IP addresses never needs, and a hop to another
        thread per connection. An IP address is answered here, in place (``AI_NUMERICHOST``: no name service
        asked, nothing waits), and a server on one listens on a socket bound here (``listening_socket``)."""

        async def getaddrinfo(self, host: Any, port: Any, *, family: int = 0, type: int = 0, proto: int = 0,
                              flags: int = 0) -> Any:
            if isinstance(host, str) and _is_ip_address(host):
                return socket.getaddrinfo(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
            return await super().getaddrinfo(host, port, family=family, type=type, proto=proto, flags=flags)

        async def create_server(self, protocol_factory: Any, host: Any = None, port: Any = None,
                                **options: Any) -> Any:
            if not (isinstance(host, str) and _is_ip_address(host) and set(options) <= _SOCKET_FREE_OPTIONS):
                return await super().create_server(protocol_factory, host, port, **options)
            sock = listening_socket(host, port or 0, reuse_address=options.pop("reuse_address", None) is not False)
            try:
                return await super().create_server(protocol_factory, sock=sock, **options)
            except BaseException:
                sock.close()
                raise

    return NumericLoop


#: ``create_server``'s options that go with a socket made beforehand (``NumericLoop.create_server``).
_SOCKET_FREE_OPTIONS = {"ssl", "backlog", "reuse_address", "ssl_handshake_timeout", "ssl_shutdown_timeout",
                        "start_serving"}


def listening_socket(address: str, port: int, *, reuse_address: bool = True) -> socket.socket:
    """A socket bound to IP address ``address`` and ``port`` as asyncio's ``create_server`` binds one
    (``SO_REUSEADDR`` unless told not to; ``IPV6_V6ONLY`` for IPv6). ``OSError`` when it cannot be bound."""
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
    except OSError:
        sock.close()
        raise
    return sock


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def describe(loop: asyncio.AbstractEventLoop) -> str:
    """``loop`` as the service's start-up line names it: ``uvloop 0.23.0`` or ``asyncio``."""
    uvloop = sys.modules.get(UVLOOP)
    if uvloop is not None and isinstance(loop, uvloop.Loop):
        return f"uvloop {getattr(uvloop, '__version__', '?')}"
    module = type(loop).__module__.partition(".")[0]
    return ASYNCIO if module == ASYNCIO else f"{module}.{type(loop).__qualname__}"


def run(main: Coroutine[Any, Any, int], factory: LoopFactory) -> int:
    """``main`` run to its end on a new loop of ``factory`` (``asyncio.run``'s clean-up: the tasks left
    cancelled, the async generators and the default executor shut down); its result."""
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
