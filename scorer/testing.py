"""A testing kit for plugin authors: build pods and nodes, run one plugin, no cluster.

    from scorer.testing import make_node, make_pod, run_plugin

    result = run_plugin(MyPlugin(), make_pod("p", cpu="500m"),
                        [make_node("n1"), make_node("n2", labels={"fast": "yes"})])
    assert result.feasible == ["n1", "n2"]
    assert result.scores["n2"] > result.scores["n1"]

End to end, ``schedule_pending(asm.scheduler)`` schedules the pending pods of
an assembly (``scorer.assembly.assemble``) whose cluster was started.

Builders go through the same parser as real manifests (``scorer.model``),
so what a test builds is what scorer would read from the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from scorer.cache import ClusterCache
from scorer.cycle import ScheduleAlgorithm
from scorer.framework.catalog import PluginInfo, extension_points_of
from scorer.framework.cycle_state import CycleState
from scorer.framework.runtime import Framework, Handle
from scorer.framework.status import Status
from scorer.model import Namespace, Node, Pod, node_from_dict, pod_from_dict
from scorer.scheduler import ScheduleOneResult, Scheduler
from scorer.sources import MetricsSnapshot, SourceHub

__all__ = [
    "PluginRun",
    "schedule_pending",
    "make_cache",
    "make_handle",
    "make_source_hub",
    "make_node",
    "make_pod",
    "plugin_config",
    "run_plugin",
]


def make_node(
    name: str,
    *,
    cpu: str | int = "4",
    memory: str = "32Gi",
    pods: int = 110,
    allocatable: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    unschedulable: bool = False,
    addresses: Iterable[Mapping[str, str]] = (),
) -> Node:
    """A Node with kube-scheduler's benchmark defaults (4 CPU, 32Gi, 110 pods)."""
    alloc: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    alloc.update(allocatable or {})
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": {"allocatable": alloc, "capacity": dict(alloc), "addresses": [dict(a) for a in addresses]},
    }
    return node_from_dict(obj)


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    requests: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority: int | None = None,
    tolerations: Iterable[Mapping[str, Any]] = (),
    node_name: str = "",
    scheduler_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Pod:
    """A Pod with one container requesting ``cpu``/``memory`` (and ``requests``).

    ``spec`` is merged last, for anything the keywords do not cover
    (init containers, overhead, topology spread constraints ...).
    """
    reqs: dict[str, Any] = {}
    if cpu is not None:
        reqs["cpu"] = cpu
    if memory is not None:
        reqs["memory"] = memory
    reqs.update(requests or {})
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    if reqs:
        container["resources"] = {"requests": reqs}
    pod_spec: dict[str, Any] = {"containers": [container], "tolerations": [dict(t) for t in tolerations]}
    if priority is not None:
        pod_spec["priority"] = priority
    if node_name:
        pod_spec["nodeName"] = node_name
    if scheduler_name:
        pod_spec["schedulerName"] = scheduler_name
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if affinity:
        pod_spec["affinity"] = dict(affinity)
    pod_spec.update(spec or {})
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                     "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": pod_spec,
    }
    return pod_from_dict(obj)


def make_cache(nodes: Iterable[Node], pods: Iterable[Pod] = (), namespaces: Iterable[Namespace] = ()) -> ClusterCache:
    """A ClusterCache holding ``nodes`` and the bound ``pods`` (those with a node name)."""
    cache = ClusterCache()
    cache.load(nodes, pods, namespaces)
    return cache


def make_source_hub(
    metrics: Mapping[str, Mapping[str, float | tuple[float, float] | None]],
    *,
    clock: Callable[[], float] | None = None,
) -> SourceHub:
    """A SourceHub serving a static snapshot: ``{metric: {node: value | (value, age_seconds) | None}}``.

    Plugins built with ``make_handle(hub)`` read these values instead of
    querying Prometheus; ``clock`` (default: a fixed time) lets a test age them.
    """
    now = 1_000_000.0
    snapshot: dict[str, dict[str, tuple[float, float]]] = {}
    for name, nodes in metrics.items():
        snapshot[name] = {}
        for node, entry in nodes.items():
            if entry is None:
                continue
            value, age = entry if isinstance(entry, tuple) else (entry, 0.0)
            snapshot[name][node] = (float(value), float(age))
    return SourceHub(snapshot=MetricsSnapshot(snapshot, "test snapshot"), clock=clock or (lambda: now))


def make_handle(hub: SourceHub | None = None, cache: ClusterCache | None = None,
                profile_name: str = "test-scheduler") -> Handle:
    """A Handle for building a plugin in a test: ``hub`` (default: an empty SourceHub) becomes
    ``handle.sources``; ``cache`` defaults to an empty ClusterCache."""
    return Handle(cache if cache is not None else ClusterCache(), profile_name, None,
                  sources=hub if hub is not None else SourceHub())


