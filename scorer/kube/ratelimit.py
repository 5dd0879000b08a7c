"""The client-side rate limit of every API request: a token bucket.

kube-scheduler's ``clientConnection.qps`` and ``burst`` (defaults 50 and
100) configure client-go's token bucket: ``burst`` requests may go at once,
then ``qps`` per second. ``TokenBucket.acquire()`` waits for a token; it
never refuses, so requests queue behind each other in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    """``burst`` tokens, refilled at ``qps`` per second; ``qps <= 0`` means no limit."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if burst < 1 and qps > 0:
            raise ValueError(f"burst must be at least 1 when qps is set, got {burst}")
        self.qps = float(qps)
        self.burst = max(int(burst), 1)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._updated = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    async def acquire(self) -> None:
        """Take one token, waiting until one is there (callers are served in order)."""
        if self.qps <= 0:
            return
        async with self._lock:
            self._refill()
            if self._tokens < 1.0:
                await self._sleep((1.0 - self._tokens) / self.qps)
                self._refill()
            self._tokens -= 1.0
