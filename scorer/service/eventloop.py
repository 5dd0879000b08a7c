"""The event loop ``scorer run`` runs on: uvloop's where it is installed (a dependency of scorer), else asyncio's.

Outside its scheduling cycles the service's work per pod is mostly the event
loop's: the watches' reads, the bindings' and Events' requests over TLS, the
extender's two requests per pod. uvloop (libuv, in Cython) does the polling,
the transports' reads and writes, TLS and the timers in C where asyncio's own
loop does them in Python. Measured end to end (``bench/README.md``, "The event
loop"): about a tenth less CPU per bound pod.

``--event-loop`` chooses (``EVENT_LOOPS``): ``auto``, the default, is uvloop
when it can be imported and asyncio's loop otherwise; ``uvloop`` is an error
naming why when it cannot be; ``asyncio`` is the standard library's loop. The
service names the one it runs on in its ``serving ...`` line at start. Nothing in scorer depends on
which: both run every test of the service (``tests/conftest.py``'s loop
factories), and the bench's stand-in extender runs on the same one as scorer.
"""

from __future__ import annotations

import asyncio
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
            import uvloop
        except ImportError as exc:
            if choice == UVLOOP:
                raise InputError(f"--event-loop uvloop: uvloop cannot be imported ({exc}): install it "
                                 f"(pip install uvloop) or run on --event-loop asyncio") from None
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def describe(loop: asyncio.AbstractEventLoop) -> str:
    """``loop`` as the service's start-up line names it: ``uvloop 0.23.0`` or ``asyncio``."""
    module = type(loop).__module__.partition(".")[0]
    if module == UVLOOP:
        import uvloop
        return f"uvloop {getattr(uvloop, '__version__', '?')}"
    return ASYNCIO if module == ASYNCIO else f"{module}.{type(loop).__qualname__}"


def run(main: Coroutine[Any, Any, int], factory: LoopFactory) -> int:
    """``main`` run to its end on a new loop of ``factory`` (``asyncio.run``'s clean-up: the tasks left
    cancelled, the async generators and the default executor shut down); its result."""
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
