"""Parity bench: kube-scheduler's scheduler_perf workload shapes, in process.

    python bench/parity.py                                 # every workload, 5,000 nodes, 1,000 pods each
    python bench/parity.py --workloads plain,anti-affinity --nodes 500 --pods 200 --out /tmp/p.json
    python bench/parity.py --workloads topology-spreading --profile --profile-top 30

Each workload builds a fresh in-memory cluster the way the scheduler_perf test
case of the same shape does (``WORKLOADS``: the nodes, the init pods placed
first, any owner objects, then the measured pods), assembles the FULL default
profile (no config file) with ``scorer.assembly.assemble``, and drives
``Scheduler.schedule_one`` as bench/run.py does (the pod's synchronous
scheduling cycle, then its binding as an asyncio task; the loop yields to the
event loop once per 5 ms of scheduling, as ``Scheduler.run`` does). Unlike
bench/run.py it also runs what a preemption needs: the event recorder drains
in the background (``BufferedRecorder.run``, as in ``Scheduler.run``: victims
are deleted through it, and the deletions reach the queue and the cache), and
pods that failed come back through the queue. Init pods are bound in the
cluster before the scheduler starts (scheduler_perf schedules them first,
unmeasured); where it matters they are placed as the scheduler would (the
anti-affinity group one per node, low-priority pods filling every node).

Time: the queue's clock is the monotonic clock plus the time skipped while
nothing but backing-off pods remained (``SkippingClock``): the bench does not
sleep through backoff, it reports the time skipped (``backoff_skipped_s``)
and the throughput with it (``pods_per_second_with_backoff``: what a run on
the real clock would have measured). Each pod gets at most
``--max-attempts`` attempts, then it is given up (counted as unscheduled).

Reported per workload (table and JSON, ``--out``): cycle latency p50/p90/p99
(the synchronous scheduling cycle, ``ScheduleOneResult.seconds``, every
attempt), pods/s (measured pods bound / wall time from the first pop until
every measured pod is bound or given up), kube-scheduler's scheduler_perf CI
floor for the shape at 5,000 nodes with the ratio, the mean time of each
extension point (from the scheduler's own histogram), and a check of the
placements (e.g. anti-affinity violations, the zone skew). ``--profile`` runs
each workload under cProfile and prints (and stores) its top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import io
import os
import platform
import pstats
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from run import make_nodes, write_report

from scorer import __version__
from scorer.assembly import assemble, gc_tuned
from scorer.cluster.memory import InMemoryCluster
from scorer.cycle import ERROR, SKIPPED, UNSCHEDULABLE
from scorer.model import LabelSelector, Namespace, Node, Pod, SelectorOwner, pod_from_dict

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
PAUSE = "registry.k8s.io/pause:3.10"


# -- the workloads ------------------------------------------------------------------


@attrs.frozen
class Floor:
    """kube-scheduler's scheduler_perf threshold (SchedulingThroughput Average, pods/s) at 5,000 nodes.

    ``same_shape`` is False when the anchors give no threshold for this exact
    shape and ``test`` names the nearest one (reported, not a like-for-like floor)."""

    pods_per_second: float
    test: str
    same_shape: bool = True


@attrs.frozen
class Setup:
    nodes: list[Node]
    init: list[Pod]  # bound before the scheduler starts
    measured: list[Pod]  # pending: what the bench schedules and times
    namespaces: list[Namespace] = attrs.Factory(list)
    owners: list[SelectorOwner] = attrs.Factory(list)


@attrs.frozen
class Workload:
    key: str
    kube_test: str  # scheduler_perf's test case of this shape
    summary: str
    init_per_node: float  # scheduler_perf's init pods / nodes at 5,000 nodes
    build: Callable[[int, int, int], Setup]  # (nodes, init pods, measured pods)
    check: Callable[[InMemoryCluster, Setup], dict[str, Any]]
    floor: Floor | None


def pod(
    name: str,
    namespace: str = "bench",
    *,
    node: str = "",
    labels: Mapping[str, str] | None = None,
    cpu: str = "100m",
    memory: str = "500Mi",
    priority: int | None = None,
    affinity: Mapping[str, Any] | None = None,
    spread: list[Mapping[str, Any]] | None = None,
    owner: SelectorOwner | None = None,
    port: bool = False,
) -> Pod:
    """scheduler_perf's pod templates: one pause container, requests = limits (100m/500Mi by default)."""
    resources = {"cpu": cpu, "memory": memory}
    container: dict[str, Any] = {"name": "pause", "image": PAUSE,
                                 "resources": {"requests": resources, "limits": resources}}
    if port:
        container["ports"] = [{"containerPort": 80}]
    spec: dict[str, Any] = {"nodeName": node, "containers": [container]}
    if priority is not None:
        spec["priority"] = priority
    if affinity is not None:
        spec["affinity"] = affinity
    if spread is not None:
        spec["topologySpreadConstraints"] = spread
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                            "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner.kind, "name": owner.name,
                                    "uid": f"uid-{owner.name}", "controller": True}]
    return pod_from_dict({"kind": "Pod", "metadata": meta, "spec": spec})


