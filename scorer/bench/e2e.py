"""The bench's end-to-end mode: a scheduler process against a real kube-apiserver v1.20.2, binds timed from a watch.

``run_e2e_point`` measures one point as scheduler_perf does, but with the
scheduler as its own process and the API server real: binding, Events and the
watch are part of what is timed. For each point:

1. a fresh control plane (``scorer.bench.controlplane``: etcd on ``/dev/shm``
   when it exists, kube-apiserver on 127.0.0.1);
2. the Setup's objects are created over 64 keep-alive connections, in order:
   namespaces and PriorityClasses, workloads (Services, ReplicaSets, PDBs ...:
   default spreading reads them), nodes (with their status: allocatable,
   capacity, Ready; no kubelet ever changes it), the init pods already bound
   (``spec.nodeName`` set), then the measured pods, pending. None of it is
   timed;
3. a WATCH on every pod from a resourceVersion taken after that;
4. the scheduler starts: ``python -m scorer run`` with a ``v1`` configuration,
   or kube-scheduler v1.20.2 with a ``v1beta1`` one, each with the profile
   (its own default plugins, or ``config_path``'s profiles: converted to
   v1beta1 for kube-scheduler, or an error saying why not),
   ``clientConnection.qps``/``burst``, ``leaderElect: false`` and the point's
   ``percentageOfNodesToScore``. For ``kube-scheduler+scorer`` (``EXTENDER``),
   scorer starts first as kube-scheduler's HTTP extender (``scorer run
   --extender-profile scorer-extender --no-scheduling --metrics FILE``: only
   the metric-driven plugins of the ``metrics`` profile, reading the Setup's
   generated snapshot, written to FILE), and kube-scheduler, started once
   scorer's ``/readyz`` answers 200 (its caches synced), gets an ``extenders``
   entry for it (``nodeCacheCapable: true``, ``ignorable: false``, weight 5);
   ``kube-scheduler+stand-in`` (``STAND_IN``) is the same with
   ``scorer.bench.standin`` in scorer's place, an extender that answers at
   once (the protocol's own cost); binds are timed from kube-scheduler's
   start, as for the others;
5. each measured pod is stamped when the watch first shows it bound. The
   harness plays the kubelet's one part a preemption needs: a bound pod the
   scheduler deletes (a victim, graceful deletion) is removed at once
   (``gracePeriodSeconds: 0``), as a kubelet would once its containers stop;
6. the run ends when every measured pod is bound, when no pod was bound for
   ``STALL_SECONDS`` (``FIRST_BIND_SECONDS`` before the first: start-up and the initial LISTs of a
   large cluster), the rest reported unscheduled, or at the deadline;
   the scheduler's ``/metrics`` is scraped, then every process is stopped.

The point (``scorer.bench.spec``'s shape, ``mode: "e2e"``) carries:
``throughput`` (pods bound over the seconds from the first bind to the last,
binds in each whole second and their p50/p90/p99, and
``pods_per_second_from_start``: from the scheduler's process start, its
start-up and initial LIST included); ``cycle_ms`` from the scheduler's
``scheduler_scheduling_algorithm_duration_seconds`` histogram (quantiles
interpolated inside the buckets as Prometheus' ``histogram_quantile`` does:
the first bucket is 0-1 ms, so sub-millisecond quantiles are coarse, the mean
is exact; ``max`` cannot be known from a histogram: null); ``attempt_ms``
(``scheduler_scheduling_attempt_duration_seconds``, kube 1.20's
``scheduler_e2e_scheduling_duration_seconds``: until the bind returned);
``extension_points_ms`` and ``plugins_ms`` from
``scheduler_framework_extension_point_duration_seconds`` and
``scheduler_plugin_execution_duration_seconds`` (both schedulers sample the
plugin durations in 10% of the cycles); ``memory.peak_rss_mb`` (``VmHWM`` of
the scheduler process); ``cpu_seconds`` used from the scheduler's start to
the end by the scheduler, kube-apiserver, etcd, this harness and the rest of
the machine (``other``: work sharing the cores). A ``kube-scheduler+scorer``
point also has ``extender``: how kube-scheduler calls scorer and what scorer's
``/metrics`` counted (``scorer_extender_requests_total`` by verb and result,
``scorer_extender_request_duration_seconds`` by verb, its peak RSS; its CPU
seconds are ``cpu_seconds.extender``); ``memory`` is kube-scheduler's. A
``kube-scheduler+stand-in`` point has the same section for the stand-in.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import orjson
from prometheus_client.parser import text_string_to_metric_families

from scorer.bench.controlplane import (
    KUBE_VERSION,
    TOKEN,
    ControllerManager,
    ControlPlane,
    ControlPlaneError,
    end_process,
    find_binary,
    free_port,
    kube_binaries,
    tmpfs_dir,
)
from scorer.bench.runner import METRICS_CONFIG, histogram_quantile
from scorer.bench.spec import ADAPTIVE, PointSpec, Setup
from scorer.bench.spec import throughput as spec_throughput
from scorer.config.convert import unstructure
from scorer.config.load import load_and_resolve
from scorer.config.source import read_file
from scorer.config.types import KIND, V1, V1BETA1, ResolvedProfile
from scorer.errors import ScorerError
from scorer.extender.http import DEFAULT_PREFIX, FILTER, PRIORITIZE, VERBS
from scorer.framework.catalog import PluginInfo
from scorer.registry import build_registry
from scorer.sources import MetricsSnapshot
from scorer.sources.static import API_VERSION as SNAPSHOT_API_VERSION
from scorer.sources.static import KIND as SNAPSHOT_KIND

DEFAULT_SCHEDULER = "default-scheduler"
ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"
ATTEMPT = ("scheduler_scheduling_attempt_duration_seconds", "scheduler_e2e_scheduling_duration_seconds")
EXTENSION_POINT = "scheduler_framework_extension_point_duration_seconds"
PLUGIN = "scheduler_plugin_execution_duration_seconds"
CONNECTIONS = 64  # concurrent keep-alive connections creating the objects
STALL_SECONDS = 30.0  # no bind for this long: the rest are unscheduled
FIRST_BIND_SECONDS = 300.0  # the same before the first bind (start-up and the initial LISTs of a large cluster)
WATCH_READY_SECONDS = 30.0
VOLUMES_SYNC_SECONDS = 120.0  # for the PersistentVolume controller to give thousands of new volumes a phase
SCRAPE_SECONDS = 5.0  # to wait for the attempt and Bind histograms to count every bound pod
SERVICE_RANGE = "10.96.0.0/12"  # room for a user's Services (each gets a ClusterIP)
BUILD_HINT = "run 'bash scripts/build-kube.sh' as root (or set SCORER_KUBE_BIN to a directory with it)"

# kube-scheduler with scorer as its HTTP extender (``scorer run --extender-profile ... --no-scheduling``).
EXTENDER = "kube-scheduler+scorer"
# kube-scheduler with the stand-in extender (``python -m scorer.bench.standin``: answers at once, does no
# work): the protocol's own cost, the ceiling of any extender on this machine.
STAND_IN = "kube-scheduler+stand-in"
EXTENDED = (EXTENDER, STAND_IN)  # kube-scheduler with an HTTP extender
KUBE_SCHEDULERS = ("kube-scheduler", *EXTENDED)  # the points where kube-scheduler schedules
EXTENDER_PROFILE = "scorer-extender"
EXTENDER_WEIGHT = 5
EXTENDER_TIMEOUT = "5s"  # kube-scheduler's httpTimeout (its default too)
EXTENDER_READY_SECONDS = 300.0  # scorer's start-up and the initial LISTs of a large cluster, to /readyz 200
EXTENDER_REQUESTS = "scorer_extender_requests"  # the counter's family (its samples end in _total)
EXTENDER_DURATION = "scorer_extender_request_duration_seconds"
EXTENDER_UNKNOWN = "scorer_extender_unknown_nodes"


class E2EError(ScorerError):
    """A point that cannot be measured end to end (the message says why)."""


def e2e_available() -> str | None:
    """None when kube-apiserver, etcd (and openssl) and kube-scheduler are there, else the one-line reason."""
    try:
        binaries = kube_binaries()
    except ControlPlaneError as error:
        return str(error)
    if binaries.scheduler is None:
        return f"kube-scheduler not found: {BUILD_HINT}"
    return None


# --- the schedulers' configurations -------------------------------------------------------------------


def scheduler_names(setup: Setup) -> list[str]:
    """The profiles the measured pods name (``default-scheduler`` when they name none), in order."""
    names = ((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER for pod in setup.measured)
    return list(dict.fromkeys(names)) or [DEFAULT_SCHEDULER]


def read_config(config_path: str) -> dict[str, Any]:
    data = read_file(config_path)
    if not isinstance(data, dict):
        raise E2EError(f"{config_path}: a KubeSchedulerConfiguration must be a mapping")
    return data


def check_profiles(profiles: Iterable[Mapping[str, Any]], wanted: list[str], source: str) -> None:
    present = {profile.get("schedulerName") or DEFAULT_SCHEDULER for profile in profiles}
    missing = [name for name in wanted if name not in present]
    if missing:
        raise E2EError(f"{source} has no profile for schedulerName {', '.join(missing)} that the measured "
                       f"pods name (it has {', '.join(sorted(present))})")


def common_settings(kubeconfig: Path, spec: PointSpec, qps: float, burst: int,
                    base: Mapping[str, Any]) -> dict[str, Any]:
    """The keys both schedulers get whatever the user's file says: client, no election, the point's percentage."""
    return {
        "clientConnection": {**(base.get("clientConnection") or {}), "kubeconfig": str(kubeconfig),
                             "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False},
        "percentageOfNodesToScore": spec.percentage,
    }


def with_percentage(profiles: list[dict[str, Any]], spec: PointSpec) -> list[dict[str, Any]]:
    """A profile's own percentageOfNodesToScore (v1beta3 and later) would override the point's."""
    if spec.percentage == ADAPTIVE:
        return [{k: v for k, v in p.items() if k != "percentageOfNodesToScore"} for p in profiles]
    return [{**p, "percentageOfNodesToScore": spec.percentage} if "percentageOfNodesToScore" in p else p
            for p in profiles]


def scorer_config(setup: Setup, spec: PointSpec, config_path: str | None, kubeconfig: Path, qps: float,
                  burst: int) -> dict[str, Any]:
    """scorer's configuration: ``config_path`` (any version scorer reads) or one default v1 profile per name."""
    names = scheduler_names(setup)
    if config_path is None:
        base: dict[str, Any] = {"apiVersion": V1, "kind": KIND, "profiles": [{"schedulerName": n} for n in names]}
    else:
        base = read_config(config_path)
        check_profiles(base.get("profiles") or [{}], names, config_path)
    return {**base, **common_settings(kubeconfig, spec, qps, burst, base),
            "profiles": with_percentage(list(base.get("profiles") or [{}]), spec)}


