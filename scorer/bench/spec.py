"""The contract between the bench's stages.

A workload (``workloads``) or a user's cluster file (``snapshot``) becomes a
``Setup`` at one node count: plain API objects, as the API server returns
them, so the same setup feeds the in-process runner (which decodes them with
``scorer.model``) and the end-to-end runner (which creates them through a real
kube-apiserver). A ``PointSpec`` names one measurement.

The result JSON (``--out DIR/result.json``)::

    {"format": "scorer-bench/v1",
     "created": "<RFC 3339>", "scorer_version": "...",
     "machine": {"cpus": 2, "cpu_model": "...", "memory_mb": ..., "platform": "...",
                 "python_loop_ms": <best of 5 runs of a fixed pure-Python loop: one core's speed>},
     "versions": {"python": "...", "numpy": "...", "kube_scheduler": "v1.20.2" | null, ...},
     "config": {"workloads_file": "...", "workloads": [<the workloads as loaded>],
                "nodes": [...], "pods": N, "config_file": "..." | null,
                "cluster_file": "..." | null, "scale": N | null, "e2e": bool},
     "points": [<point>, ...],
     "fits": [{"workload", "mode", "scheduler", "percentage", "metric": "cycle_ms_p50",
               "slope": s, "r2": r, "nodes": [...]}],
     "summary": ["<plain-words line>", ...],
     "compare": null | {...}}

One point (in-process; end-to-end points carry the fields they can measure
and ``null`` for the rest)::

    {"workload": "plain", "mode": "in-process" | "e2e",
     "scheduler": "scorer" | "kube-scheduler" | "kube-scheduler+scorer" (e2e only: kube-scheduler with scorer
                  as its HTTP extender), "profile": "default" | "metrics" | "<config file>" (end to end:
                  kube-scheduler's profile; scorer's as extender is under "extender"),
     "nodes": 5000, "percentage": 0 (adaptive) | 1..100, "init_pods": 1000, "pods": 1000,
     "bound": 1000, "unscheduled": 0,
     "cycle_ms": {"p50", "p90", "p99", "max", "mean", "blocks_p50": [p50 of each of 5
                  consecutive blocks of attempts: the run-to-run noise]},
     "throughput": {"pods_per_second": <bound / seconds from first to last bind>,
                    "samples": [<binds in each whole second (``throughput``)>],
                    "p50", "p90", "p99"},
     "extension_points_ms": {"Filter": {"mean", "p50", "p99", "count"}, ...},
     "plugins_ms": {"Filter/NodeResourcesFit": {"mean", "count"}, ...},
     "memory": {"peak_rss_mb", "base_rss_mb", "bytes_per_node", "bytes_per_pod"},
     "cpu_per_pod": {"ms", "ms_after_first_bind", "cycle_share", "start_up_s", "extender_ms",
                     "control_plane_ms", "machine_busy"}
                    (end to end only: ``scorer.bench.e2e_metrics.cpu_per_pod``),
     "events": {"scheduled", "bound", "last_after_last_bind_s"} (end to end only: the bound pods with their
               Scheduled Event when the CPU was read, and when the last came after the last bind),
     "startup_s": {"imported", "built", "synced"} | null (end to end, scorer only: its
                  ``scorer_startup_seconds``, seconds from the start of its code to each phase),
     "wall_s": ..., "check": {...}, "warnings": [...], "error": null | "<one line>",
     "repeats": {"runs", "failed", "cycle_p50_ms": [...], "cycle_p99_ms": [...], "pods_per_second": [...],
                 "peak_rss_mb": [...]}  (only with --repeat N > 1: the point is the run with the median p50),
                (end to end: {"runs", "failed", "pods_per_second": [...], "pods_per_second_from_start": [...],
                 "first_bind_after_start_s": [...], "cpu_ms_per_pod": [...],
                 "cpu_ms_per_pod_after_first_bind": [...], "extender_cpu_ms_per_pod": [...],
                 "cycle_p50_ms": [...]}: the point is the run with the median pods/s; the runs of one round
                 are each list's same position while none failed),
     "extender": {"profile": "scorer-extender", "plugins": ["LoadAware", "NetworkTraffic"], "weight": 5,
                  "nodeCacheCapable": true, "ignorable": false,
                  "requests": {"filter": {"success": n, "error": n, "bad_request": n}, "prioritize": {...}},
                  "errors": <requests that did not succeed>, "unknown_nodes": n,
                  "mean_ms": {"filter", "prioritize"}, "p50_ms": {...}, "p99_ms": {...},
                  "peak_rss_mb": <scorer's>}
                 (only "kube-scheduler+scorer" points: scorer's side, from its /metrics; the point's
                  "memory" and "cpu_seconds.scheduler" are kube-scheduler's, "cpu_seconds.extender" scorer's)}

Times are milliseconds, rounded to 3 decimals; a figure that could not be
measured is ``null``, never 0.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from typing import Any

import attrs

from scorer.sources import MetricsSnapshot

ADAPTIVE = 0  # percentageOfNodesToScore 0: kube-scheduler's adaptive default


@attrs.frozen
class Setup:
    """One cluster to schedule on, as API objects (dicts shaped as the API server returns them).

    ``init`` pods are bound (``spec.nodeName`` set) before measuring;
    ``measured`` pods are pending: what the bench schedules and times.
    ``workloads`` holds Services, ReplicationControllers, ReplicaSets,
    StatefulSets and PodDisruptionBudgets; ``storage`` the StorageClasses,
    PersistentVolumes and PersistentVolumeClaims (created before the pods,
    in that order). ``metrics`` is the metrics snapshot
    a metric-driven profile reads (in process only). ``ignored`` counts the
    objects of a user's file the bench does not use, by kind.
    """

    nodes: list[dict[str, Any]]
    init: list[dict[str, Any]]
    measured: list[dict[str, Any]]
    namespaces: list[dict[str, Any]] = attrs.Factory(list)
    workloads: list[dict[str, Any]] = attrs.Factory(list)
    metrics: MetricsSnapshot | None = None
    ignored: dict[str, int] = attrs.Factory(dict)
    storage: list[dict[str, Any]] = attrs.Factory(list)


@attrs.frozen
class PointSpec:
    """One measurement: a workload at a node count, a percentageOfNodesToScore, a mode and a scheduler."""

    workload: str
    nodes: int
    pods: int
    percentage: int = ADAPTIVE
    mode: str = "in-process"  # or "e2e"
    scheduler: str = "scorer"  # or "kube-scheduler", "kube-scheduler+scorer" (e2e only)


def throughput(bind_times: Sequence[float], start: float) -> dict[str, Any]:
    """Throughput as both runners report it (the in-process one from the first pop, the end-to-end one
    from the first bind): ``pods_per_second`` over the seconds from the first bind to the last, and
    ``samples`` as scheduler_perf's throughput collector takes them, the binds in each whole second from
    ``start`` (what binds in the last partial second is in no sample); a run shorter than a whole second
    has one sample, its rate. ``p50``/``p90``/``p99``: ``sample_percentile`` of the samples."""
    times = sorted(bind_times)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    samples: list[float] = []
    if times:
        elapsed = max(times[-1] - start, 0.0)
        if elapsed < 1.0:
            samples = [round(len(times) / elapsed, 1)] if elapsed > 0 else []
        else:
            edges = [bisect.bisect_left(times, start + i) for i in range(int(elapsed) + 1)]
            samples = [float(after - before) for before, after in itertools.pairwise(edges)]
    return {"pods_per_second": round(len(times) / span, 1) if span > 0 else None, "samples": samples,
            "p50": sample_percentile(samples, 0.5), "p90": sample_percentile(samples, 0.9),
            "p99": sample_percentile(samples, 0.99)}


def sample_percentile(samples: Sequence[float], q: float) -> float | None:
    """scheduler_perf's percentile of its throughput samples: the sorted sample at rank ceil(q*n)-1."""
    if not samples:
        return None
    ordered = sorted(samples)
    return float(ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))])
