"""Repeated failures logged as one line and a count, so an outage stays readable.

During an API outage every Event write, condition patch and watch fails
alike; a line for each is thousands of lines that say one thing.
``RepeatLog`` logs the first failure of a *kind* (a short key the caller
chooses, such as ``"event write: ApiUnavailable"``) at once, then counts the
ones that follow within ``interval`` seconds and logs them as one line::

    writing an event for pod default/p1 failed: ApiUnavailable: ... (312 more like this in the last 30s; last: ...)

A summary is written when the next failure of that kind comes after the
interval (which then starts a new one), when any failure is logged after
another kind's interval ended, when the caller reports the kind recovered
(``recovered(kind)``: the count so far, then "recovered"), and on ``flush()``.
Nothing is lost but the repeated text: each summary gives the count and the
last message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs

DEFAULT_INTERVAL = 30.0  # seconds a kind's repeats are gathered before they are summarised
MAX_KINDS = 1_000  # kinds remembered (the oldest are summarised and forgotten beyond this)


@attrs.define(slots=True)
class _Window:
    level: int
    started: float
    last: str
    repeats: int = 0


class RepeatLog:
    """Logs failures through ``logger``, each kind's repeats within ``interval`` seconds as one line."""

    def __init__(self, logger: logging.Logger, *, interval: float = DEFAULT_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        self.logger = logger
        self.interval = interval
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        self.suppressed = 0  # lines not written (counted in the summaries), for tests

    def log(self, level: int, kind: str, message: str, *args: object) -> None:
        """Log ``message % args`` now if it is the first of ``kind`` in its interval, else count it."""
        now = self._clock()
        self._summarise_expired(now, keep=kind)
        window = self._windows.get(kind)
        if window is not None and now - window.started < self.interval:
            window.repeats += 1
            window.last = message % args if args else message
            self.suppressed += 1
            return
        if window is not None:
            self._summarise(kind, window, now)
        if len(self._windows) >= MAX_KINDS:
            oldest = next(iter(self._windows))
            self._summarise(oldest, self._windows.pop(oldest), now)
        self._windows[kind] = _Window(level, now, "")
        self.logger.log(level, message, *args)

    def warning(self, kind: str, message: str, *args: object) -> None:
        self.log(logging.WARNING, kind, message, *args)

    def error(self, kind: str, message: str, *args: object) -> None:
        self.log(logging.ERROR, kind, message, *args)

    def recovered(self, kind: str, message: str = "") -> None:
        """``kind`` works again: its repeats so far are summarised (with ``message``) and its window closed.
        Cheap when nothing of ``kind`` was logged."""
        window = self._windows.pop(kind, None)
        if window is None:
            return
        now = self._clock()
        self._summarise(kind, window, now)
        if message:
            self.logger.info("%s", message)

    def flush(self) -> None:
        """Summarise every kind's repeats not yet reported (shutdown, tests)."""
        now = self._clock()
        for kind, window in list(self._windows.items()):
            self._summarise(kind, window, now)
        self._windows.clear()

    def _summarise_expired(self, now: float, keep: str) -> None:
        expired = [k for k, w in self._windows.items() if k != keep and now - w.started >= self.interval]
        for kind in expired:
            self._summarise(kind, self._windows.pop(kind), now)

    def _summarise(self, kind: str, window: _Window, now: float) -> None:
        if window.repeats:
            self.logger.log(window.level, "%s: %d more like this in the last %.0fs (last: %s)", kind,
                            window.repeats, max(now - window.started, 0.0), window.last)
            window.repeats = 0
