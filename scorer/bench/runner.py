"""One in-process point: the scheduling loop on an in-memory cluster, measured.

``run_point(setup, spec, ...)`` decodes the Setup's API objects with
``scorer.model``, assembles the profile with ``scorer.assembly.assemble``
(the built-in default, the metric-driven profile, or a config file; the
point's ``percentageOfNodesToScore`` replaces the configured one), lists the
cluster into the scheduler (namespaces, workloads, storage objects, nodes, then the bound init
pods and the pending measured pods), and drives ``Scheduler.schedule_one``
as ``Scheduler.run`` does: each binding is an asyncio task, the loop yields
once per 5 ms of scheduling, the event recorder drains in the background (a
preemption deletes its victims through it), failed pods come back through
the queue. The queue's clock skips forward when only backing-off pods are
left instead of sleeping (``SkippingClock``; the point reports the time
skipped). A pod gets at most ``MAX_ATTEMPTS`` attempts, then it is given up
(counted as unscheduled).

What it measures (the point dict of ``scorer.bench.spec``):

- ``cycle_ms``: the synchronous scheduling cycle of every attempt
  (``ScheduleOneResult.seconds``): p50/p90/p99/max/mean, and the p50 of each
  of 5 consecutive blocks of attempts (the noise within the run);
- ``throughput``: measured pods bound over the seconds from the first bind
  to the last (sustained), and samples as scheduler_perf takes them: binds
  in each whole second from the first pop, plus the last partial interval as
  a rate (so a run shorter than a second still has one sample);
- ``extension_points_ms`` and ``plugins_ms``: from the scheduler's own
  histograms (``scheduler_framework_extension_point_duration_seconds``,
  every cycle; ``scheduler_plugin_execution_duration_seconds``, sampled in
  10% of cycles as kube-scheduler does: ``count`` says how many); p50/p99
  are interpolated within the buckets as Prometheus' ``histogram_quantile``;
- ``memory``: resident set size after the imports (``base_rss_mb``), with
  the scheduler assembled and the Setup's API objects built
  (``setup_rss_mb``; the growth is mostly the bench's own copy of the
  cluster as dicts, which a scheduler reading an API server never holds all
  at once), after the nodes are in the cache, after the pods, and the
  peak (``VmHWM``, else ``ru_maxrss``; it includes that copy: an upper
  bound); ``bytes_per_node`` and ``bytes_per_pod`` from the growth while
  decoding (the decoded objects and the cache's own, the copy excluded);
- ``check``: where the measured pods went (nodes used, pods per zone and the
  skew, the most on one node, members of a required anti-affinity group
  sharing a node, victims deleted and Preempted events), and the most
  frequent reasons of pods left unscheduled.

``run_point_isolated`` runs a point in a fresh interpreter (``python -m
scorer.bench.runner``: a job as JSON on stdin, the point as JSON on stdout),
which builds the Setup itself from the workload or the cluster file, so the
peak RSS is the point's own and nothing big crosses the pipe. A point that
fails is a point with ``error`` set (one line), never an exception.
"""

from __future__ import annotations

import asyncio
import collections
import math
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import numpy as np
import orjson

from scorer.assembly import Assembly, assemble, gc_tuned
from scorer.bench.clusters import ZONE, build_setup
from scorer.bench.options import DEFAULT_TIMEOUT
from scorer.bench.snapshot import load_cluster_setup
from scorer.bench.spec import PointSpec, Setup, throughput
from scorer.bench.workloads import Workload, workload_from_data
from scorer.cluster.memory import InMemoryCluster
from scorer.cycle import ERROR, SKIPPED, UNSCHEDULABLE
from scorer.errors import ScorerError
from scorer.metrics import SchedulerMetrics
from scorer.model import Pod, namespace_from_dict, node_from_dict, pod_from_dict, storage_from_dict, workload_from_dict

MAX_ATTEMPTS = 5
BLOCKS = 5
MIB = 1 << 20
EXTENSION_POINT_HISTOGRAM = "scheduler_framework_extension_point_duration_seconds"
PLUGIN_HISTOGRAM = "scheduler_plugin_execution_duration_seconds"

