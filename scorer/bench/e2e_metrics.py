"""What the end-to-end bench reads of the processes it runs (``scorer.bench.e2e``): CPU seconds and memory
from ``/proc``, and the schedulers' ``/metrics`` as the point's figures.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
from prometheus_client.parser import text_string_to_metric_families

from scorer.bench.e2e_api import (
    Api,
)
from scorer.bench.runner import histogram_quantile
from scorer.extender.http import VERBS

ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"
ATTEMPT = ("scheduler_scheduling_attempt_duration_seconds", "scheduler_e2e_scheduling_duration_seconds")
EXTENSION_POINT = "scheduler_framework_extension_point_duration_seconds"
PLUGIN = "scheduler_plugin_execution_duration_seconds"
SCRAPE_SECONDS = 5.0  # to wait for the attempt and Bind histograms to count every bound pod
EXTENDER_REQUESTS = "scorer_extender_requests"  # the counter's family (its samples end in _total)
EXTENDER_DURATION = "scorer_extender_request_duration_seconds"
EXTENDER_UNKNOWN = "scorer_extender_unknown_nodes"


# --- the scheduler process -----------------------------------------------------------------------------


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15 of stat)


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all cores)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:8]]
    return (sum(values) - values[3] - values[4]) / CLOCK_TICKS  # minus idle and iowait


def cpu_snapshot(pids: Mapping[str, int]) -> dict[str, float]:
    return {"machine": machine_busy_seconds(), **{name: cpu_seconds(pid) for name, pid in pids.items()}}


def cpu_split(before: Mapping[str, float], after: Mapping[str, float], wall: float) -> dict[str, float]:
    """CPU seconds each process used between two snapshots; ``other`` is the rest of the machine."""
    used = {name: after[name] - before.get(name, 0.0) for name in after}
    machine = used.pop("machine")
    return {**{k: round(v, 2) for k, v in used.items()}, "other": round(max(0.0, machine - sum(used.values())), 2),
            "wall": round(wall, 2), "cores": os.cpu_count() or 1}


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process in kB ({} once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


async def poll_rss(proc: subprocess.Popen[bytes], peak: dict[str, int]) -> None:
    """Keeps the process' highest VmHWM (every 0.2 s) until it exits."""
    while proc.poll() is None:
        peak["VmHWM"] = max(peak.get("VmHWM", 0), proc_status(proc.pid).get("VmHWM", 0))
        await asyncio.sleep(0.2)


