"""A testing kit for plugin authors: build pods and nodes, run one plugin, no cluster.

    from scorer.testing import make_node, make_pod, run_plugin

    result = run_plugin(MyPlugin(), make_pod("p", cpu="500m"),
                        [make_node("n1"), make_node("n2", labels={"fast": "yes"})])
    assert result.feasible == ["n1", "n2"]
    assert result.scores["n2"] > result.scores["n1"]

End to end, ``schedule_pending(asm.scheduler)`` schedules the pending pods of
an assembly (``scorer.assembly.assemble``) whose cluster was started.

For the volume plugins: ``make_pv``, ``make_pvc``, ``make_storage_class`` and
``make_csinode`` build storage objects, ``make_pod(volumes=...)`` a pod using
them, and ``make_cache(..., storage=...)`` puts them in the cache a plugin
reads through its handle::

    cache = make_cache(nodes, storage=[make_storage_class("local"), make_pvc("data", storage_class="local")])
    plugin = MyVolumePlugin(args, make_handle(cache=cache))
    pod = make_pod("p", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    result = run_plugin(plugin, pod, nodes)

Builders go through the same parser as real manifests (``scorer.model``),
so what a test builds is what scorer would read from the API.

A plugin's tests need only this module and ``scorer.plugin``: what they drive
of scorer itself end to end is re-exported here.
``build_registry(autoload=False, modules=[my_plugin])`` registers a
distribution's entry-point module alone; ``load_config``,
``load_config_text`` and ``resolve_config`` read a KubeSchedulerConfiguration
against its catalog (``ConfigError`` lists every error with its field path;
``PluginError`` is a plugin that cannot start); ``structure`` and
``unstructure`` convert args as ``pluginConfig`` does; ``simulate``,
``explain_pod`` and ``assemble`` run the scheduler on a cluster held in memory
(``InMemoryCluster``, ``load_objects``, ``LoadedObjects``, ``VirtualClock``,
``MetricsSnapshot``, ``snapshot_from_documents``); ``matches`` says whether
an event a plugin registered covers another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from scorer.assembly import assemble
from scorer.cache import ClusterCache
from scorer.cluster.memory import InMemoryCluster
from scorer.config import load_config, load_config_text, resolve_config, structure, unstructure
from scorer.cycle import ScheduleAlgorithm
from scorer.errors import ConfigError, PluginError
from scorer.explain import explain_pod
from scorer.framework.catalog import PluginInfo, extension_points_of
from scorer.framework.cycle_state import CycleState
from scorer.framework.events import matches
from scorer.framework.runtime import Framework, Handle
from scorer.framework.status import Status
from scorer.model import (
    LoadedObjects,
    Namespace,
    Node,
    Pod,
    load_objects,
    node_from_dict,
    pod_from_dict,
    storage_from_dict,
)
from scorer.model.storage import (
    IMMEDIATE,
    NO_PROVISIONER,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObject,
)
from scorer.registry import build_registry
from scorer.scheduler import ScheduleOneResult, Scheduler
from scorer.simulate import VirtualClock, simulate
from scorer.sources import MetricsSnapshot, SourceHub, snapshot_from_documents

__all__ = [
    "ConfigError",
    "InMemoryCluster",
    "LoadedObjects",
    "MetricsSnapshot",
    "PluginError",
    "PluginRun",
    "VirtualClock",
    "assemble",
    "build_registry",
    "explain_pod",
    "load_config",
    "load_config_text",
    "load_objects",
    "matches",
    "resolve_config",
    "schedule_pending",
    "simulate",
    "snapshot_from_documents",
    "structure",
    "unstructure",
    "make_cache",
    "make_handle",
    "make_source_hub",
    "make_csinode",
    "make_node",
    "make_pod",
    "make_pv",
    "make_pvc",
    "make_storage_class",
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
    volumes: Iterable[Mapping[str, Any]] = (),
    spec: Mapping[str, Any] | None = None,
) -> Pod:
    """A Pod with one container requesting ``cpu``/``memory`` (and ``requests``).

    ``volumes`` are ``spec.volumes`` entries as in a manifest
    (``{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}``).
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
    if volumes:
        pod_spec["volumes"] = [dict(v) for v in volumes]
    pod_spec.update(spec or {})
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                     "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": pod_spec,
    }
    return pod_from_dict(obj)


