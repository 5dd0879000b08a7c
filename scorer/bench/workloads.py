"""The bench's declarative workloads file (``scorer bench --workloads FILE``).

A workload says what cluster to build and what to schedule on it, as
kube-scheduler's scheduler_perf test cases do (the default file,
``workloads.yaml`` beside this module, holds their shapes)::

    apiVersion: scorer.dev/v1alpha1
    kind: BenchWorkloads
    workloads:
    - name: plain                  # unique; --only selects by it
      shape: plain                 # what the measured pods ask for (SHAPES)
      profile: default             # default | metrics | a KubeSchedulerConfiguration file
      percentages: [0, 100]        # percentageOfNodesToScore per point (0: adaptive)
      e2e: true                    # also run end to end with --e2e
      extender: false              # with --e2e, also kube-scheduler alone and with scorer as its extender
      nodes: [100, 500]            # optional: this workload's sweep (default: --nodes)
      node: {cpu: "4", memory: 32Gi, pods: 110, zones: [zone-a, zone-b, zone-c], labels: {}}
      initPods: {perNode: 0.2, cpu: 100m, memory: 500Mi}   # or count: N; bound before measuring
      pods: {cpu: 100m, memory: 500Mi, priority: null, count: null}  # count caps --pods

Every field but ``name`` and ``shape`` has the default shown (``nodes`` and
``pods.count``: none). A profile file is relative to the workloads file.
``extender`` needs a profile other than ``default``: scorer's extender reads
the metrics snapshot generated for such a Setup.
Decoding is strict, as for a KubeSchedulerConfiguration (the same converter,
``scorer.config.convert``): an unknown key, a wrong type, an unknown shape or
a bad quantity is a ``ConfigError`` naming the file and the field path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import attrs

from scorer.bench.options import MAX_NODES
from scorer.config.convert import structure_into, unstructure
from scorer.config.text import read_file
from scorer.errors import ConfigError, QuantityError
from scorer.inputs.describe import quote
from scorer.quantity import parse_quantity

API_VERSION = "scorer.dev/v1alpha1"
KIND = "BenchWorkloads"
DEFAULT_FILE = Path(__file__).with_name("workloads.yaml")
DEFAULT_SCHEDULER = "default-scheduler"

# What the measured pods ask for; scorer.bench.clusters builds each one.
Shape = Literal[
    "plain", "node-affinity", "pod-anti-affinity", "pod-affinity", "preferred-pod-affinity",
    "preferred-pod-anti-affinity", "topology-spread", "default-spreading", "preemption", "volumes",
    "volumes-wait",
]
SHAPES: tuple[str, ...] = Shape.__args__  # type: ignore[attr-defined]
BUILT_IN_PROFILES = ("default", "metrics")


def _quantity_errors(field: str, value: str) -> list[tuple[str, str]]:
    try:
        amount = parse_quantity(value)
    except QuantityError as error:
        return [(field, str(error))]
    return [] if amount > 0 else [(field, f"must be more than 0, got {quote(value)}")]


@attrs.frozen(slots=True)
class NodeShape:
    """Every node of the cluster: allocatable = capacity, Ready, zones round-robin, unique hostnames."""

    cpu: str = "4"
    memory: str = "32Gi"
    pods: int = 110
    zones: list[str] = attrs.Factory(lambda: ["zone-a", "zone-b", "zone-c"])
    labels: dict[str, str] = attrs.Factory(dict)

    def validate(self) -> list[tuple[str, str]]:
        errors = _quantity_errors("cpu", self.cpu) + _quantity_errors("memory", self.memory)
        if self.pods < 1:
            errors.append(("pods", f"must be at least 1, got {self.pods}"))
        if not self.zones:
            errors.append(("zones", "must name at least one zone"))
        return errors


@attrs.frozen(slots=True)
class InitPods:
    """The pods bound before measuring: ``perNode`` x nodes (rounded) or ``count``; their requests and
    priority (the shape decides their labels and affinity: the group the measured pods relate to)."""

    per_node: float = 0.2
    count: int | None = None
    cpu: str = "100m"
    memory: str = "500Mi"
    priority: int | None = None

    def validate(self) -> list[tuple[str, str]]:
        errors = _quantity_errors("cpu", self.cpu) + _quantity_errors("memory", self.memory)
        if self.per_node < 0:
            errors.append(("perNode", f"must be at least 0, got {self.per_node}"))
        if self.count is not None and self.count < 0:
            errors.append(("count", f"must be at least 0, got {self.count}"))
        return errors

    def number(self, nodes: int) -> int:
        return self.count if self.count is not None else round(self.per_node * nodes)


@attrs.frozen(slots=True)
class MeasuredPods:
    """The pods scheduled and timed: requests = limits, a priority; ``count`` caps ``--pods``."""

    cpu: str = "100m"
    memory: str = "500Mi"
    priority: int | None = None
    count: int | None = None

    def validate(self) -> list[tuple[str, str]]:
        errors = _quantity_errors("cpu", self.cpu) + _quantity_errors("memory", self.memory)
        if self.count is not None and self.count < 1:
            errors.append(("count", f"must be at least 1, got {self.count}"))
        return errors


@attrs.frozen(slots=True)
class Workload:
    """One workload of the file (see the module docstring)."""

    name: str
    shape: Shape
    profile: str = "default"
    percentages: list[int] = attrs.Factory(lambda: [0])
    e2e: bool = False
    extender: bool = False
    nodes: list[int] | None = None
    description: str = ""
    node: NodeShape = attrs.Factory(NodeShape)
    init_pods: InitPods = attrs.Factory(InitPods)
    pods: MeasuredPods = attrs.Factory(MeasuredPods)

    def validate(self) -> list[tuple[str, str]]:
        errors = []
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            errors.append(("name", f"expected letters, digits, '-' or '_', got {quote(self.name)}"))
        if not self.profile:
            errors.append(("profile", "expected default, metrics or a KubeSchedulerConfiguration file"))
        if self.extender and self.profile == "default":
            errors.append(("extender", "needs a metric-driven profile (metrics or a file): scorer's extender "
                                       "reads the metrics snapshot generated for it"))
        if not self.percentages:
            errors.append(("percentages", "must list at least one percentage (0: adaptive)"))
        errors += [(f"percentages[{i}]", f"must be in 0..100, got {p}")
                   for i, p in enumerate(self.percentages) if not 0 <= p <= 100]
        errors += [(f"nodes[{i}]", f"must be in 1..{MAX_NODES:,}, got {n}")
                   for i, n in enumerate(self.nodes or ()) if not 1 <= n <= MAX_NODES]
        return errors

    def measured_pods(self, requested: int) -> int:
        """``--pods``, capped by the workload's ``pods.count``."""
        return min(requested, self.pods.count) if self.pods.count is not None else requested

    def sweep(self, default: list[int]) -> list[int]:
        return list(self.nodes) if self.nodes else list(default)

    def config_file(self) -> str | None:
        """The KubeSchedulerConfiguration file of the profile (None for a built-in one)."""
        return None if self.profile in BUILT_IN_PROFILES else self.profile

    def as_dict(self) -> dict[str, Any]:
        """The workload as written in a file (camelCase keys, defaults filled in): the result JSON's form."""
        return dict(unstructure(self))