def kube_scheduler_config(setup: Setup, spec: PointSpec, config_path: str | None, kubeconfig: Path, qps: float,
                          burst: int, port: int) -> tuple[dict[str, Any], list[str]]:
    """kube-scheduler v1.20.2's v1beta1 configuration and the conversion's warnings; E2EError when impossible."""
    names = scheduler_names(setup)
    warnings: list[str] = []
    base: dict[str, Any] = {}
    if config_path is None:
        profiles: list[dict[str, Any]] = [{"schedulerName": n} for n in names]
    else:
        base = read_config(config_path)
        if base.get("apiVersion") == V1BETA1:
            profiles = list(base.get("profiles") or [{}])
        else:
            profiles, warnings = v1beta1_profiles(config_path)
        check_profiles(profiles, names, config_path)
        if base.get("extenders"):
            raise E2EError(f"{config_path}: extenders are not converted for kube-scheduler")
    address = f"127.0.0.1:{port}"
    config = {"apiVersion": V1BETA1, "kind": KIND, **common_settings(kubeconfig, spec, qps, burst, base),
              "profiles": profiles, "healthzBindAddress": address, "metricsBindAddress": address}
    return config, warnings


def extender_entry(port: int) -> dict[str, Any]:
    """kube-scheduler's v1beta1 ``extenders`` entry for scorer on ``port``: names only (nodeCacheCapable:
    scorer knows the nodes from its own watch), not ignorable (a failing extender must show in the figures)."""
    return {"urlPrefix": f"http://127.0.0.1:{port}{DEFAULT_PREFIX}", "filterVerb": FILTER,
            "prioritizeVerb": PRIORITIZE, "weight": EXTENDER_WEIGHT, "nodeCacheCapable": True,
            "ignorable": False, "httpTimeout": EXTENDER_TIMEOUT, "enableHTTPS": False}


def extender_scorer_config(spec: PointSpec, kubeconfig: Path, qps: float, burst: int) -> dict[str, Any]:
    """scorer's configuration as kube-scheduler's extender: one profile, ``EXTENDER_PROFILE``, with only the
    metric-driven plugins of the bench's ``metrics`` profile (their weights and args) and the queue sort and
    binder every scorer profile has (it binds nothing: ``--no-scheduling``)."""
    metrics = METRICS_CONFIG["profiles"][0]
    enabled = [{"name": "PrioritySort"}, {"name": "DefaultBinder"}, *metrics["plugins"]["multiPoint"]["enabled"]]
    return {"apiVersion": V1, "kind": KIND, **common_settings(kubeconfig, spec, qps, burst, {}),
            "profiles": [{"schedulerName": EXTENDER_PROFILE,
                          "plugins": {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}},
                          "pluginConfig": metrics["pluginConfig"]}]}


