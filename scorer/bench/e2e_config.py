"""The end-to-end bench's schedulers (``scorer.bench.e2e``): their names, configurations (scorer's ``v1``,
kube-scheduler's ``v1beta1`` converted from scorer's profiles, the extender entry) and command lines.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from scorer.bench.controlplane import (
    KUBE_VERSION,
    tmpfs_dir,
)
from scorer.bench.runner import METRICS_CONFIG
from scorer.bench.spec import ADAPTIVE, PointSpec, Setup
from scorer.config.convert import unstructure
from scorer.config.load import load_and_resolve
from scorer.config.text import read_file
from scorer.config.types import KIND, V1, V1BETA1, ResolvedProfile
from scorer.errors import ScorerError
from scorer.extender.http import DEFAULT_PREFIX, FILTER, PRIORITIZE
from scorer.framework.catalog import PluginInfo
from scorer.registry import build_registry
from scorer.sources import MetricsSnapshot
from scorer.sources.static import API_VERSION as SNAPSHOT_API_VERSION
from scorer.sources.static import KIND as SNAPSHOT_KIND

DEFAULT_SCHEDULER = "default-scheduler"
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


class E2EError(ScorerError):
    """A point that cannot be measured end to end (the message says why)."""


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


# A Python scheduler starts with its modules' bytecode compiled, as an installed wheel or the image has it
# (pip compiles at install time): an editable install run with PYTHONDONTWRITEBYTECODE (set on some machines)
# would compile every module of scorer at each start, about 0.2 s of CPU that kube-scheduler, a compiled
# binary, never pays. So Python processes get a bytecode cache of their own (PYTHONPYCACHEPREFIX), filled
# by one ``scorer plugins`` (every scorer module and every installed plugin imported) before the measured start;
# it writes there the cache of attrs' generated code too (``scorer.codecache``), as the image's build does.
# One cache serves every point of a bench run (``bytecode_cache``): the sources do not change in between.
# The warm-up starts where the schedulers start, in an empty directory rather than the bench's own: run from
# a checkout beside an installed wheel (``../shared/tools/bench-on-16-cores.sh`` does), ``python -m scorer``
# would import the checkout's ``scorer/`` there, warm its bytecode, and leave the wheel's, which the
# schedulers import from their work directories, to be compiled at every measured start (0.6 s on a 16-core
# machine, more than the rest of the start).
BYTECODE_WARM_UP_SECONDS = 120.0


def python_env(cache_dir: Path) -> dict[str, str]:
    """The environment of a Python process the bench starts: its bytecode cached under ``cache_dir``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(cache_dir), "PYTHONUNBUFFERED": "1"}


def warm_bytecode(cache_dir: Path) -> None:
    """Compile what a scorer process imports into ``cache_dir`` (not timed), started from an empty
    directory as the schedulers are; E2EError when it fails."""
    try:
        with tempfile.TemporaryDirectory(prefix="scorer-bench-warm-up-") as where:
            done = subprocess.run([sys.executable, "-m", "scorer", "plugins"], env=python_env(cache_dir),
                                  cwd=where, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=BYTECODE_WARM_UP_SECONDS)
    except subprocess.TimeoutExpired:
        raise E2EError(f"importing scorer took over {BYTECODE_WARM_UP_SECONDS:.0f} s") from None
    if done.returncode != 0:
        raise E2EError(f"scorer plugins exited with {done.returncode}: "
                       f"{done.stderr.decode(errors='replace').strip()[-500:]}")


@functools.cache
def bytecode_cache() -> Path:
    """The bytecode cache of every Python process this bench run starts, warmed by the first call
    (``warm_bytecode``; a failed warm-up is tried again by the next) and removed at exit."""
    cache_dir = Path(tempfile.mkdtemp(prefix="scorer-bench-pycache-", dir=tmpfs_dir()))
    atexit.register(shutil.rmtree, cache_dir, True)
    warm_bytecode(cache_dir)
    return cache_dir


def stand_in_command(port: int) -> list[str]:
    """The stand-in extender (``scorer.bench.standin``) on ``port``."""
    return [sys.executable, "-m", "scorer.bench.standin", str(port)]