@attrs.frozen(slots=True)
class WorkloadsFile:
    workloads: list[Workload]

    def validate(self) -> list[tuple[str, str]]:
        if not self.workloads:
            return [("workloads", "must list at least one workload")]
        seen: dict[str, int] = {}
        errors = []
        for i, workload in enumerate(self.workloads):
            if workload.name in seen:
                again = f"{quote(workload.name)} is also workloads[{seen[workload.name]}]"
                errors.append((f"workloads[{i}].name", again))
            seen.setdefault(workload.name, i)
        return errors


def load_workloads(path: str | os.PathLike[str] | None) -> list[Workload]:
    """The workloads of a file (None: the shipped default); ``ConfigError`` naming the file and field."""
    source = os.fspath(path) if path is not None else str(DEFAULT_FILE)
    data = read_file(source)
    errors: list[tuple[str, str]] = []
    if not isinstance(data, dict):
        raise ConfigError([("", f"expected a {KIND} object, got {type(data).__name__}")], source)
    if data.get("kind") != KIND:
        errors.append(("kind", f"expected {KIND}, got {quote(data.get('kind'))}"))
    if data.get("apiVersion") != API_VERSION:
        errors.append(("apiVersion", f"expected {API_VERSION}, got {quote(data.get('apiVersion'))}"))
    body = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
    loaded = structure_into(WorkloadsFile, body, "", errors)
    if errors or loaded is None:
        raise ConfigError(errors or [("", "cannot be read")], source)
    base = Path(source).parent
    return [_resolve_profile(w, base) for w in loaded.workloads]


def workload_from_data(data: dict[str, Any], source: str = "<workload>") -> Workload:
    """A workload from its ``as_dict`` form (how the sweep hands it to a point's process)."""
    errors: list[tuple[str, str]] = []
    workload = structure_into(Workload, data, "", errors)
    if errors or workload is None:
        raise ConfigError(errors or [("", "cannot be read")], source)
    return workload


def _resolve_profile(workload: Workload, base: Path) -> Workload:
    """A profile file named relative to the workloads file, as a path that works from anywhere."""
    if workload.config_file() is None or os.path.isabs(workload.profile):
        return workload
    return attrs.evolve(workload, profile=str(base / workload.profile))


def scheduler_name(workload: Workload) -> str:
    """The schedulerName the measured pods carry: the profile file's first profile, else the default."""
    config = workload.config_file()
    if config is None:
        return DEFAULT_SCHEDULER
    data = read_file(config)
    profiles = data.get("profiles") if isinstance(data, dict) else None
    first = profiles[0] if isinstance(profiles, list) and profiles and isinstance(profiles[0], dict) else {}
    name = first.get("schedulerName")
    return name if isinstance(name, str) and name else DEFAULT_SCHEDULER
