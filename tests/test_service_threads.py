"""No thread pool of the service sized by the core count: numpy's BLAS and OpenMP, the event loop's executor.

``scorer.__main__`` (the ``scorer`` command and ``python -m scorer``) sets ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` to ``SCORER_NUMERIC_THREADS`` (1 when unset), whatever they
said, before numpy loads, so OpenBLAS starts no worker thread; ``serve`` gives the event loop an
executor of ``WORKER_THREADS`` threads. The process-level tests count the threads in
``/proc/<pid>/task`` (Linux). Only subprocesses import ``scorer.__main__``: importing it here would set
the variables in this process, for every later test.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from servicekit import ScorerProcess, node_manifest, pod_manifest, scheduler_config, wait_until

from scorer.assembly import assemble
from scorer.cluster.memory import InMemoryCluster
from scorer.registry import build_registry
from scorer.service.app import Service
from scorer.service.options import ServiceOptions
from scorer.service.run import WORKER_THREADS, serve
from scorer.testing import make_node

NUMERIC_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)")

# What the entry point leaves behind once numpy is loaded: its threads, the variables' names and values.
ENTRY_POINT_PROBE = """
import os
import scorer.__main__
import numpy
names = scorer.__main__.NUMERIC_THREAD_VARIABLES
print(len(os.listdir("/proc/self/task")), ",".join(names), *(os.environ[name] for name in names))
"""


def clean_env(**variables: str) -> dict[str, str]:
    """This process's environment without the numeric-thread variables, plus ``variables``."""
    env = {key: value for key, value in os.environ.items()
           if key not in NUMERIC_THREAD_VARIABLES and key != "SCORER_NUMERIC_THREADS"}
    return {**env, **variables}


def run_probe(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", ENTRY_POINT_PROBE], env=env, capture_output=True, text=True,
                          timeout=60)


def probe_entry_point(env: dict[str, str]) -> list[str]:
    """The number of threads, then the variables' values, of a process that imported the entry point."""
    result = run_probe(env)
    assert result.returncode == 0, result.stderr
    threads, names, *values = result.stdout.split()
    assert tuple(names.split(",")) == NUMERIC_THREAD_VARIABLES
    return [threads, *values]


FORCED_HIGH = {name: "16" for name in NUMERIC_THREAD_VARIABLES}


@pytest.mark.parametrize("variables", [{}, {"OMP_NUM_THREADS": "16"}, {"OPENBLAS_NUM_THREADS": ""}, FORCED_HIGH,
                                       {**FORCED_HIGH, "SCORER_NUMERIC_THREADS": ""}],
                         ids=["unset", "omp-forced-high", "empty", "all-forced-high", "bound-empty"])
def test_numpy_loaded_through_the_entry_point_starts_no_worker_thread(variables):
    # The libraries' own variables forced high (a setting common in images) do not reach scorer.
    threads, *values = probe_entry_point(clean_env(**variables))
    assert threads == "1"
    assert values == ["1", "1", "1"]


def test_scorer_numeric_threads_sets_every_library_variable():
    _, *values = probe_entry_point(clean_env(SCORER_NUMERIC_THREADS=" 3 ", OPENBLAS_NUM_THREADS="16"))
    assert values == ["3", "3", "3"]


@pytest.mark.parametrize("value", ["0", "-1", "two", "2.5", "1025", "\uff12"])
def test_a_bad_scorer_numeric_threads_is_a_one_line_error(value):
    result = run_probe(clean_env(SCORER_NUMERIC_THREADS=value))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("scorer: SCORER_NUMERIC_THREADS must be a whole number from 1 to 1024")
    assert repr(value) in result.stderr


def make_service() -> Service:
    cluster = InMemoryCluster([make_node("node-0")], [], [])
    asm = assemble(None, cluster, registry=build_registry(autoload=False))
    options = ServiceOptions(config="", bind_address="127.0.0.1", port=0, binding_grace=1.0, shutdown_timeout=5.0)
    return Service(asm, cluster, options)


async def test_the_service_executor_has_worker_threads_whatever_the_core_count(monkeypatch):
    # asyncio's own default executor would have min(32, 64 + 4) threads here.
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "process_cpu_count", lambda: 64, raising=False)
    service = make_service()
    loop = asyncio.get_running_loop()
    listening: asyncio.Future[int] = loop.create_future()
    task = asyncio.create_task(serve(service, on_listening=listening))
    await asyncio.wait_for(listening, 10)
    used: set[int] = set()

    def blocking_call() -> None:
        used.add(threading.get_ident())
        time.sleep(0.05)

    try:
        await asyncio.wait_for(asyncio.gather(*(loop.run_in_executor(None, blocking_call)
                                                for _ in range(3 * WORKER_THREADS))), 10)
    finally:
        service.request_stop(0, "test")
        assert await asyncio.wait_for(task, 10) == 0
    assert len(used) == WORKER_THREADS


@pytest.mark.kube
@pytest.mark.slow
def test_scorer_run_is_one_thread_while_it_binds(plane, cluster, scorers, tmp_path, monkeypatch):
    """The default profile against an API server given by IP address: no host-name lookup and no metrics
    source, so nothing uses the executor, and no BLAS worker: the whole process is one thread."""
    for name in NUMERIC_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "16")
    namespace, scheduler = "threads", "scorer-threads"
    cluster.ensure_namespace(namespace)
    cluster.create_all([node_manifest(f"threads-node-{i}") for i in range(3)]
                       + [pod_manifest(f"pod-{i:02d}", namespace=namespace, scheduler=scheduler) for i in range(30)])
    proc = ScorerProcess(tmp_path, scheduler_config(tmp_path / "config.yaml", scheduler), plane.kubeconfig)
    scorers.append(proc)
    wait_until(lambda: len(cluster.bound(namespace)) == 30 or proc.exited(), 60, "30 pods bound")
    assert not proc.exited(), proc.log()[-3000:]
    assert len(os.listdir(f"/proc/{proc.proc.pid}/task")) == 1
