"""``scorer bench``: a tiny smoke run through ``scorer.cli.main`` (valid JSON, a PNG), the user's cluster,
the plan of points, and bad input (exit 2, one line). Timing is never asserted."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from scorer.bench import command, e2e, plots, report, resultfile
from scorer.bench.command import BenchOptions
from scorer.bench.runner import SetupSource
from scorer.bench.spec import PointSpec
from scorer.cli import main


@pytest.mark.slow
def test_smoke_run_writes_the_table_the_json_and_the_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["bench", "--nodes", "50,100", "--pods", "20", "--only", "plain,metrics", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = resultfile.read_result(out / "result.json")  # the report's own check of the shape
    assert json.loads((out / "result.json").read_text())["format"] == "scorer-bench/v1"
    points = result["points"]
    # 2 workloads x 2 node counts x 2 percentages (adaptive and 100%), in process
    assert sorted((p["workload"], p["nodes"], p["percentage"]) for p in points) == sorted(
        (w, n, pct) for w in ("plain", "metrics") for n in (50, 100) for pct in (0, 100))
    assert all(p["error"] is None and p["bound"] == 20 and p["mode"] == "in-process" for p in points)
    assert {p["profile"] for p in points} == {"default", "metrics"}
    assert result["config"]["nodes"] == [50, 100] and result["config"]["pods"] == 20
    assert [w["name"] for w in result["config"]["workloads"]] == ["plain", "metrics"]
    assert result["machine"]["cpus"] >= 1 and result["versions"]["kube_scheduler"] is None
    assert result["machine"]["python_loop_ms"] > 0  # one core's speed, printed after the tables
    assert f"CPUs, Python loop {result['machine']['python_loop_ms']:.1f} ms\n" in captured.out
    assert "scorer-loadaware" in result["versions"]["plugins"]  # the metric-driven profile's plugins
    assert result["summary"] and result["summary"][0] in captured.out
    assert "| plain" in captured.out and "written" in captured.out
    assert "plain: 100 nodes" in captured.err  # the progress bar's steps
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib is not installed (pip install 'scorer[bench]'): no PNG to check")
    pngs = sorted(out.glob("*.png"))
    assert pngs and all(png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for png in pngs)


CLUSTER = {"apiVersion": "v1", "kind": "List", "items": [
    *({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
       "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "20"},
                  "conditions": [{"type": "Ready", "status": "True"}]}} for i in range(3)),
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "running", "namespace": "default"},
     "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "i",
                                                "resources": {"requests": {"cpu": "500m"}}}]},
     "status": {"phase": "Running"}},
    *({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pending-{k}", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}
      for k in range(2)),
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}},
]}


@pytest.mark.slow
def test_the_users_cluster_scaled_and_plots_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def no_matplotlib(result: dict[str, Any], out_dir: Any) -> list[Path]:
        raise plots.PlotsUnavailable("the plots need matplotlib: pip install 'scorer[bench]'")

    monkeypatch.setattr(plots, "write_plots", no_matplotlib)
    cluster = tmp_path / "mine.json"
    cluster.write_text(json.dumps(CLUSTER))
    code = main(["bench", "--cluster", str(cluster), "--scale", "2", "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    [p] = resultfile.read_result(tmp_path / "out" / "result.json")["points"]
    assert p["error"] is None and p["workload"] == "mine"
    assert (p["nodes"], p["init_pods"], p["pods"], p["bound"]) == (6, 2, 4, 4)  # every object twice
    assert "pip install 'scorer[bench]'" in captured.err  # the rest is written all the same
    assert f"note: {cluster}: ignored what the bench does not use: 1 Secret" in captured.err
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["config"]["cluster_file"] == str(cluster) and result["config"]["scale"] == 2
    # the same run against the first one as a baseline: the comparison is printed and stored
    code = main(["bench", "--cluster", str(cluster), "--scale", "2", "--out", str(tmp_path / "again"),
                 "--compare", str(tmp_path / "out" / "result.json")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    again = json.loads((tmp_path / "again" / "result.json").read_text())
    assert again["compare"] is not None and report.render_compare(again["compare"]) in captured.out


def test_the_plan_caps_e2e_and_applies_config(tmp_path: Path) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    options = BenchOptions(only=["plain", "metrics", "preemption"], config=str(config))
    workloads = command._selected_workloads(options)
    # --config replaces the default profile only: metrics keeps its own
    assert [(w.name, w.profile) for w in workloads] == [
        ("plain", str(config)), ("metrics", "metrics"), ("preemption", str(config))]
    jobs = command.plan_in_process(workloads, options)
    specs = [(j.spec.workload, j.spec.nodes, j.spec.pods, j.spec.percentage) for j in jobs]
    assert specs[:3] == [("plain", 100, 1000, 0), ("plain", 100, 1000, 100), ("plain", 500, 1000, 0)]
    assert {n for w, n, _, _ in specs if w == "preemption"} == {100, 500, 1000, 5000}  # the workload's cap
    assert {p for w, _, p, _ in specs if w == "preemption"} == {500}
    assert len(specs) == 6 * 2 + 6 * 2 + 4
    e2e_jobs = command.plan_e2e(workloads, options)  # plain only (e2e: true), up to 5,000 nodes, both schedulers
    assert [(j.spec.nodes, j.spec.scheduler, j.spec.mode) for j in e2e_jobs] == [
        (n, s, "e2e") for n in (100, 500, 1000, 5000) for s in ("scorer", "kube-scheduler")]
    assert all(j.config_path == str(config) for j in e2e_jobs)
    explicit = command.plan_e2e(workloads, BenchOptions(nodes=[50000]))
    assert [j.spec.nodes for j in explicit] == [50000, 50000]  # --nodes is taken as given
    metrics = attrs.evolve(workloads[1], e2e=True)
    assert command.plan_e2e([metrics], options) == []  # its generated metrics snapshot exists in process only


def test_e2e_runs_both_schedulers_through_the_e2e_module(tmp_path: Path, e2e_calls: list[tuple[Any, PointSpec, Any]],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--e2e", "--only", "plain", "--nodes", "10", "--pods", "3", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().err
    assert [(s.mode, s.scheduler, s.nodes) for _, s, _ in e2e_calls] == [("e2e", "scorer", 10),
                                                                          ("e2e", "kube-scheduler", 10)]
    assert all(len(setup.nodes) == spec.nodes and kw["qps"] == 5000 for setup, spec, kw in e2e_calls)
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["config"]["e2e"] is True and result["versions"]["kube_scheduler"] == "v1.20.2"
    assert "failed: not measured in this test" in capsys.readouterr().err


def test_e2e_unavailable_stops_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(e2e, "e2e_available", lambda: "no kube-apiserver: run scripts/build-kube.sh")
    assert main(["bench", "--e2e", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == "error: --e2e: no kube-apiserver: run scripts/build-kube.sh\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("argv", "expected"), [
    (["--nodes", "100,0"], "error: --nodes: 0 is out of range 1..1,000,000"),
    (["--nodes", "1k"], "error: --nodes: expected comma-separated whole numbers, got '1k'"),
    (["--percentages", "101"], "error: --percentages: 101 is out of range 0..100"),
    (["--only", "plain,nope"], "error: --only: no workload named nope in"),
    (["--scale", "2"], "error: --scale: only with --cluster FILE"),
    (["--pods", "0"], "error: --pods: expected a whole number of at least 1, got 0"),
    (["--repeat", "0"], "error: --repeat: expected a whole number in 1..20, got 0"),
    (["--cluster", "/nonexistent/c.yaml"], "error: --cluster: /nonexistent/c.yaml: no such file"),
    (["--workloads", "/nonexistent/w.yaml"], "error: /nonexistent/w.yaml: no such file"),
    (["--config", "/nonexistent/s.yaml"], "error: /nonexistent/s.yaml: no such file"),
    (["--compare", "/nonexistent/r.json"], "error: /nonexistent/r.json: no such file"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], expected: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_repeat_keeps_the_run_with_the_median_p50_and_lists_every_run() -> None:
    def run(p50: float | None, pods_per_second: float = 100.0, error: str | None = None) -> dict[str, Any]:
        return {"cycle_ms": {"p50": p50, "p99": 2 * (p50 or 0)}, "throughput": {"pods_per_second": pods_per_second},
                "memory": {"peak_rss_mb": 50.0}, "error": error}

    single = run(0.5)
    assert command.median_run([single]) is single and "repeats" not in single
    chosen = command.median_run([run(0.9, 10), run(0.4, 40), run(None, error="boom"), run(0.6, 60), run(0.5, 50)])
    assert chosen["cycle_ms"]["p50"] == 0.5 and chosen["throughput"]["pods_per_second"] == 50  # one real run
    assert chosen["repeats"] == {"runs": 5, "failed": 1, "cycle_p50_ms": [0.9, 0.4, 0.6, 0.5],
                                 "cycle_p99_ms": [1.8, 0.8, 1.2, 1.0], "pods_per_second": [10, 40, 60, 50],
                                 "peak_rss_mb": [50.0] * 4}
    failed = command.median_run([run(None, error="a"), run(None, error="b")])
    assert failed["error"] == "a" and failed["repeats"]["failed"] == 2


def median_e2e(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return command.median_run(runs, command.E2E_REPEAT_FIGURES)


def test_end_to_end_repeats_keep_the_run_with_the_median_rate_and_list_every_run() -> None:
    def run(rate: float | None, first: float = 0.5, error: str | None = None) -> dict[str, Any]:
        return {"throughput": {"pods_per_second": rate, "pods_per_second_from_start": rate and rate / 2,
                               "first_bind_after_start_s": first},
                "cpu_per_pod": {"ms": 0.7, "ms_after_first_bind": 0.6, "extender_ms": None},
                "cycle_ms": {"p50": 0.3}, "error": error}

    single = run(900)
    assert median_e2e([single]) is single and "repeats" not in single
    chosen = median_e2e([run(1000, 0.4), run(800, 0.6), run(None, error="boom"), run(1200, 0.5)])
    assert chosen["throughput"]["pods_per_second"] == 1000 and chosen["throughput"]["first_bind_after_start_s"] == 0.4
    assert chosen["repeats"] == {
        "runs": 4, "failed": 1, "pods_per_second": [1000, 800, 1200], "pods_per_second_from_start": [500, 400, 600],
        "first_bind_after_start_s": [0.4, 0.6, 0.5], "cpu_ms_per_pod": [0.7] * 3,
        "cpu_ms_per_pod_after_first_bind": [0.6] * 3, "extender_cpu_ms_per_pod": [None] * 3,
        "cycle_p50_ms": [0.3] * 3}
    assert median_e2e([run(None, error="a"), run(None, error="b")])["error"] == "a"


def test_end_to_end_repeats_run_in_rounds_of_every_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    def job(nodes: int, scheduler: str) -> command.Job:
        return command.Job(SetupSource(), PointSpec("plain", nodes, 10, mode="e2e", scheduler=scheduler),
                           "default", None)

    e2e_jobs = [job(40, "scorer"), job(40, "kube-scheduler"), job(80, "scorer"), job(80, "kube-scheduler")]
    assert [[j.spec.nodes for j in g] for g in command.e2e_rounds(e2e_jobs)] == [[40, 40], [80, 80]]
    order: list[tuple[int, str]] = []
    rates = iter([100, 50, 300, 70, 200, 60, 10, 1, 20, 2, 30, 3])

    def fake_run(j: command.Job, opts: BenchOptions) -> dict[str, Any]:
        order.append((j.spec.nodes, j.spec.scheduler))
        return {"nodes": j.spec.nodes, "scheduler": j.spec.scheduler, "throughput": {"pods_per_second": next(rates)},
                "error": None}

    monkeypatch.setattr(command, "_run_e2e", fake_run)
    points = command._run([], e2e_jobs, BenchOptions(repeat=3), lambda line: None)
    # each round starts with the next scheduler: none always runs first
    assert order == [(40, "scorer"), (40, "kube-scheduler"), (40, "kube-scheduler"), (40, "scorer"),
                     (40, "scorer"), (40, "kube-scheduler"), (80, "scorer"), (80, "kube-scheduler"),
                     (80, "kube-scheduler"), (80, "scorer"), (80, "scorer"), (80, "kube-scheduler")]
    assert [(p["nodes"], p["scheduler"], p["throughput"]["pods_per_second"]) for p in points] == [
        (40, "scorer", 100), (40, "kube-scheduler", 60), (80, "scorer", 10), (80, "kube-scheduler", 3)]
    assert points[0]["repeats"]["pods_per_second"] == [100, 70, 200]
    assert command.round_order(3, 0) == [0, 1, 2] and command.round_order(3, 4) == [1, 2, 0]


@pytest.mark.slow
def test_repeat_runs_each_in_process_point_n_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["bench", "--nodes", "40", "--pods", "10", "--only", "plain", "--percentages", "0", "--repeat", "3",
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (point,) = resultfile.read_result(out / "result.json")["points"]
    repeats = point["repeats"]
    assert repeats["runs"] == 3 and repeats["failed"] == 0 and len(repeats["cycle_p50_ms"]) == 3
    assert point["cycle_ms"]["p50"] == sorted(repeats["cycle_p50_ms"])[1]
    assert "median cycle p50 of 3" in captured.out and "run 3/3" in captured.err