def snapshot_document(snapshot: MetricsSnapshot) -> dict[str, Any]:
    """A ``MetricsSnapshot`` document (``scorer.sources.static``'s format) holding ``snapshot``'s values
    and ages (seconds)."""
    return {"apiVersion": SNAPSHOT_API_VERSION, "kind": SNAPSHOT_KIND,
            "metrics": {metric: {node: {"value": value, "age": age} for node, (value, age) in nodes.items()}
                        for metric, nodes in snapshot.metrics.items()}}


# What kube-scheduler v1.20.2 registers, and where each plugin runs (a plugin enabled at a point it does not
# implement stops kube-scheduler at start-up).
KUBE_120_POINTS: dict[str, frozenset[str]] = {name: frozenset(points.split()) for name, points in {
    "PrioritySort": "queueSort", "DefaultBinder": "bind", "DefaultPreemption": "postFilter",
    "ImageLocality": "score", "TaintToleration": "filter preScore score", "NodeName": "filter",
    "NodePorts": "preFilter filter", "NodePreferAvoidPods": "score", "NodeAffinity": "filter score",
    "PodTopologySpread": "preFilter filter preScore score", "NodeUnschedulable": "filter",
    "NodeResourcesFit": "preFilter filter", "NodeResourcesBalancedAllocation": "score",
    "NodeResourcesLeastAllocated": "score", "NodeResourcesMostAllocated": "score",
    "RequestedToCapacityRatio": "score", "VolumeBinding": "preFilter filter reserve preBind",
    "VolumeRestrictions": "filter", "VolumeZone": "filter", "NodeVolumeLimits": "filter",
    "EBSLimits": "filter", "GCEPDLimits": "filter", "AzureDiskLimits": "filter", "CinderLimits": "filter",
    "InterPodAffinity": "preFilter filter preScore score", "NodeLabel": "filter score",
    "ServiceAffinity": "preFilter filter score", "SelectorSpread": "preScore score",
}.items()}
# Work kube 1.20 does in Filter or Score that later versions moved to PreFilter or PreScore: left out quietly.
SPLIT_POINTS = {"preFilter": "filter", "preScore": "score"}
V1BETA1_POINTS = ("queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit",
                  "preBind", "bind", "postBind")
FIT_STRATEGY_PLUGINS = {"LeastAllocated": "NodeResourcesLeastAllocated",
                        "MostAllocated": "NodeResourcesMostAllocated",
                        "RequestedToCapacityRatio": "RequestedToCapacityRatio"}
DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]


def catalog() -> Mapping[str, PluginInfo]:
    """The installed plugins (built in and pip-installed), as ``scorer run`` sees them."""
    return build_registry().catalog()


