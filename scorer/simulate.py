"""``scorer simulate``: schedule every pending pod of a cluster snapshot in memory.

The in-memory cluster lists its objects into the scheduler's event handlers,
then ``Scheduler.schedule_one`` schedules one pod at a time; each binding
completes before the next pod, so the output is deterministic. Time is
virtual: when only backing-off pods remain, the clock jumps to the next
backoff expiry, so retries happen as they would in a cluster without the
wait. The run is bounded: at most ``max_attempts_per_pod`` attempts per pod,
then the pod is reported with its last failure.

Preemption: when a pod's PostFilter nominated a node, its victims are
removed from the in-memory cluster right after that attempt (the recorder
is flushed), which requeues the preemptor; it is placed on a later attempt.
Its placement says which pods it preempted and on which nominated node
(``Placement.preempted``, ``Placement.nominated``, and in ``decided_by``);
a pod placed earlier in the run and then preempted is reported as not
placed, naming its preemptor.
"""

from __future__ import annotations

import asyncio
import time
from importlib import resources
from typing import Any

import attrs
import yaml

from scorer.assembly import Assembly, assemble, gc_tuned
from scorer.cluster.memory import InMemoryCluster
from scorer.cycle import SCHEDULED, SKIPPED, CycleReport, ScheduleResult
from scorer.model import LoadedObjects, Pod, load_file, load_objects
from scorer.registry import PluginRegistry
from scorer.sources import MetricsSnapshot, snapshot_from_documents
from scorer.state import NodeTable

DEMO_CLUSTER = "demo-cluster.yaml"
DEMO_CONFIG = "demo-config.yaml"
DEMO_PLUGINS = {"LoadAware": "loadaware", "NetworkTraffic": "networktraffic", "NetworkAware": "networkaware"}


class VirtualClock:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance_to(self, t: float) -> None:
        self.now = max(self.now, t)


@attrs.define(slots=True)
class Placement:
    pod: str
    profile: str
    node: str | None
    score: int | None
    decided_by: str
    attempts: int
    message: str = ""
    preempted: tuple[str, ...] = ()  # pods this pod's preemption deleted
    nominated: str | None = None  # the node preemption nominated it to
    volumes: tuple[tuple[str, str], ...] = ()  # (claim, the PersistentVolume it is bound to) of a placed pod


@attrs.define(slots=True)
class SimulationReport:
    placements: list[Placement]
    nodes: int
    placed: int
    unschedulable: int
    errors: int
    ignored: list[str]
    cycle_seconds: float
    warnings: tuple[str, ...]
    cluster: InMemoryCluster

    @property
    def pods_per_second(self) -> float:
        attempts = sum(p.attempts for p in self.placements)
        return attempts / self.cycle_seconds if self.cycle_seconds > 0 else 0.0


def load_demo_cluster() -> LoadedObjects:
    text = resources.files("scorer.data").joinpath(DEMO_CLUSTER).read_text(encoding="utf-8")
    return load_objects(text, source=f"<built-in {DEMO_CLUSTER}>")


def demo_config(registry: PluginRegistry) -> tuple[Any, str]:
    """The demo's metric-driven profile, or (None, a note) when its contrib plugins are not installed."""
    missing = [name for name in DEMO_PLUGINS if name not in registry.plugins]
    if missing:
        paths = " ".join(f"./contrib_plugins/{DEMO_PLUGINS[name]}" for name in missing)
        return None, (f"the demo's metric-driven profile needs the contrib plugins {', '.join(missing)} "
                      f"(pip install {paths}); using kube-scheduler's default profile")
    text = resources.files("scorer.data").joinpath(DEMO_CONFIG).read_text(encoding="utf-8")
    return yaml.safe_load(text), ""


def deciding_plugins(result: ScheduleResult | None, table: NodeTable) -> str:
    """Which plugins made the chosen node win over the runner-up, by weighted points."""
    if result is None or result.selected is None:
        return ""
    feasible = len(result.feasible_positions)
    if result.nominated:
        return f"nominated node {result.nominated}"
    if feasible == 1:
        return "only feasible node" + (f" of {result.num_all_nodes}" if result.num_all_nodes > 1 else "")
    scores = result.scores
    if scores is None or not scores.plugins:
        return "no score plugins; picked at random"
    names = [table.names[int(r)] for r in result.feasible_rows]
    chosen = names.index(result.selected)
    totals = scores.totals
    best = int(totals[chosen])
    ties = int((totals == best).sum())
    others = [i for i in range(len(names)) if i != chosen]
    runner = max(others, key=lambda i: int(totals[i]))
    diffs = []
    for ps in scores.plugins:
        delta = ps.weight * (int(ps.normalized[chosen]) - int(ps.normalized[runner]))
        if delta > 0:
            diffs.append((delta, ps.plugin))
    diffs.sort(key=lambda d: (-d[0], d[1]))
    parts = [f"{plugin} +{delta}" for delta, plugin in diffs]
    text = ", ".join(parts) if parts else "no plugin separated the best nodes"
    if ties > 1:
        text += f" (tie among {ties} nodes, picked at random)"
    return f"{text} vs {names[runner]}"


