"""Named background tasks of the service, each guarded.

``Supervisor.start(name, factory, restart=...)`` runs ``factory()`` as the
task ``name``. If it raises (or, for a task that is restarted, returns while
the supervisor is not stopping):

* ``restart=True`` (the cluster source, metric sources): the crash is logged
  with the task's name on one line and the task is started again after a
  capped exponential backoff (the reflectors' ``Backoff``: 1 s doubling to 60 s, with jitter; reset once it ran a
  minute without crashing);
* ``restart=False`` (the scheduling loop, the leader elector): the crash is
  logged, ``failure`` names it, ``/livez`` fails, and ``on_fatal`` asks the
  service to stop with a non-zero exit status.

``stop()`` cancels every task and waits for them.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

from scorer.kube.reflector import Backoff

log = logging.getLogger("scorer.service")

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 60.0
HEALTHY_RUN = 60.0  # a task that ran this long before crashing starts again without delay growth


class Supervisor:
    def __init__(self, on_fatal: Callable[[str], None], *, rng: random.Random | None = None,
                 initial_backoff: float = INITIAL_BACKOFF, max_backoff: float = MAX_BACKOFF) -> None:
        self.on_fatal = on_fatal
        self.failure: str | None = None  # the first fatal crash, for /livez
        self.restarts: dict[str, int] = {}
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._rng = rng or random.Random()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        return dict(self._tasks)

    def start(self, name: str, factory: Callable[[], Awaitable[None]], *, restart: bool) -> asyncio.Task[None]:
        if name in self._tasks and not self._tasks[name].done():
            raise RuntimeError(f"task {name} is already running")
        task = asyncio.get_running_loop().create_task(self._guard(name, factory, restart), name=name)
        self._tasks[name] = task
        return task

    async def _guard(self, name: str, factory: Callable[[], Awaitable[None]], restart: bool) -> None:
        backoff = Backoff(self.initial_backoff, self.max_backoff, rng=self._rng)
        while True:
            started = time.monotonic()
            try:
                await factory()
                if self._stopping or not restart:
                    return
                problem = "ended unexpectedly"
                log.error("task %s ended unexpectedly", name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                problem = f"{type(exc).__name__}: {exc}"
                log.error("task %s crashed: %s", name, problem, exc_info=exc)
            if not restart:
                if self.failure is None:
                    self.failure = f"{name}: {problem}"
                self.on_fatal(name)
                return
            if time.monotonic() - started >= HEALTHY_RUN:
                backoff.reset()
            delay = backoff.next()
            self.restarts[name] = self.restarts.get(name, 0) + 1
            log.warning("task %s restarts in %.1fs (restart %d)", name, delay, self.restarts[name])
            await asyncio.sleep(delay)

    async def stop(self, name: str | None = None) -> None:
        """Cancel the task ``name`` (every task when None) and wait until it ended."""
        if name is None:
            self._stopping = True
        tasks = [t for n, t in self._tasks.items() if name is None or n == name]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
