"""Background tasks, each named and guarded, and the backoff between their restarts.

``Backoff``: capped exponential delays with jitter, for anything that tries
again (the reflectors' re-lists and reconnects, the task restarts below).

``Supervisor.start(name, factory, restart=...)`` runs ``factory()`` as the
asyncio task ``name``. If it raises (or, for a task that is restarted, returns
while the supervisor is not stopping):

* ``restart=True``: the crash is logged with the task's name (``task NAME
  crashed; restarting it``, with the traceback) and the task is started again
  after the next delay of a ``Backoff`` (``initial_backoff`` doubling to
  ``max_backoff``, stretched by up to ``jitter`` of itself), reset once the
  task ran ``healthy_run`` seconds before it crashed (``math.inf``: never);
* ``restart=False``: the crash is logged, ``failure`` names it (the first
  one), and ``on_fatal(name)`` is called (the service stops with a non-zero
  exit status). A task that returns is done, unless it was started with
  ``until_stop=True`` (it should run until ``stop()``): then its return is
  fatal as a crash is (logged ``task NAME ended unexpectedly``, ``failure``
  ``NAME: ended``).

``stop()`` cancels every task and waits for them; ``stop(name)`` one.

Used by the service (``scorer.service.app``: reflectors, metric sources, the
leader elector, the scheduling loop), ``ApiSource.run`` (one task per
reflector), each Prometheus metric source (its refresh loop) and
``Scheduler.run`` (the queue's flushes, the event recorder's drain).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 60.0
HEALTHY_RUN = 60.0  # a task that ran this long before crashing starts again without delay growth


class Backoff:
    """Capped exponential backoff with jitter: ``initial``, doubling up to ``cap``; each delay is
    stretched by up to ``jitter`` of itself (and still capped)."""

    def __init__(self, initial: float, cap: float, *, jitter: float = 0.5, rng: random.Random | None = None) -> None:
        self.initial = initial
        self.cap = cap
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._current = initial

    def next(self) -> float:
        delay = self._current
        self._current = min(self.cap, self._current * 2)
        return min(self.cap, delay * (1.0 + self.jitter * self._rng.random()))

    def reset(self) -> None:
        self._current = self.initial


class Supervisor:
    """Named background tasks, each restarted with backoff or fatal (the module docstring)."""

    def __init__(self, on_fatal: Callable[[str], None] | None = None, *, log: logging.Logger | None = None,
                 rng: random.Random | None = None, initial_backoff: float = INITIAL_BACKOFF,
                 max_backoff: float = MAX_BACKOFF, jitter: float = 0.5, healthy_run: float = HEALTHY_RUN) -> None:
        self.on_fatal = on_fatal
        self.log = log or logging.getLogger("scorer.tasks")
        self.failure: str | None = None  # the first fatal crash, for /livez
        self.restarts: dict[str, int] = {}
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.jitter = jitter
        self.healthy_run = healthy_run
        self._rng = rng or random.Random()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        return dict(self._tasks)

    def start(self, name: str, factory: Callable[[], Awaitable[None]], *, restart: bool,
              until_stop: bool = False) -> asyncio.Task[None]:
        if name in self._tasks and not self._tasks[name].done():
            raise RuntimeError(f"task {name} is already running")
        task = asyncio.get_running_loop().create_task(self._guard(name, factory, restart, until_stop), name=name)
        self._tasks[name] = task
        return task

    async def _guard(self, name: str, factory: Callable[[], Awaitable[None]], restart: bool,
                     until_stop: bool) -> None:
        backoff = Backoff(self.initial_backoff, self.max_backoff, jitter=self.jitter, rng=self._rng)
        while True:
            started = time.monotonic()
            try:
                await factory()
                if self._stopping:
                    return
                if not restart:
                    if until_stop:
                        self.log.error("task %s ended unexpectedly", name)
                        self._fatal(name, "ended")
                    return
                self.log.error("task %s ended unexpectedly; restarting it", name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not restart:
                    problem = f"{type(exc).__name__}: {exc}"
                    self.log.error("task %s crashed: %s", name, problem, exc_info=exc)
                    self._fatal(name, problem)
                    return
                self.log.error("task %s crashed; restarting it", name, exc_info=exc)
            if time.monotonic() - started >= self.healthy_run:
                backoff.reset()
            delay = backoff.next()
            self.restarts[name] = self.restarts.get(name, 0) + 1
            self.log.warning("task %s restarts in %.1fs (restart %d)", name, delay, self.restarts[name])
            await asyncio.sleep(delay)

    def _fatal(self, name: str, problem: str) -> None:
        if self.failure is None:
            self.failure = f"{name}: {problem}"
        if self.on_fatal is not None:
            self.on_fatal(name)

    async def stop(self, name: str | None = None) -> None:
        """Cancel the task ``name`` (every task when None) and wait until it ended."""
        if name is None:
            self._stopping = True
        tasks = [t for n, t in self._tasks.items() if name is None or n == name]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
