"""Handing memory back to the system once pods stop coming and going.

Under churn (pods created and deleted by the hundred a second) the process
allocates and frees millions of small objects. Freed, they stay with the
allocators: glibc's malloc keeps the free chunks of its heap, CPython's
pymalloc keeps a 1 MiB arena while any object in it lives. Measured with
``tests/test_fault_churn.py`` (250 pods/s for 60 s, every pod then deleted,
30 s idle), once the per-pod data was bounded (``scorer.kube.writer``,
``scorer.cluster.recorder``): the live objects were back at their idle size,
glibc held 20-25 MB free, which ``malloc_trim(0)`` returns at once, and
pymalloc kept the arenas of the peak (a few hundred live objects made during
the churn, mostly the HTTP client's timers and connections, pin them), which
nothing but a smaller peak or ``PYTHONMALLOC=malloc`` (glibc for every
object: then the trim returns them too) gives back.

``release_memory()`` runs a full cyclic collection (the garbage that only a
collection frees: exceptions and their tracebacks, asyncio's cycles) and then
``malloc_trim(0)``, where the C library has it (glibc; not musl or macOS).
It costs a collection of the objects not frozen (``gc.freeze``), tens of
milliseconds for a large cluster: the scheduling queue calls it only in the
quiet spell that follows enough churn, a few times at most
(``SchedulingQueue.release_memory_if_quiet``).
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_memory() -> bool:
    """Collect cyclic garbage, then return the C allocator's free memory to the system; whether some
    was returned (False also where the C library cannot be trimmed)."""
    gc.collect()
    trim = _malloc_trim()
    return trim is not None and trim(0) == 1
