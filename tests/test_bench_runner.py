"""scorer.bench.runner: one point in process and in its own process (fields and their sense; no timing asserted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram

from scorer.bench import overhead, runner
from scorer.bench.clusters import build_setup
from scorer.bench.runner import SetupSource, run_point, run_point_isolated
from scorer.bench.spec import PointSpec, sample_percentile, throughput
from scorer.bench.workloads import Workload, load_workloads, workload_from_data
from scorer.cluster.memory import InMemoryCluster
from scorer.errors import ScorerError

POINT_FIELDS = {"workload", "mode", "scheduler", "profile", "nodes", "percentage", "init_pods", "pods", "bound",
                "unscheduled", "cycle_ms", "throughput", "extension_points_ms", "plugins_ms", "memory", "wall_s",
                "check", "warnings", "error"}


def workload(shape: str = "plain", **kw: Any) -> Workload:
    return workload_from_data({"name": "w", "shape": shape, **kw})


def point(w: Workload, nodes: int, pods: int, percentage: int = 0) -> dict[str, Any]:
    return run_point(build_setup(w, nodes, pods), PointSpec("w", nodes, pods, percentage), config_path=w.config_file(),
                     profile=w.profile)


def test_a_plain_point_has_every_field_and_they_make_sense() -> None:
    p = point(workload(), 60, 30)
    assert POINT_FIELDS <= set(p) and p["error"] is None
    assert (p["mode"], p["scheduler"], p["profile"], p["nodes"], p["percentage"]) == (
        "in-process", "scorer", "default", 60, 0)
    assert (p["init_pods"], p["pods"], p["bound"], p["unscheduled"]) == (12, 30, 30, 0)
    cycle = p["cycle_ms"]
    assert 0 < cycle["p50"] <= cycle["p90"] <= cycle["p99"] <= cycle["max"] and cycle["mean"] > 0
    assert len(cycle["blocks_p50"]) == 5
    throughput = p["throughput"]
    assert throughput["pods_per_second"] > 0 and throughput["samples"] and throughput["p50"] > 0
    assert {"PreFilter", "Filter", "Score", "Bind"} <= set(p["extension_points_ms"])
    assert p["extension_points_ms"]["Filter"]["count"] == 30  # every cycle
    assert p["extension_points_ms"]["Filter"]["p50"] is not None
    sampled = [v["count"] for key, v in p["plugins_ms"].items() if key.startswith("Filter/")]
    assert sampled and all(0 < count <= 30 for count in sampled)  # 10% of cycles, as kube samples them
    memory = p["memory"]
    assert memory["peak_rss_mb"] >= memory["base_rss_mb"] > 0
    assert memory["peak_rss_mb"] >= memory["pods_rss_mb"] and memory["setup_rss_mb"] > 0
    assert p["check"]["nodes_used"] >= 1 and sum(p["check"]["pods_per_zone"].values()) == 30
    assert p["wall_s"] > 0


def test_a_peak_that_trails_the_rss_read_before_is_at_least_that_rss(monkeypatch: pytest.MonkeyPatch) -> None:
    # VmHWM is synced lazily by the kernel: it may be below an RSS read earlier (CI saw 203.6 < 203.8 MiB)
    monkeypatch.setattr(runner, "peak_rss_mb", lambda: 1.0)
    w = workload()
    memory = run_point(build_setup(w, 20, 5), PointSpec("w", 20, 5, 0), config_path=w.config_file(),
                       profile=w.profile, base_rss=10_000.0)["memory"]
    assert memory["base_rss_mb"] == 10_000.0 and memory["peak_rss_mb"] >= 10_000.0
    assert memory["peak_rss_mb"] >= max(memory["setup_rss_mb"], memory["nodes_rss_mb"], memory["pods_rss_mb"])


def test_preemption_deletes_victims_and_the_check_counts_them() -> None:
    w = workload("preemption", initPods={"perNode": 4, "cpu": "900m", "priority": 1},
                 pods={"cpu": "3", "priority": 10})
    p = point(w, 8, 4)
    assert p["error"] is None and p["bound"] == 4
    assert p["check"]["victims_deleted"] == 12 and p["check"]["preempted_events"] == 12  # three per preemptor
    assert "PostFilter" in p["extension_points_ms"]


def test_anti_affinity_group_never_shares_a_node_and_the_loop_ends_when_nothing_can_move() -> None:
    p = point(workload("pod-anti-affinity", initPods={"perNode": 1}), 10, 3)
    # every node holds one of the group already: no measured pod can be placed
    assert (p["bound"], p["unscheduled"]) == (0, 3)
    assert p["check"]["nodes_with_two_of_the_group"] == 0
    # one attempt each: no event of this cluster can make them placeable, so the loop stops waiting
    assert p["attempts"] == {"unschedulable": 3} and p["given_up"] == 0
    assert p["throughput"]["pods_per_second"] is None and p["throughput"]["samples"] == []
    assert p["check"]["unscheduled_reasons"]


def test_the_metric_driven_profile_reads_the_generated_snapshot() -> None:
    p = point(workload(profile="metrics"), 30, 10, percentage=100)
    assert p["error"] is None and p["bound"] == 10 and p["percentage"] == 100
    assert {"Filter/LoadAware", "Score/LoadAware"} & set(p["plugins_ms"]) or p["extension_points_ms"]["Score"]


def test_backoff_is_skipped_not_slept_and_failed_binds_come_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every first bind of a pod fails (retried with backoff, 1 s at first): the loop skips the clock to
    # the backoff expiry when nothing else is left, and the pods are bound on their second attempt.
    real_bind = InMemoryCluster.bind
    failed: set[str] = set()

    async def flaky_bind(self: InMemoryCluster, pod: Any, node_name: str) -> None:
        if pod.key not in failed:
            failed.add(pod.key)
            raise ScorerError("try again")
        await real_bind(self, pod, node_name)

    monkeypatch.setattr(InMemoryCluster, "bind", flaky_bind)
    p = point(workload(), 4, 3)
    assert (p["bound"], p["unscheduled"]) == (3, 0)
    assert p["attempts"] == {"binding": 6} and p["backoff_skipped_s"] >= 0.5  # two attempts each
    assert p["wall_s"] < 30  # the backoff was skipped, not slept


def test_a_point_that_cannot_run_is_an_error_point_not_an_exception(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    p = run_point(build_setup(workload(), 5, 2), PointSpec("w", 5, 2), config_path=missing, profile=missing)
    assert p["error"] is not None and "nope.yaml" in p["error"] and "\n" not in p["error"]
    assert p["cycle_ms"] is None and p["bound"] is None and p["wall_s"] is not None


# -- in its own process --------------------------------------------------------------------------


@pytest.mark.slow
def test_an_isolated_point_builds_its_setup_in_the_child() -> None:
    w = workload(initPods={"count": 7})
    p = run_point_isolated(SetupSource(workload=w), PointSpec("w", 20, 5), config_path=None, profile="default",
                           timeout=120)
    assert p["error"] is None and (p["nodes"], p["init_pods"], p["bound"]) == (20, 7, 5)
    assert p["memory"]["base_rss_mb"] > 0 and p["setup_s"] >= 0 and p["wall_s"] > 0


@pytest.mark.slow
def test_an_isolated_point_that_fails_or_hangs_is_reported(tmp_path: Path) -> None:
    missing = SetupSource(cluster_file=str(tmp_path / "gone.yaml"))
    p = run_point_isolated(missing, PointSpec("mine", 0, 0), config_path=None, profile="default", timeout=120)
    assert p["error"] is not None and "gone.yaml" in p["error"]
    slow = run_point_isolated(SetupSource(workload=workload()), PointSpec("w", 20, 5), config_path=None,
                              profile="default", timeout=0.01)
    assert slow["error"] == "did not finish within 0.01 s" and slow["wall_s"] > 0


# -- the figures ---------------------------------------------------------------------------------


def test_throughput_samples_whole_seconds_from_the_first_pop_as_scheduler_perf_does() -> None:
    binds = [0.1, 0.2, 0.5, 1.2, 1.9, 2.1, 2.6, 2.7]  # 3 in [0, 1), 2 in [1, 2), 3 in the last 0.7 s: no sample
    figures = throughput([100 + t for t in binds], 100.0)
    assert figures["samples"] == [3.0, 2.0]
    assert figures["pods_per_second"] == round(8 / 2.6, 1)  # first to last bind
    assert (figures["p50"], figures["p90"], figures["p99"]) == (2.0, 3.0, 3.0)  # nearest rank: ceil(q*n)-1
    short = throughput([100.1, 100.3, 100.4, 100.5], 100.0)
    assert short["samples"] == [8.0] and short["p50"] == 8.0  # shorter than a second: one sample, its rate
    one = throughput([5.0], 4.5)
    assert one["pods_per_second"] is None and one["samples"] == [2.0]  # one bind half a second in
    assert throughput([], 0.0) == {"pods_per_second": None, "samples": [], "p50": None,
                                                       "p90": None, "p99": None}


def test_the_sample_percentile_is_scheduler_perfs_nearest_rank() -> None:
    assert sample_percentile([5, 1, 3, 2, 4], 0.5) == 3.0 and sample_percentile([5, 1, 3, 2, 4], 0.99) == 5.0
    assert sample_percentile([7.0], 0.9) == 7.0 and sample_percentile([], 0.5) is None


def test_cycle_figures_and_blocks() -> None:
    figures = runner.cycle_figures([0.001] * 5 + [0.002] * 5)
    assert (figures["p50"], figures["max"], figures["mean"]) == (1.5, 2.0, 1.5)
    assert figures["blocks_p50"] == [1.0, 1.0, 1.5, 2.0, 2.0]
    assert runner.cycle_figures([])["p50"] is None


def test_histogram_quantiles_and_figures_from_a_registry() -> None:
    collector_registry = CollectorRegistry()
    histogram = Histogram(runner.EXTENSION_POINT_HISTOGRAM, "x", ["extension_point", "status", "profile"],
                          buckets=(0.001, 0.002, 0.004), registry=collector_registry)
    for seconds in (0.0005, 0.0005, 0.0015, 0.003):
        histogram.labels("Filter", "Success", "p").observe(seconds)
    histogram.labels("Filter", "Unschedulable", "p").observe(0.0015)  # summed over status and profile
    figures = runner.extension_points(collector_registry)["Filter"]
    assert figures["count"] == 5 and figures["mean"] == 1.4
    assert figures["p50"] == pytest.approx(1.25)  # rank 2.5: a quarter into (1, 2] ms
    assert runner.histogram_quantile(0.99, [(0.001, 1.0), (float("inf"), 2.0)]) == 0.001
    assert runner.histogram_quantile(0.5, [(float("inf"), 0.0)]) is None


def test_the_plugin_overhead_module_alternates_blocks_with_and_without_the_plugins(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import scorer_loadaware.plugin

    scored: list[int] = []
    score_batch = scorer_loadaware.plugin.LoadAware.score_batch
    monkeypatch.setattr(scorer_loadaware.plugin.LoadAware, "score_batch",
                        lambda self, state, pod, nodes: scored.append(1) or score_batch(self, state, pod, nodes))
    workload = next(w for w in load_workloads(None) if w.name == "metrics")
    full, without = overhead.one_run(workload, 60, 30, {"LoadAware", "NetworkTraffic"}, 5, 0)
    assert full > 0 and without > 0
    # 30 pods, blocks of 5: LoadAware scores in the blocks with it only (3 of 6; retries aside)
    assert 10 <= len(scored) <= 20, len(scored)
    assert overhead.main(["--nodes", "60", "--pods", "20", "--block", "4", "--repeat", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["run 1", "run 2", "median added"]
    assert "with LoadAware, NetworkTraffic" in out[0]
    with pytest.raises(SystemExit, match="not in the profile: Nope"):
        overhead.main(["--nodes", "60", "--pods", "10", "--plugins", "Nope"])


@pytest.mark.parametrize("shape", ["volumes", "volumes-wait"])
def test_volume_points_bind_every_claim_and_keep_pods_on_their_volumes_nodes(shape: str) -> None:
    """``volumes``: each pod's claim is pre-bound to a local PV on one node, so it must land there;
    ``volumes-wait``: WaitForFirstConsumer claims, one free PV per pod round-robin: every claim ends bound
    (PreBind writes the chosen PV's claimRef, the in-memory PersistentVolume controller binds it)."""
    setup = build_setup(workload(shape), 12, 24)
    assert sum(1 for obj in setup.storage if obj["kind"] == "PersistentVolume") == 24
    p = run_point(setup, PointSpec("w", 12, 24), config_path=None, profile="default")
    assert p["error"] is None and (p["bound"], p["unscheduled"]) == (24, 0)
    assert p["check"]["volumes"] == {"claims": 24, "claims_bound": 24, "pods_off_their_volumes": 0}
    assert {"Reserve", "PreBind"} <= set(p["extension_points_ms"])
    if shape == "volumes":  # pod k's volume is on node k mod 12: two pods per node
        assert p["check"]["nodes_used"] == 12 and p["check"]["max_on_a_node"] == 2
