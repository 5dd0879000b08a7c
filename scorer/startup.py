"""When ``scorer run`` reached each phase of its start: ``scorer_startup_seconds`` (``scorer.metrics``).

``STARTED`` is taken when this module is first imported, and ``scorer.__main__`` imports it before
anything else: the phases count from the moment scorer's own code began (the interpreter's start before
it, some tens of milliseconds, is not in them). ``mark(phase)`` keeps the first time a phase of
``PHASES`` is reached; ``reached()`` gives those reached so far, in order:

* ``imported``: scorer's modules loaded (``scorer.__main__``, every command);
* ``built``: the service assembled from its configuration (``scorer run``);
* ``synced``: every reflector's first list delivered, so scheduling starts (on a standby, once it leads;
  ``scorer run``).

Where the first bind comes after that, the bench says (``scorer bench --e2e``), and ``/metrics`` shows
how the phases went on any machine without a profiler.
"""

from __future__ import annotations

import time

STARTED = time.monotonic()
PHASES = ("imported", "built", "synced")
_reached: dict[str, float] = {}


def mark(phase: str) -> None:
    """Note that ``phase`` (one of ``PHASES``) is reached now, unless it was before."""
    if phase not in PHASES:
        raise ValueError(f"not a start-up phase: {phase!r} (phases: {', '.join(PHASES)})")
    _reached.setdefault(phase, time.monotonic() - STARTED)


def reached() -> dict[str, float]:
    """Seconds from ``STARTED`` to each phase reached so far, in ``PHASES`` order."""
    return {phase: _reached[phase] for phase in PHASES if phase in _reached}
