"""``scorer bench``: the sweep behind the one command.

    scorer bench                                   # the default workloads at 100 ... 50,000 nodes
    scorer bench --only plain,metrics --nodes 500,5000 --pods 500 --out /tmp/b
    scorer bench --cluster mine.yaml --config sched.yaml --scale 3
    scorer bench --e2e --only plain --nodes 500,1000,5000
    scorer bench --compare bench-results/result.json

It plans the points (workload x node count x percentageOfNodesToScore, then
the end-to-end ones), runs each in-process point in its own process
(``runner.run_point_isolated``: its own peak RSS) and each end-to-end point
against a fresh control plane (``e2e.run_e2e_point``, for scorer and for
kube-scheduler) under a progress bar, then collects the result (``spec``'s
JSON: the machine, the versions, the configuration, the points), fits the
slopes, prints the table, the comparison with a baseline and the
capacity-planning summary, and writes ``result.json`` and the PNG plots to
``--out``. A point that fails is reported, not fatal (exit 0); bad input
stops before anything runs (exit 2, one line).

``--nodes`` replaces every workload's sweep, its own ``nodes`` cap
included; ``--config`` replaces the profile of the workloads whose profile
is ``default``; ``--cluster FILE`` runs one workload, the user's cluster
(``snapshot.load_cluster_setup``, ``--scale`` copies), with ``--config`` as
its profile and the configuration's own percentageOfNodesToScore unless
``--percentages`` is given.
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from scorer import __version__
from scorer.bench import e2e, plots, report, resultfile
from scorer.bench.options import (
    DEFAULT_NODES,
    DEFAULT_PODS,
    E2E_MAX_NODES,
    KUBE_SCHEDULER_VERSION,
    MAX_REPEAT,
    BenchOptions,
)
from scorer.bench.progress import Progress
from scorer.bench.runner import SetupSource, run_point_isolated
from scorer.bench.spec import ADAPTIVE, PointSpec
from scorer.bench.workloads import DEFAULT_FILE as DEFAULT_WORKLOADS
from scorer.bench.workloads import Workload, load_workloads, scheduler_name
from scorer.config import load_and_resolve
from scorer.errors import InputError
from scorer.registry import PluginRegistry, build_registry

SCHEDULERS = ("scorer", "kube-scheduler")
# An ``extender`` workload end to end: kube-scheduler alone, with the stand-in extender (the protocol's
# own cost), then with scorer as its HTTP extender.
EXTENDER_SCHEDULERS = ("kube-scheduler", e2e.STAND_IN, e2e.EXTENDER)

Print = Callable[[str], None]


@attrs.frozen(slots=True)
class Job:
    """One point to run: where its Setup comes from, what to measure, with which profile."""

    source: SetupSource
    spec: PointSpec
    profile: str
    config_path: str | None


# -- the command ------------------------------------------------------------------------------


def run_bench(options: BenchOptions, out: Print, err: Print) -> int:
    """Plan, run, report; 0 (also when a point failed: it is reported). Bad input raises ``InputError``."""
    registry = build_registry()
    configured_percentage = _check_options(options, registry)
    baseline = resultfile.read_result(options.compare) if options.compare is not None else None
    if options.e2e:
        reason = e2e.e2e_available()
        if reason is not None:
            raise InputError(f"--e2e: {reason}")
    workloads = _selected_workloads(options)
    jobs = plan_in_process(workloads, options, configured_percentage)
    e2e_jobs = plan_e2e(workloads, options, configured_percentage) if options.e2e else []
    points = _run(jobs, e2e_jobs, options, err)
    result = collect(points, workloads, options, registry)
    result["fits"] = report.fit_slopes(points)
    result["summary"] = report.summary(result)
    if baseline is not None:
        result["compare"] = report.compare(result, baseline)
    out(report.render_table(result))
    if result["compare"] is not None:
        out("")
        out(report.render_compare(result["compare"]))
    out("")
    for line in result["summary"]:
        out(line)
    written = resultfile.write_result(result, options.out)
    out(f"\nwritten {written}")
    try:
        for path in plots.write_plots(result, options.out):
            out(f"written {path}")
    except plots.PlotsUnavailable as exc:
        err(f"note: {exc}")
    return 0


def _check_options(options: BenchOptions, registry: PluginRegistry) -> int:
    """``InputError`` for options that do not fit together; the ``--config`` file's percentageOfNodesToScore
    (``ADAPTIVE`` without one), read while checking the file."""
    if options.scale is not None and options.cluster is None:
        raise InputError("--scale: only with --cluster FILE (it multiplies that cluster)")
    if options.scale is not None and options.scale < 1:
        raise InputError(f"--scale: expected a whole number of at least 1, got {options.scale}")
    if options.pods is not None and options.pods < (0 if options.cluster else 1):
        raise InputError(f"--pods: expected a whole number of at least 1, got {options.pods}")
    if options.timeout <= 0:
        raise InputError(f"--timeout: expected seconds above 0, got {options.timeout:g}")
    if not 1 <= options.repeat <= MAX_REPEAT:
        raise InputError(f"--repeat: expected a whole number in 1..{MAX_REPEAT}, got {options.repeat}")
    if options.cluster is not None and options.workloads is not None:
        raise InputError("--cluster and --workloads: one or the other (the cluster file is the workload)")
    if options.cluster is not None and not os.path.isfile(options.cluster):
        raise InputError(f"--cluster: {options.cluster}: no such file")
    if options.config is None:
        return ADAPTIVE
    # a bad configuration stops the run before it starts, naming the field
    loaded, _resolved = load_and_resolve(options.config, registry.catalog())
    return int(loaded.percentage_of_nodes_to_score or ADAPTIVE)


def _selected_workloads(options: BenchOptions) -> list[Workload]:
    """The workloads to run: ``--cluster``'s one, else the file's (``--only``), ``--config`` applied."""
    if options.cluster is not None:
        name = Path(options.cluster).name.split(".")[0] or "cluster"
        return [Workload(name=name, shape="plain", profile=options.config or "default",
                         description=f"the cluster of {options.cluster}"
                                     + (f" x {options.scale}" if options.scale and options.scale > 1 else ""))]
    workloads = load_workloads(options.workloads)
    if options.only is not None:
        known = {w.name for w in workloads}
        unknown = [name for name in options.only if name not in known]
        if unknown:
            raise InputError(f"--only: no workload named {', '.join(unknown)} in "
                             f"{options.workloads or DEFAULT_WORKLOADS}; there are {', '.join(sorted(known))}")
        workloads = [w for w in workloads if w.name in options.only]
    if options.config is not None:
        workloads = [attrs.evolve(w, profile=options.config) if w.profile == "default" else w for w in workloads]
    return workloads


def plan_in_process(workloads: list[Workload], options: BenchOptions,
                    configured_percentage: int = ADAPTIVE) -> list[Job]:
    """One job per workload, node count and percentage (node counts ascending: the small ones first);
    ``--cluster`` runs at ``configured_percentage`` (``--config``'s) unless ``--percentages`` is given."""
    if options.cluster is not None:
        return _cluster_jobs(workloads[0], options, configured_percentage)
    jobs = []
    for workload in workloads:
        sweep = options.nodes if options.nodes is not None else workload.sweep(list(DEFAULT_NODES))
        pods = workload.measured_pods(options.pods if options.pods is not None else DEFAULT_PODS)
        for nodes in sorted(set(sweep)):
            for percentage in options.percentages or workload.percentages:
                jobs.append(Job(SetupSource(workload=workload), PointSpec(workload.name, nodes, pods, percentage),
                                workload.profile, workload.config_file()))
    return jobs


def _cluster_jobs(workload: Workload, options: BenchOptions, configured_percentage: int) -> list[Job]:
    source = SetupSource(cluster_file=options.cluster, scale=options.scale or 1,
                         scheduler_name=scheduler_name(workload))
    percentages = options.percentages or [configured_percentage]
    # nodes 0: the file decides (the point reports the count it ran with); pods 0: the file's pending pods
    return [Job(source, PointSpec(workload.name, 0, options.pods or 0, percentage), workload.profile, options.config)
            for percentage in percentages]


def plan_e2e(workloads: list[Workload], options: BenchOptions, configured_percentage: int = ADAPTIVE) -> list[Job]:
    """Each e2e workload (``--cluster``: the cluster) at the sweep's sizes up to ``E2E_MAX_NODES`` (all of
    ``--nodes`` when given), adaptive percentage, for scorer and for kube-scheduler, alternating. The
    ``metrics`` profile stays in process: kube-scheduler has no metric plugins to compare with. An
    ``extender`` workload runs, at the same sizes, kube-scheduler alone, with the stand-in extender and with
    scorer as its extender (``EXTENDER_SCHEDULERS``), alternating too (kube-scheduler alone once when both
    apply)."""
    jobs = []
    for job in plan_in_process(workloads, options, configured_percentage):
        if job.spec.percentage != ADAPTIVE:
            continue
        if options.nodes is None and options.cluster is None and job.spec.nodes > E2E_MAX_NODES:
            continue
        for scheduler in e2e_schedulers(job):
            jobs.append(attrs.evolve(job, spec=attrs.evolve(job.spec, mode="e2e", scheduler=scheduler)))
    return jobs


def e2e_schedulers(job: Job) -> tuple[str, ...]:
    """The schedulers a job's workload runs with end to end, in order (none: in process only)."""
    workload = job.source.workload
    schedulers: tuple[str, ...] = ()
    if job.profile != "metrics" and (workload is None or workload.e2e):
        schedulers = SCHEDULERS
    if workload is not None and workload.extender:
        schedulers += tuple(s for s in EXTENDER_SCHEDULERS if s not in schedulers)
    return schedulers


def _label(job: Job) -> str:
    spec = job.spec
    where = f"{spec.nodes:,} nodes" if spec.nodes else "the file's nodes"
    pct = "adaptive" if spec.percentage == ADAPTIVE else f"{spec.percentage}%"
    who = "" if spec.mode == "in-process" else f", e2e {spec.scheduler}"
    return f"{spec.workload}: {where}, {pct}{who}"


def _run(jobs: Sequence[Job], e2e_jobs: Sequence[Job], options: BenchOptions, err: Print) -> list[dict[str, Any]]:
    """Every point in order under the progress bar; a failed one is noted as it happens (and in the table).
    With ``--repeat N``, the end-to-end points of one workload and node count run in N rounds, each round
    every scheduler once in turn (``e2e_rounds``), so that the machine's slow and fast moments fall on all
    of them alike, each round starting with the next one (``round_order``)."""
    progress = Progress((len(jobs) + len(e2e_jobs)) * options.repeat)
    points = []

    def suffix(k: int) -> str:
        return f", run {k + 1}/{options.repeat}" if options.repeat > 1 else ""

    for job in jobs:
        runs = []
        for k in range(options.repeat):
            progress.step(_label(job) + suffix(k))
            runs.append(run_point_isolated(job.source, job.spec, config_path=job.config_path,
                                           profile=job.profile, seed=options.seed, timeout=options.timeout))
        points.append(_noted(median_run(runs), progress))
    for group in e2e_rounds(e2e_jobs):
        by_job: list[list[dict[str, Any]]] = [[] for _ in group]
        for k in range(options.repeat):
            for i in round_order(len(group), k):
                progress.step(_label(group[i]) + suffix(k))
                by_job[i].append(_run_e2e(group[i], options))
        points.extend(_noted(median_run(runs, E2E_REPEAT_FIGURES), progress) for runs in by_job)
    progress.done()
    ignored = next((p["ignored"] for p in points if p.get("ignored")), None)
    if options.cluster is not None and ignored:
        counts = ", ".join(f"{count} {kind}" for kind, count in ignored.items())
        err(f"note: {options.cluster}: ignored what the bench does not use: {counts}")
    return points


#: What ``--repeat`` lists of every run of an in-process point: (name, path in the point); the median run is
#: the one of the first figure's median.
REPEAT_FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cycle_p50_ms", ("cycle_ms", "p50")),
    ("cycle_p99_ms", ("cycle_ms", "p99")),
    ("pods_per_second", ("throughput", "pods_per_second")),
    ("peak_rss_mb", ("memory", "peak_rss_mb")),
)
#: The same for an end-to-end point: the median of pods/s (first to last bind).
E2E_REPEAT_FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pods_per_second", ("throughput", "pods_per_second")),
    ("pods_per_second_from_start", ("throughput", "pods_per_second_from_start")),
    ("first_bind_after_start_s", ("throughput", "first_bind_after_start_s")),
    ("cpu_ms_per_pod", ("cpu_per_pod", "ms")),
    ("cpu_ms_per_pod_after_first_bind", ("cpu_per_pod", "ms_after_first_bind")),
    ("extender_cpu_ms_per_pod", ("cpu_per_pod", "extender_ms")),
    ("cycle_p50_ms", ("cycle_ms", "p50")),
)


