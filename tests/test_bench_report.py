"""scorer.bench.report and scorer.bench.progress on synthetic results (no scheduling: the figures are made up
to known shapes, so fits, verdicts and summary lines can be checked exactly)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from scorer.bench import report, resultfile
from scorer.bench.progress import Progress
from scorer.bench.resultfile import ResultFileError
from scorer.errors import InputError

MiB = 1 << 20
SWEEP = (100, 500, 1000, 5000, 15000)


def make_point(workload: str, nodes: int, *, profile: str = "default", percentage: int = 0, mode: str = "in-process",
               scheduler: str = "scorer", p50: float | None = None, pods_per_node: float = 1.0,
               bytes_per_node: float = 20_000.0, bytes_per_pod: float | None = 3_000.0, noise: float = 0.02,
               error: str | None = None) -> dict[str, Any]:
    """One point shaped as spec.py says: cycle p50 = 0.05 ms * nodes^0.25 unless given, p99 = 1.5 x p50,
    pods/s = 800 / p50, blocks spread by ``noise``, peak RSS = 100 MB + the per-node and per-pod bytes."""
    p50 = 0.05 * nodes ** 0.25 if p50 is None else p50
    init_pods = int(nodes * pods_per_node)
    blocks = [round(p50 * (1 + noise * f), 3) for f in (-0.5, -0.25, 0.0, 0.25, 0.5)]
    pods_per_second = 800 / p50
    samples = [round(pods_per_second * (1 + noise * f)) for f in (-1, 0, 1, 0.5)]
    peak = 100 + 20 + (nodes * bytes_per_node + init_pods * (bytes_per_pod or 0.0)) / MiB
    return {
        "workload": workload, "mode": mode, "scheduler": scheduler, "profile": profile, "nodes": nodes,
        "percentage": percentage, "init_pods": init_pods, "pods": 1000, "bound": 1000, "unscheduled": 0,
        "cycle_ms": {"p50": round(p50, 3), "p90": round(1.2 * p50, 3), "p99": round(1.5 * p50, 3),
                     "max": round(3 * p50, 3), "mean": round(1.1 * p50, 3), "blocks_p50": blocks},
        "throughput": {"pods_per_second": round(pods_per_second, 1), "samples": samples,
                       "p50": float(np.percentile(samples, 50)), "p90": float(np.percentile(samples, 90)),
                       "p99": float(np.percentile(samples, 99))},
        "extension_points_ms": {"PreFilter": {"mean": 0.04, "p50": 0.04, "p99": 0.06, "count": 1000},
                                "Filter": {"mean": 0.05, "p50": 0.05, "p99": 0.08, "count": 1000},
                                "Score": {"mean": 0.19, "p50": 0.18, "p99": 0.25, "count": 1000}},
        "plugins_ms": {"Filter/NodeResourcesFit": {"mean": 0.01, "count": 100}},
        "memory": {"peak_rss_mb": round(peak, 1), "base_rss_mb": 100.0, "bytes_per_node": bytes_per_node,
                   "bytes_per_pod": bytes_per_pod},
        "wall_s": 1.0, "check": {}, "warnings": [], "error": error,
    }


def synthetic_result() -> dict[str, Any]:
    """A few workloads x node counts x percentages; null figures; an e2e pair; a failed point."""
    points = [make_point("plain", n) for n in SWEEP]
    points += [make_point("plain", n, percentage=100, p50=0.0001 * n) for n in SWEEP]
    points += [make_point("metrics", n, profile="metrics", p50=0.05 * n ** 0.25 + 0.1) for n in SWEEP]
    points += [make_point("dense", n, pods_per_node=10, bytes_per_pod=4_000.0) for n in (1000, 15000)]
    sparse = make_point("node-affinity", 100)
    sparse["throughput"] = {"pods_per_second": None, "samples": [], "p50": None, "p90": None, "p99": None}
    sparse["memory"] = {"peak_rss_mb": None, "base_rss_mb": None, "bytes_per_node": None, "bytes_per_pod": None}
    sparse["extension_points_ms"] = {}
    points.append(sparse)
    ours = make_point("plain", 500, mode="e2e", p50=0.3)
    ours["throughput"]["pods_per_second"] = 900.0
    theirs = make_point("plain", 500, mode="e2e", scheduler="kube-scheduler", p50=0.6)
    theirs["throughput"]["pods_per_second"] = 450.0
    theirs["extension_points_ms"] = None
    ours["cpu_per_pod"] = {"ms": 0.95, "ms_after_first_bind": 0.7, "cycle_share": 0.4, "start_up_s": 0.5,
                           "control_plane_ms": 1.02, "machine_busy": 0.874}
    ours["throughput"]["first_bind_after_start_s"] = 0.89
    ours["events"] = {"scheduled": 1000, "bound": 1000, "last_after_last_bind_s": 1.234}
    ours["startup_s"] = {"imported": 0.412, "built": 0.4356, "synced": 0.47}
    theirs["throughput"]["first_bind_after_start_s"] = 0.25
    theirs["cpu_per_pod"] = {"ms": 1.31, "ms_after_first_bind": 1.2, "cycle_share": None, "start_up_s": 0.1}
    points += [ours, theirs]
    points.append(make_point("preemption", 5000, error="runner exited with status 137 (killed: out of memory?)"))
    return {"format": "scorer-bench/v1", "created": "2026-11-24T15:00:00Z", "scorer_version": "0.1.0",
            "machine": {"cpus": 2, "cpu_model": "Test CPU", "memory_mb": 4096, "platform": "Linux"},
            "versions": {"python": "3.11", "numpy": "1.26", "kube_scheduler": "v1.20.2"},
            "config": {"workloads_file": "workloads.yaml", "workloads": [], "nodes": list(SWEEP), "pods": 1000,
                       "config_file": None, "cluster_file": None, "scale": None, "e2e": True},
            "points": points, "fits": None, "summary": [], "compare": None}


def fit_of(fits: list[dict[str, Any]], workload: str, metric: str, percentage: int = 0) -> dict[str, Any]:
    return next(f for f in fits if (f["workload"], f["metric"], f["percentage"]) == (workload, metric, percentage))


# -- fits --------------------------------------------------------------------------------------


def test_fits_recover_the_exponents_of_power_laws() -> None:
    fits = report.fit_slopes(synthetic_result()["points"])
    flat = fit_of(fits, "plain", "cycle_ms_p50")
    assert flat["slope"] == pytest.approx(0.25, abs=0.01) and flat["r2"] > 0.99
    assert flat["nodes"] == list(SWEEP) and flat["mode"] == "in-process" and flat["scheduler"] == "scorer"
    assert fit_of(fits, "plain", "cycle_ms_p99")["slope"] == pytest.approx(0.25, abs=0.01)
    linear = fit_of(fits, "plain", "cycle_ms_p50", percentage=100)
    assert linear["slope"] == pytest.approx(1.0, abs=0.01)


def test_fits_recover_an_exponent_through_noise() -> None:
    rng = np.random.default_rng(7)
    nodes = [100, 300, 1000, 3000, 10000, 30000]
    points = [make_point("plain", n, p50=0.01 * n ** 0.6 * float(rng.uniform(0.9, 1.1))) for n in nodes]
    fit = fit_of(report.fit_slopes(points), "plain", "cycle_ms_p50")
    assert fit["slope"] == pytest.approx(0.6, abs=0.05)
    assert 0.9 < fit["r2"] <= 1.0


def test_fits_leave_out_failed_points_null_figures_and_short_series() -> None:
    points = [make_point("two-sizes", n) for n in (100, 500)]
    points += [make_point("with-error", n) for n in (100, 500)] + [make_point("with-error", 1000, error="boom")]
    points += [make_point("with-null", n) for n in (100, 500, 1000)]
    points[-1]["cycle_ms"]["p50"] = None
    fits = report.fit_slopes(points)
    assert [f for f in fits if f["metric"] == "cycle_ms_p50"] == []
    assert [f["workload"] for f in fits] == ["with-null"]  # its p99 has three sizes


# -- the table --------------------------------------------------------------------------------


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_table_has_a_row_per_point_and_every_section() -> None:
    result = synthetic_result()
    text = report.render_table(result)
    titles = [line for line in text.splitlines() if line and not line.startswith("|")]
    assert [t.split(" (")[0].split(",")[0] for t in titles] == [
        "Points", "Mean ms per extension point", "The 4 slowest plugins per point", "Cycle cost against node count",
        "End to end", "End to end", "End to end", "Failed points"]
    tables = [block.splitlines() for block in text.split("\n\n") if block.startswith("|")]
    points_table = tables[0]
    assert len(points_table) == 2 + len(result["points"])
    for table in tables:  # every row has the header's columns; the second line is the markdown rule
        assert len({line.count("|") for line in table}) == 1
        assert set(table[1]) <= {"|", "-", ":"}
    rows = [cells(line) for line in points_table]
    assert rows[0][:6] == ["workload", "mode", "nodes", "pct", "bound/pods", "p50"]
    plain_5000 = next(row for row in rows if row[:4] == ["plain", "in-process", "5,000", "adaptive"])
    assert plain_5000[4:6] == ["1,000/1,000", "0.420"]  # 0.05 * 5000^0.25
    sparse = next(row for row in rows if row[0] == "node-affinity")
    assert sparse[9:] == ["-"] * 7  # pods/s, its samples and memory are null
    assert next(row for row in rows if row[1] == "e2e/kube-scheduler")[:3] == ["plain", "e2e/kube-scheduler", "500"]


def test_table_shows_the_end_to_end_ratios_and_failures() -> None:
    text = report.render_table(synthetic_result())
    e2e_block = text.split("End to end, scorer / kube-scheduler on the same control plane\n\n")[1].split("\n\n")[0]
    assert [cells(line) for line in e2e_block.splitlines()][2] == [
        "plain", "500", "adaptive", "900", "450", "2.00x", "0.300", "0.600", "0.50x", "131", "131", "1.00x"]
    cpu_block = text.split("the bound pods have theirs)\n\n")[1].split("\n\n")[0]
    assert [cells(line) for line in cpu_block.splitlines()][2] == [
        "plain", "500", "adaptive", "0.950", "0.700", "40%", "0.89", "1.020", "87%", "1.23",
        "1.310", "1.200", "-", "0.25", "-", "-", "-"]
    start_block = text.split("seconds after the process start)\n\n")[1].split("\n\n")[0]
    header, _, row = (cells(line) for line in start_block.splitlines())
    assert header == ["workload", "nodes", "pct", "imported", "built", "synced", "scorer 1st bind", "kube 1st bind"]
    assert row == ["plain", "500", "adaptive", "0.41", "0.44", "0.47", "0.89", "0.25"]
    assert "where scorer's start goes" not in report.render_table(
        {"points": [p for p in synthetic_result()["points"] if p.get("startup_s") is None]})
    failed = text.split("Failed points\n\n")[1].splitlines()
    assert cells(failed[2]) == ["preemption", "in-process", "5,000", "adaptive",
                                "runner exited with status 137 (killed: out of memory?)"]
    extension = text.split("Mean ms per extension point\n\n")[1].split("\n\n")[0].splitlines()
    assert cells(extension[0])[4:] == ["PreFilter", "Filter", "Score"]
    assert len(extension) == 2 + 19  # the kube-scheduler point has none, node-affinity an empty set
    plugins = text.split("The 4 slowest plugins per point (mean ms per call, from the 10% of cycles sampled)\n\n")[1]
    assert cells(plugins.splitlines()[2]) == ["plain", "in-process", "100", "adaptive", "Filter/NodeResourcesFit 0.010"]


def test_table_cells_keep_the_table_shape() -> None:
    text = report.render_table({"points": [make_point("a|b", 100, error="exit 1 | killed\nby the kernel")]})
    failed = text.split("Failed points\n\n")[1].splitlines()
    assert failed[2] == "| a\\|b     | in-process | 100   | adaptive | exit 1 \\| killed by the kernel |"


def test_plugins_table_shows_the_slowest_first() -> None:
    point = make_point("metrics", 5000, profile="metrics")
    point["plugins_ms"] = {"Score/LoadAware": {"mean": 0.2, "count": 100}, "Filter/LoadAware": {"mean": 0.05},
                           "Score/NetworkTraffic": {"mean": 0.3}, "Filter/NodeResourcesFit": {"mean": 0.01},
                           "PreScore/LoadAware": {"mean": None}, "Score/ImageLocality": {"mean": 0.02}}
    text = report.render_table({"points": [point]})
    row = text.split("sampled)\n\n")[1].splitlines()[2]
    assert cells(row)[4] == ("Score/NetworkTraffic 0.300, Score/LoadAware 0.200, Filter/LoadAware 0.050, "
                             "Score/ImageLocality 0.020")


def test_table_of_an_empty_result_is_empty() -> None:
    assert report.render_table({"points": []}) == ""


# -- the summary ------------------------------------------------------------------------------


def test_summary_gives_the_figures_at_5000_nodes_and_the_growth_when_the_cluster_doubles() -> None:
    lines = report.summary(synthetic_result())
    at = next(line for line in lines if line.startswith("At 5,000 nodes with the default profile (workload plain, "
                                                         "adaptive)"))
    assert at.endswith(": 1,903 pods/s sustained, cycle p50 0.42 ms, cycle p99 0.63 ms, 230 MB peak.")
    doubles = next(line for line in lines if line.startswith("When the cluster doubles from 5,000 to 10,000")
                   and "(workload plain, adaptive" in line)
    assert "grows by 19% (workload plain, adaptive; log-log slope 0.25, r² 1.00, over 100-15,000 nodes)." in doubles
    assert any(line.startswith("At 15,000 nodes with the default profile (workload dense") for line in lines)
    assert any("with the metric-driven profile (workload metrics, adaptive)" in line for line in lines)
    assert any(line.startswith("End to end at 500 nodes (workload plain, adaptive): scorer 900 pods/s, "
                               "kube-scheduler 450 pods/s (2.00x)") for line in lines)
    assert not any("preemption" in line for line in lines)  # its only point failed


def test_summary_checks_the_issue_targets_that_have_data() -> None:
    lines = [line for line in report.summary(synthetic_result()) if line.startswith("target: ")]
    assert "target: 5,000 nodes, plain pods, default profile, cycle p50 <= 0.5 ms: met (0.420 ms)" in lines
    assert "target: 5,000 nodes, plain pods, default profile, cycle p99 <= 2 ms: met (0.631 ms)" in lines
    assert "target: 5,000 nodes, plain pods, at least 1,500 pods/s: met (1,903 pods/s)" in lines
    assert "target: 5,000 nodes, metric-driven profile, cycle p50 <= 0.65 ms: met (0.520 ms)" in lines
    assert "target: 5,000 nodes, the metric plugins add at most 0.15 ms to the cycle p50: met (0.100 ms)" in lines
    assert "target: 15,000 nodes, plain pods, cycle p50 <= 1 ms: met (0.553 ms)" in lines
    dense = next(line for line in lines if "(dense)" in line)
    assert dense.startswith("target: 15,000 nodes and 151,000 pods (dense), peak RSS <= 1.5 GB: met (")
    assert "target: end to end at 500 nodes (workload plain), at least kube-scheduler's 450 pods/s: met " \
           "(900 pods/s)" in lines
    # the end-to-end targets of the pair (pods/s from start not measured: no line)
    assert "target: end to end at 500 nodes (plain), scorer at least 2x kube-scheduler's pods/s, first bind to " \
           "last: met (2.00x)" in lines
    assert "target: end to end at 500 nodes (plain), scorer's first bind at most 0.5 s after its start: missed " \
           "(0.89 s)" in lines
    assert "target: end to end at 500 nodes (plain), scorer's CPU per bound pod (start-up included) at most " \
           "0.8 ms: missed (0.95 ms)" in lines
    assert not any("50,000" in line for line in lines)  # not measured: no line
    assert len(lines) == 11


def test_summary_says_by_how_much_a_target_is_missed() -> None:
    points = [make_point("plain", 5000, p50=0.58), make_point("metrics", 5000, profile="metrics", p50=0.9),
              make_point("plain", 50000, error="killed")]
    lines = [line for line in report.summary({"points": points}) if line.startswith("target: ")]
    assert "target: 5,000 nodes, plain pods, default profile, cycle p50 <= 0.5 ms: missed by 0.080 ms (0.580 ms)" \
        in lines
    assert "target: 5,000 nodes, plain pods, at least 1,500 pods/s: missed by 121 pods/s (1,379 pods/s)" in lines
    assert "target: 5,000 nodes, the metric plugins add at most 0.15 ms to the cycle p50: missed by 0.170 ms " \
           "(0.320 ms)" in lines
    assert "target: 50,000 nodes, plain pods: runs: missed (killed)" in lines


def with_peak(point: dict[str, Any], peak: float) -> dict[str, Any]:
    point["memory"]["peak_rss_mb"] = peak
    return point


def test_memory_line_extrapolates_the_peak_growth_between_the_two_largest_sizes() -> None:
    points = [with_peak(make_point("plain", 100), 120.0), with_peak(make_point("plain", 1000), 150.0),
              with_peak(make_point("plain", 5000), 250.0)]
    line = next(line for line in report.summary({"points": points}) if "within 1 GB" in line)
    # 100 MB more from 1,000 to 5,000 nodes: 0.025 MB per node; 125 MB fixed; (1,024 - 125) / 0.025 = 35,960
    assert line == ("The largest cluster within 1 GB (workload plain, 1 existing pod per node): about 36,000 nodes "
                    "(extrapolated: measured up to 5,000 nodes at 250 MB peak; 26,214 bytes per node with its pods, "
                    "from the peak's growth over 1,000-5,000 nodes).")


def test_memory_line_within_the_measured_range() -> None:
    lines = report.summary({"points": [make_point("dense", n, pods_per_node=10, bytes_per_pod=4_000.0)
                                       for n in (1000, 30000)]})
    line = next(line for line in lines if line.startswith("The largest cluster within 1 GB (workload dense"))
    # (1024 - 120) MB / (20,000 + 10 * 4,000) B = 15,799 nodes; 30,000 measured
    assert "about 16,000 nodes (within the measured range, up to 30,000 nodes at " in line


def test_memory_line_from_one_size_uses_the_bytes_per_node_and_pod() -> None:
    points = [make_point("plain", n) for n in (100, 5000, 15000)]
    points[-1]["memory"] = None  # the largest size without figures: the two below it
    line = next(line for line in report.summary({"points": points}) if "within 1 GB" in line)
    assert "about 41,000 nodes (extrapolated: measured up to 5,000 nodes at 230 MB peak; " in line
    falling = [with_peak(make_point("plain", 1000), 300.0), with_peak(make_point("plain", 5000), 250.0)]
    line = next(line for line in report.summary({"points": falling}) if "within 1 GB" in line)
    # the peak fell (noise): 23,000 bytes per node and pod from the 5,000-node point; 140 MB fixed
    assert line.endswith("about 40,000 nodes (extrapolated: measured up to 5,000 nodes at 250 MB peak; 20,000 bytes "
                         "per node, 3,000 per pod, as they were added).")
    heavy = make_point("plain", 100, bytes_per_node=5e6)  # 4.77 MB per node: (1,024 - 120) / 4.77 = 189
    assert "about 190 nodes (extrapolated: measured up to 100 nodes" in report.summary({"points": [heavy]})[1]
    small = make_point("plain", 100, bytes_per_node=200.0, bytes_per_pod=None)
    assert report.summary({"points": [small]})[1] == (
        "The largest cluster within 1 GB (workload plain, 1 existing pod per node): more than 1,000 nodes (over 10x "
        "the largest measured, 100 nodes at 120 MB peak; 200 bytes per node, per pod not measured, as they were "
        "added: too far to extrapolate; measure larger clusters).")
    huge = with_peak(make_point("plain", 100), 2000.0)
    assert report.summary({"points": [huge]})[1] == ("Memory (workload plain): 1,998 MB before any node: no cluster "
                                                     "fits in 1,024 MB.")
    bare = make_point("plain", 100)
    bare["memory"]["bytes_per_node"] = None
    assert not any("1 GB" in line for line in report.summary({"points": [bare]}))


def test_summary_says_when_a_target_point_failed() -> None:
    points = [make_point("plain", 5000), make_point("metrics", 5000, profile="metrics", error="plugin failed")]
    lines = [line for line in report.summary({"points": points}) if "metric" in line]
    assert lines == ["target: 5,000 nodes, metric-driven profile, cycle p50 <= 0.65 ms: not measured (plugin failed)",
                     "target: 5,000 nodes, the metric plugins add at most 0.15 ms to the cycle p50: not measured "
                     "(plugin failed)"]


def test_summary_of_a_cluster_run_with_one_size_and_a_config_file() -> None:
    point = make_point("my-cluster", 1200, profile="/home/me/sched.yaml", percentage=50)
    lines = report.summary({"points": [point]})
    assert lines[0].startswith("At 1,200 nodes with config sched.yaml (workload my-cluster, 50%): ")
    assert lines[1].startswith("The largest cluster within 1 GB (workload my-cluster")
    assert len(lines) == 2  # one size: no growth line; no targets for this workload


# -- --compare --------------------------------------------------------------------------------


def slowed(point: dict[str, Any], factor: float) -> dict[str, Any]:
    changed = json.loads(json.dumps(point))
    for key in ("p50", "p90", "p99", "max", "mean"):
        changed["cycle_ms"][key] = round(changed["cycle_ms"][key] * factor, 3)
    changed["cycle_ms"]["blocks_p50"] = [round(b * factor, 3) for b in changed["cycle_ms"]["blocks_p50"]]
    changed["throughput"]["pods_per_second"] /= factor
    changed["throughput"]["samples"] = [s / factor for s in changed["throughput"]["samples"]]
    return changed


def as_result(points: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": "scorer-bench/v1", "created": "2026-11-24T15:00:00Z", "scorer_version": "0.1.0",
            "machine": {"cpus": 2}, "points": points}


def test_compare_marks_a_2x_slowdown_and_not_a_1_percent_change_within_5_percent_noise() -> None:
    base = [make_point("plain", 5000, noise=0.05), make_point("plain", 500, noise=0.05)]
    new = [slowed(base[0], 2.0), slowed(base[1], 1.01)]
    new[1]["memory"]["peak_rss_mb"] *= 1.5
    cmp = report.compare(as_result(new), as_result(base))
    big, small = cmp["points"]
    assert big["figures"]["cycle_p50_ms"]["verdict"] == "slower"
    assert big["figures"]["cycle_p50_ms"]["change"] == pytest.approx(1.0, abs=0.01)
    assert big["figures"]["cycle_p99_ms"]["verdict"] == "slower"
    assert big["figures"]["pods_per_second"]["verdict"] == "slower"
    assert big["figures"]["peak_rss_mb"]["verdict"] == "within noise"
    assert small["figures"]["cycle_p50_ms"]["verdict"] == "within noise"
    assert small["figures"]["cycle_p50_ms"]["noise"] == pytest.approx(0.05, abs=0.005)  # blocks rounded to 3 decimals
    assert small["figures"]["pods_per_second"]["verdict"] == "within noise"
    assert small["figures"]["peak_rss_mb"]["verdict"] == "more memory"
    assert not cmp["machine_differs"] and cmp["only_in_result"] == [] and cmp["only_in_baseline"] == []


def test_compare_marks_a_speedup_beyond_noise_and_a_small_one_within_the_floor() -> None:
    base = [make_point("plain", 5000, noise=0.0), make_point("plain", 500, noise=0.0)]
    new = [slowed(base[0], 0.8), slowed(base[1], 0.98)]
    first, second = report.compare(as_result(new), as_result(base))["points"]
    assert first["figures"]["cycle_p50_ms"]["verdict"] == "faster"
    assert first["figures"]["pods_per_second"]["verdict"] == "faster"
    assert second["figures"]["cycle_p50_ms"]["verdict"] == "within noise"  # 2% is under the 3% floor
    assert second["figures"]["cycle_p50_ms"]["noise"] == report.NOISE_FLOOR


def test_compare_lists_points_of_one_run_only_and_skips_failed_ones() -> None:
    base = [make_point("plain", 500), make_point("plain", 1000), make_point("preemption", 500)]
    new = [make_point("plain", 500, percentage=100), make_point("plain", 1000),
           make_point("preemption", 500, error="boom")]
    cmp = report.compare(as_result(new), as_result(base))
    assert [(k["workload"], k["nodes"], k["percentage"]) for k in cmp["only_in_result"]] == [("plain", 500, 100)]
    assert [(k["workload"], k["nodes"], k["percentage"]) for k in cmp["only_in_baseline"]] == [("plain", 500, 0)]
    failed = next(row for row in cmp["points"] if row["workload"] == "preemption")
    assert failed["error"] == "boom" and {f["verdict"] for f in failed["figures"].values()} == {"n/a"}
    text = report.render_compare(cmp)
    assert "Only in this run: plain in-process 500 nodes 100%." in text
    assert "Only in the baseline: plain in-process 500 nodes adaptive." in text
    assert "Not compared, a run failed: preemption in-process 500 nodes: boom" in text


def test_render_compare_shows_changes_and_counts() -> None:
    base = [make_point("plain", 5000, noise=0.05), make_point("plain", 500, noise=0.05)]
    other_machine = as_result([slowed(base[0], 2.0), slowed(base[1], 1.01)])
    other_machine["machine"] = {"cpus": 8}
    text = report.render_compare(report.compare(other_machine, as_result(base)))
    assert text.startswith("Against the baseline of 2026-11-24T15:00:00Z (scorer 0.1.0)")
    assert "another machine" in text.splitlines()[0]
    row = next(line for line in text.splitlines() if "| 5,000 |" in line)
    assert "0.420 -> 0.840 (+100.0%) SLOWER" in row
    assert "Figures: 3 slower, 5 within noise." in text


def test_the_machine_is_printed_with_its_python_speed_which_does_not_make_it_another_machine() -> None:
    result = as_result([make_point("plain", 500)])
    result["machine"] = {"cpus": 16, "cpu_model": "Test CPU", "memory_mb": 4096, "platform": "Linux",
                         "python_loop_ms": 41.23}
    assert report.render_table(result).endswith("Test CPU, 16 CPUs, Python loop 41.2 ms")
    assert "Python loop" not in report.render_table({**result, "machine": {"cpus": 16}})
    again = {**result, "machine": {**result["machine"], "python_loop_ms": 39.0}}
    assert report.compare(again, result)["machine_differs"] is False
    other = {**result, "machine": {**result["machine"], "cpus": 2}}
    assert report.compare(other, result)["machine_differs"] is True


def test_compare_refuses_a_baseline_that_is_not_a_bench_result() -> None:
    with pytest.raises(ResultFileError, match=r'^the baseline: not a scorer bench result: format is "x", expected '
                                              r'"scorer-bench/v1"$'):
        report.compare(as_result([]), {"format": "x", "points": []})
    with pytest.raises(ResultFileError, match=r"^the baseline: not a scorer bench result: expected a JSON object, "
                                              r"got list$"):
        report.compare(as_result([]), [])  # type: ignore[arg-type]


# -- the result file --------------------------------------------------------------------------


@attrs.frozen
class Shape:
    name: str
    profile: Path
    percentages: frozenset[int]


def test_write_and_read_a_result(tmp_path: Path) -> None:
    result = synthetic_result()
    result["points"][0]["cycle_ms"]["mean"] = math.nan
    result["points"][0]["wall_s"] = np.float64(1.5)
    result["config"]["workloads"] = [Shape("plain", Path("cfg.yaml"), frozenset({100, 0}))]
    path = resultfile.write_result(result, tmp_path / "new" / "dir")
    assert path == tmp_path / "new" / "dir" / "result.json"
    assert path.read_text().startswith('{\n  "format": "scorer-bench/v1"')
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]
    back = resultfile.read_result(path)
    assert back["points"][0]["cycle_ms"]["mean"] is None and back["points"][0]["wall_s"] == 1.5
    assert back["config"]["workloads"] == [{"name": "plain", "profile": "cfg.yaml", "percentages": [0, 100]}]
    assert back["points"][1:] == json.loads(json.dumps(result["points"][1:]))
    assert report.render_table(back) == report.render_table(result)


def test_write_result_where_it_cannot(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ResultFileError, match=r"/file/sub: cannot write result.json: "):
        resultfile.write_result(as_result([]), tmp_path / "file" / "sub")


@pytest.mark.parametrize(("content", "message"), [
    (None, r"no such file$"),
    ("{not json", r"bad\.json: "),
    ("[1, 2]", r"bad\.json: not a scorer bench result: expected a JSON object, got list$"),
    ('{"format": "scorer-bench/v2", "points": []}', r'bad\.json: not a scorer bench result: format is '
                                                    r'"scorer-bench/v2", expected "scorer-bench/v1"$'),
    ('{"format": "scorer-bench/v1"}', r"bad\.json: points: expected a list, got null$"),
    ('{"format": "scorer-bench/v1", "points": [3]}', r"bad\.json: points\[0\]: expected an object, got integer 3$"),
])
def test_read_result_errors_name_the_file_and_field(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=message) as caught:
        resultfile.read_result(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("nodes", "5000", r"points\[0\]\.nodes: expected a whole number, got string \"5000\""),
    ("workload", None, r"points\[0\]\.workload: expected a string, got null"),
    ("cycle_ms", {"p50": "fast"}, r"points\[0\]\.cycle_ms\.p50: expected a number or null, got string \"fast\""),
    ("cycle_ms", {"blocks_p50": [0.1, True]}, r"points\[0\]\.cycle_ms\.blocks_p50\[1\]: expected a number or null, "
                                              r"got boolean true"),
    ("memory", [], r"points\[0\]\.memory: expected an object or null, got list"),
    ("extension_points_ms", {"Filter": 3}, r"points\[0\]\.extension_points_ms\.Filter: expected an object"),
    ("error", 3, r"points\[0\]\.error: expected a string or null, got integer 3"),
])
def test_read_result_checks_the_fields_it_reads(tmp_path: Path, field: str, value: Any, message: str) -> None:
    point = make_point("plain", 100)
    point[field] = value
    path = tmp_path / "result.json"
    path.write_text(json.dumps(as_result([point])))
    with pytest.raises(ResultFileError, match=message):
        resultfile.read_result(path)


# -- the progress bar -------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_without_a_terminal_writes_a_line_per_step() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = Progress(3, stream, clock=clock)
    progress.step("plain 100 nodes")
    clock.now += 65
    progress.step("plain 500 nodes")
    clock.now += 3600
    progress.step("metrics\n100 nodes")
    progress.done()
    assert stream.getvalue().splitlines() == [
        "[........................] 1/3 0:00:00 plain 100 nodes",
        "[########................] 2/3 0:01:05 plain 500 nodes",
        "[################........] 3/3 1:01:05 metrics\\n100 nodes",
        "[########################] 3/3 1:01:05 done",
    ]


def test_progress_on_a_terminal_redraws_one_line() -> None:
    stream = TTY()
    progress = Progress(2, stream, clock=Clock())
    progress.step("a long label for the first point")
    progress.step("short")
    assert "\n" not in stream.getvalue()
    assert stream.getvalue().count("\r") == 2
    last = stream.getvalue().split("\r")[-1]
    assert last.startswith("[############............] 2/2 0:00:00 short") and last.endswith("   ")
    progress.done()
    assert stream.getvalue().endswith("\n") and stream.getvalue().split("\r")[-1].rstrip().endswith("2/2 0:00:00 done")


def test_progress_notes_go_above_the_bar() -> None:
    plain, tty = io.StringIO(), TTY()
    for stream in (plain, tty):
        progress = Progress(2, stream, clock=Clock())
        progress.step("plain 100 nodes")
        progress.note("point plain 100 nodes failed: \x1b[31mkilled")
    assert plain.getvalue().splitlines()[1] == "point plain 100 nodes failed: \\x1b[31mkilled"
    bar = "[........................] 1/2 0:00:00 plain 100 nodes"
    note = "point plain 100 nodes failed: \\x1b[31mkilled".ljust(len(bar))  # covers the bar it replaces
    assert tty.getvalue() == f"\r{bar}\r{note}\n\r{bar}"


def test_progress_never_raises_on_a_closed_stream() -> None:
    stream = io.StringIO()
    stream.close()
    progress = Progress(1, stream)
    progress.step("plain")
    progress.note("failed")
    progress.done()
    empty = Progress(0, io.StringIO())
    empty.done()


def test_compare_counts_the_spread_of_repeated_runs_as_noise() -> None:
    base = [make_point("plain", 5000, noise=0.0)]
    new = [slowed(base[0], 1.2)]  # 20% slower: beyond the 3% floor, within the runs' 50% spread
    before = report.compare(as_result(new), as_result(base))["points"][0]["figures"]["cycle_p50_ms"]
    assert before["verdict"] == "slower"
    p50 = new[0]["cycle_ms"]["p50"]
    new[0]["repeats"] = {"runs": 3, "failed": 0, "cycle_p50_ms": [0.8 * p50, p50, 1.3 * p50]}
    row = report.compare(as_result(new), as_result(base))["points"][0]["figures"]["cycle_p50_ms"]
    assert row["verdict"] == "within noise" and row["noise"] == pytest.approx(0.5, abs=0.01)
    assert "median cycle p50 of 3" in report.render_table(as_result(new)).splitlines()[0]


def e2e_run_point(workload: str, nodes: int, scheduler: str, runs: dict[str, list[float]], *,
                  failed: int = 0) -> dict[str, Any]:
    """An end-to-end point with ``--repeat`` figures (``runs``: name -> each round's value); its own figures
    are its first run's."""
    point = make_point(workload, nodes, mode="e2e", scheduler=scheduler)
    point["throughput"].update(pods_per_second=runs["pods_per_second"][0],
                               pods_per_second_from_start=runs.get("pods_per_second_from_start", [None])[0],
                               first_bind_after_start_s=runs.get("first_bind_after_start_s", [None])[0])
    point["cpu_per_pod"] = {"ms": runs.get("cpu_ms_per_pod", [None])[0]}
    point["repeats"] = {"runs": len(runs["pods_per_second"]) + failed, "failed": failed, **runs}
    return point


def test_summary_checks_the_end_to_end_targets_round_by_round() -> None:
    """Each round's scorer run against the same round's kube-scheduler (or stand-in) run."""
    ours = e2e_run_point("plain", 500, "scorer", {
        "pods_per_second": [900.0, 800.0, 1000.0], "pods_per_second_from_start": [700.0, 600.0, 800.0],
        "first_bind_after_start_s": [0.45, 0.55, 0.5], "cpu_ms_per_pod": [0.75, 0.9, 0.8]})
    theirs = e2e_run_point("plain", 500, "kube-scheduler", {
        "pods_per_second": [400.0, 500.0, 450.0], "pods_per_second_from_start": [390.0, 480.0, 440.0]})
    big = e2e_run_point("plain", 15000, "scorer", {"pods_per_second": [700.0], "first_bind_after_start_s": [1.2]})
    big_kube = e2e_run_point("plain", 15000, "kube-scheduler", {"pods_per_second": [400.0]})
    alone = e2e_run_point("extender", 5000, "kube-scheduler", {"pods_per_second": [300.0, 310.0]})
    null = e2e_run_point("extender", 5000, "kube-scheduler+stand-in", {"pods_per_second": [170.0, 200.0]})
    with_scorer = e2e_run_point("extender", 5000, "kube-scheduler+scorer", {"pods_per_second": [160.0, 170.0]})
    lines = [line for line in report.summary({"points": [ours, theirs, big, big_kube, alone, null, with_scorer]})
             if line.startswith("target: end to end at")]
    assert "target: end to end at 500 nodes (plain), scorer at least 2x kube-scheduler's pods/s, first bind to " \
           "last: met in 2 of 3 rounds (2.25x, 1.60x, 2.22x)" in lines
    assert "target: end to end at 500 nodes (plain), scorer at least 1.5x kube-scheduler's pods/s, from process " \
           "start: met in 2 of 3 rounds (1.79x, 1.25x, 1.82x)" in lines
    assert "target: end to end at 500 nodes (plain), scorer's first bind at most 0.5 s after its start: met in 2 " \
           "of 3 rounds (0.45 s, 0.55 s, 0.50 s)" in lines
    assert "target: end to end at 500 nodes (plain), scorer's CPU per bound pod (start-up included) at most 0.8 " \
           "ms: met in 2 of 3 rounds (0.75 ms, 0.90 ms, 0.80 ms)" in lines
    assert "target: end to end at 15,000 nodes (plain), scorer's first bind at most 1 s after its start: missed " \
           "(1.20 s)" in lines
    assert "target: end to end at 5,000 nodes (workload extender), kube-scheduler with scorer as extender at " \
           "least 90% of its pods/s with the stand-in: met in 1 of 2 rounds (94.1%, 85.0%)" in lines
    assert not any("15,000 nodes (plain), scorer at least" in line for line in lines)  # no ratio target there


def test_a_failed_run_leaves_the_end_to_end_targets_to_the_points_own_figures() -> None:
    """A failed run breaks the rounds' pairing: the median runs' figures are compared instead."""
    ours = e2e_run_point("plain", 5000, "scorer", {"pods_per_second": [900.0, 700.0]}, failed=1)
    theirs = e2e_run_point("plain", 5000, "kube-scheduler", {"pods_per_second": [300.0, 200.0, 250.0]})
    lines = [line for line in report.summary({"points": [ours, theirs]}) if "3x kube-scheduler" in line]
    assert lines == ["target: end to end at 5,000 nodes (plain), scorer at least 3x kube-scheduler's pods/s, "
                     "first bind to last: met (3.00x)"]
