"""The bench's progress bar: which point is running, how many are done, and the time so far.

A sweep runs for minutes, one point at a time, so the user needs to see it move::

    progress = Progress(total=len(points))
    for spec in points:
        progress.step(f"{spec.workload} {spec.nodes:,} nodes")   # this point starts now
        run(spec)
    progress.done()

``step(label)`` announces the point about to run ("3/20": the third of 20);
the bar fills with the points finished before it. On a terminal the bar is
one line redrawn with ``\\r`` (cut to the terminal's width); on anything else
(a CI log, a file) each step is a plain line of its own. ``note(text)``
prints a line (a failed point) above the bar. What a terminal would act on is
escaped (a workload name comes from a user's file). Writing never raises: a
closed or broken stream only stops the display, never the sweep.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

from scorer.inputs.describe import printable

BAR_WIDTH = 24


class Progress:
    """A one-line progress display on ``stream`` (standard error by default)."""

    def __init__(self, total: int, stream: TextIO | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(total, 0)
        self.stream = sys.stderr if stream is None else stream
        self._now = clock
        self.started = self._now()
        self.finished = 0
        self._steps = 0
        self._tty = _is_tty(self.stream)
        self._shown = 0  # characters of the bar on screen (TTY)
        self._line = ""  # the bar's current text, redrawn after a note

    def step(self, label: str) -> None:
        """The point ``label`` starts: the points before it are finished."""
        self.finished = min(self._steps, self.total)
        self._steps += 1
        self._show(f"{self._bar()} {self._steps}/{self.total} {self._elapsed()} {label}")

    def note(self, text: str) -> None:
        """A line of its own (a failed point, a warning) that the bar does not overwrite."""
        if not self._tty:
            self._write(printable(text) + "\n")
            return
        self._write("\r" + printable(text).ljust(self._shown) + "\n")
        self._shown = 0
        if self._line:
            self._show(self._line)

    def done(self) -> None:
        """Every point is finished: the last line says so and the bar's line ends."""
        self.finished = self.total
        self._show(f"{self._bar()} {self.total}/{self.total} {self._elapsed()} done")
        if self._tty:
            self._write("\n")

    def _bar(self) -> str:
        filled = BAR_WIDTH * self.finished // self.total if self.total else BAR_WIDTH
        return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"

    def _elapsed(self) -> str:
        seconds = int(self._now() - self.started)
        return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def _show(self, line: str) -> None:
        line = printable(line)
        self._line = line
        if not self._tty:
            self._write(line + "\n")
            return
        line = line[: self._columns() - 1]
        self._write("\r" + line + " " * max(self._shown - len(line), 0))
        self._shown = len(line)

    def _columns(self) -> int:
        """The terminal's width (of this stream's terminal, which may not be standard output's)."""
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both of the first two
            columns = 0
        return columns if columns > 0 else shutil.get_terminal_size().columns  # 0: a pty with no size set

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # closed, or a broken pipe: the display stops, the sweep goes on
            pass


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False