def median_run(runs: list[dict[str, Any]],
               figures: tuple[tuple[str, tuple[str, ...]], ...] = REPEAT_FIGURES) -> dict[str, Any]:
    """The run whose first figure (``figures``: the cycle p50 in process, pods/s end to end) is the median (the
    lower one of an even count) among the runs that did not fail and have it (the first run when none does),
    with ``repeats``, every such run's ``figures``, when there are several: the figures stay those of one
    real run, and the repeats show the run-to-run noise."""
    if len(runs) == 1:
        return runs[0]

    def figure(run: dict[str, Any], path: tuple[str, ...]) -> Any:
        value: Any = run
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    ranked = figures[0][1]
    ok = [run for run in runs if not run.get("error") and figure(run, ranked) is not None]
    chosen = dict(sorted(ok, key=lambda run: figure(run, ranked))[(len(ok) - 1) // 2] if ok else runs[0])
    chosen["repeats"] = {"runs": len(runs), "failed": len(runs) - len(ok),
                         **{name: [figure(run, path) for run in ok] for name, path in figures}}
    return chosen


def _noted(point: dict[str, Any], progress: Progress) -> dict[str, Any]:
    if point.get("error"):
        progress.note(f"warning: {_point_name(point)} failed: {point['error']}")
    return point


def e2e_rounds(e2e_jobs: Sequence[Job]) -> list[list[Job]]:
    """The end-to-end jobs in groups of consecutive ones that differ only in the scheduler (one workload,
    node count and percentage: ``e2e_jobs`` lists each job's schedulers together)."""
    groups: list[list[Job]] = []
    for job in e2e_jobs:
        key = attrs.evolve(job.spec, scheduler="")
        if groups and attrs.evolve(groups[-1][0].spec, scheduler="") == key:
            groups[-1].append(job)
        else:
            groups.append([job])
    return groups


def round_order(schedulers: int, k: int) -> list[int]:
    """The order the schedulers of a group run in round ``k``: each round starts one further along, so that no
    scheduler always runs first in its round, should the machine's state favour a position."""
    return [(k + i) % schedulers for i in range(schedulers)]


def _run_e2e(job: Job, options: BenchOptions) -> dict[str, Any]:
    setup = job.source.build(job.spec, options.seed)
    return e2e.run_e2e_point(setup, job.spec, config_path=job.config_path, qps=options.qps, burst=options.burst,
                             timeout=options.timeout)


def _point_name(point: dict[str, Any]) -> str:
    where = f"{point['nodes']:,} nodes" if point["nodes"] else "the file's nodes"
    return f"{point['workload']} at {where} ({point['mode']}, {point['scheduler']})"


# -- the result -------------------------------------------------------------------------------


def collect(points: list[dict[str, Any]], workloads: list[Workload], options: BenchOptions,
            registry: PluginRegistry) -> dict[str, Any]:
    """The result dict of ``scorer.bench.spec`` (fits, summary and compare filled in by the caller)."""
    return {
        "format": resultfile.FORMAT,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "scorer_version": __version__,
        "machine": machine(),
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "kube_scheduler": KUBE_SCHEDULER_VERSION if options.e2e else None,
                     "plugins": plugin_distributions(registry)},
        "config": {
            "workloads_file": None if options.cluster else str(options.workloads or DEFAULT_WORKLOADS),
            "workloads": [w.as_dict() for w in workloads],
            "nodes": options.nodes or list(DEFAULT_NODES), "pods": options.pods or DEFAULT_PODS,
            "percentages": options.percentages, "config_file": options.config,
            "cluster_file": options.cluster, "scale": options.scale, "e2e": options.e2e, "seed": options.seed,
            "repeat": options.repeat,
        },
        "points": points,
        "fits": [],
        "summary": [],
        "compare": None,
    }


def plugin_distributions(registry: PluginRegistry) -> dict[str, str]:
    """The installed plugin distributions other than scorer itself, with their versions (a profile may use them)."""
    plugins = registry.plugins.values()
    return {info.source: info.version for info in sorted(plugins, key=lambda i: i.source) if info.source != "scorer"}


# One core's speed for Python, to compare figures across machines and moments: the CPU model does not say
# it, nor do machines of one kind (the same in-process point ran 1,498 to 3,243 pods/s on three lent 16-core
# machines), and a virtual machine's varies with its host's other work (30 to 50 ms here on one 2-core VM).
PYTHON_LOOP_ROUNDS = 5
PYTHON_LOOP_UPDATES = 300_000


def python_loop_ms() -> float:
    """The best of ``PYTHON_LOOP_ROUNDS`` times of a fixed pure-Python loop (``PYTHON_LOOP_UPDATES`` dict
    updates), in ms: lower is faster."""
    best = float("inf")
    for _ in range(PYTHON_LOOP_ROUNDS):
        started = time.perf_counter()
        counts: dict[int, int] = {}
        for i in range(PYTHON_LOOP_UPDATES):
            counts[i % 1000] = counts.get(i % 1000, 0) + i
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def machine() -> dict[str, Any]:
    """CPUs, CPU model, memory and platform of this machine (``null`` where /proc does not say), and its
    ``python_loop_ms``."""
    return {"cpus": os.cpu_count(), "cpu_model": _proc_field("/proc/cpuinfo", "model name"),
            "memory_mb": _memory_mb(), "platform": platform.platform(), "python_loop_ms": python_loop_ms()}


def _proc_field(path: str, name: str) -> str | None:
    try:
        with open(path) as text:
            for line in text:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return None


def _memory_mb() -> int | None:
    total = _proc_field("/proc/meminfo", "MemTotal")  # "24684424 kB"
    try:
        return int(total.split()[0]) // 1024 if total else None
    except ValueError:
        return None