def _node_selector(labels: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """A NodeSelector of one term: each label ``In`` its values."""
    expressions = [{"key": key, "operator": "In", "values": list(values)} for key, values in labels.items()]
    return {"nodeSelectorTerms": [{"matchExpressions": expressions}]}


def make_pv(
    name: str,
    *,
    capacity: str = "10Gi",
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    storage_class: str = "",
    claim: str = "",
    claim_uid: str | None = None,
    node_affinity: Mapping[str, Sequence[str]] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    csi_driver: str = "",
    phase: str | None = None,
    resource_version: str = "1",
    spec: Mapping[str, Any] | None = None,
) -> PersistentVolume:
    """A PersistentVolume (Filesystem, ``capacity``, ``access_modes``).

    ``claim`` (``namespace/name``, or a name in ``default``) sets ``spec.claimRef``, with
    ``claim_uid`` (default: the uid ``make_pvc`` gives that claim). ``node_affinity`` maps node
    labels to the values they may have (``{"kubernetes.io/hostname": ["n1"]}``). ``csi_driver``
    makes it a CSI volume (handle = the name). ``phase`` defaults to Bound with a claim, else
    Available. ``spec`` is merged last (in-tree sources, volumeMode...).
    """
    pv_spec: dict[str, Any] = {"capacity": {"storage": capacity}, "accessModes": list(access_modes)}
    if storage_class:
        pv_spec["storageClassName"] = storage_class
    if claim:
        namespace, _, claim_name = claim.rpartition("/")
        namespace = namespace or "default"
        uid = f"uid-{namespace}-{claim_name}" if claim_uid is None else claim_uid
        pv_spec["claimRef"] = {"namespace": namespace, "name": claim_name, "uid": uid}
    if node_affinity:
        pv_spec["nodeAffinity"] = {"required": _node_selector(node_affinity)}
    if csi_driver:
        pv_spec["csi"] = {"driver": csi_driver, "volumeHandle": name}
    pv_spec.update(spec or {})
    obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": dict(labels or {}),
                     "annotations": dict(annotations or {}), "resourceVersion": resource_version},
        "spec": pv_spec,
        "status": {"phase": phase if phase is not None else "Bound" if claim else "Available"},
    }
    pv = storage_from_dict(obj)
    assert isinstance(pv, PersistentVolume)
    return pv


def make_pvc(
    name: str,
    *,
    namespace: str = "default",
    storage_class: str | None = None,
    request: str = "1Gi",
    access_modes: Sequence[str] = ("ReadWriteOnce",),
    volume_name: str = "",
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    resource_version: str = "1",
    spec: Mapping[str, Any] | None = None,
) -> PersistentVolumeClaim:
    """A PersistentVolumeClaim (uid ``uid-<namespace>-<name>``) requesting ``request``.

    ``storage_class`` None leaves ``storageClassName`` unset ("" the model's no class).
    With ``volume_name`` it is bound as the PV controller leaves it: ``spec.volumeName``,
    ``pv.kubernetes.io/bind-completed``, phase Bound; else Pending. ``spec`` is merged last.
    """
    pvc_spec: dict[str, Any] = {"accessModes": list(access_modes), "resources": {"requests": {"storage": request}}}
    if storage_class is not None:
        pvc_spec["storageClassName"] = storage_class
    all_annotations = dict(annotations or {})
    if volume_name:
        pvc_spec["volumeName"] = volume_name
        all_annotations.setdefault("pv.kubernetes.io/bind-completed", "yes")
    pvc_spec.update(spec or {})
    obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                     "labels": dict(labels or {}), "annotations": all_annotations,
                     "resourceVersion": resource_version},
        "spec": pvc_spec,
        "status": {"phase": "Bound" if volume_name else "Pending"},
    }
    pvc = storage_from_dict(obj)
    assert isinstance(pvc, PersistentVolumeClaim)
    return pvc


def make_storage_class(
    name: str,
    *,
    provisioner: str = NO_PROVISIONER,
    binding_mode: str = IMMEDIATE,
    allowed_topologies: Mapping[str, Sequence[str]] | None = None,
) -> StorageClass:
    """A StorageClass; ``allowed_topologies`` is one term, label -> the values it may have."""
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": binding_mode,
    }
    if allowed_topologies:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": key, "values": list(values)} for key, values in allowed_topologies.items()]}]
    storage_class = storage_from_dict(obj)
    assert isinstance(storage_class, StorageClass)
    return storage_class


def make_csinode(
    name: str,
    *,
    drivers: Mapping[str, int | None] | None = None,
    migrated_plugins: Iterable[str] = (),
) -> CSINode:
    """The CSINode of node ``name``: ``drivers`` maps a driver to its ``allocatable.count``
    (None: no limit); ``migrated_plugins`` fills the migrated-plugins annotation."""
    entries = []
    for driver, count in (drivers or {}).items():
        entry: dict[str, Any] = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        entries.append(entry)
    plugins = ",".join(migrated_plugins)
    annotations = {"storage.alpha.kubernetes.io/migrated-plugins": plugins} if plugins else {}
    obj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"drivers": entries},
    }
    csinode = storage_from_dict(obj)
    assert isinstance(csinode, CSINode)
    return csinode


def make_cache(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    namespaces: Iterable[Namespace] = (),
    *,
    storage: Iterable[StorageObject] = (),
) -> ClusterCache:
    """A ClusterCache holding ``nodes``, the bound ``pods`` (those with a node name) and the
    ``storage`` objects (PVs, PVCs, StorageClasses, CSINodes...)."""
    cache = ClusterCache()
    cache.load(nodes, pods, namespaces)
    for obj in storage:
        cache.add_storage(obj)
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
