"""``python -m scorer`` and the ``scorer`` command (setup.cfg's console script): the numerical libraries'
threads bounded, then ``scorer.cli.main``.

OpenBLAS (numpy's wheels) starts its worker threads when numpy loads it, one per core of the machine (of
the node, not of a pod's CPU limit) unless a variable says otherwise: 15 workers on a 16-core
control-plane node; MKL and OpenMP size their pools the same way. scorer makes no call that uses them
(its numpy work is elementwise over the node table, no matrix product), and they are not free: each
spins when started. So each of
``NUMERIC_THREAD_VARIABLES`` that is unset or empty is set to 1 here, before anything imports numpy, for
this process and the processes it starts (the bench's ``scorer run``); a value the user set is kept.

The cyclic garbage collector is off while the modules load: they build some 110,000 tracked objects
that live as long as the process, and the collections among them that the allocations would trigger
(about 150, 15-35 ms of a start) find little to free. The objects are then frozen (``gc.freeze``:
left out of every later collection, as the reflectors' first lists are) and the collector is back on.

The code attrs generates for each class comes from a cache beside the bytecode (``scorer.codecache``)
rather than being compiled at every start: about 60 ms of CPU.

For ``scorer run``, the reflectors' first lists are asked for before the rest of scorer loads
(``scorer.kube.early``): the API server encodes them while Python imports.
"""

import gc
import os

gc.disable()

NUMERIC_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

for _variable in NUMERIC_THREAD_VARIABLES:
    if not os.environ.get(_variable):
        os.environ[_variable] = "1"

from scorer import codecache  # noqa: E402 - imports nothing that defines an attrs class

codecache.install()

import sys  # noqa: E402

from scorer.kube import early  # noqa: E402 - loads no numerical library

EARLY_LISTS = early.start(sys.argv[1:])

from scorer.cli import main as cli_main  # noqa: E402 - after the variables: scorer.cli imports numpy

gc.freeze()
gc.enable()


def main() -> int:
    """The ``scorer`` command: ``scorer.cli.main`` with the early lists."""
    return cli_main(early_lists=EARLY_LISTS)


if __name__ == "__main__":
    raise SystemExit(main())
