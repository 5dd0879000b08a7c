"""The queue's quiet-spell memory hook: freed memory handed back to the system once churn is over.

The queue counts its changes (pods added, popped or deleted, cluster events) in a
``QuietSpell``; ``SchedulingQueue.run`` asks it every ``quiet_period`` (10 s). When at least
``RELEASE_AFTER_CHANGES`` changes came since memory was last released, and then none for a whole
quiet period, it calls ``release_memory`` (``scorer.state.memory``: a full collection, then
glibc's ``malloc_trim``), and again every quiet period while that still returns memory (what
the recorder frees as it drains the Events of the churn, after the queue went quiet),
``MAX_RELEASES`` times at most. A scheduler that keeps scheduling never pays for it; one whose
pods all came and went gives its memory back within about 20 s of the last change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("scorer.queue")

# Pods added, popped or deleted and cluster events since memory was last released, before a quiet
# spell releases it again (a handful of pods freed nothing worth a full collection).
RELEASE_AFTER_CHANGES = 1_000
MAX_RELEASES = 6  # releases in one quiet spell, while each still returns memory


class QuietSpell:
    """Counts the queue's changes (``changes``) and releases memory when they stop after churn."""

    __slots__ = ("_checked", "_released", "_releases_left", "changes", "release_memory")

    def __init__(self, release_memory: Callable[[], object] | None) -> None:
        self.release_memory = release_memory
        # Changes counted so far, at the last quiet check, and when memory was last released;
        # releases left in this quiet spell.
        self.changes = 0
        self._checked = 0
        self._released = 0
        self._releases_left = 0

    def release_if_quiet(self) -> bool:
        """Call ``release_memory`` if nothing changed since the previous call and either at least
        ``RELEASE_AFTER_CHANGES`` changes came before (churn ended), or the previous release in this
        quiet spell returned memory (``MAX_RELEASES`` at most); whether it was called."""
        changes, checked = self.changes, self._checked
        self._checked = changes
        if self.release_memory is None or changes != checked:
            return False
        if changes - self._released >= RELEASE_AFTER_CHANGES:
            self._releases_left = MAX_RELEASES
        if not self._releases_left:
            return False
        self._releases_left -= 1
        started = time.monotonic()
        freed = self.release_memory()
        log.debug("quiet after %d pod changes and cluster events: memory released in %.3fs%s",
                  changes - self._released, time.monotonic() - started, "" if freed else " (none left)")
        self._released = changes
        if not freed:
            self._releases_left = 0
        return True