# The metric-driven profile: the default plugins plus the two contrib metric plugins.
METRICS_CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{
        "schedulerName": "default-scheduler",
        "plugins": {"multiPoint": {"enabled": [{"name": "LoadAware", "weight": 3},
                                               {"name": "NetworkTraffic", "weight": 2}]}},
        "pluginConfig": [{"name": "LoadAware", "args": {"usageThresholds": {"cpu": 90}}}],
    }],
}


class SkippingClock:
    """The monotonic clock plus the time skipped when only backing-off pods were left."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped

    def skip_to(self, t: float) -> None:
        self.skipped += max(0.0, t - self())


# -- memory ----------------------------------------------------------------------------------


def rss_mb() -> float:
    """The resident set size now (``/proc/self/statm``), MiB; the peak where there is no /proc."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB
    except (OSError, ValueError, IndexError):
        return peak_rss_mb()


def peak_rss_mb() -> float:
    """The peak resident set size of this process: ``VmHWM``, else ``ru_maxrss``, MiB."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / MIB if sys.platform == "darwin" else maxrss / 1024  # bytes on macOS, KiB elsewhere


# -- the point -------------------------------------------------------------------------------


@attrs.define(slots=True)
class Run:
    """What the loop records."""

    cycles: list[float] = attrs.Factory(list)
    outcomes: collections.Counter[str] = attrs.Factory(collections.Counter)
    attempts: collections.Counter[str] = attrs.Factory(collections.Counter)
    bind_times: list[float] = attrs.Factory(list)
    given_up: int = 0
    start: float = 0.0
    end: float = 0.0


def run_point(
    setup: Setup, spec: PointSpec, *, config_path: str | None, profile: str, seed: int = 0,
    base_rss: float | None = None,
) -> dict[str, Any]:
    """One point (spec.py's point dict); ``error`` set, not raised, when it cannot be run."""
    started = time.perf_counter()
    base = rss_mb() if base_rss is None else base_rss
    try:
        point = _measure(setup, spec, config_path=config_path, profile=profile, seed=seed, base_rss=base)
    except ScorerError as exc:
        point = error_point(spec, profile, _one_line(str(exc)))
    except Exception as exc:  # a bug in scorer or a plugin: reported in the point, the sweep goes on
        point = error_point(spec, profile, f"internal error: {type(exc).__name__}: {_one_line(str(exc))}")
    point["wall_s"] = round(time.perf_counter() - started, 3)
    return point


def _config_source(profile: str, config_path: str | None) -> tuple[Any, bool | None]:
    """The configuration to assemble and whether to load installed plugins (entry points)."""
    if config_path is not None:
        return config_path, None
    if profile == "metrics":
        return METRICS_CONFIG, True
    return None, False


@attrs.define(eq=False)
class Loaded:
    """A point's scheduler with the Setup listed into its in-memory cluster, ready to ``drive``."""

    asm: Assembly
    cluster: InMemoryCluster
    clock: SkippingClock
    measured: list[Pod]
    rss_empty: float = 0.0  # after assembling, before the objects
    rss_nodes: float = 0.0
    rss_pods: float = 0.0


def load(setup: Setup, spec: PointSpec, *, config_path: str | None, profile: str, seed: int) -> Loaded:
    """Assemble the point's profile and list the Setup's objects into its cluster (nothing scheduled yet)."""
    cluster = InMemoryCluster([], [], [])
    clock = SkippingClock()
    config, autoload = _config_source(profile, config_path)
    metrics = SchedulerMetrics(rng=random.Random(seed))  # the cycles whose plugins are timed: the seed's
    asm = assemble(config, cluster, autoload=autoload, seed=seed, clock=clock, metrics=metrics,
                   metrics_snapshot=setup.metrics)
    asm.scheduler.algorithm.percentage_of_nodes_to_score = spec.percentage  # the point's, over the config's
    for fwk in asm.frameworks.values():
        fwk.percentage_of_nodes_to_score = None
    cluster.start(asm.handlers)
    loaded = Loaded(asm, cluster, clock, [], rss_empty=rss_mb())
    for obj in setup.namespaces:
        cluster.apply(namespace_from_dict(obj))
    for obj in setup.workloads:
        cluster.apply(workload_from_dict(obj))
    for obj in setup.storage:
        cluster.apply(storage_from_dict(obj))
    for obj in setup.nodes:
        cluster.apply(node_from_dict(obj))
    loaded.rss_nodes = rss_mb()
    loaded.measured = [pod_from_dict(obj) for obj in setup.measured]
    for pod in (*(pod_from_dict(obj) for obj in setup.init), *loaded.measured):
        cluster.apply(pod)
    loaded.rss_pods = rss_mb()
    return loaded


def drive(loaded: Loaded) -> Run:
    """Schedule the measured pods (``_drive``) with the collector tuned as the service tunes it."""
    run = Run()
    with gc_tuned():
        asyncio.run(_drive(loaded.asm, loaded.clock, {p.key for p in loaded.measured}, run))
    return run


def _measure(
    setup: Setup, spec: PointSpec, *, config_path: str | None, profile: str, seed: int, base_rss: float,
) -> dict[str, Any]:
    loaded = load(setup, spec, config_path=config_path, profile=profile, seed=seed)
    asm, cluster, clock, measured = loaded.asm, loaded.cluster, loaded.clock, loaded.measured
    rss_empty, rss_nodes, rss_pods = loaded.rss_empty, loaded.rss_nodes, loaded.rss_pods
    run = drive(loaded)
    bound = [p for p in measured if (current := cluster.pods.get(p.key)) is not None and current.node_name]
    n_pods = len(setup.init) + len(setup.measured)
    return {
        "workload": spec.workload, "mode": "in-process", "scheduler": "scorer", "profile": profile,
        "nodes": len(setup.nodes), "percentage": spec.percentage,
        "init_pods": len(setup.init), "pods": len(measured),
        "bound": len(bound), "unscheduled": len(measured) - len(bound),
        "cycle_ms": cycle_figures(run.cycles),
        "throughput": throughput(run.bind_times, run.start),  # samples from the first pop
        "extension_points_ms": extension_points(asm.metrics.collector_registry),
        "plugins_ms": plugins(asm.metrics.collector_registry),
        "memory": {
            # VmHWM may trail the RSS read before (the kernel syncs its counters lazily): the peak is at least
            # every RSS this process has read, the base included
            "peak_rss_mb": round(max(peak_rss_mb(), base_rss, rss_empty, rss_nodes, rss_pods, rss_mb()), 1),
            "base_rss_mb": round(base_rss, 1),
            "setup_rss_mb": round(rss_empty, 1), "nodes_rss_mb": round(rss_nodes, 1),
            "pods_rss_mb": round(rss_pods, 1),
            "bytes_per_node": _per(rss_nodes - rss_empty, len(setup.nodes)),
            "bytes_per_pod": _per(rss_pods - rss_nodes, n_pods),
        },
        "attempts": dict(run.outcomes), "given_up": run.given_up,
        "backoff_skipped_s": round(clock.skipped, 3),
        "check": placement_check(cluster, setup, measured),
        "ignored": dict(setup.ignored),  # a user's cluster file: the objects of kinds the bench does not use
        "warnings": list(asm.warnings),
        "error": None,
    }


async def _drive(asm: Assembly, clock: SkippingClock, measured: set[str], run: Run) -> None:
    """Schedule until every measured pod is bound or given up (bounded: each turn is an attempt, at most
    MAX_ATTEMPTS per pod, or an idle round that frees pods: bindings done, victims deleted, a backoff skipped)."""
    scheduler, queue = asm.scheduler, asm.queue
    drain = asyncio.get_running_loop().create_task(asm.recorder.run(), name="event-recorder")

    def bound(task: asyncio.Task[bool]) -> None:
        if not task.cancelled() and task.exception() is None and task.result():
            run.bind_times.append(time.perf_counter())

    run.start = time.perf_counter()
    try:
        for _ in range((3 * MAX_ATTEMPTS + 3) * max(len(measured), 1)):
            turn = scheduler.schedule_one()
            if turn is None:
                await scheduler.wait_for_bindings()
                await asm.recorder.flush()  # victims' deletions reach the queue and the cache
                if queue.pending_counts()["active"]:
                    continue
                expiry = queue.next_backoff_expiry()
                if expiry is None:
                    break  # the rest waits for an event that will not come: unscheduled
                clock.skip_to(expiry)
                continue
            if turn.outcome == SKIPPED:
                continue
            run.cycles.append(turn.seconds)
            run.outcomes[turn.outcome] += 1
            run.attempts[turn.pod.key] += 1
            if turn.binding is not None:
                turn.binding.add_done_callback(bound)
            elif turn.outcome in (UNSCHEDULABLE, ERROR) and run.attempts[turn.pod.key] >= MAX_ATTEMPTS:
                queue.delete(turn.pod)
                run.given_up += 1
            await scheduler.maybe_yield()  # binding tasks and the recorder's drain run
        await scheduler.wait_for_bindings()
        await asm.recorder.flush()
    finally:
        run.end = time.perf_counter()
        drain.cancel()
        await asyncio.gather(drain, return_exceptions=True)


# -- figures ---------------------------------------------------------------------------------


def _ms(value: float) -> float:
    return round(value, 3)


def _quantiles(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {"p50": None, "p90": None, "p99": None}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"p50": _ms(float(p50)), "p90": _ms(float(p90)), "p99": _ms(float(p99))}


def cycle_figures(seconds: Iterable[float]) -> dict[str, Any]:
    """p50/p90/p99/max/mean ms of the cycles, and the p50 of each of ``BLOCKS`` consecutive blocks."""
    ms = np.asarray(list(seconds), dtype=float) * 1000.0
    figures: dict[str, Any] = {**_quantiles(ms), "max": None, "mean": None, "blocks_p50": []}
    if len(ms):
        figures["max"] = _ms(float(ms.max()))
        figures["mean"] = _ms(float(ms.mean()))
        figures["blocks_p50"] = [_ms(float(np.percentile(block, 50)))
                                 for block in np.array_split(ms, min(BLOCKS, len(ms)))]
    return figures


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative ``(upper bound, count)`` buckets (sorted, +Inf last)."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower  # the last finite bound, as Prometheus does
            return lower + (upper - lower) * ((rank - below) / (count - below) if count > below else 0.0)
        lower, below = upper, count
    return lower


def _histograms(collector_registry: Any, name: str,
                key: Callable[[Mapping[str, str]], str]) -> dict[str, dict[str, Any]]:
    """``key(labels)`` -> {"sum", "count", "buckets": {le: cumulative count}}, summed over the other labels."""
    out: dict[str, dict[str, Any]] = {}
    for family in collector_registry.collect():
        if family.name != name:
            continue
        for sample in family.samples:
            entry = out.setdefault(key(sample.labels), {"sum": 0.0, "count": 0.0, "buckets": collections.Counter()})
            if sample.name.endswith("_sum"):
                entry["sum"] += sample.value
            elif sample.name.endswith("_count"):
                entry["count"] += sample.value
            elif sample.name.endswith("_bucket"):
                entry["buckets"][float(sample.labels["le"])] += sample.value
    return {k: v for k, v in sorted(out.items()) if v["count"]}


def extension_points(collector_registry: Any) -> dict[str, dict[str, Any]]:
    """Per extension point: mean, p50, p99 (ms) and count, from the scheduler's histogram."""
    figures = {}
    histograms = _histograms(collector_registry, EXTENSION_POINT_HISTOGRAM, lambda labels: labels["extension_point"])
    for point, h in histograms.items():
        buckets = sorted(h["buckets"].items())
        quantile = {q: histogram_quantile(q, buckets) for q in (0.5, 0.99)}
        figures[point] = {"mean": _ms(h["sum"] / h["count"] * 1000.0),
                          "p50": None if quantile[0.5] is None else _ms(quantile[0.5] * 1000.0),
                          "p99": None if quantile[0.99] is None else _ms(quantile[0.99] * 1000.0),
                          "count": int(h["count"])}
    return figures


def plugins(collector_registry: Any) -> dict[str, dict[str, Any]]:
    """Per ``ExtensionPoint/Plugin``: mean ms and count (sampled cycles only)."""
    histograms = _histograms(collector_registry, PLUGIN_HISTOGRAM,
                             lambda labels: f"{labels['extension_point']}/{labels['plugin']}")
    return {key: {"mean": _ms(h["sum"] / h["count"] * 1000.0), "count": int(h["count"])}
            for key, h in histograms.items()}


def _per(mib: float, count: int) -> int | None:
    """Bytes per object from a growth in MiB; None when nothing grew measurably (small clusters)."""
    return round(mib * MIB / count) if count and mib > 0 else None


# -- the placement check ---------------------------------------------------------------------


def placement_check(cluster: InMemoryCluster, setup: Setup, measured: list[Pod]) -> dict[str, Any]:
    """Where the measured pods went, and what became of the init pods (preemption victims)."""
    placed = [current for p in measured if (current := cluster.pods.get(p.key)) is not None and current.node_name]
    per_node = collections.Counter(p.node_name for p in placed)
    zones = collections.Counter(cluster.nodes[p.node_name].labels.get(ZONE, "") for p in placed
                                if p.node_name in cluster.nodes)
    check: dict[str, Any] = {
        "nodes_used": len(per_node),
        "max_on_a_node": max(per_node.values(), default=0),
        "pods_per_zone": dict(sorted(zones.items())),
        "zone_skew": max(zones.values()) - min(zones.values()) if zones else 0,
    }
    group = _anti_affinity_group(setup)
    if group is not None:
        members = collections.Counter(p.node_name for p in cluster.pods.values()
                                      if p.node_name and all(p.labels.get(k) == v for k, v in group.items()))
        check["nodes_with_two_of_the_group"] = sum(1 for c in members.values() if c > 1)
    if setup.storage:
        check["volumes"] = _volume_check(cluster, placed)
    deleted = sum(1 for obj in setup.init if _key(obj) not in cluster.pods)
    if deleted or cluster.preempted:
        check["victims_deleted"] = deleted
        check["preempted_events"] = sum(1 for e in cluster.events if e.reason == "Preempted")
    reasons = collections.Counter(
        condition.message for p in measured
        if (condition := cluster.conditions.get(p.key)) is not None and condition.status == "False"
        and not (p.key in cluster.pods and cluster.pods[p.key].node_name))
    if reasons:
        check["unscheduled_reasons"] = dict(reasons.most_common(3))
    return check


def _volume_check(cluster: InMemoryCluster, placed: list[Pod]) -> dict[str, int]:
    """The placed pods' claims: how many ended bound (the in-memory PersistentVolume controller completes
    what PreBind wrote), and how many pods sit on a node their volume's node affinity does not allow."""
    claims = bound = off = 0
    for pod in placed:
        node = cluster.nodes.get(pod.node_name)
        misplaced = False
        for name in pod.pvc_claims:
            claims += 1
            claim = cluster.pvc(f"{pod.namespace}/{name}")
            if claim is None or not claim.fully_bound:
                continue
            bound += 1
            volume = cluster.pv(claim.volume_name)
            if volume is None or node is None or (volume.node_affinity is not None
                                                  and not volume.node_affinity.matches(node)):
                misplaced = True
        off += misplaced
    return {"claims": claims, "claims_bound": bound, "pods_off_their_volumes": off}


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def _anti_affinity_group(setup: Setup) -> dict[str, str] | None:
    """The labels of the measured pods when they carry required pod anti-affinity (the group that must not
    share a node), else None."""
    if not setup.measured:
        return None
    first = setup.measured[0]
    anti = first.get("spec", {}).get("affinity", {}).get("podAntiAffinity", {})
    labels = first.get("metadata", {}).get("labels") or {}
    return dict(labels) if anti.get("requiredDuringSchedulingIgnoredDuringExecution") and labels else None


# -- errors ----------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]


def error_point(spec: PointSpec, profile: str, message: str) -> dict[str, Any]:
    """A point that could not be measured: the spec's fields, ``null`` figures and the one-line error."""
    return {
        "workload": spec.workload, "mode": spec.mode, "scheduler": spec.scheduler, "profile": profile,
        "nodes": spec.nodes, "percentage": spec.percentage, "init_pods": None, "pods": spec.pods,
        "bound": None, "unscheduled": None, "cycle_ms": None, "throughput": None,
        "extension_points_ms": {}, "plugins_ms": {}, "memory": None, "wall_s": None, "check": {},
        "warnings": [], "error": message,
    }


# -- a point in its own process --------------------------------------------------------------


@attrs.frozen(slots=True)
class SetupSource:
    """How a point's process builds its Setup: from a workload, or from a user's cluster file."""

    workload: Workload | None = None
    cluster_file: str | None = None
    scale: int = 1
    scheduler_name: str | None = None

    def build(self, spec: PointSpec, seed: int) -> Setup:
        if self.workload is not None:
            return build_setup(self.workload, spec.nodes, spec.pods, seed)
        if self.cluster_file is None:
            raise ScorerError("a point needs a workload or a cluster file")
        return load_cluster_setup(self.cluster_file, scale=self.scale, pods=spec.pods or None,
                                  scheduler_name=self.scheduler_name)

    def as_dict(self) -> dict[str, Any]:
        return {"workload": None if self.workload is None else self.workload.as_dict(),
                "clusterFile": self.cluster_file, "scale": self.scale, "schedulerName": self.scheduler_name}


def run_point_isolated(
    source: SetupSource, spec: PointSpec, *, config_path: str | None, profile: str, seed: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """``run_point`` in a fresh ``python -m scorer.bench.runner`` (the Setup built there from ``source``)."""
    job = {"source": source.as_dict(), "spec": attrs.asdict(spec), "configPath": config_path, "profile": profile,
           "seed": seed}
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "scorer.bench.runner"], input=orjson.dumps(job),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        point = error_point(spec, profile, f"did not finish within {timeout:g} s")
    else:
        point = _child_point(done, spec, profile)
    if point.get("wall_s") is None or point["error"] is None:
        point["wall_s"] = round(time.perf_counter() - started, 3)  # the set-up in the child included
    return point


def _child_point(done: subprocess.CompletedProcess[bytes], spec: PointSpec, profile: str) -> dict[str, Any]:
    try:
        point = orjson.loads(done.stdout)
    except orjson.JSONDecodeError:
        point = None
    if isinstance(point, dict) and "error" in point:
        return point
    stderr = done.stderr.decode(errors="replace").strip().splitlines()
    why = stderr[-1] if stderr else f"exit status {done.returncode}"
    if done.returncode < 0:
        why = f"killed by signal {-done.returncode} (out of memory?)" + (f": {why}" if stderr else "")
    return error_point(spec, profile, f"the point's process failed: {_one_line(why)}")


def _child_main() -> int:
    """Read a job on stdin, write the point on stdout (always a point: errors go in its ``error``)."""
    base = rss_mb()
    job = orjson.loads(sys.stdin.buffer.read())
    spec = PointSpec(**job["spec"])
    profile = job["profile"]
    started = time.perf_counter()
    try:
        raw = job["source"]
        workload = None if raw["workload"] is None else workload_from_data(raw["workload"])
        source = SetupSource(workload, raw["clusterFile"], raw["scale"], raw["schedulerName"])
        setup = source.build(spec, job["seed"])
    except ScorerError as exc:
        point = error_point(spec, profile, _one_line(str(exc)))
    else:
        point = run_point(setup, spec, config_path=job["configPath"], profile=profile, seed=job["seed"],
                          base_rss=base)
        point["setup_s"] = round(time.perf_counter() - started - (point["wall_s"] or 0.0), 3)
    sys.stdout.buffer.write(orjson.dumps(point, option=orjson.OPT_SERIALIZE_NUMPY))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(_child_main())
