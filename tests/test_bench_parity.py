"""bench/parity.py: the scheduler_perf workload shapes run at tiny sizes and write valid JSON (no timing asserted)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scorer.cluster.memory import InMemoryCluster
from scorer.errors import ScorerError

REPO = Path(__file__).resolve().parent.parent
PARITY = REPO / "bench" / "parity.py"
WORKLOADS = ("plain", "anti-affinity", "preferred-affinity", "pod-affinity", "topology-spreading",
             "default-spreading", "preemption")


@pytest.fixture
def parity(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(PARITY.parent))  # parity.py imports bench/run.py as ``run``
    spec = importlib.util.spec_from_file_location("bench_parity", PARITY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_workload_runs_and_writes_its_results(tmp_path: Path) -> None:
    out = tmp_path / "parity.json"
    done = subprocess.run([sys.executable, str(PARITY), "--nodes", "12", "--pods", "6", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    results = {r["workload"]: r for r in report["results"]}
    assert tuple(results) == WORKLOADS
    for key, r in results.items():
        assert r["nodes"] == 12 and r["measured_pods"] == 6, key
        assert r["bound"] + r["unscheduled"] == 6, key
        assert sum(r["attempts"].values()) >= 6, key  # every measured pod was attempted
        assert set(r["cycle_ms"]) == {"p50", "p90", "p99", "mean"}, key
        assert r["kube_floor"]["pods_per_second"] > 0 and r["kube_floor"]["test"], key
        assert r["profiled"] is False
        assert "NodeResourcesFit" in r["plugins"]["filter"], key  # the default profile, no config file
    # scheduler_perf's init pods at 12 nodes (its ratios at 5,000): 0.2, 1 or 4 per node
    assert [results[k]["init_pods"] for k in WORKLOADS] == [2, 2, 12, 12, 12, 12, 48]
    # plain pods always fit: the shape needs no plugin that another branch builds
    assert results["plain"]["bound"] == 6 and results["plain"]["check"] == {"nodes_used_by_measured_pods": 6}
    # the anti-affinity group never shares a node, whether or not InterPodAffinity places it
    assert results["anti-affinity"]["check"] == {"nodes_with_two_or_more_of_the_group": 0}
    assert "| plain | SchedulingBasic | 12 |" in done.stdout
    assert "PreemptionAsync" in results["preemption"]["kube_floor"]["test"]
    assert results["preemption"]["kube_floor"]["same_shape"] is False


def test_profile_lists_the_top_functions(tmp_path: Path) -> None:
    out = tmp_path / "parity.json"
    done = subprocess.run([sys.executable, str(PARITY), "--workloads", "plain", "--nodes", "5", "--pods", "3",
                           "--profile", "--profile-top", "7", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "Ordered by: internal time" in done.stdout and "Ordered by: cumulative time" in done.stdout
    (r,) = json.loads(out.read_text())["results"]
    assert r["profiled"] is True
    assert len(r["profile_top"]) == 7
    assert {"function", "calls", "tottime_s", "cumtime_s"} <= set(r["profile_top"][0])


def test_unknown_workload_is_refused() -> None:
    done = subprocess.run([sys.executable, str(PARITY), "--workloads", "plain,nope"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "unknown workload(s) nope" in done.stderr


def test_backoff_is_skipped_not_slept_and_the_pods_come_back(parity: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every first bind of a pod fails (retried with backoff, 1 s at first): the driver skips the clock
    # to the backoff expiry when nothing else is left, and the pods are bound on their second attempt.
    real_bind = InMemoryCluster.bind
    failed: set[str] = set()

    async def flaky_bind(self: InMemoryCluster, pod: Any, node_name: str) -> None:
        if pod.key not in failed:
            failed.add(pod.key)
            raise ScorerError("try again")
        await real_bind(self, pod, node_name)

    monkeypatch.setattr(InMemoryCluster, "bind", flaky_bind)
    r = parity.run_workload(parity.WORKLOADS["plain"], 4, 3)
    assert r["bound"] == 3 and r["unscheduled"] == 0
    assert r["bound_after_a_failed_attempt"] == 3
    assert r["backoff_skipped_s"] >= 0.5  # the 1 s initial backoff, less what the run itself took
    assert r["pods_per_second_with_backoff"] < r["pods_per_second"]


def test_pods_that_never_fit_are_given_up_after_max_attempts(parity: Any) -> None:
    # 100-CPU pods fit no 4-CPU node, preemption or not: one attempt each, then given up.
    def huge(n_nodes: int, n_init: int, n_measured: int) -> Any:
        setup = parity.plain(n_nodes, n_init, 0)
        return parity.Setup(setup.nodes, setup.init, [parity.pod(f"huge-{k}", cpu="100") for k in range(n_measured)])

    workload = parity.Workload("huge", "-", "pods too large for any node", 0.0, huge, parity.check_nodes_used, None)
    r = parity.run_workload(workload, 3, 2, max_attempts=1)
    assert r["unscheduled"] == 2 and r["given_up"] == 2 and r["attempts"] == {"unschedulable": 2}
    assert r["unscheduled_reasons"] == {"0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are "
                                        "available: 3 Preemption is not helpful for scheduling.": 2}
    assert r["kube_floor"] is None and r["pods_per_second"] == 0.0


def test_skipping_clock_moves_forward_only(parity: Any) -> None:
    clock = parity.SkippingClock()
    before = clock()
    clock.skip_to(before + 10.0)
    assert clock() >= before + 10.0 and 9.0 < clock.skipped <= 10.0  # less the time since `before`
    skipped = clock.skipped
    clock.skip_to(before)  # the past: nothing to skip
    assert clock.skipped == skipped