def _spread_over(nodes: list[Node], count: int, per_node: int = 1) -> list[str]:
    """Node names for ``count`` init pods: ``per_node`` on each node in turn, wrapping around."""
    return [nodes[(i // per_node) % len(nodes)].name for i in range(count)] if nodes else []


def plain(n_nodes: int, n_init: int, n_measured: int) -> Setup:
    """SchedulingBasic: pod-default init pods, then pod-default pods."""
    nodes = make_nodes(n_nodes)
    init = [pod(f"init-{i:06d}", node=node) for i, node in enumerate(_spread_over(nodes, n_init))]
    return Setup(nodes, init, [pod(f"pod-{k:06d}") for k in range(n_measured)])


def _namespaces() -> list[Namespace]:
    return [Namespace(name="sched-0"), Namespace(name="sched-1")]


ANTI_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
    "labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": HOSTNAME,
    "namespaces": ["sched-1", "sched-0"]}]}}


def anti_affinity(n_nodes: int, n_init: int, n_measured: int) -> Setup:
    """SchedulingPodAntiAffinity: pod-with-pod-anti-affinity (color=green, required anti-affinity to
    color=green on the hostname, namespaces sched-0 and sched-1); the init group in sched-0, one per
    node as the scheduler placed them; the measured pods in sched-1."""
    nodes = make_nodes(n_nodes)
    group = {"color": "green", "name": "test"}
    init = [pod(f"init-{i:06d}", "sched-0", node=nodes[i].name, labels=group, affinity=ANTI_AFFINITY, port=True)
            for i in range(min(n_init, n_nodes))]
    measured = [pod(f"pod-{k:06d}", "sched-1", labels=group, affinity=ANTI_AFFINITY, port=True)
                for k in range(n_measured)]
    return Setup(nodes, init, measured, _namespaces())


def check_anti_affinity(cluster: InMemoryCluster, setup: Setup) -> dict[str, Any]:
    per_node = collections.Counter(p.node_name for p in cluster.pods.values()
                                   if p.node_name and p.labels.get("color") == "green")
    return {"nodes_with_two_or_more_of_the_group": sum(1 for c in per_node.values() if c > 1)}


PREFERRED_AFFINITY = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
    "weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": {"foo": ""}}, "topologyKey": HOSTNAME,
                                     "namespaces": ["sched-1", "sched-0"]}}]}}


def preferred_affinity(n_nodes: int, n_init: int, n_measured: int) -> Setup:
    """SchedulingPreferredPodAffinity: pod-with-preferred-pod-affinity (foo="", preferred affinity of
    weight 1 to foo="" on the hostname); init pods in sched-0, measured in sched-1."""
    nodes = make_nodes(n_nodes)
    init = [pod(f"init-{i:06d}", "sched-0", node=node, labels={"foo": ""}, affinity=PREFERRED_AFFINITY)
            for i, node in enumerate(_spread_over(nodes, n_init))]
    measured = [pod(f"pod-{k:06d}", "sched-1", labels={"foo": ""}, affinity=PREFERRED_AFFINITY)
                for k in range(n_measured)]
    return Setup(nodes, init, measured, _namespaces())


REQUIRED_AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
    "labelSelector": {"matchLabels": {"foo": ""}}, "topologyKey": ZONE, "namespaces": ["sched-1", "sched-0"]}]}}


def pod_affinity(n_nodes: int, n_init: int, n_measured: int) -> Setup:
    """SchedulingPodAffinity: every node in one zone (zone1), pod-with-pod-affinity (foo="", required
    affinity to foo="" on the zone); init pods in sched-0, measured in sched-1."""
    nodes = make_nodes(n_nodes, zones=("zone1",))
    init = [pod(f"init-{i:06d}", "sched-0", node=node, labels={"foo": ""}, affinity=REQUIRED_AFFINITY)
            for i, node in enumerate(_spread_over(nodes, n_init))]
    measured = [pod(f"pod-{k:06d}", "sched-1", labels={"foo": ""}, affinity=REQUIRED_AFFINITY)
                for k in range(n_measured)]
    return Setup(nodes, init, measured, _namespaces())