def v1beta1_profiles(config_path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The profiles of a v1beta2/v1beta3/v1 file, as scorer resolves them, written out for kube 1.20.

    Every extension point is listed in full (``disabled: [*]``), so kube 1.20's defaults do not add
    plugins back; what cannot be said in v1beta1 raises E2EError naming it.
    """
    _, resolved = load_and_resolve(config_path, catalog())
    profiles: list[dict[str, Any]] = []
    warnings: list[str] = []
    for profile in resolved:
        converted, notes = v1beta1_profile(profile)
        profiles.append(converted)
        warnings.extend(f"kube-scheduler profile {profile.scheduler_name}: {note}" for note in notes)
    return profiles, warnings


def v1beta1_profile(profile: ResolvedProfile) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    fit = unstructure(profile.args.get("NodeResourcesFit")) or {}
    plugins: dict[str, Any] = {}
    for point in V1BETA1_POINTS:
        enabled = []
        for name in profile.points.get(point, ()):
            if point in ("preScore", "score") and name == "NodeResourcesFit":  # its score is a plugin in 1.20
                name = FIT_STRATEGY_PLUGINS[(fit.get("scoringStrategy") or {}).get("type", "LeastAllocated")]
            if name not in KUBE_120_POINTS:
                raise E2EError(f"plugin {name} does not exist in kube-scheduler {KUBE_VERSION}")
            if point not in KUBE_120_POINTS[name]:
                if point not in SPLIT_POINTS or SPLIT_POINTS[point] not in KUBE_120_POINTS[name]:
                    notes.append(f"{name} does not run at {point} in {KUBE_VERSION}: left out there")
                continue
            entry: dict[str, Any] = {"name": name}
            if point == "score":
                entry["weight"] = profile.weights.get(name, profile.weights.get("NodeResourcesFit", 1))
            enabled.append(entry)
        plugins[point] = {"enabled": enabled, "disabled": [{"name": "*"}]}
    for name in profile.points.get("preEnqueue", ()):
        if name != "SchedulingGates":
            raise E2EError(f"plugin {name} (preEnqueue) does not exist in kube-scheduler {KUBE_VERSION}")
        # SchedulingGates is left out: kube-apiserver 1.20 drops spec.schedulingGates, so no pod has any
    plugin_config = [{"name": name, "args": args} for name, args in v1beta1_args(profile, fit) if args]
    return {"schedulerName": profile.scheduler_name, "plugins": plugins, "pluginConfig": plugin_config}, notes


def v1beta1_args(profile: ResolvedProfile, fit: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(plugin, v1beta1 args) for the plugins that run and have args; E2EError for args 1.20 cannot express."""
    running = set(profile.plugin_names)
    for name in sorted(running):
        args = unstructure(profile.args.get(name))
        if not args:
            continue
        if name == "NodeResourcesFit":
            yield name, {k: fit[k] for k in ("ignoredResources", "ignoredResourceGroups") if fit.get(k)}
            yield from fit_strategy_args(fit.get("scoringStrategy") or {})
        elif name == "NodeResourcesBalancedAllocation":
            if args.get("resources", DEFAULT_RESOURCES) != DEFAULT_RESOURCES:
                raise E2EError(f"NodeResourcesBalancedAllocation's resources cannot be set in {KUBE_VERSION}")
        elif name == "InterPodAffinity":
            if args.get("ignorePreferredTermsOfExistingPods"):
                raise E2EError(f"InterPodAffinity's ignorePreferredTermsOfExistingPods is not in {KUBE_VERSION}")
            yield name, {"hardPodAffinityWeight": args.get("hardPodAffinityWeight", 1)}
        elif name == "PodTopologySpread":
            yield name, spread_args(args)
        elif name in ("DefaultPreemption", "NodeAffinity"):
            yield name, args  # the same fields in v1beta1 (1.20)
        elif name == "VolumeBinding":
            timeout = args.get("bindTimeoutSeconds", 600)
            if timeout <= 0:  # 1.20's plugin refuses it at start-up ("must be positive integer")
                raise E2EError(f"VolumeBinding's bindTimeoutSeconds {timeout} is refused by {KUBE_VERSION} "
                               "(it must be positive there)")
            yield name, {"bindTimeoutSeconds": timeout}
        else:
            raise E2EError(f"{name}'s args have no v1beta1 form for kube-scheduler {KUBE_VERSION}")


def fit_strategy_args(strategy: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    kind = strategy.get("type", "LeastAllocated")
    resources = strategy.get("resources") or DEFAULT_RESOURCES
    if kind == "RequestedToCapacityRatio":  # v1beta1 scores the shape 0-10, v1beta2 and later 0-100
        shape = [{"utilization": p["utilization"], "score": p["score"] // 10}
                 for p in (strategy.get("requestedToCapacityRatio") or {}).get("shape", [])]
        yield FIT_STRATEGY_PLUGINS[kind], {"shape": shape, "resources": resources}
    else:
        yield FIT_STRATEGY_PLUGINS[kind], {"resources": resources}


def spread_args(args: dict[str, Any]) -> dict[str, Any]:
    constraints = args.get("defaultConstraints") or []
    if args.get("defaultingType", "System") == "System":
        return {}  # 1.20 (DefaultPodTopologySpread on): no defaultConstraints means the system defaults
    if not constraints:
        raise E2EError(f"PodTopologySpread with defaultingType List and no constraints cannot be said in "
                       f"{KUBE_VERSION} (an empty list means the system defaults there)")
    return {"defaultConstraints": constraints}


def scheduler_command(spec: PointSpec, config_file: Path, kubeconfig: Path, port: int,
                      kube_scheduler: str | None) -> list[str]:
    if spec.scheduler in KUBE_SCHEDULERS:
        if kube_scheduler is None:
            raise E2EError(f"kube-scheduler not found: {BUILD_HINT}")
        return [kube_scheduler, f"--config={config_file}", "--secure-port=0", "-v=1"]
    return scorer_command(config_file, kubeconfig, port)


def scorer_command(config_file: Path, kubeconfig: Path, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "scorer", "run", "--config", str(config_file), "--kubeconfig", str(kubeconfig),
            "--bind-address", "127.0.0.1", "--port", str(port), *extra]


def extender_command(config_file: Path, kubeconfig: Path, port: int, snapshot_file: Path) -> list[str]:
    """scorer serving only the extender verbs, reading the metrics snapshot file."""
    return scorer_command(config_file, kubeconfig, port, "--extender-profile", EXTENDER_PROFILE, "--no-scheduling",
                          "--metrics", str(snapshot_file))


def stand_in_command(port: int) -> list[str]:
    """The stand-in extender (``scorer.bench.standin``) on ``port``."""
    return [sys.executable, "-m", "scorer.bench.standin", str(port)]


# --- the Setup as API requests ---------------------------------------------------------------------------


# (apiVersion, kind) -> (the version served by kube-apiserver 1.20, the collection's path, namespaced)
COLLECTIONS: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("v1", "Namespace"): ("v1", "/api/v1/namespaces", False),
    ("v1", "Node"): ("v1", "/api/v1/nodes", False),
    ("v1", "Pod"): ("v1", "/api/v1/pods", True),
    ("v1", "Service"): ("v1", "/api/v1/services", True),
    ("v1", "ReplicationController"): ("v1", "/api/v1/replicationcontrollers", True),
    ("v1", "PersistentVolumeClaim"): ("v1", "/api/v1/persistentvolumeclaims", True),
    ("v1", "PersistentVolume"): ("v1", "/api/v1/persistentvolumes", False),
    ("storage.k8s.io/v1", "StorageClass"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/storageclasses", False),
    ("storage.k8s.io/v1beta1", "StorageClass"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/storageclasses",
                                                 False),
    ("storage.k8s.io/v1", "CSINode"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csinodes", False),
    ("storage.k8s.io/v1beta1", "CSINode"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csinodes", False),
    ("storage.k8s.io/v1", "CSIDriver"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csidrivers", False),
    ("storage.k8s.io/v1beta1", "CSIDriver"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csidrivers", False),
    ("apps/v1", "ReplicaSet"): ("apps/v1", "/apis/apps/v1/replicasets", True),
    ("apps/v1", "StatefulSet"): ("apps/v1", "/apis/apps/v1/statefulsets", True),
    ("apps/v1", "Deployment"): ("apps/v1", "/apis/apps/v1/deployments", True),
    ("policy/v1", "PodDisruptionBudget"): ("policy/v1beta1", "/apis/policy/v1beta1/poddisruptionbudgets", True),
    ("policy/v1beta1", "PodDisruptionBudget"): ("policy/v1beta1", "/apis/policy/v1beta1/poddisruptionbudgets",
                                                True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("scheduling.k8s.io/v1",
                                                "/apis/scheduling.k8s.io/v1/priorityclasses", False),
}
# Set by the API server for the object it stores: not sent back.
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink", "generation",
                   "deletionTimestamp", "deletionGracePeriodSeconds")
SERVICE_ALLOCATED = frozenset({"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "healthCheckNodePort"})
BUILT_IN_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


@attrs.frozen(slots=True)
class Request:
    """One object to POST: its collection's path (namespace filled in) and the body."""

    path: str
    body: dict[str, Any]
    status: dict[str, Any] | None = None  # set after the create (a PodDisruptionBudget's disruptionsAllowed)


def request_for(obj: Mapping[str, Any]) -> Request:
    """The object, cleaned of what the server sets, posted to its collection (the version 1.20 serves)."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in COLLECTIONS:
        raise E2EError(f"{key[1] or '?'} {key[0] or '?'} objects cannot be created by the end-to-end bench")
    version, path, namespaced = COLLECTIONS[key]
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_METADATA}
    body = {**obj, "apiVersion": version, "metadata": metadata}
    if namespaced:
        namespace = metadata.setdefault("namespace", "default")
        base, _, plural = path.rpartition("/")
        path = f"{base}/namespaces/{namespace}/{plural}"
    if key[1] == "Service":
        body["spec"] = service_spec(body.get("spec") or {})
    status = None
    if key[1] not in ("Node", "Namespace"):
        status = body.pop("status", None)  # ignored on create; a node's status is kept (what schedulers read)
    # no disruption controller runs: a budget keeps the disruptions its file allowed, set after the create
    return Request(path, body, status if key[1] == "PodDisruptionBudget" and status else None)


def service_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Without the addresses and node ports the user's cluster allocated (they would clash when scaled);
    a headless Service stays headless."""
    out = {k: v for k, v in spec.items() if k not in SERVICE_ALLOCATED}
    if spec.get("clusterIP") == "None":
        out["clusterIP"] = "None"
    if "ports" in out:
        out["ports"] = [{k: v for k, v in port.items() if k != "nodePort"} for port in out["ports"]]
    return out


@attrs.frozen(slots=True)
class Objects:
    """The Setup as phases of creations (each phase done before the next starts)."""

    first: list[Request]  # namespaces, PriorityClasses
    workloads: list[Request]
    storage: list[Request]  # StorageClasses, CSIDrivers, CSINodes, PersistentVolumes
    claims: list[Request]  # PersistentVolumeClaims (after the volumes: a claim naming a volume not there is Lost)
    nodes: list[Request]
    init: list[Request]
    measured: list[Request]
    keys: list[tuple[str, str]]  # (namespace, name) of each measured pod


def setup_objects(setup: Setup) -> Objects:
    classes: dict[str, dict[str, Any]] = {}
    init = [pod_request(pod, classes, bound=True) for pod in setup.init]
    measured = [pod_request(pod, classes, bound=False) for pod in setup.measured]
    workloads = [request_for(obj) for obj in setup.workloads if obj.get("kind") != "PriorityClass"]
    for obj in setup.workloads:
        if obj.get("kind") == "PriorityClass":
            classes[obj["metadata"]["name"]] = dict(obj)
    storage = [request_for(obj) for obj in setup.storage if obj.get("kind") != "PersistentVolumeClaim"]
    claims = [request_for(obj) for obj in setup.storage if obj.get("kind") == "PersistentVolumeClaim"]
    namespaces = {(ns.get("metadata") or {}).get("name"): ns for ns in setup.namespaces}
    for request in (*workloads, *storage, *claims, *init, *measured):
        name = request.body["metadata"].get("namespace")
        if name and name not in namespaces:
            namespaces[name] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    first = [request_for({**ns, "status": {}}) for ns in namespaces.values()]
    first += [request_for(cls) for cls in classes.values()]
    return Objects(first=first, workloads=workloads, storage=storage, claims=claims,
                   nodes=[request_for(node) for node in setup.nodes],
                   init=init, measured=measured,
                   keys=[(r.body["metadata"]["namespace"], r.body["metadata"]["name"]) for r in measured])


def pod_request(pod: Mapping[str, Any], classes: dict[str, dict[str, Any]], *, bound: bool) -> Request:
    """A pod to create: bound or not as asked; a priority becomes a PriorityClass (the API server computes
    ``spec.priority`` from the class and refuses a pod that sets it), created with the pod's value."""
    request = request_for(pod)
    spec = dict(request.body.get("spec") or {})
    if not bound:
        spec.pop("nodeName", None)
    priority = spec.pop("priority", None)
    policy = spec.pop("preemptionPolicy", None)
    name = spec.get("priorityClassName")
    if priority is not None or name:
        if not name:
            value = int(priority or 0)
            name = f"bench-priority-{'m' if value < 0 else ''}{abs(value)}{'-never' if policy == 'Never' else ''}"
            spec["priorityClassName"] = name
        if name not in BUILT_IN_PRIORITY_CLASSES and name not in classes:
            cls: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": name}, "value": int(priority or 0)}
            if policy:
                cls["preemptionPolicy"] = policy
            classes[name] = cls
    return Request(request.path, {**request.body, "spec": spec})


# --- API access (the harness's own, unthrottled: measuring must not go through the code under test) -----


class Api:
    """An aiohttp session to the control plane: creations by a pool of workers, a LIST, deletes, a scrape."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=False, keepalive_timeout=60),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            read_bufsize=2**21)

    async def close(self) -> None:
        await self.session.close()

    async def create(self, request: Request, deadline: float) -> None:
        """POST one object (409, already there, is fine), then its status when it carries one."""
        await self.send("POST", request.path, request.body, request, deadline)
        if request.status is not None:
            item = f"{request.path}/{request.body['metadata']['name']}/status"
            await self.send("PATCH", item, {"status": request.status}, request, deadline,
                            content_type="application/merge-patch+json")

    async def send(self, method: str, path: str, body: dict[str, Any], request: Request, deadline: float,
                   content_type: str = "application/json") -> None:
        """One write; 429, 5xx and transport errors are retried until the deadline."""
        data = orjson.dumps(body)
        delay = 0.05
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise E2EError(f"deadline reached while creating objects in {request.path}")
            try:
                async with self.session.request(method, self.url + path, data=data,
                                                headers={"Content-Type": content_type},
                                                timeout=aiohttp.ClientTimeout(total=min(30.0, remaining))) as resp:
                    text = await resp.read()
                    if resp.status in (200, 201, 202, 409):
                        return
                    if resp.status != 429 and resp.status < 500:
                        name = request.body["metadata"].get("name", "?")
                        raise E2EError(f"creating {request.body.get('kind')} {name}: the API server answered "
                                       f"{resp.status}: {status_message(text)}")
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 2.0)

    async def create_all(self, requests: Iterable[Request], deadline: float) -> float:
        """Creates every object with CONNECTIONS workers; returns the seconds it took."""
        start = time.monotonic()
        iterator = iter(requests)

        async def worker() -> None:
            for request in iterator:  # one shared iterator: each request is taken once
                await self.create(request, deadline)

        await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
        return time.monotonic() - start

    async def get_json(self, path: str, deadline: float) -> dict[str, Any]:
        timeout = aiohttp.ClientTimeout(total=max(0.1, min(60.0, deadline - time.monotonic())))
        async with self.session.get(self.url + path, timeout=timeout) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise E2EError(f"GET {path}: the API server answered {resp.status}: {status_message(body)}")
            result: dict[str, Any] = orjson.loads(body)
            return result

    async def delete_now(self, namespace: str, name: str, uid: str) -> bool:
        """DELETE a pod with no grace period (what a kubelet does once the containers stopped)."""
        body = orjson.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                             "preconditions": {"uid": uid}})
        try:
            async with self.session.delete(f"{self.url}/api/v1/namespaces/{namespace}/pods/{name}", data=body,
                                           timeout=aiohttp.ClientTimeout(total=30)) as resp:
                await resp.read()
                return resp.status in (200, 202)
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def status(self, port: int, path: str) -> int | None:
        """The HTTP status of a GET of ``path`` on a local server (a probe), None while nothing answers."""
        try:
            async with self.session.get(f"http://127.0.0.1:{port}{path}",
                                        timeout=aiohttp.ClientTimeout(total=2)) as resp:
                await resp.read()
                return resp.status
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def metrics(self, port: int) -> str | None:
        try:
            async with self.session.get(f"http://127.0.0.1:{port}/metrics",
                                        timeout=aiohttp.ClientTimeout(total=5)) as resp:
                return await resp.text() if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError):
            return None


def status_message(body: bytes) -> str:
    """The ``message`` of a Status answer, else the body's start, on one line."""
    try:
        message = str(orjson.loads(body).get("message"))
    except (orjson.JSONDecodeError, AttributeError):
        message = body[:300].decode(errors="replace")
    return " ".join(message.split())


class BindWatch:
    """Stamps each measured pod when a WATCH first shows it bound; removes deleted bound pods at once."""

    def __init__(self, api: Api, keys: Iterable[tuple[str, str]], resource_version: str) -> None:
        self.api = api
        self.pending = set(keys)
        self.resource_version = resource_version
        self.bound: dict[tuple[str, str], tuple[float, str]] = {}  # (ns, name) -> (monotonic time, node)
        self.rebinds = 0  # a bound pod seen on another node: must stay 0
        self.victims = 0  # bound pods the scheduler deleted (preemption), removed by the harness
        self.deleting: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.established = asyncio.Event()
        self.complete = asyncio.Event()
        self.last_bind = time.monotonic()

    async def run(self, deadline: float) -> None:
        while not self.complete.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                return
            params = {"watch": "1", "resourceVersion": self.resource_version, "allowWatchBookmarks": "true",
                      "timeoutSeconds": str(int(min(remaining, 1800)))}
            try:
                async with self.api.session.get(self.api.url + "/api/v1/pods", params=params,
                                                timeout=aiohttp.ClientTimeout(total=remaining + 5)) as resp:
                    if resp.status != 200:
                        raise E2EError(f"the pod WATCH was answered {resp.status}: {status_message(await resp.read())}")
                    self.established.set()
                    async for line in resp.content:
                        if line.strip():
                            self.on_event(orjson.loads(line), time.monotonic())
                        if self.complete.is_set():
                            return
            except (aiohttp.ClientError, TimeoutError):  # resumed from the last resourceVersion seen
                await asyncio.sleep(0.2)

    def on_event(self, event: dict[str, Any], now: float) -> None:
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":  # e.g. 410 Expired: bind times after the gap would be wrong
            raise E2EError(f"the pod watch failed: {obj.get('message') or obj}")
        metadata = obj.get("metadata") or {}
        self.resource_version = metadata.get("resourceVersion", self.resource_version)
        if event.get("type") not in ("ADDED", "MODIFIED"):
            return
        node = (obj.get("spec") or {}).get("nodeName")
        if node and metadata.get("deletionTimestamp"):
            self.remove(metadata)
        key = (metadata.get("namespace", ""), metadata.get("name", ""))
        if not node or key not in self.pending:
            return
        seen = self.bound.get(key)
        if seen is None:
            self.bound[key] = (now, node)
            self.last_bind = now
            if len(self.bound) == len(self.pending):
                self.complete.set()
        elif seen[1] != node:
            self.rebinds += 1

    def remove(self, metadata: Mapping[str, Any]) -> None:
        uid = str(metadata.get("uid", ""))
        if uid in self.deleting:
            return
        self.deleting.add(uid)
        task = asyncio.create_task(self._delete(metadata["namespace"], metadata["name"], uid),
                                   name=f"delete {metadata['namespace']}/{metadata['name']}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _delete(self, namespace: str, name: str, uid: str) -> None:
        if await self.api.delete_now(namespace, name, uid):
            self.victims += 1

    async def stop(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


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


# --- one point -----------------------------------------------------------------------------------------


def throughput(times: list[float], started: float) -> dict[str, Any] | None:
    """``spec.throughput`` from the first bind, and pods per second from the scheduler's start."""
    if not times:
        return None
    return {**spec_throughput(times, times[0]),
            "pods_per_second_from_start": round(len(times) / (times[-1] - started), 1),
            "first_bind_after_start_s": round(times[0] - started, 3),
            "last_bind_after_start_s": round(times[-1] - started, 3)}


def empty_point(setup: Setup, spec: PointSpec, config_path: str | None) -> dict[str, Any]:
    return {"workload": spec.workload, "mode": "e2e", "scheduler": spec.scheduler,
            "profile": config_path or "default", "nodes": len(setup.nodes), "percentage": spec.percentage,
            "init_pods": len(setup.init), "pods": len(setup.measured), "bound": 0, "unscheduled": len(setup.measured),
            "cycle_ms": None, "cycle_source": "algorithm histogram", "attempt_ms": None, "throughput": None,
            "extension_points_ms": {}, "plugins_ms": {},
            "memory": {"peak_rss_mb": None, "base_rss_mb": None, "bytes_per_node": None, "bytes_per_pod": None},
            "cpu_seconds": None, "load_s": {}, "wall_s": None, "check": {}, "warnings": [], "error": None,
            "kube_version": KUBE_VERSION,
            **({"extender": empty_extender(spec.scheduler)} if spec.scheduler in EXTENDED else {})}


def empty_extender(scheduler: str = EXTENDER) -> dict[str, Any]:
    """An EXTENDER or STAND_IN point's ``extender``: how kube-scheduler calls it, then what its /metrics
    counted (the stand-in has no profile and no plugin)."""
    metrics = METRICS_CONFIG["profiles"][0]
    scorer = scheduler == EXTENDER
    return {"profile": EXTENDER_PROFILE if scorer else None,
            "plugins": [entry["name"] for entry in metrics["plugins"]["multiPoint"]["enabled"]] if scorer else [],
            "weight": EXTENDER_WEIGHT, "nodeCacheCapable": True, "ignorable": False,
            "requests": None, "errors": None, "unknown_nodes": None, "mean_ms": None, "p50_ms": None,
            "p99_ms": None, "peak_rss_mb": None}


@attrs.define
class Run:
    """One point's moving parts: where it works, the control plane, the scheduler process."""

    setup: Setup
    spec: PointSpec
    config_path: str | None
    qps: float
    burst: int
    deadline: float
    point: dict[str, Any]
    workdir: Path = attrs.field(factory=lambda: Path(tempfile.mkdtemp(prefix="scorer-e2e-", dir=tmpfs_dir())))
    plane: ControlPlane | None = None
    controllers: ControllerManager | None = None  # the PersistentVolume controller, for setups with volumes
    scheduler: subprocess.Popen[bytes] | None = None
    port: int = 0  # the scheduler's /metrics
    extender: subprocess.Popen[bytes] | None = None  # kube-scheduler's extender (EXTENDED points)
    extender_command: list[str] | None = None
    extender_port: int = 0  # its verbs, /readyz and /metrics

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.spec.scheduler}.log"

    @property
    def extender_log(self) -> Path:
        return self.workdir / "extender.log"

    @property
    def extender_name(self) -> str:
        return "scorer (the extender)" if self.spec.scheduler == EXTENDER else "the stand-in extender"

    def write_config(self, port: int) -> list[str]:
        """Writes the scheduler's configuration (JSON: both read it as YAML) and returns its command line;
        scorer's is loaded here once, so a configuration it refuses is an error before anything starts."""
        assert self.plane is not None
        self.port = port
        kubeconfig = self.plane.kubeconfig
        path = self.workdir / "scheduler-config.json"
        if self.spec.scheduler in KUBE_SCHEDULERS:
            config, notes = kube_scheduler_config(self.setup, self.spec, self.config_path, kubeconfig, self.qps,
                                                  self.burst, port)
            self.point["warnings"].extend(notes)
            if self.spec.scheduler == EXTENDER:
                config["extenders"] = [extender_entry(self.write_extender_config())]
            elif self.spec.scheduler == STAND_IN:
                self.extender_port = self.free_extender_port()
                self.extender_command = stand_in_command(self.extender_port)
                config["extenders"] = [extender_entry(self.extender_port)]
            path.write_text(json.dumps(config, indent=2))
        elif self.spec.scheduler == "scorer":
            config = scorer_config(self.setup, self.spec, self.config_path, kubeconfig, self.qps, self.burst)
            path.write_text(json.dumps(config, indent=2))
            if self.config_path is not None:
                load_and_resolve(path, catalog())
        else:
            raise E2EError(f"unknown scheduler {self.spec.scheduler!r}: expected scorer, kube-scheduler, "
                           f"{EXTENDER} or {STAND_IN}")
        return scheduler_command(self.spec, path, kubeconfig, port, kube_binaries().scheduler)

    def write_extender_config(self) -> int:
        """Writes scorer's extender configuration (loaded here once, as scorer's) and the Setup's metrics
        snapshot, sets the extender's command line; returns its port."""
        assert self.plane is not None
        if self.setup.metrics is None:
            raise E2EError(f"workload {self.spec.workload}: scorer's extender reads a metrics snapshot, and this "
                           "setup has none (a workload marked extender needs a metric-driven profile)")
        config = self.workdir / "extender-config.json"
        config.write_text(json.dumps(extender_scorer_config(self.spec, self.plane.kubeconfig, self.qps, self.burst),
                                     indent=2))
        load_and_resolve(config, catalog())
        snapshot = self.workdir / "metrics-snapshot.json"
        snapshot.write_bytes(orjson.dumps(snapshot_document(self.setup.metrics)))
        self.extender_port = self.free_extender_port()
        self.extender_command = extender_command(config, self.plane.kubeconfig, self.extender_port, snapshot)
        return self.extender_port

    def free_extender_port(self) -> int:
        port = free_port()
        while port == self.port:
            port = free_port()
        return port

    def start_scheduler(self, command: list[str]) -> subprocess.Popen[bytes]:
        with open(self.log, "wb") as out:
            self.scheduler = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, cwd=self.workdir)
        return self.scheduler

    def start_extender(self) -> subprocess.Popen[bytes]:
        assert self.extender_command is not None
        with open(self.extender_log, "wb") as out:
            self.extender = subprocess.Popen(self.extender_command, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.workdir,
                                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return self.extender

    def close(self) -> None:
        if self.scheduler is not None:
            code = end_process(self.scheduler)
            self.point["check"]["exit_code"] = code
        if self.extender is not None:  # after kube-scheduler, which would fail its pods without it
            self.point["check"]["extender_exit_code"] = end_process(self.extender)
        if self.controllers is not None:
            self.controllers.stop()
        if self.plane is not None:
            self.plane.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def run_e2e_point(setup: Setup, spec: PointSpec, *, config_path: str | None, qps: float = 5000,
                  burst: int = 5000, timeout: float = 900) -> dict[str, Any]:
    """One end-to-end point (``spec.scheduler`` on a fresh control plane); a point that cannot be measured
    carries ``error`` (one line) with what was measured before."""
    point = empty_point(setup, spec, config_path)
    started = time.monotonic()
    run = Run(setup, spec, config_path, qps, burst, started + timeout, point)
    try:
        run.plane = ControlPlane(run.workdir / "plane", extra_args=(f"--service-cluster-ip-range={SERVICE_RANGE}",))
        command = run.write_config(free_port())  # a configuration that cannot be made fails before anything starts
        run.plane.start()
        if setup.storage:
            run.controllers = start_volume_controller(run.plane, run.workdir)
        asyncio.run(measure(run, command))
    except ScorerError as error:
        point["error"] = str(error).splitlines()[0]
    except Exception as error:  # a point that breaks is reported; the sweep's other points still run
        point["error"] = f"{type(error).__name__}: {error}".splitlines()[0]
    finally:
        if point["error"] and run.scheduler is not None:
            point["check"]["log_tail"] = log_tail(run.log)
        if point["error"] and run.extender is not None:
            point["check"]["extender_log_tail"] = log_tail(run.extender_log)
        run.close()
        point["wall_s"] = round(time.monotonic() - started, 3)
    return point


def start_volume_controller(plane: ControlPlane, workdir: Path) -> ControllerManager:
    """kube-controller-manager with only the PersistentVolume binder (what completes the bindings the
    schedulers' VolumeBinding starts, as in a real cluster), on the admin's credentials."""
    binary = find_binary("kube-controller-manager")
    if binary is None:
        raise E2EError("this workload has volumes, whose binding needs kube-controller-manager v1.20.2's "
                       "PersistentVolume controller: run 'bash scripts/build-kube.sh' as root to build it")
    return ControllerManager(binary, plane.kubeconfig, workdir / "controller-manager").start()


async def measure(run: Run, command: list[str]) -> None:
    """Loads the cluster, starts the scheduler and fills the point with what the watch, /metrics and /proc say."""
    assert run.plane is not None
    point, deadline, port = run.point, run.deadline, run.port
    objects = setup_objects(run.setup)
    api = Api(run.plane.url)
    try:
        point["load_s"] = await load(api, objects, deadline)
        listing = await api.get_json("/api/v1/pods?limit=1", deadline)
        watch = BindWatch(api, objects.keys, listing["metadata"]["resourceVersion"])
        watch_task = asyncio.create_task(watch.run(deadline), name="bind-watch")
        await wait_established(watch, watch_task, deadline)
        etcd, apiserver = run.plane.processes
        pids = {"kube_apiserver": apiserver.pid, "etcd": etcd.pid, "harness": os.getpid()}
        if run.controllers is not None and run.controllers.process is not None:
            pids["kube_controller_manager"] = run.controllers.process.pid
        extender_peak: dict[str, int] = {}
        pollers = []
        if run.extender_command is not None:  # the extender ready (scorer: its caches synced) before kube-scheduler
            extender = run.start_extender()
            pollers.append(asyncio.create_task(poll_rss(extender, extender_peak), name="extender-rss-poll"))
            await wait_extender_ready(api, run, deadline)
            pids["extender"] = extender.pid
        cpu_before = cpu_snapshot(pids)
        t0 = time.monotonic()
        proc = run.start_scheduler(command)
        peak: dict[str, int] = {}
        pollers.append(asyncio.create_task(poll_rss(proc, peak), name="rss-poll"))
        watch.last_bind = t0
        outcome = await wait_bound(watch, watch_task, proc, deadline, run.extender)
        point["cpu_seconds"] = cpu_split(cpu_before, cpu_snapshot({**pids, "scheduler": proc.pid}),
                                         time.monotonic() - t0)
        record_binds(point, watch, t0, outcome)
        if proc.poll() is None:
            await record_metrics(point, api, port, len(watch.bound), deadline + 10)
            peak["VmHWM"] = max(peak.get("VmHWM", 0), proc_status(proc.pid).get("VmHWM", 0))
        else:
            point["error"] = f"{run.spec.scheduler} exited with {proc.returncode}: {log_tail(run.log)}"
        point["memory"]["peak_rss_mb"] = round(peak["VmHWM"] / 1024, 1) if peak.get("VmHWM") else None
        if run.extender is not None:
            await record_extender(point, api, run, extender_peak)
        for poller in pollers:
            poller.cancel()
        watch_task.cancel()
        await watch.stop()
        await asyncio.gather(watch_task, *pollers, return_exceptions=True)
        add_warnings(point)
    finally:
        await api.close()


async def load(api: Api, objects: Objects, deadline: float) -> dict[str, float]:
    """Creates the objects phase by phase; returns the seconds each phase took (not part of any figure)."""
    seconds = {}
    for phase in ("first", "workloads", "storage", "claims", "nodes", "init", "measured"):
        requests = getattr(objects, phase)
        if requests:
            seconds[phase] = round(await api.create_all(requests, deadline), 2)
        if phase == "claims" and any(r.body.get("kind") == "PersistentVolume" for r in objects.storage):
            started = time.monotonic()
            await wait_volumes_synced(api, deadline)
            seconds["volumes_synced"] = round(time.monotonic() - started, 2)
    return seconds


async def wait_volumes_synced(api: Api, deadline: float) -> None:
    """Waits (at most ``VOLUMES_SYNC_SECONDS``) until the PersistentVolume controller has given every new
    PersistentVolume its phase (VolumeBinding matches only Available volumes, in scorer and in
    kube-scheduler alike) and bound every claim pre-bound to a volume (``spec.volumeName``)."""
    until = min(deadline, time.monotonic() + VOLUMES_SYNC_SECONDS)
    while True:
        volumes = await api.get_json("/api/v1/persistentvolumes", deadline)
        claims = await api.get_json("/api/v1/persistentvolumeclaims", deadline)
        pending = [f"PersistentVolume {item['metadata']['name']}" for item in volumes.get("items") or ()
                   if (item.get("status") or {}).get("phase", "Pending") == "Pending"]
        pending += [f"PersistentVolumeClaim {item['metadata']['namespace']}/{item['metadata']['name']}"
                    for item in claims.get("items") or ()
                    if (item.get("spec") or {}).get("volumeName")
                    and (item.get("status") or {}).get("phase") != "Bound"]
        if not pending:
            return
        if time.monotonic() >= until:
            raise E2EError(f"{len(pending)} volume(s) or pre-bound claim(s) still Pending after "
                           f"{VOLUMES_SYNC_SECONDS:.0f} s (is kube-controller-manager's PersistentVolume controller "
                           f"running?), e.g. {pending[0]}")
        await asyncio.sleep(0.5)


async def wait_established(watch: BindWatch, watch_task: asyncio.Task[None], deadline: float) -> None:
    established = asyncio.create_task(watch.established.wait())
    await asyncio.wait({watch_task, established}, timeout=max(0.1, min(WATCH_READY_SECONDS,
                                                                         deadline - time.monotonic())),
                       return_when=asyncio.FIRST_COMPLETED)
    if not watch.established.is_set():
        established.cancel()
        if watch_task.done():
            watch_task.result()  # raises what stopped it
        watch_task.cancel()
        raise E2EError(f"the pod watch was not established within {WATCH_READY_SECONDS:.0f} s")


async def wait_extender_ready(api: Api, run: Run, deadline: float) -> None:
    """Waits (at most ``EXTENDER_READY_SECONDS``) for the extender's /readyz to answer 200 (scorer's: its caches
    synced)."""
    assert run.extender is not None
    limit = max(0.0, min(EXTENDER_READY_SECONDS, deadline - time.monotonic()))
    until = time.monotonic() + limit
    while await api.status(run.extender_port, "/readyz") != 200:
        if run.extender.poll() is not None:
            raise E2EError(f"{run.extender_name} exited with {run.extender.returncode} before it was ready: "
                           f"{log_tail(run.extender_log)}")
        if time.monotonic() >= until:
            raise E2EError(f"{run.extender_name} was not ready within {limit:.0f} s: {log_tail(run.extender_log)}")
        await asyncio.sleep(0.2)


async def wait_bound(watch: BindWatch, watch_task: asyncio.Task[None], proc: subprocess.Popen[bytes],
                     deadline: float, extender: subprocess.Popen[bytes] | None = None) -> str:
    """Waits until every measured pod is bound; returns "complete", "stalled", "exited" (the scheduler or
    its extender) or "deadline"."""
    while True:
        if watch.complete.is_set():
            return "complete"
        if watch_task.done():
            watch_task.result()  # a watch error ends the run with its message
            return "deadline"
        if proc.poll() is not None or (extender is not None and extender.poll() is not None):
            return "exited"
        now = time.monotonic()
        if now >= deadline:
            return "deadline"
        if now - watch.last_bind >= (STALL_SECONDS if watch.bound else FIRST_BIND_SECONDS):
            return "stalled"
        try:  # the binds are stamped by the watch: how often this loop looks changes no figure
            await asyncio.wait_for(watch.complete.wait(), timeout=min(0.5, deadline - now))
        except TimeoutError:
            pass


def record_binds(point: dict[str, Any], watch: BindWatch, t0: float, outcome: str) -> None:
    times = sorted(t for t, _ in watch.bound.values())
    point["bound"] = len(times)
    point["unscheduled"] = point["pods"] - len(times)
    point["throughput"] = throughput(times, t0)
    point["check"].update({"bound": len(times), "outcome": outcome, "rebinds": watch.rebinds,
                           "victims_removed": watch.victims,
                           "nodes_used": len({node for _, node in watch.bound.values()})})
    if outcome == "stalled":
        point["warnings"].append(f"no pod bound for {STALL_SECONDS if times else FIRST_BIND_SECONDS:.0f} s: "
                                 f"{point['unscheduled']} left unscheduled")
    elif outcome == "deadline":
        point["error"] = f"deadline reached with {len(times)} of {point['pods']} pods bound"


async def record_metrics(point: dict[str, Any], api: Api, port: int, bound: int, deadline: float) -> None:
    text = await scrape(api, port, bound, deadline)
    if text is None:
        point["warnings"].append("the scheduler's /metrics did not answer")
        return
    point["cycle_ms"] = cycle_ms(text)
    point["attempt_ms"] = summary_ms(text, ATTEMPT)
    point["extension_points_ms"] = extension_points_ms(text)
    point["plugins_ms"] = plugins_ms(text)


async def record_extender(point: dict[str, Any], api: Api, run: Run, peak: dict[str, int]) -> None:
    """The extender's side of an EXTENDED point: its request counts and latency from its /metrics, its peak RSS."""
    assert run.extender is not None
    figures = point["extender"]
    if run.extender.poll() is not None:
        point["error"] = point["error"] or (f"{run.extender_name} exited with {run.extender.returncode}: "
                                            f"{log_tail(run.extender_log)}")
        return
    text = await api.metrics(run.extender_port)
    if text is None:
        point["warnings"].append(f"the /metrics of {run.extender_name} did not answer")
    else:
        figures.update(extender_figures(text))
    hwm = max(peak.get("VmHWM", 0), proc_status(run.extender.pid).get("VmHWM", 0))
    figures["peak_rss_mb"] = round(hwm / 1024, 1) if hwm else None


def add_warnings(point: dict[str, Any]) -> None:
    cpu = point.get("cpu_seconds") or {}
    if cpu.get("wall") and cpu.get("other", 0) > 0.25 * cpu["wall"]:
        point["warnings"].append(f"other work used {cpu['other']} CPU seconds of the {cpu['wall']} s measured: "
                                 "the figures are noisy")
