"""The bench's PNG plots: latency, throughput and memory against the node count.

``write_plots(result, out_dir)`` draws from the result JSON (``scorer.bench.spec``):

- ``latency.png``: cycle p50 (solid) and p99 (dashed) against nodes, log-log,
  one colour per series (workload, and the percentage when not adaptive);
- ``throughput.png``: sustained pods/s against nodes (log-log), one line per series;
  end-to-end points are their own lines ("e2e scorer: plain", "e2e
  kube-scheduler: plain") with distinct markers;
- ``memory.png``: peak RSS against nodes.

A plot with no figures to draw is not written. matplotlib is an optional
extra (``pip install 'scorer[bench]'``): it is imported only here, inside
``write_plots``, with its object-oriented API and the Agg renderer (no pyplot,
no display, no global state); without it ``PlotsUnavailable`` says what to install.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from scorer.bench.resultfile import ResultFileError
from scorer.errors import ScorerError

FIGURE_SIZE = (9.0, 5.0)
DPI = 110
KUBE_GREYS = ("0.15", "0.45", "0.65")  # kube-scheduler's lines, apart from every scorer hue
# Markers per mode/scheduler, so end-to-end lines read apart from in-process ones in black and white too.
MARKERS = {("in-process", "scorer"): "o", ("e2e", "scorer"): "s", ("e2e", "kube-scheduler"): "^",
           ("e2e", "kube-scheduler+scorer"): "D"}


class PlotsUnavailable(ScorerError):
    """matplotlib cannot be imported: the plots need the ``bench`` extra."""


SeriesKey = tuple[str, str, str, int]  # workload, mode, scheduler, percentage
Series = dict[SeriesKey, list[dict[str, Any]]]
Colours = dict[SeriesKey, Any]


def write_plots(result: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the plots that have data into ``out_dir`` (created); return their paths.
    ``ResultFileError`` when a file cannot be written there."""
    try:
        from matplotlib import colormaps
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter, NullLocator
    except ImportError as error:
        raise PlotsUnavailable(f"the plots need matplotlib ({error}): pip install 'scorer[bench]'") from None
    directory = Path(out_dir)
    series = _series(result.get("points", []))
    colours = _colours(series, colormaps["tab20"])
    node_counts = sorted({point["nodes"] for members in series.values() for point in members})
    plain_numbers = FuncFormatter(lambda value, _: f"{value:,.10g}")
    plots = (("latency.png", "Scheduling cycle against node count", _latency),
             ("throughput.png", "Throughput against node count", _throughput),
             ("memory.png", "Peak memory against node count", _memory))
    written = []
    for name, heading, draw in plots:
        figure = Figure(figsize=FIGURE_SIZE, dpi=DPI)
        axes = figure.add_subplot()
        if not draw(axes, series, colours):
            continue
        axes.set_xscale("log")
        axes.set_xticks(node_counts, [f"{n:,}" for n in node_counts], fontsize="small")
        axes.xaxis.set_minor_locator(NullLocator())
        axes.yaxis.set_major_formatter(plain_numbers)
        axes.set_xlabel("nodes")
        axes.grid(True, which="both", alpha=0.3)
        axes.set_title(f"{heading}: {_title(result)}", fontsize="medium")
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
        written.append(_save(figure, directory / name))
    return written


def _save(figure: Any, path: Path) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, bbox_inches="tight")
    except OSError as error:
        raise ResultFileError(f"{path.parent}: cannot write {path.name}: {error.strerror or error}") from None
    return path


def _series(points: list[dict[str, Any]]) -> Series:
    """Points without an error, by (workload, mode, scheduler, percentage), each sorted by nodes."""
    series: Series = {}
    for point in points:
        if not point.get("error"):
            key = (point["workload"], point["mode"], point["scheduler"], point["percentage"])
            series.setdefault(key, []).append(point)
    for members in series.values():
        members.sort(key=lambda point: point["nodes"])
    return series


def _title(result: dict[str, Any]) -> str:
    """``scorer 0.1.0\n<cpu model>, 2 CPUs``: the version and the machine the figures are from."""
    machine = result.get("machine")
    machine = machine if isinstance(machine, dict) else {}
    cpus = machine.get("cpus")
    where = ", ".join(str(part) for part in (machine.get("cpu_model"), f"{cpus} CPUs" if cpus else None) if part)
    return f"scorer {result.get('scorer_version') or 'version unknown'}\n{where or 'machine unknown'}"


def _colours(series: Series, palette: Any) -> Colours:
    """The same colours in every plot: a hue per workload for scorer (tab20's dark shade at the
    adaptive percentage, its light shade at another), greys for kube-scheduler."""
    hues: dict[str, int] = {}
    colours: Colours = {}
    for key in series:
        workload, _, scheduler, percentage = key
        hue = hues.setdefault(workload, len(hues) % 10)
        if scheduler == "scorer":
            colours[key] = palette(2 * hue + int(percentage != 0))
        else:
            colours[key] = KUBE_GREYS[sum(1 for other in colours if other[2] != "scorer") % len(KUBE_GREYS)]
    return colours


def _label(key: SeriesKey) -> str:
    workload, mode, scheduler, percentage = key
    name = workload if percentage == 0 else f"{workload} {percentage}%"
    return name if mode == "in-process" else f"{mode} {scheduler}: {name}"


def _values(members: list[dict[str, Any]], section: str, key: str) -> tuple[list[int], list[float]]:
    pairs = [(point["nodes"], value) for point in members
             if isinstance(value := (point.get(section) or {}).get(key), (int, float))
             and not isinstance(value, bool) and value > 0]
    return [nodes for nodes, _ in pairs], [value for _, value in pairs]


def _lines(axes: Any, series: Series, colours: Colours, section: str, key: str, style: str = "-",
           legend: bool = True) -> int:
    """One line per series with figures; the colour follows the series, the marker its mode."""
    drawn = 0
    for series_key, members in series.items():
        nodes, values = _values(members, section, key)
        if not nodes:
            continue
        axes.plot(nodes, values, style, marker=MARKERS.get(series_key[1:3], "o"), markersize=4,
                  color=colours[series_key], label=_label(series_key) if legend else "_nolegend_")
        drawn += 1
    return drawn


def _latency(axes: Any, series: Series, colours: Colours) -> int:
    drawn = _lines(axes, series, colours, "cycle_ms", "p50", "-")
    drawn += _lines(axes, series, colours, "cycle_ms", "p99", "--", legend=False)
    axes.set_yscale("log")
    axes.set_ylabel("scheduling cycle, ms (p50 solid, p99 dashed)")
    return drawn


def _throughput(axes: Any, series: Series, colours: Colours) -> int:
    drawn = _lines(axes, series, colours, "throughput", "pods_per_second")
    axes.set_yscale("log")  # preemption's tens of pods/s and plain pods' thousands on one plot
    axes.set_ylabel("pods/s sustained")
    return drawn


def _memory(axes: Any, series: Series, colours: Colours) -> int:
    drawn = _lines(axes, series, colours, "memory", "peak_rss_mb")
    axes.set_ylabel("peak RSS, MB")
    axes.set_ylim(bottom=0)
    return drawn