MOONS = ("moon-1", "moon-2", "moon-3")
SPREAD = [{"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}}]


def topology_spreading(n_nodes: int, n_init: int, n_measured: int) -> Setup:
    """TopologySpreading: nodes in zones moon-1..3, pod-default init pods, then pod-with-topology-spreading
    (color=blue, maxSkew 5 over the zone, DoNotSchedule, selector color In [blue])."""
    nodes = make_nodes(n_nodes, zones=MOONS)
    init = [pod(f"init-{i:06d}", node=node) for i, node in enumerate(_spread_over(nodes, n_init))]
    measured = [pod(f"pod-{k:06d}", labels={"color": "blue"}, spread=SPREAD) for k in range(n_measured)]
    return Setup(nodes, init, measured)


def _zone_counts(cluster: InMemoryCluster, selects: Callable[[Pod], bool]) -> dict[str, int]:
    counts = collections.Counter(cluster.nodes[p.node_name].labels.get(ZONE, "")
                                 for p in cluster.pods.values() if p.node_name and selects(p))
    return dict(sorted(counts.items()))


def check_spreading(cluster: InMemoryCluster, setup: Setup) -> dict[str, Any]:
    zones = _zone_counts(cluster, lambda p: p.labels.get("color") == "blue")
    return {"blue_pods_per_zone": zones, "zone_skew": (max(zones.values()) - min(zones.values())) if zones else 0}


def default_spreading(n_nodes: int, n_init: int, n_measured: int) -> Setup:
    """System default spreading (DefaultTopologySpreading's shape): nodes in zones moon-1..3,
    pod-default init pods, a ReplicaSet and a Service selecting app=web, then the ReplicaSet's pods
    (app=web, owned by it) with no constraints of their own: PodTopologySpread's system defaults
    (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) spread them."""
    nodes = make_nodes(n_nodes, zones=MOONS)
    selector = LabelSelector(match_labels={"app": "web"})
    replicaset = SelectorOwner(kind="ReplicaSet", namespace="bench", name="web", selector=selector)
    service = SelectorOwner(kind="Service", namespace="bench", name="web", selector=selector)
    init = [pod(f"init-{i:06d}", node=node) for i, node in enumerate(_spread_over(nodes, n_init))]
    measured = [pod(f"web-{k:06d}", labels={"app": "web"}, owner=replicaset) for k in range(n_measured)]
    return Setup(nodes, init, measured, owners=[replicaset, service])


def check_default_spreading(cluster: InMemoryCluster, setup: Setup) -> dict[str, Any]:
    zones = _zone_counts(cluster, lambda p: p.labels.get("app") == "web")
    per_node = collections.Counter(p.node_name for p in cluster.pods.values()
                                   if p.node_name and p.labels.get("app") == "web")
    return {"web_pods_per_zone": zones, "zone_skew": (max(zones.values()) - min(zones.values())) if zones else 0,
            "max_web_pods_on_a_node": max(per_node.values(), default=0)}


def preemption(n_nodes: int, n_init: int, n_measured: int) -> Setup:
    """PreemptionBasic: pod-low-priority init pods (priority 1, 900m CPU, 500Mi; 4 fill a 4-CPU
    node), then pod-high-priority pods (priority 10, 3 CPU, 500Mi) that fit only by preempting 3
    low-priority pods of a node."""
    nodes = make_nodes(n_nodes)
    init = [pod(f"low-{i:06d}", node=node, cpu="900m", priority=1, port=True)
            for i, node in enumerate(_spread_over(nodes, n_init, per_node=4))]
    measured = [pod(f"high-{k:06d}", cpu="3000m", priority=10, port=True) for k in range(n_measured)]
    return Setup(nodes, init, measured)


def check_preemption(cluster: InMemoryCluster, setup: Setup) -> dict[str, Any]:
    return {"victims_deleted": sum(1 for p in setup.init if p.key not in cluster.pods),
            "preempted_events": sum(1 for e in cluster.events if e.reason == "Preempted")}


def check_nodes_used(cluster: InMemoryCluster, setup: Setup) -> dict[str, Any]:
    return {"nodes_used_by_measured_pods": len({cluster.pods[p.key].node_name for p in setup.measured
                                                if p.key in cluster.pods and cluster.pods[p.key].node_name})}


WORKLOADS: dict[str, Workload] = {w.key: w for w in (
    Workload("plain", "SchedulingBasic", "plain pods (100m/500Mi)", 0.2, plain, check_nodes_used,
             Floor(680, "SchedulingBasic/5000Nodes_10000Pods (the 1,000-pod variant has no threshold)")),
    Workload("anti-affinity", "SchedulingPodAntiAffinity", "required pod anti-affinity within the group, hostname",
             0.2, anti_affinity, check_anti_affinity, Floor(60, "SchedulingPodAntiAffinity/5000Nodes_2000Pods")),
    Workload("preferred-affinity", "SchedulingPreferredPodAffinity", "preferred pod affinity, hostname",
             1.0, preferred_affinity, check_nodes_used,
             Floor(90, "SchedulingPreferredPodAffinity/5000Nodes_5000Pods")),
    Workload("pod-affinity", "SchedulingPodAffinity", "required pod affinity, zone (one zone)",
             1.0, pod_affinity, check_nodes_used, Floor(35, "SchedulingPodAffinity/5000Nodes_5000Pods")),
    Workload("topology-spreading", "TopologySpreading", "DoNotSchedule spread over 3 zones, maxSkew 5",
             1.0, topology_spreading, check_spreading, Floor(460, "TopologySpreading/5000Nodes_5000Pods")),
    Workload("default-spreading", "DefaultTopologySpreading", "system default spreading of a ReplicaSet's pods",
             1.0, default_spreading, check_default_spreading,
             Floor(160, "DefaultTopologySpreading/5000Nodes_50000Pods")),
    Workload("preemption", "PreemptionBasic", "high-priority pods preempting low-priority ones",
             4.0, preemption, check_preemption,
             Floor(570, "PreemptionAsync/5000Nodes (20,000 init pods, preemptors created at 5/s; "
                   "PreemptionBasic has no threshold in the anchors)", same_shape=False)),
)}


# -- the driver ----------------------------------------------------------------------


class SkippingClock:
    """The monotonic clock plus the time skipped when only backing-off pods were left."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped

    def skip_to(self, t: float) -> None:
        self.skipped += max(0.0, t - self())


def _percentiles(seconds: Iterable[float]) -> dict[str, float | None]:
    ms = np.array(list(seconds), dtype=float) * 1000.0
    if not len(ms):
        return {"p50": None, "p90": None, "p99": None, "mean": None}
    return {"p50": round(float(np.percentile(ms, 50)), 4), "p90": round(float(np.percentile(ms, 90)), 4),
            "p99": round(float(np.percentile(ms, 99)), 4), "mean": round(float(ms.mean()), 4)}


def _extension_points(registry: Any) -> dict[str, float]:
    """Mean ms per extension point over the run, from scheduler_framework_extension_point_duration_seconds."""
    sums: dict[str, float] = collections.defaultdict(float)
    counts: dict[str, float] = collections.defaultdict(float)
    for family in registry.collect():
        if family.name != "scheduler_framework_extension_point_duration_seconds":
            continue
        for sample in family.samples:
            point = sample.labels.get("extension_point", "")
            if sample.name.endswith("_sum"):
                sums[point] += sample.value
            elif sample.name.endswith("_count"):
                counts[point] += sample.value
    return {point: round(sums[point] / counts[point] * 1000.0, 4) for point in sorted(sums) if counts[point]}


def _profile_top(profiler: cProfile.Profile, top: int) -> tuple[str, list[dict[str, Any]]]:
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    rows = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, line, function), (_cc, ncalls, tottime, cumtime, _callers) in sorted(
            raw.items(), key=lambda item: -item[1][2])[:top]:
        rows.append({"function": f"{Path(filename).name}:{line}({function})", "calls": ncalls,
                     "tottime_s": round(tottime, 4), "cumtime_s": round(cumtime, 4)})
    return text.getvalue(), rows


def _unscheduled_reasons(cluster: InMemoryCluster, measured: set[str], top: int = 3) -> dict[str, int]:
    """The most frequent PodScheduled=False messages of the measured pods left unbound."""
    reasons = collections.Counter(
        condition.message for key in measured
        if (condition := cluster.conditions.get(key)) is not None and condition.status == "False"
        and not (key in cluster.pods and cluster.pods[key].node_name))
    return dict(reasons.most_common(top))


def run_workload(workload: Workload, n_nodes: int, n_measured: int, *, init_pods: int | None = None,
                 seed: int = 0, max_attempts: int = 5, profile_top: int = 0) -> dict[str, Any]:
    n_init = round(workload.init_per_node * n_nodes) if init_pods is None else init_pods
    setup = workload.build(n_nodes, n_init, n_measured)
    cluster = InMemoryCluster(setup.nodes, setup.init + setup.measured, setup.namespaces)
    clock = SkippingClock()
    asm = assemble(None, cluster, autoload=False, seed=seed, clock=clock)
    for owner in setup.owners:  # Services and ReplicaSets: what the cluster source would deliver first
        asm.cache.add_workload(owner)
    cluster.start(asm.handlers)  # nodes and init pods into the cache, measured pods into the queue
    scheduler, queue = asm.scheduler, asm.queue
    measured = {p.key for p in setup.measured}
    cycles: list[float] = []
    by_outcome: dict[str, list[float]] = collections.defaultdict(list)
    outcomes: collections.Counter[str] = collections.Counter()
    attempts: collections.Counter[str] = collections.Counter()
    given_up: list[str] = []
    retried_then_bound = 0

    async def drive() -> None:
        nonlocal retried_then_bound
        drain = asyncio.get_running_loop().create_task(asm.recorder.run(), name="event-recorder")
        try:
            # Each turn is an attempt (at most max_attempts per pod), or an idle round that
            # frees pods (bindings done, victims deleted, a backoff skipped): bounded.
            for _ in range((3 * max_attempts + 3) * max(len(measured), 1)):
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
                key = turn.pod.key
                cycles.append(turn.seconds)
                by_outcome[turn.outcome].append(turn.seconds)
                outcomes[turn.outcome] += 1
                attempts[key] += 1
                if turn.binding is not None:
                    retried_then_bound += attempts[key] > 1
                elif turn.outcome in (UNSCHEDULABLE, ERROR) and attempts[key] >= max_attempts:
                    queue.delete(turn.pod)
                    given_up.append(key)
                await scheduler.maybe_yield()  # binding tasks and the recorder's drain run
            await scheduler.wait_for_bindings()
            await asm.recorder.flush()
        finally:
            drain.cancel()
            await asyncio.gather(drain, return_exceptions=True)

    profiler = cProfile.Profile() if profile_top else None
    with gc_tuned():
        wall0 = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        asyncio.run(drive())
        if profiler is not None:
            profiler.disable()
        wall = time.perf_counter() - wall0
    bound = sum(1 for key in measured if key in cluster.pods and cluster.pods[key].node_name)
    floor = workload.floor
    pods_per_second = bound / wall if wall > 0 else 0.0
    with_backoff = bound / (wall + clock.skipped) if wall + clock.skipped > 0 else 0.0
    registry = asm.metrics.registry
    result: dict[str, Any] = {
        "workload": workload.key,
        "kube_test": workload.kube_test,
        "summary": workload.summary,
        "nodes": n_nodes,
        "init_pods": len(setup.init),
        "measured_pods": len(measured),
        "bound": bound,
        "unscheduled": len(measured) - bound,
        "given_up": len(given_up),
        "attempts": dict(outcomes),
        "bound_after_a_failed_attempt": retried_then_bound,
        "cycle_ms": _percentiles(cycles),
        "cycle_ms_by_outcome": {outcome: _percentiles(seconds) for outcome, seconds in sorted(by_outcome.items())},
        "pods_per_second": round(pods_per_second, 1),
        "pods_per_second_with_backoff": round(with_backoff, 1),
        "cycle_only_pods_per_second": round(len(cycles) / sum(cycles), 1) if cycles and sum(cycles) else None,
        "profiled": profiler is not None,  # cProfile slows everything: not figures to compare
        "wall_s": round(wall, 3),
        "backoff_skipped_s": round(clock.skipped, 3),
        "kube_floor": None if floor is None else {
            "pods_per_second": floor.pods_per_second, "test": floor.test, "same_shape": floor.same_shape,
            "ratio": round(pods_per_second / floor.pods_per_second, 2),
            "target_10x_met": pods_per_second >= 10 * floor.pods_per_second},
        "preemption": {"attempts": registry.get_sample_value("scheduler_preemption_attempts_total") or 0.0,
                       "victims": registry.get_sample_value("scheduler_preemption_victims_sum") or 0.0},
        "extension_point_mean_ms": _extension_points(registry),
        "check": workload.check(cluster, setup),
        "unscheduled_reasons": _unscheduled_reasons(cluster, measured),
        "plugins": {"filter": [p.name for p in asm.frameworks["default-scheduler"].filter_plugins],
                    "score": [p.name for p in asm.frameworks["default-scheduler"].score_plugins]},
        "warnings": list(asm.warnings),
    }
    if profiler is not None:
        text, rows = _profile_top(profiler, profile_top)
        result["profile_top"] = rows
        result["_profile_text"] = text
    return result


# -- output --------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(results: list[dict[str, Any]]) -> str:
    """A markdown table of the results."""
    lines = ["| workload | kube test | nodes | init | measured | bound | p50 ms | p90 ms | p99 ms | pods/s "
             "| kube floor pods/s | ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c, floor = r["cycle_ms"], r["kube_floor"]
        floor_text = "-" if floor is None else f"{floor['pods_per_second']:g}" + ("" if floor["same_shape"] else "*")
        ratio = "-" if floor is None else f"{floor['ratio']:.1f}x"
        lines.append(f"| {r['workload']} | {r['kube_test']} | {r['nodes']:,} | {r['init_pods']:,} "
                     f"| {r['measured_pods']:,} | {r['bound']:,} | {_fmt(c['p50'])} | {_fmt(c['p90'])} "
                     f"| {_fmt(c['p99'])} | {r['pods_per_second']:,.1f} | {floor_text} | {ratio} |")
    return "\n".join(lines)


POINTS = ("PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "Permit")


def points_table(results: list[dict[str, Any]]) -> str:
    """Mean ms per extension point and workload (where the cycle's time goes)."""
    seen = {point for r in results for point in r["extension_point_mean_ms"]}
    points = [p for p in POINTS if p in seen] + sorted(seen - set(POINTS))
    lines = ["| workload | " + " | ".join(points) + " |", "|---|" + "---|" * len(points)]
    for r in results:
        means = r["extension_point_mean_ms"]
        lines.append(f"| {r['workload']} | " + " | ".join(_fmt(means.get(p)) for p in points) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, from: {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=1000, help="measured pods per workload")
    parser.add_argument("--init-pods", type=int, default=None,
                        help="init pods per workload (default: scheduler_perf's ratio to the nodes at 5,000 "
                             "nodes, e.g. 1,000 plain, 5,000 topology spreading, 20,000 low-priority)")
    parser.add_argument("--max-attempts", type=int, default=5, help="attempts per pod before it is given up")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="run each workload under cProfile, print its top")
    parser.add_argument("--profile-top", type=int, default=25, help="functions listed by --profile")
    parser.add_argument("--out", default="bench/results/parity.json", help="JSON results")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.workloads.split(",") if k.strip()]
    unknown = [k for k in keys if k not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    if args.nodes < 1 or args.pods < 0 or args.max_attempts < 1:
        parser.error("--nodes and --max-attempts must be >= 1, --pods >= 0")
    results = []
    for key in keys:
        r = run_workload(WORKLOADS[key], args.nodes, args.pods, init_pods=args.init_pods, seed=args.seed,
                         max_attempts=args.max_attempts, profile_top=args.profile_top if args.profile else 0)
        text = r.pop("_profile_text", None)
        results.append(r)
        c = r["cycle_ms"]
        print(f"{key:>19}: {r['bound']}/{r['measured_pods']} bound, p50 {_fmt(c['p50'])} ms, "
              f"p99 {_fmt(c['p99'])} ms, {r['pods_per_second']:.1f} pods/s, check {r['check']}"
              + (f", unscheduled: {r['unscheduled_reasons']}" if r["unscheduled"] else ""), flush=True)
        if text:
            print(text, flush=True)
    print()
    print(table(results))
    if any(r["kube_floor"] and not r["kube_floor"]["same_shape"] for r in results):
        print("\n*: not a threshold of this exact shape (see kube_floor.test in the JSON)")
    print("\nmean ms per extension point (scheduler_framework_extension_point_duration_seconds):\n")
    print(points_table(results))
    report = {
        "bench": "parity",
        "scorer": __version__,
        "python": sys.version.split()[0],
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "profile": "default-scheduler (kube defaults, no config file; plugins scorer implements)",
        "floors_at": "5,000 nodes (scheduler_perf CI thresholds, performance-anchors.md §1.2)",
        "results": results,
    }
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
