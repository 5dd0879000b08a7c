"""What the bench tells its user: the terminal table, the log-log fits, the
capacity-planning summary, ``--compare`` against a baseline, and the result file.

Everything here works on the result JSON documented in ``scorer.bench.spec``
(plain dicts, as written to and read from ``result.json``), so a result read
back from disk renders exactly as the run that wrote it.

- ``fit_slopes(points)``: per series (workload, mode, scheduler, percentage)
  measured at 3 or more node counts, the least-squares slope of log(cycle ms)
  on log(nodes), for p50 and p99: 0 is flat, 1 linear in the node count.
- ``render_table(result)``: one row per point, the mean ms per extension point,
  the slowest plugins, the fits, scorer / kube-scheduler ratios where both ran end to end, and
  kube-scheduler with scorer as its extender / kube-scheduler alone (with scorer's request latency,
  and the stand-in extender's pods/s beside it when it ran) where both of those ran; as
  ``|``-separated rows that read in a terminal and paste into markdown.
- ``summary(result)``: the same in plain words, with the issue's targets
  checked against the points that exist (a line only where there is data).
- ``compare(result, baseline)`` and ``render_compare``: a change is marked only
  when it is beyond the run-to-run noise both runs measured and beyond
  ``NOISE_FLOOR``.

The result file itself (``write_result``, ``read_result``) is ``scorer.bench.resultfile``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np

from scorer import startup
from scorer.bench.resultfile import check_result
from scorer.inputs.reader import MiB

# A relative change within this is never marked, whatever noise the runs measured.
NOISE_FLOOR = 0.03
# p99 has no per-block figures: its noise is taken as this multiple of the p50 blocks' spread.
P99_NOISE_FACTOR = 2.0
MIN_FIT_NODE_COUNTS = 3
TOP_PLUGINS = 4  # plugins shown per point in the table (result.json has them all)
MEMORY_BUDGET_MB = 1024.0
# The 1 GB line extrapolates at most this many times the largest measured cluster (small clusters'
# RSS grows by less than the allocator's granularity: their bytes per node say little).
MAX_EXTRAPOLATION = 10

# The workloads of the shipped workloads file that the targets name.
PLAIN = "plain"  # plain pods, default profile
METRICS = "metrics"  # plain pods, metric-driven profile
DENSE = "dense"  # plain pods, 10 existing pods per node (the RSS target)
HEADLINE_NODES = 5000
SCORER, KUBE, EXTENDER = "scorer", "kube-scheduler", "kube-scheduler+scorer"  # end-to-end schedulers
STAND_IN = "kube-scheduler+stand-in"  # kube-scheduler with an extender that does no work
# kube-scheduler with scorer as its extender (nodeCacheCapable) keeps at least this share of kube-scheduler
# alone's pods/s, at these sizes (one HTTP extender took Go kube-scheduler from about 990 to 111 pods/s)
EXTENDER_SHARE = 0.6
EXTENDER_TARGET_NODES = (500, 5000)
# The end-to-end targets of the per-pod API path and start-up (plain pods, default profile, 2 cores), checked
# round by round: a round's scorer run against the same round's kube-scheduler (or stand-in) run, minutes
# apart at most. Scorer's pods/s over kube-scheduler's, first bind to last and from process start, by nodes:
ROUND_RATIO_TARGETS = {500: (2.0, 1.5), 5000: (3.0, 2.0)}
FIRST_BIND_TARGETS = {500: 0.5, 15_000: 1.0}  # seconds from scorer's start to its first bind
CPU_PER_POD_TARGET = (0.8, (500, 5000))  # ms of scorer's CPU per bound pod, start-up included; at these nodes
STAND_IN_SHARE = (0.9, (500, 5000))  # kube-scheduler with scorer against with the stand-in extender; nodes

EXTENSION_POINTS = ("PreEnqueue", "QueueSort", "PreFilter", "Filter", "PostFilter", "PreScore", "Score",
                    "NormalizeScore", "Reserve", "Permit", "PreBind", "Bind", "PostBind")


# -- reading figures --------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    """A finite number, or None (null, missing, a boolean, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _figure(point: dict[str, Any] | None, section: str, key: str) -> float | None:
    """``point[section][key]`` as a number; None when the point, the section or the figure is absent or null."""
    values = None if point is None else point.get(section)
    return _number(values.get(key)) if isinstance(values, dict) else None


def _numbers(point: dict[str, Any], section: str, key: str) -> list[float]:
    values = point.get(section)
    raw = values.get(key) if isinstance(values, dict) else None
    if not isinstance(raw, list):
        return []
    return [number for number in map(_number, raw) if number is not None]


def _ok(points: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [point for point in points if not point.get("error")]


def _series(point: dict[str, Any]) -> tuple[str, str, str, int]:
    return (point["workload"], point["mode"], point["scheduler"], point["percentage"])


# -- formatting -------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _whole(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or denominator is None or denominator <= 0:
        return "-"
    return f"{numerator / denominator:.2f}x"


def _pct(percentage: int) -> str:
    return "adaptive" if percentage == 0 else f"{percentage}%"


def _mode(point: dict[str, Any]) -> str:
    return point["mode"] if point["mode"] == "in-process" else f"{point['mode']}/{point['scheduler']}"


def _profile_words(profile: str) -> str:
    if profile == "default":
        return "the default profile"
    if profile == "metrics":
        return "the metric-driven profile"
    return f"config {os.path.basename(profile)}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right_from: int = 0) -> list[str]:
    """A ``|`` table padded to column widths (markdown, right-aligned from column ``right_from``)."""
    headers, rows = _cells(headers), [_cells(row) for row in rows]
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) if rows else len(headers[i])
              for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        padded = [cell.rjust(widths[i]) if right_from and i >= right_from else cell.ljust(widths[i])
                  for i, cell in enumerate(cells)]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * (w + 1) + ":" if right_from and i >= right_from else "-" * (w + 2) for i, w in enumerate(widths)]
    return [line(headers), "|" + "|".join(rule) + "|", *(line(row) for row in rows)]


