"""bench/e2e.py: a tiny end-to-end run against the real API server with kube-scheduler, and its quantile math."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kubekit import CACHE_BIN, kube_binaries

REPO = Path(__file__).resolve().parent.parent
E2E = REPO / "bench" / "e2e.py"


def load_e2e():
    spec = importlib.util.spec_from_file_location("bench_e2e", E2E)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_histogram_quantiles_interpolate_inside_buckets_as_prometheus_does() -> None:
    e2e = load_e2e()
    # 10 observations: 4 up to 1 ms, 4 in (1, 2] ms, 2 in (2, 4] ms; kube-scheduler's bucket layout
    exposition = "\n".join([
        "# HELP scheduler_e2e_scheduling_duration_seconds x",
        "# TYPE scheduler_e2e_scheduling_duration_seconds histogram",
        *(f'scheduler_e2e_scheduling_duration_seconds_bucket{{profile="p",result="{result}",le="{le}"}} {count}'
          for result, counts in (("scheduled", (4, 8, 10, 10)), ("error", (5, 5, 5, 5)))
          for le, count in zip(("0.001", "0.002", "0.004", "+Inf"), counts, strict=True)),
        'scheduler_e2e_scheduling_duration_seconds_sum{profile="p",result="scheduled"} 0.015',
        'scheduler_e2e_scheduling_duration_seconds_count{profile="p",result="scheduled"} 10',
        'scheduler_e2e_scheduling_duration_seconds_sum{profile="p",result="error"} 0.001',
        'scheduler_e2e_scheduling_duration_seconds_count{profile="p",result="error"} 5',
    ]) + "\n"
    summary = e2e.histogram_summary(exposition, e2e.ATTEMPT)
    # only result="scheduled": rank 5 of 10 is 1/4 into (1, 2] ms, rank 9 is half-way into (2, 4] ms
    assert summary == {"metric": "scheduler_e2e_scheduling_duration_seconds", "count": 10,
                       "p50": 1.25, "p90": 3.0, "p99": 3.9, "mean": 1.5}
    assert e2e.histogram_quantile(0.99, [(0.001, 1.0), (float("inf"), 2.0)]) == 0.001  # +Inf: last finite bound
    assert e2e.histogram_quantile(0.5, [(float("inf"), 0.0)]) is None


@pytest.mark.kube
@pytest.mark.slow
def test_e2e_bench_binds_every_pod_with_kube_scheduler(tmp_path) -> None:
    kube_binaries()  # skips (fails under CI=true) without kube-apiserver, etcd or openssl
    scheduler = Path(os.environ.get("SCORER_KUBE_BIN", CACHE_BIN)) / "kube-scheduler"
    if not scheduler.is_file():
        pytest.skip(f"no kube-scheduler at {scheduler}: 'bash scripts/build-kube.sh --with-scheduler' builds it "
                    "(it is not part of the default test build)")
    out = tmp_path / "e2e.json"
    done = subprocess.run([sys.executable, str(E2E), "--scheduler", "kube-scheduler", "--nodes", "5", "--pods", "20",
                           "--timeout", "150", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["kube_apiserver"] == "Kubernetes v1.20.2"
    [run] = report["results"]
    assert run["scheduler"] == "kube-scheduler"
    assert (run["nodes"], run["pods"], run["bound"], run["rebinds"]) == (5, 20, 20, 0)
    assert not run["timed_out"] and "error" not in run and not run["scheduler_exited_early"]
    assert run["pods_per_second"] > 0 and run["pods_per_second_from_start"] > 0
    assert 0 <= run["first_bind_after_start_s"] <= run["last_bind_after_start_s"]
    assert run["algorithm_ms"]["metric"] == "scheduler_scheduling_algorithm_duration_seconds"
    assert run["attempt_ms"]["metric"] == "scheduler_e2e_scheduling_duration_seconds"  # the 1.20 name
    for histogram in (run["algorithm_ms"], run["attempt_ms"]):
        assert histogram["count"] >= 20
        assert 0 <= histogram["p50"] <= histogram["p90"] <= histogram["p99"]
        assert histogram["mean"] > 0
    assert run["rss_peak_mb"] >= run["rss_end_mb"] > 0
    assert "| kube-scheduler | 5 | 20 | 20 |" in done.stdout  # the markdown table


@pytest.mark.kube
@pytest.mark.slow
def test_e2e_bench_binds_every_pod_with_scorer(tmp_path) -> None:
    kube_binaries()  # skips (fails under CI=true) without kube-apiserver, etcd or openssl
    out = tmp_path / "e2e.json"
    done = subprocess.run([sys.executable, str(E2E), "--scheduler", "scorer", "--nodes", "5", "--pods", "20",
                           "--timeout", "150", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = json.loads(out.read_text())["results"]
    assert run["scheduler"] == "scorer"
    assert (run["nodes"], run["pods"], run["bound"], run["rebinds"]) == (5, 20, 20, 0)
    assert not run["timed_out"] and "error" not in run and not run["scheduler_exited_early"]
    assert run["attempt_ms"]["metric"] == "scheduler_scheduling_attempt_duration_seconds"
    assert run["algorithm_ms"]["count"] >= 20 and run["rss_peak_mb"] > 0
    assert "| scorer | 5 | 20 | 20 |" in done.stdout
