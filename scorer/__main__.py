"""``python -m scorer`` and the ``scorer`` command (setup.cfg's console script): the numerical libraries'
threads bounded, then ``scorer.cli.main``.

OpenBLAS (numpy's wheels) starts its worker threads when numpy loads it, one per core of the machine (of
the node, not of a pod's CPU limit) unless a variable says otherwise: 15 workers on a 16-core
control-plane node; MKL and OpenMP size their pools the same way. scorer makes no call that uses them
(its numpy work is elementwise over the node table, no matrix product), and they are not free: each
spins when started. So every one of ``NUMERIC_THREAD_VARIABLES`` is set here, before anything imports
numpy, for this process and the processes it starts (the bench's ``scorer run``), to scorer's own bound:
``SCORER_NUMERIC_THREADS`` (``NUMERIC_THREADS_VARIABLE``), 1 when unset or empty. The variables' values in
the environment are not read: an image or a platform that sets ``OMP_NUM_THREADS=16`` for its other
programs does not give the scheduler 16 threads. A plugin that multiplies matrices and wants threads
sets ``SCORER_NUMERIC_THREADS``; a value that is not a whole number from 1 to ``MAX_NUMERIC_THREADS``
stops the command with a one-line error (exit 2).

The cyclic garbage collector is off while the modules load: they build some 110,000 tracked objects
that live as long as the process, and the collections among them that the allocations would trigger
(about 150, 15-35 ms of a start) find little to free. The objects are then frozen (``gc.freeze``:
left out of every later collection, as the reflectors' first lists are) and the collector is back on.

The code attrs generates for each class comes from a cache beside the bytecode (``scorer.codecache``)
rather than being compiled at every start: about 60 ms of CPU.

For ``scorer run``, the reflectors' first lists are asked for before the rest of scorer loads
(``scorer.kube.early``): the API server encodes them while Python imports.
"""

from scorer import startup  # noqa: I001 - first: the start-up phases count from here

import gc
import os
import sys

gc.disable()

NUMERIC_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
NUMERIC_THREADS_VARIABLE = "SCORER_NUMERIC_THREADS"
MAX_NUMERIC_THREADS = 1024


def numeric_threads(value: str | None) -> str:
    """``SCORER_NUMERIC_THREADS``'s value as the numeric libraries read it: "1" when unset or empty;
    ValueError naming the variable when it is not a whole number from 1 to ``MAX_NUMERIC_THREADS``."""
    text = (value or "").strip()
    if not text:
        return "1"
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_NUMERIC_THREADS):
        raise ValueError(f"{NUMERIC_THREADS_VARIABLE} must be a whole number from 1 to {MAX_NUMERIC_THREADS} "
                         f"(the numeric libraries' threads), got {value!r}")
    return str(int(text))


try:
    _threads = numeric_threads(os.environ.get(NUMERIC_THREADS_VARIABLE))
except ValueError as _error:
    print(f"scorer: {_error}", file=sys.stderr)
    raise SystemExit(2) from None
for _variable in NUMERIC_THREAD_VARIABLES:
    os.environ[_variable] = _threads

from scorer import codecache  # noqa: E402 - imports nothing that defines an attrs class

codecache.install()

from scorer.kube import early  # noqa: E402 - loads no numerical library

EARLY_LISTS = early.start(sys.argv[1:])

from scorer.cli import main as cli_main  # noqa: E402 - after the variables: scorer.cli imports numpy

startup.mark("imported")
gc.freeze()
gc.enable()


def main() -> int:
    """The ``scorer`` command: ``scorer.cli.main`` with the early lists."""
    return cli_main(early_lists=EARLY_LISTS)


if __name__ == "__main__":
    raise SystemExit(main())