def plugin_config(name: str, args: Mapping[str, Any] | None = None, *, weight: int | None = None,
                  scheduler_name: str = "default-scheduler") -> dict[str, Any]:
    """A KubeSchedulerConfiguration (v1) whose one profile enables plugin ``name`` at every
    extension point it implements (``multiPoint``, on top of the defaults), with ``args``."""
    enabled: dict[str, Any] = {"name": name}
    if weight is not None:
        enabled["weight"] = weight
    profile: dict[str, Any] = {"schedulerName": scheduler_name, "plugins": {"multiPoint": {"enabled": [enabled]}}}
    if args is not None:
        profile["pluginConfig"] = [{"name": name, "args": dict(args)}]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


@attrs.frozen(slots=True)
class _Profile:
    scheduler_name: str
    percentage_of_nodes_to_score: int | None
    points: dict[str, tuple[str, ...]]
    weights: dict[str, int]
    args: dict[str, Any]


@attrs.define(slots=True)
class PluginRun:
    """What one plugin did for one pod.

    ``filter``: every node's Filter status (Success for nodes that pass);
    ``feasible``: nodes that passed, in node order; ``raw_scores`` and
    ``scores`` (after NormalizeScore): per feasible node, empty when the plugin
    does not score or PreScore returned Skip (``score_skipped``).
    """

    pre_filter: Status
    filter: dict[str, Status]
    feasible: list[str]
    pre_score: Status | None
    score_skipped: bool
    raw_scores: dict[str, int]
    scores: dict[str, int]
    error: Status | None = None


def run_plugin(
    plugin: Any,
    pod: Pod,
    nodes: Sequence[Node],
    *,
    pods: Iterable[Pod] = (),
    namespaces: Iterable[Namespace] = (),
    weight: int = 1,
    sources: SourceHub | None = None,
) -> PluginRun:
    """Run one plugin object through PreFilter, Filter, PreScore, Score and NormalizeScore.

    Only the extension points the plugin implements are run, through the
    scheduler's own algorithm (``scorer.cycle.ScheduleAlgorithm``) with every
    node evaluated, and every feasible node scored (even a single one).
    Exceptions raised by the plugin become Error statuses in ``error``, as in
    the scheduler.
    """
    cache = make_cache(nodes, pods, namespaces)
    name = getattr(plugin, "name", None) or type(plugin).__name__
    points = extension_points_of(plugin)
    profile = _Profile(
        scheduler_name="test-scheduler",
        percentage_of_nodes_to_score=100,
        points={p: (name,) for p in ("preFilter", "filter", "preScore", "score") if p in points},
        weights={name: weight},
        args={},
    )
    info = PluginInfo(name=name, factory=lambda args, handle: plugin, extension_points=points)
    fwk = Framework(profile, {name: info}, Handle(cache, "test-scheduler", None, sources=sources))
    state = CycleState()
    result = ScheduleAlgorithm(cache).schedule_pod(fwk, state, pod, evaluate_all=True, score_all="score" in points)
    table = cache.table
    run = PluginRun(Status(), {}, [], None, False, {}, {})
    if result.failed_at == "PreFilter" or result.pre_filter_status is not None:
        run.pre_filter = result.pre_filter_status or result.status
        run.filter = {n: run.pre_filter for n in table.names}
        run.error = result.status if result.failed_at == "PreFilter" else None
        return run
    if result.failed_at == "Filter":
        run.error = result.status
        return run
    rows = result.rows
    statuses = {table.names[int(r)]: Status(plugin=name) for r in rows}
    statuses.update((name_, status) for name_, status in result.node_statuses(table).items() if name_ in statuses)
    run.filter = statuses
    run.feasible = [table.names[int(r)] for r in result.feasible_rows]
    run.pre_score = result.pre_score_status
    if result.failed_at == "PreScore":
        run.error = result.status
        return run
    if name in state.skip_score_plugins:
        run.score_skipped = True
        return run
    if result.failed_at == "Score":
        run.error = result.status
        return run
    if result.scores is not None and result.scores.plugins:
        ps = result.scores.plugins[0]
        run.raw_scores = {n: int(v) for n, v in zip(run.feasible, ps.raw.tolist(), strict=True)}
        run.scores = {n: int(v) for n, v in zip(run.feasible, ps.normalized.tolist(), strict=True)}
    return run


async def schedule_pending(scheduler: Scheduler) -> list[ScheduleOneResult]:
    """Schedule the active pods one at a time, each binding awaited before the next,
    until no pod is active; then flush the recorder. Returns every turn, in order
    (``turn.binding.result()`` says whether a pod was bound). Backing-off pods wait."""
    turns = []
    while (turn := scheduler.schedule_one()) is not None:
        turns.append(turn)
        if turn.binding is not None:
            await turn.binding
    await scheduler.recorder.flush()
    return turns