def simulate(
    objects: LoadedObjects,
    config_source: Any = None,
    *,
    registry: PluginRegistry | None = None,
    autoload: bool | None = None,
    seed: int = 0,
    max_attempts_per_pod: int = 5,
    metrics_snapshot: MetricsSnapshot | None = None,
) -> SimulationReport:
    """Schedule every pending pod of ``objects``.

    Metric-driven plugins read ``metrics_snapshot``, else the
    ``MetricsSnapshot`` documents of the cluster file, else query Prometheus
    once before the first cycle (their configured ``address``).
    """
    cluster = InMemoryCluster.from_objects(objects)
    clock = VirtualClock()
    reports: dict[str, CycleReport] = {}
    attempts: dict[str, int] = {}
    if metrics_snapshot is None:
        metrics_snapshot = snapshot_from_documents(objects.others, "the cluster file")
    # Metric ages and in-flight placements follow the virtual clock too, from the wall time at start
    # (Prometheus sample times are wall times), so a long simulation does not age its snapshot.
    started = time.time()
    preempted: dict[str, list[str]] = {}  # preemptor -> victims
    nominated: dict[str, str] = {}  # preemptor -> node
    preempted_by: dict[str, tuple[str, str]] = {}  # victim -> (preemptor, node)

    def on_report(report: CycleReport) -> None:
        reports[report.pod.key] = report
        result = report.result
        if result is not None and result.selected is None and result.nominated:
            nominated[report.pod.key] = result.nominated
            for victim in result.victims:
                preempted.setdefault(report.pod.key, []).append(victim.key)
                preempted_by[victim.key] = (report.pod.key, result.nominated)

    asm: Assembly = assemble(config_source, cluster, registry=registry, autoload=autoload, seed=seed,
                             clock=clock, on_report=on_report,
                             metrics_snapshot=metrics_snapshot, metrics_clock=lambda: started + clock.now)
    cache, queue, scheduler = asm.cache, asm.queue, asm.scheduler
    ignored: list[str] = []
    order: list[str] = []
    terminal: list[str] = []
    for pod in cluster.pending_pods():
        if pod.is_terminal:
            terminal.append(pod.key)
        elif pod.scheduler_name in asm.frameworks:
            order.append(pod.key)
        else:
            ignored.append(f"{pod.key} (schedulerName {pod.scheduler_name!r})")
    cluster.start(asm.handlers)  # nodes and bound pods into the cache, pending pods into the queue

    cycle_seconds = 0.0

    async def run() -> None:
        nonlocal cycle_seconds
        await asm.sources.refresh_all()
        # Every turn is an attempt (at most max_attempts_per_pod per pod) or a clock jump
        # that releases a backing-off pod for one: bounded.
        for _ in range((2 * max_attempts_per_pod + 2) * max(len(order), 1)):
            turn = scheduler.schedule_one()
            if turn is None:
                expiry = queue.next_backoff_expiry()
                if expiry is None:
                    break
                clock.advance_to(expiry)
                queue.flush_backoff_completed()
                continue
            cycle_seconds += turn.seconds
            if asm.recorder.pending_deletions:  # preemption's victims leave the cluster now
                await asm.recorder.flush()
            key = turn.pod.key
            attempts[key] = attempts.get(key, 0) + 1
            if turn.outcome == SKIPPED:
                continue
            bound = turn.binding is not None and await turn.binding
            if not bound and attempts[key] >= max_attempts_per_pod:
                queue.delete(turn.pod)  # reported with its last failure
        await asm.recorder.flush()

    with gc_tuned():
        asyncio.run(run())

    placements = []
    placed = unschedulable = errors = 0
    for key in order:
        report = reports.get(key)
        n = attempts.get(key, 0)
        extra = {"preempted": tuple(preempted.get(key, ())), "nominated": nominated.get(key)}
        if key in preempted_by:
            preemptor, node = preempted_by[key]
            unschedulable += 1
            placements.append(Placement(key, report.profile if report else "", None, None, "", n,
                                        f"preempted by {preemptor} (nominated to node {node})"))
            continue
        if report is None:
            placements.append(Placement(key, "", None, None, "", n, "not attempted"))
            continue
        if report.outcome == SCHEDULED:
            placed += 1
            score = None
            result = report.result
            if result is not None and result.scores is not None and result.selected is not None:
                names = [cache.table.names[int(r)] for r in result.feasible_rows]
                score = int(result.scores.totals[names.index(result.selected)])
            decided = deciding_plugins(result, cache.table)
            if extra["preempted"]:
                # "nominated node N" alone says the pod went where its preemption made room: say once.
                preempted_on = f"preempted {', '.join(extra['preempted'])} on nominated node {extra['nominated']}"
                decided = preempted_on if decided == f"nominated node {extra['nominated']}" else \
                    f"{decided}; {preempted_on}"
            placements.append(Placement(key, report.profile, report.node, score, decided, n,
                                        volumes=claimed_volumes(cluster, report.pod),
                                        **extra))  # type: ignore[arg-type]
        else:
            if report.outcome == "error":
                errors += 1
            else:
                unschedulable += 1
            placements.append(Placement(key, report.profile, None, None, "", n, report.message,
                                        **extra))  # type: ignore[arg-type]
    warnings = tuple(objects.warnings) + asm.warnings + tuple(asm.sources.source_warnings())
    if terminal:
        warnings += (f"{len(terminal)} pending pod(s) in a terminal phase (Succeeded or Failed) are not "
                     f"scheduled: {', '.join(terminal)}",)
    return SimulationReport(placements, len(cache.table), placed, unschedulable, errors, ignored,
                            cycle_seconds, warnings, cluster)


def claimed_volumes(cluster: InMemoryCluster, pod: Pod) -> tuple[tuple[str, str], ...]:
    """(claim, PersistentVolume) of each of ``pod``'s claims, as the in-memory PersistentVolume controller
    left them once the pod was bound ("" for a claim still unbound)."""
    out = []
    for name in pod.pvc_claims:
        claim = cluster.pvc(f"{pod.namespace}/{name}")
        out.append((name, claim.volume_name if claim is not None else ""))
    return tuple(out)


def load_cluster(path: str | None) -> LoadedObjects:
    return load_demo_cluster() if path is None else load_file(path)