def log_tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(line.strip() for line in path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --- metrics -------------------------------------------------------------------------------------------


@attrs.define(slots=True)
class Histogram:
    """One histogram summed over series: cumulative buckets by upper bound, the sum and the count."""

    buckets: dict[float, float] = attrs.Factory(dict)
    total: float = 0.0
    count: float = 0.0

    def add(self, sample_name: str, name: str, labels: Mapping[str, str], value: float) -> None:
        if sample_name == name + "_bucket":
            le = float(labels["le"])
            self.buckets[le] = self.buckets.get(le, 0.0) + value
        elif sample_name == name + "_sum":
            self.total += value
        elif sample_name == name + "_count":
            self.count += value

    def ms(self, q: float) -> float | None:
        value = histogram_quantile(q, sorted(self.buckets.items()))
        return None if value is None else round(value * 1000.0, 3)

    @property
    def mean_ms(self) -> float | None:
        return round(self.total / self.count * 1000.0, 3) if self.count else None


def histograms(metrics_text: str, name: str, by: tuple[str, ...] = ()) -> dict[tuple[str, ...], Histogram]:
    """The histogram ``name`` summed over its series, grouped by the labels ``by`` (only
    ``result="scheduled"`` when it has a ``result`` label: failed attempts are not cycles that bound)."""
    groups: dict[tuple[str, ...], Histogram] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name != name or family.type != "histogram":
            continue
        for sample in family.samples:
            if sample.labels.get("result", "scheduled") != "scheduled":
                continue
            key = tuple(sample.labels.get(label, "") for label in by)
            groups.setdefault(key, Histogram()).add(sample.name, name, sample.labels, sample.value)
    return groups


def summary_ms(metrics_text: str, names: Iterable[str]) -> dict[str, Any] | None:
    """p50/p90/p99/mean (ms) and count of the first histogram of ``names`` the scheduler exports."""
    for name in names:
        found = histograms(metrics_text, name).get(())
        if found is not None:
            return {"metric": name, "count": int(found.count), "p50": found.ms(0.5), "p90": found.ms(0.9),
                    "p99": found.ms(0.99), "mean": found.mean_ms}
    return None


def cycle_ms(metrics_text: str) -> dict[str, Any] | None:
    found = summary_ms(metrics_text, (ALGORITHM,))
    if found is None:
        return None
    return {"p50": found["p50"], "p90": found["p90"], "p99": found["p99"], "max": None, "mean": found["mean"],
            "count": found["count"], "blocks_p50": None}


STARTUP = "scorer_startup_seconds"


def startup_s(metrics_text: str) -> dict[str, float] | None:
    """scorer's start-up phases from its ``scorer_startup_seconds`` (seconds from the start of its code),
    None when the scheduler exports none (kube-scheduler)."""
    phases = {sample.labels.get("phase", ""): round(sample.value, 3)
              for family in text_string_to_metric_families(metrics_text) if family.name == STARTUP
              for sample in family.samples}
    return phases or None


def cpu_per_pod(cpu: Mapping[str, float] | None, at_first_bind: float | None, bound: int,
                metrics_text: str | None) -> dict[str, Any] | None:
    """Where the scheduler's CPU goes, per bound pod: ``ms`` (its process from its start, start-up and the
    initial LISTs included), ``ms_after_first_bind`` (from the first bind on: the per-pod path alone),
    ``cycle_share`` (the scheduling algorithm's seconds, ``scheduler_scheduling_algorithm_duration_seconds``'
    sum, over the CPU seconds after the first bind: the rest is the API path, the event loop, Events...),
    ``start_up_s`` (CPU seconds before the first bind) and, with an extender, ``extender_ms`` (its CPU per
    pod while kube-scheduler ran: its start-up is not in it). Beside the scheduler: ``control_plane_ms``,
    kube-apiserver's and etcd's CPU per bound pod over the same time (what each binding, Event and watch
    costs the server side), and ``machine_busy``, the share of the machine's cores busy then, every process
    counted (near 1: the run was bound by the cores, not by waiting). None without binds."""
    if not cpu or bound <= 0 or cpu.get("scheduler") is None:
        return None
    total = cpu["scheduler"]
    figures: dict[str, Any] = {"ms": round(total * 1000 / bound, 3), "ms_after_first_bind": None,
                               "cycle_share": None, "start_up_s": None}
    if cpu.get("kube_apiserver") is not None and cpu.get("etcd") is not None:
        figures["control_plane_ms"] = round((cpu["kube_apiserver"] + cpu["etcd"]) * 1000 / bound, 3)
    wall, cores = cpu.get("wall"), cpu.get("cores")
    if wall and cores:
        busy = sum(value for name, value in cpu.items() if name not in ("wall", "cores"))
        figures["machine_busy"] = round(min(1.0, busy / (wall * cores)), 3)
    if at_first_bind is not None:
        figures["start_up_s"] = round(at_first_bind, 3)
        after = total - at_first_bind
        if bound > 1 and after > 0:
            figures["ms_after_first_bind"] = round(after * 1000 / (bound - 1), 3)
            cycles = histograms(metrics_text, ALGORITHM).get(()) if metrics_text else None
            if cycles is not None and cycles.count:
                figures["cycle_share"] = round(min(1.0, cycles.total / after), 3)
    if cpu.get("extender") is not None:
        figures["extender_ms"] = round(cpu["extender"] * 1000 / bound, 3)
    return figures


def extension_points_ms(metrics_text: str) -> dict[str, dict[str, Any]]:
    return {point: {"mean": h.mean_ms, "p50": h.ms(0.5), "p99": h.ms(0.99), "count": int(h.count)}
            for (point,), h in sorted(histograms(metrics_text, EXTENSION_POINT, ("extension_point",)).items())
            if h.count}


def plugins_ms(metrics_text: str) -> dict[str, dict[str, Any]]:
    groups = histograms(metrics_text, PLUGIN, ("extension_point", "plugin"))
    return {f"{point}/{plugin}": {"mean": h.mean_ms, "count": int(h.count)}
            for (point, plugin), h in sorted(groups.items()) if h.count}


def extender_figures(metrics_text: str) -> dict[str, Any]:
    """scorer's extender figures from its /metrics: requests by verb and result, the failed ones
    (``errors``: a plugin failed, or the request could not be read), unknown node names, and the request
    latency by verb (mean exact, p50/p99 interpolated within the buckets)."""
    requests: dict[str, dict[str, int]] = {verb: {} for verb in VERBS}
    unknown = 0
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if family.name == EXTENDER_REQUESTS and sample.name.endswith("_total"):
                requests.setdefault(sample.labels["verb"], {})[sample.labels["result"]] = int(sample.value)
            elif family.name == EXTENDER_UNKNOWN and sample.name.endswith("_total"):
                unknown += int(sample.value)
    durations = histograms(metrics_text, EXTENDER_DURATION, ("verb",))
    timed = {verb: durations.get((verb,)) for verb in VERBS}
    return {"requests": requests,
            "errors": sum(count for results in requests.values() for result, count in results.items()
                          if result != "success"),
            "unknown_nodes": unknown,
            "mean_ms": {verb: h.mean_ms if h else None for verb, h in timed.items()},
            "p50_ms": {verb: h.ms(0.5) if h and h.count else None for verb, h in timed.items()},
            "p99_ms": {verb: h.ms(0.99) if h and h.count else None for verb, h in timed.items()}}


async def scrape(api: Api, port: int, want: int, deadline: float) -> str | None:
    """The scheduler's /metrics once its attempt and Bind histograms count ``want`` pods (or after SCRAPE_SECONDS).

    kube-scheduler records extension-point durations through a buffer it flushes every second, so the
    Bind histogram can trail the binds (and the attempt histogram) by up to a second.
    """
    until = min(deadline, time.monotonic() + SCRAPE_SECONDS)
    text = None
    while True:
        text = await api.metrics(port) or text
        if (text and counted(text, want)) or time.monotonic() >= until:
            return text
        await asyncio.sleep(0.25)


def counted(metrics_text: str, want: int) -> bool:
    attempts = summary_ms(metrics_text, ATTEMPT)
    binds = histograms(metrics_text, EXTENSION_POINT, ("extension_point",)).get(("Bind",))
    return attempts is not None and attempts["count"] >= want and (binds.count if binds else 0) >= want