def _cells(row: Sequence[str]) -> list[str]:
    """Cells that keep the table's shape: a ``|`` escaped as markdown does, a line break as a space."""
    return [cell.replace("|", "\\|").replace("\r", " ").replace("\n", " ") for cell in row]


# -- fits -------------------------------------------------------------------------------------


def fit_slopes(points: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Log-log slopes of cycle p50 and p99 against the node count, per series with at least
    ``MIN_FIT_NODE_COUNTS`` node counts (failed points and null figures left out)."""
    groups: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
    for point in _ok(points):
        groups.setdefault(_series(point), []).append(point)
    fits = []
    for (workload, mode, scheduler, percentage), members in groups.items():
        for metric, key in (("cycle_ms_p50", "p50"), ("cycle_ms_p99", "p99")):
            pairs = [(point["nodes"], value) for point in members
                     if (value := _figure(point, "cycle_ms", key)) is not None and value > 0 and point["nodes"] > 0]
            nodes = sorted({n for n, _ in pairs})
            if len(nodes) < MIN_FIT_NODE_COUNTS:
                continue
            slope, r2 = _loglog_fit([n for n, _ in pairs], [v for _, v in pairs])
            fits.append({"workload": workload, "mode": mode, "scheduler": scheduler, "percentage": percentage,
                         "metric": metric, "slope": round(slope, 3), "r2": round(r2, 3), "nodes": nodes})
    return fits


def _loglog_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Slope and r² of the least-squares line through (log x, log y)."""
    x, y = np.log(np.asarray(xs, dtype=float)), np.log(np.asarray(ys, dtype=float))
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(np.sum((y - (slope * x + intercept)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    return float(slope), 1.0 - residual / total if total > 0 else 1.0


def _fits(result: dict[str, Any]) -> list[dict[str, Any]]:
    fits = result.get("fits")
    return fits if isinstance(fits, list) else fit_slopes(result.get("points", []))


# -- the terminal table -----------------------------------------------------------------------


def render_table(result: dict[str, Any]) -> str:
    """The terminal table: points, extension points, fits, end-to-end ratios, failed points."""
    points = result.get("points", [])
    sections = [
        ("Points (cycle ms; pods/s sustained and per-second samples; peak RSS)"
         + (f"; in process the run with the median cycle p50 of {_repeats(points)}" if _repeats(points) else ""),
         _points_table(points)),
        ("Mean ms per extension point", _extension_point_table(points)),
        (f"The {TOP_PLUGINS} slowest plugins per point (mean ms per call, from the 10% of cycles sampled)",
         _plugins_table(points)),
        ("Cycle cost against node count (slope of log cycle ms on log nodes: 0 flat, 1 linear)",
         _fits_table(_fits(result))),
        ("End to end, scorer / kube-scheduler on the same control plane"
         + (f"; each point the run with the median pods/s of {_repeats(points, 'e2e')}, run in rounds"
            if _repeats(points, "e2e") else ""), _e2e_table(points)),
        ("End to end, where each scheduler's CPU goes (ms of its process's CPU per bound pod: in all, start-up "
         "included; from the first bind on; the scheduling algorithm's share of the latter; seconds to the first "
         "bind; kube-apiserver's and etcd's CPU per bound pod meanwhile; the share of the machine's cores busy; the "
         "last Scheduled Event, seconds after the last bind: the CPU is read once the bound pods have theirs)",
         _e2e_cpu_table(points)),
        ("End to end, where scorer's start goes (seconds from the start of its code to its modules loaded, its "
         "service built and every first list delivered; then its first bind and kube-scheduler's, seconds after "
         "the process start)", _e2e_start_table(points)),
        ("End to end, kube-scheduler with scorer as its extender / kube-scheduler alone on the same control plane "
         "(scorer's mean ms per request; the stand-in extender answers at once: the protocol's own cost)",
         _extender_table(points)),
        ("Failed points", _errors_table(points)),
        ("The machine (the best of 5 runs of a fixed pure-Python loop, 300,000 dict updates: one core's speed "
         "for Python, lower is faster; the figures of two machines compare through it)", _machine_lines(result)),
    ]
    return "\n\n".join("\n".join([title, "", *lines]) for title, lines in sections if lines)


def _machine_lines(result: dict[str, Any]) -> list[str]:
    machine = result.get("machine")
    if not isinstance(machine, dict) or (loop := _number(machine.get("python_loop_ms"))) is None:
        return []
    cpus = _number(machine.get("cpus"))
    parts = [str(machine.get("cpu_model") or "CPU model unknown"),
             f"{cpus:.0f} CPUs" if cpus is not None else "CPUs unknown", f"Python loop {loop:.1f} ms"]
    return [", ".join(parts)]


#: What ``python_loop_ms`` measures differs from run to run on one machine: not a reason to call it another.
_RUN_DEPENDENT_MACHINE_FIELDS = ("python_loop_ms",)


def _machine_identity(result: dict[str, Any]) -> Any:
    machine = result.get("machine")
    if not isinstance(machine, dict):
        return machine
    return {key: value for key, value in machine.items() if key not in _RUN_DEPENDENT_MACHINE_FIELDS}


def _repeats(points: list[dict[str, Any]], mode: str = "in-process") -> int:
    """How many runs ``--repeat`` made of each point of ``mode`` (0: one)."""
    return max((int(p["repeats"]["runs"]) for p in points
                if p.get("mode") == mode and isinstance(p.get("repeats"), dict)), default=0)


def _points_table(points: list[dict[str, Any]]) -> list[str]:
    headers = ("workload", "mode", "nodes", "pct", "bound/pods", "p50", "p90", "p99", "max",
               "pods/s", "s p50", "s p90", "s p99", "RSS MB", "B/node", "B/pod")
    rows = []
    for point in points:
        bound, pods = point.get("bound"), point.get("pods")
        rows.append([
            point["workload"], _mode(point), f"{point['nodes']:,}", _pct(point["percentage"]),
            f"{_whole(_number(bound))}/{_whole(_number(pods))}",
            *(_ms(_figure(point, "cycle_ms", key)) for key in ("p50", "p90", "p99", "max")),
            *(_whole(_figure(point, "throughput", key)) for key in ("pods_per_second", "p50", "p90", "p99")),
            *(_whole(_figure(point, "memory", key)) for key in ("peak_rss_mb", "bytes_per_node", "bytes_per_pod")),
        ])
    return _table(headers, rows, right_from=2) if rows else []


def _extension_point_table(points: list[dict[str, Any]]) -> list[str]:
    with_figures = [p for p in points if isinstance(p.get("extension_points_ms"), dict) and p["extension_points_ms"]]
    seen = {name for p in with_figures for name in p["extension_points_ms"]}
    names = [name for name in EXTENSION_POINTS if name in seen] + sorted(seen.difference(EXTENSION_POINTS))
    rows = []
    for point in with_figures:
        means = point["extension_points_ms"]
        rows.append([point["workload"], _mode(point), f"{point['nodes']:,}", _pct(point["percentage"]),
                     *(_ms(_figure(means, name, "mean")) for name in names)])
    return _table(("workload", "mode", "nodes", "pct", *names), rows, right_from=2) if rows else []


def _plugins_table(points: list[dict[str, Any]]) -> list[str]:
    rows = []
    for point in points:
        means = point.get("plugins_ms")
        if not isinstance(means, dict):
            continue
        timed = sorted(((mean, name) for name in means if (mean := _figure(means, name, "mean")) is not None),
                       reverse=True)[:TOP_PLUGINS]
        if timed:
            rows.append([point["workload"], _mode(point), f"{point['nodes']:,}", _pct(point["percentage"]),
                         ", ".join(f"{name} {mean:.3f}" for mean, name in timed)])
    return _table(("workload", "mode", "nodes", "pct", "plugins"), rows) if rows else []


def _fits_table(fits: list[dict[str, Any]]) -> list[str]:
    rows = [[fit["workload"], _mode(fit), _pct(fit["percentage"]), fit["metric"], f"{fit['slope']:.3f}",
             f"{fit['r2']:.3f}", f"{fit['nodes'][0]:,}-{fit['nodes'][-1]:,} ({len(fit['nodes'])})"] for fit in fits]
    return _table(("workload", "mode", "pct", "metric", "slope", "r2", "nodes (counts)"), rows,
                  right_from=4) if rows else []


@attrs.frozen(slots=True)
class _E2EPair:
    """Two end-to-end points of one workload at one size: ``measured`` (scorer, or kube-scheduler with scorer
    as its extender) and ``kube`` (kube-scheduler alone)."""

    workload: str
    nodes: int
    percentage: int
    measured: dict[str, Any]
    kube: dict[str, Any]


def _e2e_pairs(points: list[dict[str, Any]], scheduler: str = SCORER) -> list[_E2EPair]:
    """The pairs of ``scheduler``'s end-to-end point and kube-scheduler's (alone) at the same workload,
    size and percentage, both without an error."""
    by_key: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}
    for point in _ok(points):
        if point["mode"] == "e2e":
            key = (point["workload"], point["nodes"], point["percentage"])
            by_key.setdefault(key, {})[point["scheduler"]] = point
    return [_E2EPair(workload, nodes, percentage, found[scheduler], found[KUBE])
            for (workload, nodes, percentage), found in by_key.items()
            if scheduler in found and KUBE in found]


def _e2e_table(points: list[dict[str, Any]]) -> list[str]:
    rows = []
    for pair in _e2e_pairs(points):
        figures = [(_figure(pair.measured, section, key), _figure(pair.kube, section, key))
                   for section, key in (("throughput", "pods_per_second"), ("cycle_ms", "p50"),
                                        ("memory", "peak_rss_mb"))]
        (pods_s, pods_k), (p50_s, p50_k), (rss_s, rss_k) = figures
        rows.append([pair.workload, f"{pair.nodes:,}", _pct(pair.percentage),
                     _whole(pods_s), _whole(pods_k), _ratio(pods_s, pods_k),
                     _ms(p50_s), _ms(p50_k), _ratio(p50_s, p50_k),
                     _whole(rss_s), _whole(rss_k), _ratio(rss_s, rss_k)])
    headers = ("workload", "nodes", "pct", "scorer pods/s", "kube pods/s", "ratio", "scorer p50 ms",
               "kube p50 ms", "ratio", "scorer RSS MB", "kube RSS MB", "ratio")
    return _table(headers, rows, right_from=1) if rows else []


def _e2e_cpu_table(points: list[dict[str, Any]]) -> list[str]:
    rows = []
    for pair in _e2e_pairs(points):
        row = [pair.workload, f"{pair.nodes:,}", _pct(pair.percentage)]
        for point in (pair.measured, pair.kube):
            share = _figure(point, "cpu_per_pod", "cycle_share")
            first = _figure(point, "throughput", "first_bind_after_start_s")
            busy = _figure(point, "cpu_per_pod", "machine_busy")
            events = _figure(point, "events", "last_after_last_bind_s")
            row += [_ms(_figure(point, "cpu_per_pod", "ms")), _ms(_figure(point, "cpu_per_pod", "ms_after_first_bind")),
                    "-" if share is None else f"{share:.0%}", _seconds(first),
                    _ms(_figure(point, "cpu_per_pod", "control_plane_ms")), "-" if busy is None else f"{busy:.0%}",
                    _seconds(events)]
        rows.append(row)
    headers = ("workload", "nodes", "pct", "scorer ms/pod", "after 1st bind", "in cycle", "1st bind s",
               "API+etcd ms/pod", "busy", "Events s", "kube ms/pod", "after 1st bind", "in cycle", "1st bind s",
               "API+etcd ms/pod", "busy", "Events s")
    return _table(headers, rows, right_from=1) if any(cell != "-" for row in rows for cell in row[3:]) else []


def _e2e_start_table(points: list[dict[str, Any]]) -> list[str]:
    rows = []
    for pair in _e2e_pairs(points):
        phases = [_figure(pair.measured, "startup_s", phase) for phase in startup.PHASES]
        if all(value is None for value in phases):
            continue
        firsts = [_figure(point, "throughput", "first_bind_after_start_s") for point in (pair.measured, pair.kube)]
        rows.append([pair.workload, f"{pair.nodes:,}", _pct(pair.percentage),
                     *(_seconds(value) for value in (*phases, *firsts))])
    headers = ("workload", "nodes", "pct", *startup.PHASES, "scorer 1st bind", "kube 1st bind")
    return _table(headers, rows, right_from=1) if rows else []


def _extender(point: dict[str, Any], key: str, verb: str) -> float | None:
    """``point["extender"][key][verb]`` (scorer's figures as kube-scheduler's extender), None when absent."""
    section = point.get("extender")
    return _figure(section, key, verb) if isinstance(section, dict) else None


def _stand_in(points: list[dict[str, Any]], beside: dict[str, Any]) -> dict[str, Any] | None:
    """The stand-in extender's point beside the point ``beside`` (same workload, size and percentage), if it
    ran well."""
    key = ("e2e", STAND_IN, beside["workload"], beside["nodes"], beside["percentage"])
    return next((p for p in _ok(points) if (p["mode"], p["scheduler"], p["workload"], p["nodes"], p["percentage"])
                 == key), None)


def _extender_table(points: list[dict[str, Any]]) -> list[str]:
    rows = []
    for pair in _e2e_pairs(points, EXTENDER):
        extended, alone = pair.measured, pair.kube
        scorer = extended["extender"] if isinstance(extended.get("extender"), dict) else {}
        pods_x, pods_k = (_figure(p, "throughput", "pods_per_second") for p in (extended, alone))
        pods_null = _figure(_stand_in(points, pair.measured), "throughput", "pods_per_second")
        rows.append([pair.workload, f"{pair.nodes:,}", _pct(pair.percentage),
                     _whole(pods_x), _whole(pods_k), _ratio(pods_x, pods_k), _whole(pods_null),
                     _ratio(pods_null, pods_k),
                     *(_ms(_figure(p, "cycle_ms", "p50")) for p in (extended, alone)),
                     *(_ms(_extender(extended, "mean_ms", verb)) for verb in ("filter", "prioritize")),
                     _whole(_number(scorer.get("errors"))),
                     *(_whole(_figure(p, "memory", "peak_rss_mb")) for p in (extended, alone)),
                     _whole(_number(scorer.get("peak_rss_mb")))])
    headers = ("workload", "nodes", "pct", "with extender pods/s", "alone pods/s", "ratio", "stand-in pods/s",
               "stand-in ratio", "with extender p50 ms",
               "alone p50 ms", "filter ms", "prioritize ms", "failed requests", "kube RSS MB with",
               "kube RSS MB alone", "scorer RSS MB")
    return _table(headers, rows, right_from=1) if rows else []


def _errors_table(points: list[dict[str, Any]]) -> list[str]:
    rows = [[p["workload"], _mode(p), f"{p['nodes']:,}", _pct(p["percentage"]), str(p["error"])]
            for p in points if p.get("error")]
    return _table(("workload", "mode", "nodes", "pct", "error"), rows) if rows else []


# -- the capacity-planning summary ------------------------------------------------------------


def summary(result: dict[str, Any]) -> list[str]:
    """The capacity-planning summary in plain words, then the issue's targets against the points."""
    points = result.get("points", [])
    fits = _fits(result)
    lines: list[str] = []
    series = _in_process_series(points)
    for workload, members in _in_process_workloads(points).items():  # a workload's lines together
        for series_members in (m for (name, _, _), m in series.items() if name == workload):
            lines.extend(_series_lines(series_members, fits))
        lines.extend(_memory_lines(workload, members))
    for pair in _e2e_pairs(points):
        lines.extend(_e2e_lines(pair))
    for pair in _e2e_pairs(points, EXTENDER):
        lines.extend(_extender_lines(pair, _stand_in(points, pair.measured)))
    return lines + _target_lines(points)


def _in_process_series(points: list[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    series: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for point in _ok(points):
        if point["mode"] == "in-process":
            series.setdefault((point["workload"], point["profile"], point["percentage"]), []).append(point)
    return series


def _in_process_workloads(points: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    workloads: dict[str, list[dict[str, Any]]] = {}
    for point in _ok(points):
        if point["mode"] == "in-process":
            workloads.setdefault(point["workload"], []).append(point)
    return workloads


def _headline(members: list[dict[str, Any]]) -> dict[str, Any]:
    """The point at ``HEADLINE_NODES`` nodes if measured, else the largest."""
    at = [p for p in members if p["nodes"] == HEADLINE_NODES]
    return at[0] if at else max(members, key=lambda p: p["nodes"])


def _series_lines(members: list[dict[str, Any]], fits: list[dict[str, Any]]) -> list[str]:
    point = _headline(members)
    figures = []
    pods_per_second = _figure(point, "throughput", "pods_per_second")
    if pods_per_second is not None:
        figures.append(f"{pods_per_second:,.0f} pods/s sustained")
    for key in ("p50", "p99"):
        if (value := _figure(point, "cycle_ms", key)) is not None:
            figures.append(f"cycle {key} {value:.2f} ms")
    if (rss := _figure(point, "memory", "peak_rss_mb")) is not None:
        figures.append(f"{rss:,.0f} MB peak")
    unscheduled, pods = _number(point.get("unscheduled")), _number(point.get("pods"))
    if unscheduled and pods:
        figures.append(f"{unscheduled:,.0f} of {pods:,.0f} pods left unscheduled")
    lines = []
    if figures:
        lines.append(f"At {point['nodes']:,} nodes with {_profile_words(point['profile'])} "
                     f"(workload {point['workload']}, {_pct(point['percentage'])}): {', '.join(figures)}.")
    fit = next((f for f in fits if f["metric"] == "cycle_ms_p50" and f["mode"] == "in-process"
                and (f["workload"], f["percentage"]) == (point["workload"], point["percentage"])), None)
    if fit is not None:
        growth = 2 ** fit["slope"] - 1
        lines.append(f"When the cluster doubles from {point['nodes']:,} to {2 * point['nodes']:,} nodes the cycle "
                     f"p50 {'grows' if growth >= 0 else 'falls'} by {abs(growth):.0%} (workload {point['workload']}, "
                     f"{_pct(point['percentage'])}; log-log slope {fit['slope']:.2f}, r² {fit['r2']:.2f}, over "
                     f"{fit['nodes'][0]:,}-{fit['nodes'][-1]:,} nodes).")
    return lines


def _memory_lines(workload: str, members: list[dict[str, Any]]) -> list[str]:
    """The largest cluster of this workload's shape within ``MEMORY_BUDGET_MB`` of peak RSS: a line
    through the largest measured point, with the growth of peak RSS per node (see ``_growth``)."""
    peaks: dict[int, float] = {}  # the highest peak at each node count (percentages may differ)
    for point in members:
        if (peak := _figure(point, "memory", "peak_rss_mb")) is not None:
            peaks[point["nodes"]] = max(peak, peaks.get(point["nodes"], 0.0))
    if not peaks:
        return []
    nodes = max(peaks)
    point = next(p for p in members if p["nodes"] == nodes)
    growth = _growth(peaks, point)
    if growth is None:
        return []
    mb_per_node, basis = growth
    fixed = peaks[nodes] - nodes * mb_per_node  # imports, the measured pods, the scheduling's own
    largest = _round_significant((MEMORY_BUDGET_MB - fixed) / mb_per_node)
    if largest <= 0:
        return [f"Memory (workload {workload}): {fixed:,.0f} MB before any node: no cluster fits in "
                f"{MEMORY_BUDGET_MB:,.0f} MB."]
    pods_per_node = (_number(point.get("init_pods")) or 0.0) / nodes
    shape = (f"{pods_per_node:.3g} existing pod{'' if pods_per_node == 1 else 's'} per node" if pods_per_node
             else "no existing pods")
    heading = f"The largest cluster within {MEMORY_BUDGET_MB / 1024:.0f} GB (workload {workload}, {shape}):"
    measured = f"{nodes:,} nodes at {peaks[nodes]:,.0f} MB peak; {basis}"
    if largest > MAX_EXTRAPOLATION * nodes:
        return [f"{heading} more than {MAX_EXTRAPOLATION * nodes:,} nodes (over {MAX_EXTRAPOLATION}x the largest "
                f"measured, {measured}: too far to extrapolate; measure larger clusters)."]
    how = "within the measured range, up to" if largest <= nodes else "extrapolated: measured up to"
    return [f"{heading} about {largest:,} nodes ({how} {measured})."]


def _growth(peaks: dict[int, float], point: dict[str, Any]) -> tuple[float, str] | None:
    """MB of peak RSS per node (with its pods) and how it was found: between the two largest node
    counts measured (everything that grows with the cluster: the cache, the objects as decoded, the
    cycle's tables), else from the largest point's RSS growth as its nodes and pods were added (a
    lower bound: the scheduling's own growth is not in it)."""
    sizes = sorted(peaks)
    if len(sizes) >= 2 and (rise := peaks[sizes[-1]] - peaks[sizes[-2]]) > 0:
        mb_per_node = rise / (sizes[-1] - sizes[-2])
        return mb_per_node, (f"{mb_per_node * MiB:,.0f} bytes per node with its pods, from the peak's growth over "
                             f"{sizes[-2]:,}-{sizes[-1]:,} nodes")
    per_node, per_pod = _figure(point, "memory", "bytes_per_node"), _figure(point, "memory", "bytes_per_pod")
    if per_node is None:
        return None
    pods_per_node = (_number(point.get("init_pods")) or 0.0) / point["nodes"]
    mb = (per_node + pods_per_node * (per_pod or 0.0)) / MiB
    per_pod_text = "per pod not measured" if per_pod is None else f"{per_pod:,.0f} per pod"
    return (mb, f"{per_node:,.0f} bytes per node, {per_pod_text}, as they were added") if mb > 0 else None


def _round_significant(value: float, digits: int = 2) -> int:
    if value <= 0:
        return 0
    return int(round(value, digits - 1 - int(math.floor(math.log10(value)))))


def _e2e_lines(pair: _E2EPair) -> list[str]:
    ours, theirs = _figure(pair.measured, "throughput", "pods_per_second"), _figure(pair.kube, "throughput",
                                                                                     "pods_per_second")
    if ours is None or theirs is None:
        return []
    return [f"End to end at {pair.nodes:,} nodes (workload {pair.workload}, {_pct(pair.percentage)}): "
            f"scorer {ours:,.0f} pods/s, kube-scheduler {theirs:,.0f} pods/s ({_ratio(ours, theirs)})."]


def _extender_lines(pair: _E2EPair, stand_in: dict[str, Any] | None = None) -> list[str]:
    extended, alone = (_figure(point, "throughput", "pods_per_second") for point in (pair.measured, pair.kube))
    if extended is None or alone is None or alone <= 0:
        return []
    line = (f"End to end at {pair.nodes:,} nodes (workload {pair.workload}, {_pct(pair.percentage)}): kube-scheduler "
            f"with scorer as its extender {extended:,.0f} pods/s, kube-scheduler alone {alone:,.0f} pods/s "
            f"({extended / alone:.0%} of it)")
    filter_ms, prioritize_ms = (_extender(pair.measured, "mean_ms", verb) for verb in ("filter", "prioritize"))
    if filter_ms is not None and prioritize_ms is not None:
        line += f"; scorer answered filter in {filter_ms:.2f} ms and prioritize in {prioritize_ms:.2f} ms on average"
    null = _figure(stand_in, "throughput", "pods_per_second")
    if null is not None:
        line += (f"; with the stand-in extender, which answers at once, {null:,.0f} pods/s ({null / alone:.0%}): "
                 "the extender protocol's own cost on this machine")
    return [line + "."]


@attrs.frozen(slots=True)
class _Target:
    """One target of the issue: a figure of one point against a bound."""

    text: str
    bound: float
    at_most: bool  # else at least
    unit: str

    def verdict(self, value: float) -> str:
        shown = self._show(value)
        if (value <= self.bound) if self.at_most else (value >= self.bound):
            return f"target: {self.text}: met ({shown})"
        gap = abs(value - self.bound)
        by = f"{100 * gap:.0f} percentage points" if self.unit == "%" else self._show(gap)
        return f"target: {self.text}: missed by {by} ({shown})"

    def _show(self, value: float) -> str:
        if self.unit == "%":  # a share: 0.6 is 60%
            return f"{value:.0%}"
        return f"{value:.3f} {self.unit}" if self.unit == "ms" else f"{value:,.0f} {self.unit}"


def _find(points: list[dict[str, Any]], workload: str, nodes: int, profile: str | None = None
          ) -> dict[str, Any] | None:
    """The in-process, adaptive-percentage point of a workload at a size (a failed one included)."""
    for point in points:
        if (point["workload"], point["nodes"], point["mode"], point["percentage"]) == (
                workload, nodes, "in-process", 0) and (profile is None or point["profile"] == profile):
            return point
    return None


def _check(target: _Target, point: dict[str, Any] | None, value: Callable[[dict[str, Any]], float | None]
           ) -> list[str]:
    if point is None:
        return []
    if point.get("error"):
        return [f"target: {target.text}: not measured ({point['error']})"]
    figure = value(point)
    return [] if figure is None else [target.verdict(figure)]


def _p50(point: dict[str, Any]) -> float | None:
    return _figure(point, "cycle_ms", "p50")


def _target_lines(points: list[dict[str, Any]]) -> list[str]:
    plain = _find(points, PLAIN, HEADLINE_NODES, profile="default")
    metrics = _find(points, METRICS, HEADLINE_NODES, profile="metrics")
    lines = [
        *_check(_Target("5,000 nodes, plain pods, default profile, cycle p50 <= 0.5 ms", 0.5, True, "ms"), plain, _p50),
        *_check(_Target("5,000 nodes, plain pods, default profile, cycle p99 <= 2 ms", 2.0, True, "ms"), plain,
                lambda p: _figure(p, "cycle_ms", "p99")),
        *_check(_Target("5,000 nodes, plain pods, at least 1,500 pods/s", 1500.0, False, "pods/s"), plain,
                lambda p: _figure(p, "throughput", "pods_per_second")),
        *_check(_Target("5,000 nodes, metric-driven profile, cycle p50 <= 0.65 ms", 0.65, True, "ms"), metrics, _p50),
    ]
    if plain is not None and not plain.get("error") and (base := _p50(plain)) is not None:
        lines += _check(_Target("5,000 nodes, the metric plugins add at most 0.15 ms to the cycle p50", 0.15, True,
                                "ms"), metrics, lambda p: None if (v := _p50(p)) is None else v - base)
    lines += _check(_Target("15,000 nodes, plain pods, cycle p50 <= 1 ms", 1.0, True, "ms"),
                    _find(points, PLAIN, 15_000, profile="default"), _p50)
    lines += _runs_line(_find(points, PLAIN, 50_000, profile="default"))
    dense = _find(points, DENSE, 15_000)
    if dense is not None:
        pods = (_number(dense.get("init_pods")) or 0) + (_number(dense.get("pods")) or 0)
        lines += _check(_Target(f"15,000 nodes and {pods:,.0f} pods (dense), peak RSS <= 1.5 GB", 1536.0, True, "MB"),
                        dense, lambda p: _figure(p, "memory", "peak_rss_mb"))
    for pair in _e2e_pairs(points):
        if pair.nodes in (500, 1000, 5000) and pair.percentage == 0:
            theirs = _figure(pair.kube, "throughput", "pods_per_second")
            if theirs is not None:
                target = _Target(f"end to end at {pair.nodes:,} nodes (workload {pair.workload}), at least "
                                 f"kube-scheduler's {theirs:,.0f} pods/s", theirs, False, "pods/s")
                lines += _check(target, pair.measured, lambda p: _figure(p, "throughput", "pods_per_second"))
    return lines + _round_targets(points) + _extender_targets(points)


def _runs(point: dict[str, Any], name: str, section: str, key: str) -> list[float | None]:
    """The figure of each run of ``point`` (``repeats[name]``, in the rounds' order), or the point's own
    (``point[section][key]``) when it ran once or a run failed (the runs no longer pair by round)."""
    repeats = point.get("repeats")
    if isinstance(repeats, dict) and not repeats.get("failed") and isinstance(repeats.get(name), list):
        return [_number(value) for value in repeats[name]]
    return [_figure(point, section, key)]


def _by_round(text: str, values: list[float | None], bound: float, at_most: bool, show: str) -> list[str]:
    """``target: <text>: met`` (one run) or ``met in k of n rounds``, with each value (``show`` formats one)."""
    known = [value for value in values if value is not None]
    if not known:
        return []
    met = sum((value <= bound) if at_most else (value >= bound) for value in known)
    shown = ", ".join(show.format(value) for value in known)
    if len(known) == 1:
        return [f"target: {text}: {'met' if met else 'missed'} ({shown})"]
    return [f"target: {text}: met in {met} of {len(known)} rounds ({shown})"]


def _ratios(ours: dict[str, Any], theirs: dict[str, Any], name: str, key: str) -> list[float | None]:
    """``ours`` over ``theirs`` in ``throughput[key]`` round by round (``repeats[name]``), else the two points'
    own figures (one ran once, or a run failed: the runs no longer pair by round)."""
    mine, other = _runs(ours, name, "throughput", key), _runs(theirs, name, "throughput", key)
    if len(mine) != len(other):
        mine, other = [_figure(ours, "throughput", key)], [_figure(theirs, "throughput", key)]
    return [a / b if a is not None and b else None for a, b in zip(mine, other, strict=True)]


def _round_targets(points: list[dict[str, Any]]) -> list[str]:
    """The end-to-end targets of plain pods (``ROUND_RATIO_TARGETS``, ``FIRST_BIND_TARGETS``,
    ``CPU_PER_POD_TARGET``) and of the extender against the stand-in (``STAND_IN_SHARE``), by round."""
    lines = []
    for pair in _e2e_pairs(points):
        if pair.workload != PLAIN or pair.percentage != 0:
            continue
        nodes, ours, theirs = pair.nodes, pair.measured, pair.kube
        where = f"end to end at {nodes:,} nodes (plain)"
        if nodes in ROUND_RATIO_TARGETS:
            for bound, name, what in zip(ROUND_RATIO_TARGETS[nodes],
                                         ("pods_per_second", "pods_per_second_from_start"),
                                         ("first bind to last", "from process start"), strict=True):
                ratios = _ratios(ours, theirs, name, name)
                lines += _by_round(f"{where}, scorer at least {bound:g}x kube-scheduler's pods/s, {what}", ratios,
                                   bound, False, "{:.2f}x")
        if nodes in FIRST_BIND_TARGETS:
            bound = FIRST_BIND_TARGETS[nodes]
            lines += _by_round(f"{where}, scorer's first bind at most {bound:g} s after its start",
                               _runs(ours, "first_bind_after_start_s", "throughput", "first_bind_after_start_s"),
                               bound, True, "{:.2f} s")
        bound, at = CPU_PER_POD_TARGET
        if nodes in at:
            lines += _by_round(f"{where}, scorer's CPU per bound pod (start-up included) at most {bound:g} ms",
                               _runs(ours, "cpu_ms_per_pod", "cpu_per_pod", "ms"), bound, True, "{:.2f} ms")
    share, at = STAND_IN_SHARE
    for pair in _e2e_pairs(points, EXTENDER):
        null = _stand_in(points, pair.measured)
        if pair.percentage != 0 or pair.nodes not in at or null is None:
            continue
        shares = _ratios(pair.measured, null, "pods_per_second", "pods_per_second")
        lines += _by_round(f"end to end at {pair.nodes:,} nodes (workload {pair.workload}), kube-scheduler with "
                           f"scorer as extender at least {share:.0%} of its pods/s with the stand-in", shares,
                           share, False, "{:.1%}")
    return lines


def _extender_targets(points: list[dict[str, Any]]) -> list[str]:
    """At ``EXTENDER_TARGET_NODES``: kube-scheduler with scorer as its extender against kube-scheduler alone
    (a failed point of either says so)."""
    lines = []
    for point in points:
        if (point["mode"], point["scheduler"], point["percentage"]) != ("e2e", EXTENDER, 0) or \
                point["nodes"] not in EXTENDER_TARGET_NODES:
            continue
        alone = next((p for p in points if (p["mode"], p["scheduler"], p["workload"], p["nodes"], p["percentage"])
                      == ("e2e", KUBE, point["workload"], point["nodes"], 0)), None)
        if alone is None:
            continue
        target = _Target(f"end to end, {point['nodes']:,} nodes (workload {point['workload']}): kube-scheduler with "
                         f"scorer as extender (nodeCacheCapable) at least {EXTENDER_SHARE:.0%} of kube-scheduler "
                         "alone", EXTENDER_SHARE, False, "%")
        theirs = _figure(alone, "throughput", "pods_per_second")
        if alone.get("error"):
            lines.append(f"target: {target.text}: not measured (kube-scheduler alone: {alone['error']})")
        elif theirs is not None and theirs > 0:
            lines += _check(target, point, _share_of(theirs))
            null = _figure(_stand_in(points, point), "throughput", "pods_per_second")
            if null is not None:  # what any extender can reach on this machine
                lines.append(f"  beside it, the stand-in extender (no work, two HTTP round trips per pod): "
                             f"{null / theirs:.0%} of kube-scheduler alone")
    return lines


def _share_of(base: float) -> Callable[[dict[str, Any]], float | None]:
    """A point's pods/s as a share of ``base`` pods/s."""
    def share(point: dict[str, Any]) -> float | None:
        value = _figure(point, "throughput", "pods_per_second")
        return None if value is None else value / base
    return share


def _runs_line(point: dict[str, Any] | None) -> list[str]:
    if point is None:
        return []
    if point.get("error"):
        return [f"target: 50,000 nodes, plain pods: runs: missed ({point['error']})"]
    p50, rss = _p50(point), _figure(point, "memory", "peak_rss_mb")
    pods_per_second = _figure(point, "throughput", "pods_per_second")
    return [f"target: 50,000 nodes, plain pods: runs: met (cycle p50 {_ms(p50)} ms, {_whole(pods_per_second)} "
            f"pods/s, {_whole(rss)} MB peak)"]


# -- --compare --------------------------------------------------------------------------------

_KEY_FIELDS = ("workload", "mode", "scheduler", "nodes", "percentage", "profile")


@attrs.frozen(slots=True)
class _Measure:
    """A compared figure: where it is in a point, and the words for a rise and for a fall."""

    name: str
    section: str
    key: str
    up: str
    down: str


MEASURES = (
    _Measure("cycle_p50_ms", "cycle_ms", "p50", "slower", "faster"),
    _Measure("cycle_p99_ms", "cycle_ms", "p99", "slower", "faster"),
    _Measure("pods_per_second", "throughput", "pods_per_second", "faster", "slower"),
    _Measure("peak_rss_mb", "memory", "peak_rss_mb", "more memory", "less memory"),
)


def _key(point: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(point.get(field) for field in _KEY_FIELDS)


def compare(result: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Each point of ``result`` against the baseline's point of the same workload, mode, scheduler,
    nodes, percentage and profile: relative change of cycle p50/p99, pods/s and peak RSS, and a verdict
    that names a change only when it is beyond both runs' measured noise and ``NOISE_FLOOR``."""
    check_result(baseline, "the baseline")
    base_points = {_key(point): point for point in baseline["points"]}
    new_points = {_key(point): point for point in result.get("points", [])}
    rows = []
    for key, point in new_points.items():
        old = base_points.get(key)
        if old is not None:
            rows.append(_compare_point(point, old))
    return {
        "baseline": {field: baseline.get(field) for field in ("created", "scorer_version", "machine")},
        "machine_differs": _machine_identity(baseline) != _machine_identity(result),
        "floor": NOISE_FLOOR,
        "points": rows,
        "only_in_result": [dict(zip(_KEY_FIELDS, key, strict=True)) for key in new_points if key not in base_points],
        "only_in_baseline": [dict(zip(_KEY_FIELDS, key, strict=True)) for key in base_points if key not in new_points],
    }


def _compare_point(point: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {field: point.get(field) for field in _KEY_FIELDS}
    error = point.get("error") or old.get("error")
    row["error"] = error or None
    cycle_noise = max(_spread(_numbers(point, "cycle_ms", "blocks_p50")),
                      _spread(_numbers(old, "cycle_ms", "blocks_p50")),
                      _spread(_numbers(point, "repeats", "cycle_p50_ms")),  # --repeat: the runs' own spread
                      _spread(_numbers(old, "repeats", "cycle_p50_ms")))
    noise = {
        "cycle_p50_ms": cycle_noise,
        "cycle_p99_ms": P99_NOISE_FACTOR * cycle_noise,
        "pods_per_second": _throughput_noise(point, old, cycle_noise),
        "peak_rss_mb": 0.0,
    }
    row["figures"] = {measure.name: _compare_figure(measure, point, old, noise[measure.name], bool(error))
                      for measure in MEASURES}
    return row


def _spread(values: list[float]) -> float:
    """Relative spread (max - min) / median; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    median = float(np.median(values))
    return (max(values) - min(values)) / median if median > 0 else 0.0


def _throughput_noise(point: dict[str, Any], old: dict[str, Any], cycle_noise: float) -> float:
    """The per-second samples' relative spread (p10 to p90 over the median) when both runs have at
    least three samples, else the cycle's noise (a short run has no whole seconds to sample)."""
    spreads = []
    for run in (point, old):
        samples = _numbers(run, "throughput", "samples")
        if len(samples) < 3:
            return cycle_noise
        p10, p50, p90 = np.percentile(samples, [10, 50, 90])
        spreads.append(float((p90 - p10) / p50) if p50 > 0 else 0.0)
    return max(spreads)


def _compare_figure(measure: _Measure, point: dict[str, Any], old: dict[str, Any], noise: float,
                    failed: bool) -> dict[str, Any]:
    before, after = _figure(old, measure.section, measure.key), _figure(point, measure.section, measure.key)
    threshold = max(noise, NOISE_FLOOR)
    figure: dict[str, Any] = {"baseline": before, "result": after, "change": None,
                              "noise": round(threshold, 4), "verdict": "n/a"}
    if failed or before is None or after is None or before <= 0:
        return figure
    change = after / before - 1
    figure["change"] = round(change, 4)
    if abs(change) <= threshold:
        figure["verdict"] = "within noise"
    else:
        figure["verdict"] = measure.up if change > 0 else measure.down
    return figure


def render_compare(cmp: dict[str, Any]) -> str:
    """``compare``'s result as a table: baseline -> this run (change) and the verdict per figure."""
    lines = [_compare_heading(cmp)]
    rows = []
    for row in cmp["points"]:
        cells = [row["workload"], _mode(row), f"{row['nodes']:,}", _pct(row["percentage"])]
        for measure in MEASURES:
            cells.append(_compare_cell(measure.name, row["figures"][measure.name]))
        rows.append(cells)
    if rows:
        lines += ["", *_table(("workload", "mode", "nodes", "pct", "cycle p50 ms", "cycle p99 ms", "pods/s",
                               "peak RSS MB"), rows)]
    verdicts = [figure["verdict"] for row in cmp["points"] for figure in row["figures"].values()]
    counts = {verdict: verdicts.count(verdict) for verdict in dict.fromkeys(verdicts)}
    if counts:
        lines += ["", "Figures: " + ", ".join(f"{count} {verdict}" for verdict, count in counts.items()) + "."]
    for key, words in (("only_in_result", "Only in this run"), ("only_in_baseline", "Only in the baseline")):
        if cmp[key]:
            names = "; ".join(f"{k['workload']} {_mode(k)} {k['nodes']:,} nodes {_pct(k['percentage'])}"
                              for k in cmp[key])
            lines.append(f"{words}: {names}.")
    errors = [row for row in cmp["points"] if row["error"]]
    for row in errors:
        lines.append(f"Not compared, a run failed: {row['workload']} {_mode(row)} {row['nodes']:,} nodes: "
                     f"{row['error']}")
    return "\n".join(lines)


def _compare_heading(cmp: dict[str, Any]) -> str:
    base = cmp["baseline"]
    heading = (f"Against the baseline of {base.get('created') or 'unknown date'} (scorer "
               f"{base.get('scorer_version') or 'unknown'}); a change is marked beyond the noise both runs "
               f"measured and at least {cmp['floor']:.0%}")
    if cmp["machine_differs"]:
        heading += "; the baseline ran on another machine: differences include the machine's"
    return heading + "."


def _compare_cell(name: str, figure: dict[str, Any]) -> str:
    show = _ms if name.startswith("cycle") else _whole
    if figure["change"] is None:
        return f"{show(figure['baseline'])} -> {show(figure['result'])}"
    text = f"{show(figure['baseline'])} -> {show(figure['result'])} ({figure['change']:+.1%})"
    return text if figure["verdict"] == "within noise" else f"{text} {figure['verdict'].upper()}"
