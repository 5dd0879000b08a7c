"""Kubernetes objects as the scheduler sees them: Pod, Node, Namespace.

Built from API objects (JSON/YAML dicts with camelCase fields) by
``pod_from_dict``, ``node_from_dict``, ``namespace_from_dict``,
``object_from_dict``, or from whole files by ``load_objects``/``load_file``.
Only what scheduling needs is kept; unknown fields are ignored (these are
API objects, not our config). Resource maps hold canonical integers
(``scorer.quantity.resource_value``): millicores for cpu, units otherwise.

Every malformed value raises ``ModelError`` naming the object and the field
(``Pod default/web: spec.containers[0].resources.requests.cpu: invalid
quantity "abc" ...``); no KeyError/TypeError escapes for bad input.

Objects from the API server have already been defaulted; manifests read from
files have not, so the parsers apply the API server defaults that change
scheduling (no-ops for objects that went through it):

- a container's requests default to its limits for each resource that has a
  limit and no request;
- with ``spec.hostNetwork``, a container port's hostPort defaults to its
  containerPort;
- pod-level requests (``spec.resources``, PodLevelResources) default from the
  containers' requests, then from pod-level limits.

The classes are frozen; their dict fields (labels, resource maps) must not be
mutated. Pods and Nodes hold dicts, so they are not hashable: key them by
``Pod.key`` or name.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import json
import os
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import orjson
import yaml

from scorer.errors import ModelError, QuantityError
from scorer.quantity import resource_value

# kube-scheduler's defaults for containers that request no cpu / memory
# (pkg/scheduler/util/pod_resources.go), used for non-zero requests.
DEFAULT_MILLI_CPU_REQUEST = 100
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_NON_ZERO_DEFAULTS: Mapping[str, int] = types.MappingProxyType(
    {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}
)

TAINT_EFFECTS: tuple[str, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS: tuple[str, ...] = ("Equal", "Exists")
LABEL_SELECTOR_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
WHEN_UNSATISFIABLE: tuple[str, ...] = ("DoNotSchedule", "ScheduleAnyway")
NODE_INCLUSION_POLICIES: tuple[str, ...] = ("Honor", "Ignore")
PORT_PROTOCOLS: tuple[str, ...] = ("TCP", "UDP", "SCTP")
NODE_FIELD_KEYS: tuple[str, ...] = ("metadata.name",)

_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_EMPTY: Mapping[str, Any] = types.MappingProxyType({})


# --------------------------------------------------------------------------
# Taints and tolerations


@attrs.frozen(slots=True, kw_only=True)
class Taint:
    """A node taint (``spec.taints[]``); effect is one of ``TAINT_EFFECTS``."""

    key: str
    value: str = ""
    effect: str


@attrs.frozen(slots=True, kw_only=True)
class Toleration:
    """A pod toleration (``spec.tolerations[]``); an empty operator means Equal."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes ``Toleration.ToleratesTaint``.

        The effect matches if empty or equal; an empty key matches every key
        (valid only with Exists); Exists ignores the value, Equal compares it.
        """
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


def untolerated_taints(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], effects: Iterable[str]
) -> list[Taint]:
    """Taints whose effect is in ``effects`` and that no toleration tolerates.

    ``effects`` is e.g. ``{"NoSchedule", "NoExecute"}`` for filtering or
    ``{"PreferNoSchedule"}`` for scoring.
    """
    wanted = effects if isinstance(effects, (set, frozenset)) else frozenset(effects)
    return [
        taint
        for taint in taints
        if taint.effect in wanted and not any(t.tolerates(taint) for t in tolerations)
    ]


# --------------------------------------------------------------------------
# Label selectors (metav1.LabelSelector)


@attrs.frozen(slots=True, kw_only=True)
class LabelSelectorRequirement:
    """One ``matchExpressions`` entry: In, NotIn, Exists or DoesNotExist."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        return False


@attrs.frozen(slots=True, kw_only=True)
class LabelSelector:
    """``matchLabels`` and ``matchExpressions``, all AND-ed.

    An empty selector matches everything. A missing (null) selector is
    ``None`` where it is used, and matches nothing.
    """

    match_labels: dict[str, str] = attrs.Factory(dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(r.matches(labels) for r in self.match_expressions)


# --------------------------------------------------------------------------
# Node selectors and node affinity


@attrs.frozen(slots=True, kw_only=True)
class NodeSelectorRequirement:
    """One node selector requirement: In, NotIn, Exists, DoesNotExist, Gt, Lt.

    Gt/Lt compare the label as an integer against the single value; a label
    that is not an integer does not match.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            if self.key not in labels or len(self.values) != 1:
                return False
            have = parse_int64(labels[self.key])
            want = parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False


@attrs.frozen(slots=True, kw_only=True)
class NodeSelectorTerm:
    """Requirements AND-ed together; a term with none matches no node.

    ``match_fields`` support only the key ``metadata.name``.
    """

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node: Node) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        labels = node.labels
        for requirement in self.match_expressions:
            if not requirement.matches(labels):
                return False
        if self.match_fields:
            fields = {"metadata.name": node.name}
            for requirement in self.match_fields:
                if not requirement.matches(fields):
                    return False
        return True


@attrs.frozen(slots=True, kw_only=True)
class NodeSelector:
    """Node selector terms, OR-ed."""

    terms: tuple[NodeSelectorTerm, ...] = ()

    def matches(self, node: Node) -> bool:
        return any(term.matches(node) for term in self.terms)


@attrs.frozen(slots=True, kw_only=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@attrs.frozen(slots=True, kw_only=True)
class NodeAffinity:
    """``required``: requiredDuringSchedulingIgnoredDuringExecution;
    ``preferred``: preferredDuringSchedulingIgnoredDuringExecution."""

    required: NodeSelector | None = None
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


# --------------------------------------------------------------------------
# Pod affinity, anti-affinity, topology spread


@attrs.frozen(slots=True, kw_only=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    topology_key: str
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@attrs.frozen(slots=True, kw_only=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@attrs.frozen(slots=True, kw_only=True)
class PodAffinity:
    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@attrs.frozen(slots=True, kw_only=True)
class PodAntiAffinity:
    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@attrs.frozen(slots=True, kw_only=True)
class Affinity:
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None


@attrs.frozen(slots=True, kw_only=True)
class TopologySpreadConstraint:
    """``node_affinity_policy``/``node_taints_policy``: Honor, Ignore, or None if unset."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: tuple[str, ...] = ()


# --------------------------------------------------------------------------
# Pods


@attrs.frozen(slots=True, kw_only=True)
class OwnerReference:
    api_version: str = ""
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


@attrs.frozen(slots=True, kw_only=True)
class ContainerPort:
    """``host_port`` is 0 when unset."""

    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""


@attrs.frozen(slots=True, kw_only=True)
class Container:
    """A container or init container.

    ``requests`` already include the limits-to-requests defaulting when
    parsed (see the module docstring); built directly, they are used as given.
    """

    name: str
    image: str = ""
    requests: dict[str, int] = attrs.Factory(dict)
    limits: dict[str, int] = attrs.Factory(dict)
    ports: tuple[ContainerPort, ...] = ()
    restart_policy: str | None = None

    @property
    def is_restartable_init(self) -> bool:
        """True for a sidecar: an init container with restartPolicy Always."""
        return self.restart_policy == "Always"


@attrs.frozen(slots=True, kw_only=True)
class Pod:
    """A pod, with its effective requests computed once at construction.

    Derived attributes (not constructor arguments):

    - ``requests``: kube's ``PodRequests``: the per-resource max of (sum of
      regular containers and sidecars) and (each init container's request plus
      the sidecars started before it; a sidecar's own candidate is the running
      sidecar total), pod-level requests overriding for cpu/memory/hugepages,
      plus ``overhead``.
    - ``non_zero_cpu`` (millicores), ``non_zero_memory`` (bytes): the same, but
      each container without a cpu / memory entry counts 100m / 200Mi (an
      explicit 0 stays 0). With pod-level requests the defaults apply only to
      resources that neither the pod nor any container requests.
    - ``host_ports``: ports of all containers (init too) with a hostPort.

    ``pod_level_requests`` holds ``spec.resources.requests`` (after
    defaulting); empty when the pod does not use pod-level resources.
    """

    namespace: str = "default"
    name: str
    uid: str = ""
    labels: dict[str, str] = attrs.Factory(dict)
    annotations: dict[str, str] = attrs.Factory(dict)
    owner_references: tuple[OwnerReference, ...] = ()
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    node_selector: dict[str, str] = attrs.Factory(dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    priority: int = 0
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: dict[str, int] = attrs.Factory(dict)
    pod_level_requests: dict[str, int] = attrs.Factory(dict)
    phase: str = ""
    scheduling_gates: tuple[str, ...] = ()
    nominated_node_name: str = ""
    deleting: bool = False
    resource_version: str = ""
    creation_timestamp: str = ""

    requests: dict[str, int] = attrs.field(init=False, eq=False, repr=False)
    non_zero_cpu: int = attrs.field(init=False, eq=False, repr=False)
    non_zero_memory: int = attrs.field(init=False, eq=False, repr=False)
    host_ports: tuple[ContainerPort, ...] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if len(self.containers) == 1 and not self.init_containers and not self.pod_level_requests:
            self._set_single_container()
            return
        requests = self._requests(None)
        if not self.pod_level_requests:
            fill: Mapping[str, int] = _NON_ZERO_DEFAULTS
        else:
            # Kubernetes then defaults only what nothing in the pod requests.
            fill = {k: v for k, v in _NON_ZERO_DEFAULTS.items() if k not in requests}
        non_zero = self._requests(fill) if fill else requests
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "non_zero_cpu", non_zero.get("cpu", 0))
        object.__setattr__(self, "non_zero_memory", non_zero.get("memory", 0))
        object.__setattr__(
            self,
            "host_ports",
            tuple(
                port
                for container in (*self.containers, *self.init_containers)
                for port in container.ports
                if port.host_port > 0
            ),
        )

    def _set_single_container(self) -> None:
        """Fast path for the common pod: one container, no init containers."""
        container_requests = self.containers[0].requests
        requests = dict(container_requests)
        for name, value in self.overhead.items():
            requests[name] = requests.get(name, 0) + value
        cpu = container_requests.get("cpu", DEFAULT_MILLI_CPU_REQUEST)
        memory = container_requests.get("memory", DEFAULT_MEMORY_REQUEST)
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "non_zero_cpu", cpu + self.overhead.get("cpu", 0))
        object.__setattr__(self, "non_zero_memory", memory + self.overhead.get("memory", 0))
        object.__setattr__(
            self, "host_ports", tuple(p for p in self.containers[0].ports if p.host_port > 0)
        )

    def _requests(self, fill: Mapping[str, int] | None) -> dict[str, int]:
        requests = aggregate_container_requests(self.containers, self.init_containers, fill)
        for name, value in self.pod_level_requests.items():
            if is_pod_level_resource(name):
                requests[name] = value
        for name, value in self.overhead.items():
            requests[name] = requests.get(name, 0) + value
        return requests

    @property
    def is_terminal(self) -> bool:
        """Succeeded or Failed: the pod's containers are done and it holds no resources
        (kube-scheduler's informer does not even list such pods)."""
        return self.phase in TERMINAL_PHASES

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


def aggregate_container_requests(
    containers: Sequence[Container],
    init_containers: Sequence[Container],
    fill: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Kubernetes ``AggregateContainerRequests``: container requests without overhead.

    ``fill`` (``NonMissingContainerRequests``) gives a value for each resource
    a container has no entry for.
    """
    total: dict[str, int] = {}
    for container in containers:
        for name, value in _filled(container.requests, fill).items():
            total[name] = total.get(name, 0) + value
    if not init_containers:
        return total
    # While init container i runs, the sidecars before it are running too.
    sidecars: dict[str, int] = {}
    highest: dict[str, int] = {}
    for container in init_containers:
        requests = _filled(container.requests, fill)
        if container.is_restartable_init:
            for name, value in requests.items():
                total[name] = total.get(name, 0) + value
                sidecars[name] = sidecars.get(name, 0) + value
            candidate = sidecars
        else:
            candidate = dict(requests)
            for name, value in sidecars.items():
                candidate[name] = candidate.get(name, 0) + value
        _max_into(highest, candidate)
    _max_into(total, highest)
    return total


def _filled(requests: dict[str, int], fill: Mapping[str, int] | None) -> dict[str, int]:
    if not fill or all(name in requests for name in fill):
        return requests
    result = dict(requests)
    for name, value in fill.items():
        result.setdefault(name, value)
    return result


def _max_into(target: dict[str, int], source: Mapping[str, int]) -> None:
    for name, value in source.items():
        if name not in target or value > target[name]:
            target[name] = value


def is_pod_level_resource(name: str) -> bool:
    """Resources allowed in pod-level ``spec.resources`` (PodLevelResources)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


# --------------------------------------------------------------------------
# Nodes and namespaces


@attrs.frozen(slots=True, kw_only=True)
class ContainerImage:
    names: tuple[str, ...] = ()
    size_bytes: int = 0


@attrs.frozen(slots=True, kw_only=True)
class Node:
    """A node.

    ``allocatable`` comes from ``status.allocatable``; when that is missing
    (or null) it is a copy of ``capacity``. ``addresses`` holds
    ``(type, address)`` pairs from ``status.addresses``.
    """

    name: str
    uid: str = ""
    labels: dict[str, str] = attrs.Factory(dict)
    annotations: dict[str, str] = attrs.Factory(dict)
    allocatable: dict[str, int] = attrs.Factory(dict)
    capacity: dict[str, int] = attrs.Factory(dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    images: tuple[ContainerImage, ...] = ()
    addresses: tuple[tuple[str, str], ...] = ()
    resource_version: str = ""


@attrs.frozen(slots=True, kw_only=True)
class Namespace:
    name: str
    labels: dict[str, str] = attrs.Factory(dict)


@attrs.frozen(slots=True)
class LoadedObjects:
    """What ``load_objects`` found; ``skipped`` names objects of other kinds
    (``"Service default/web"``) and ``others`` holds them as decoded, for
    callers that read kinds of their own (a ``MetricsSnapshot``)."""

    pods: list[Pod] = attrs.Factory(list)
    nodes: list[Node] = attrs.Factory(list)
    namespaces: list[Namespace] = attrs.Factory(list)
    skipped: list[str] = attrs.Factory(list)
    others: list[Mapping[str, Any]] = attrs.Factory(list)


# --------------------------------------------------------------------------
# Parsing helpers. They raise _FieldError with the field path; the
# *_from_dict functions add the object's name and raise ModelError.


class _FieldError(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, message)
        self.path = path
        self.message = message


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: str) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 80 else shown[:76] + '..."'


def describe_value(value: object) -> str:
    """``a boolean (true)``, ``a list``... for "expected X, got Y" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({_show(value)})"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return f"a timestamp ({value.isoformat()})"
    return f"a {type(value).__name__}"


def _expected(what: str, value: object) -> str:
    hint = ""
    if what == "a string" and isinstance(value, (bool, int, float, datetime.date)):
        hint = " (quote it in YAML)"
    return f"expected {what}, got {describe_value(value)}{hint}"


def _mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return _EMPTY
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise _FieldError(_join(path, key), _expected("a mapping", value))


def _optional_mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    if value is None or type(value) is dict or isinstance(value, Mapping):
        return value
    raise _FieldError(_join(path, key), _expected("a mapping", value))


def _list(obj: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
    value = obj.get(key)
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return value
    raise _FieldError(_join(path, key), _expected("a list", value))


def _mappings(obj: Mapping[str, Any], key: str, path: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(path, item) for each entry of a list of mappings."""
    if obj.get(key) is None:
        return []
    base = _join(path, key)
    result = []
    for index, item in enumerate(_list(obj, key, path)):
        item_path = f"{base}[{index}]"
        if type(item) is not dict and not isinstance(item, Mapping):
            raise _FieldError(item_path, _expected("a mapping", item))
        result.append((item_path, item))
    return result


def _str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise _FieldError(_join(path, key), _expected("a string", value))


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    return _str(obj, key, path) or None


def _required_str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = _str(obj, key, path)
    if not value:
        raise _FieldError(_join(path, key), "required")
    return value


def _choice(obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> str:
    """A required string out of ``allowed``."""
    value = _str(obj, key, path)
    if value in allowed:
        return value
    expected = ", ".join(allowed)
    if not value:
        raise _FieldError(_join(path, key), f"required, expected one of {expected}")
    raise _FieldError(_join(path, key), f"unknown value {_show(value)}, expected one of {expected}")


def _optional_choice(
    obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]
) -> str | None:
    return _choice(obj, key, path, allowed) if obj.get(key) is not None else None


def _optional_int(obj: Mapping[str, Any], key: str, path: str) -> int | None:
    value = obj.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _FieldError(_join(path, key), _expected("an integer", value))


def _int_in_range(obj: Mapping[str, Any], key: str, path: str, low: int, high: int) -> int:
    """A required integer in [low, high]."""
    value = _optional_int(obj, key, path)
    if value is None:
        raise _FieldError(_join(path, key), f"required, expected an integer {low}-{high}")
    if not low <= value <= high:
        raise _FieldError(_join(path, key), f"{value} out of range, expected {low}-{high}")
    return value


def _bool(obj: Mapping[str, Any], key: str, path: str) -> bool:
    value = obj.get(key)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise _FieldError(_join(path, key), _expected("a boolean (true or false)", value))


def _str_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    """A map of strings (labels, annotations, nodeSelector). A null value is ""
    as in Go."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _FieldError(_join(path, key), _expected("a mapping of strings", value))
    result = dict(value)
    for name, item in result.items():
        if not isinstance(name, str):
            raise _FieldError(_join(path, key), _expected("string keys", name))
        if not isinstance(item, str):
            if item is None:
                result[name] = ""
                continue
            raise _FieldError(f"{_join(path, key)}.{name}", _expected("a string", item))
    return result


def _str_tuple(obj: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    items = _list(obj, key, path)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise _FieldError(f"{_join(path, key)}[{index}]", _expected("a string", item))
    return tuple(items)


def _resource_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, int]:
    """Resource name -> canonical integer; quantities must not be negative."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _FieldError(
            _join(path, key), _expected('a mapping of resource name to quantity like "500m"', value)
        )
    result: dict[str, int] = {}
    for name, quantity in value.items():
        if not isinstance(name, str) or not name:
            raise _FieldError(_join(path, key), _expected("resource names as keys", name))
        try:
            amount = resource_value(name, quantity)
        except QuantityError as error:
            raise _FieldError(f"{_join(path, key)}.{name}", str(error)) from None
        if amount < 0:
            shown = _show(quantity) if isinstance(quantity, str) else repr(quantity)
            raise _FieldError(f"{_join(path, key)}.{name}", f"must not be negative, got {shown}")
        result[name] = amount
    return result


def _timestamp(obj: Mapping[str, Any], key: str, path: str) -> str:
    """An RFC 3339 string; YAML turns unquoted timestamps into datetimes."""
    value = obj.get(key)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None and value.utcoffset() == datetime.timedelta(0):
            return value.replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    return _str(obj, key, path)


def parse_int64(text: str) -> int | None:
    """Go ``strconv.ParseInt(text, 10, 64)``: the value, or None if invalid."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    value = int(text)
    return value if -(1 << 63) <= value < (1 << 63) else None


# --------------------------------------------------------------------------
# Parsing: selectors, affinity, tolerations


def _taint(obj: Mapping[str, Any], path: str) -> Taint:
    return Taint(
        key=_required_str(obj, "key", path),
        value=_str(obj, "value", path),
        effect=_choice(obj, "effect", path, TAINT_EFFECTS),
    )


def _toleration(obj: Mapping[str, Any], path: str) -> Toleration:
    key = _str(obj, "key", path)
    operator = _str(obj, "operator", path) or "Equal"
    if operator not in TOLERATION_OPERATORS:
        raise _FieldError(
            _join(path, "operator"),
            f"unknown operator {_show(operator)}, expected one of Equal, Exists",
        )
    value = _str(obj, "value", path)
    if operator == "Exists" and value:
        raise _FieldError(_join(path, "value"), "must be empty when operator is Exists")
    if not key and operator != "Exists":
        raise _FieldError(_join(path, "operator"), "must be Exists when key is empty")
    effect = _str(obj, "effect", path)
    if effect and effect not in TAINT_EFFECTS:
        raise _FieldError(
            _join(path, "effect"),
            f"unknown effect {_show(effect)}, expected empty (all effects) "
            "or one of NoSchedule, PreferNoSchedule, NoExecute",
        )
    return Toleration(
        key=key,
        operator=operator,
        value=value,
        effect=effect,
        toleration_seconds=_optional_int(obj, "tolerationSeconds", path),
    )


def _operator(obj: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> str:
    operator = _str(obj, "operator", path)
    if operator in allowed:
        return operator
    expected = ", ".join(allowed)
    if not operator:
        raise _FieldError(_join(path, "operator"), f"required, expected one of {expected}")
    raise _FieldError(
        _join(path, "operator"), f"unknown operator {_show(operator)}, expected one of {expected}"
    )


def _check_values(operator: str, values: tuple[str, ...], path: str) -> None:
    """Value rules shared by label and node selector requirements."""
    if operator in ("In", "NotIn") and not values:
        raise _FieldError(_join(path, "values"), f"must be non-empty when operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise _FieldError(_join(path, "values"), f"must be empty when operator is {operator}")
    if operator in ("Gt", "Lt") and (len(values) != 1 or parse_int64(values[0]) is None):
        raise _FieldError(
            _join(path, "values"), f"must be a single integer when operator is {operator}"
        )


def _label_selector(obj: Mapping[str, Any], key: str, path: str) -> LabelSelector | None:
    selector = _optional_mapping(obj, key, path)
    if selector is None:
        return None
    path = _join(path, key)
    expressions = []
    for item_path, item in _mappings(selector, "matchExpressions", path):
        operator = _operator(item, item_path, LABEL_SELECTOR_OPERATORS)
        values = _str_tuple(item, "values", item_path)
        _check_values(operator, values, item_path)
        expressions.append(
            LabelSelectorRequirement(
                key=_required_str(item, "key", item_path), operator=operator, values=values
            )
        )
    return LabelSelector(
        match_labels=_str_map(selector, "matchLabels", path), match_expressions=tuple(expressions)
    )


def _node_selector_term(obj: Mapping[str, Any], path: str) -> NodeSelectorTerm:
    expressions = []
    for item_path, item in _mappings(obj, "matchExpressions", path):
        operator = _operator(item, item_path, NODE_SELECTOR_OPERATORS)
        values = _str_tuple(item, "values", item_path)
        _check_values(operator, values, item_path)
        expressions.append(
            NodeSelectorRequirement(
                key=_required_str(item, "key", item_path), operator=operator, values=values
            )
        )
    fields = []
    for item_path, item in _mappings(obj, "matchFields", path):
        key = _required_str(item, "key", item_path)
        if key not in NODE_FIELD_KEYS:
            raise _FieldError(
                _join(item_path, "key"), f"unsupported field {_show(key)}, expected metadata.name"
            )
        operator = _operator(item, item_path, ("In", "NotIn"))
        values = _str_tuple(item, "values", item_path)
        if len(values) != 1:
            raise _FieldError(
                _join(item_path, "values"), "must have exactly one value for matchFields"
            )
        fields.append(NodeSelectorRequirement(key=key, operator=operator, values=values))
    return NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields))


def _node_affinity(obj: Mapping[str, Any], path: str) -> NodeAffinity:
    required = None
    selector = _optional_mapping(obj, "requiredDuringSchedulingIgnoredDuringExecution", path)
    if selector is not None:
        selector_path = _join(path, "requiredDuringSchedulingIgnoredDuringExecution")
        terms = _mappings(selector, "nodeSelectorTerms", selector_path)
        if not terms:
            raise _FieldError(
                _join(selector_path, "nodeSelectorTerms"), "must have at least one term"
            )
        required = NodeSelector(terms=tuple(_node_selector_term(t, p) for p, t in terms))
    preferred = []
    for item_path, item in _mappings(obj, "preferredDuringSchedulingIgnoredDuringExecution", path):
        weight = _int_in_range(item, "weight", item_path, 1, 100)
        preference = _optional_mapping(item, "preference", item_path)
        if preference is None:
            raise _FieldError(_join(item_path, "preference"), "required")
        preferred.append(
            PreferredSchedulingTerm(
                weight=weight,
                preference=_node_selector_term(preference, _join(item_path, "preference")),
            )
        )
    return NodeAffinity(required=required, preferred=tuple(preferred))


def _pod_affinity_term(obj: Mapping[str, Any], path: str) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=_label_selector(obj, "labelSelector", path),
        namespaces=_str_tuple(obj, "namespaces", path),
        topology_key=_required_str(obj, "topologyKey", path),
        namespace_selector=_label_selector(obj, "namespaceSelector", path),
        match_label_keys=_str_tuple(obj, "matchLabelKeys", path),
        mismatch_label_keys=_str_tuple(obj, "mismatchLabelKeys", path),
    )


def _pod_affinity_terms(
    obj: Mapping[str, Any], path: str
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    """(required, preferred) of a podAffinity or podAntiAffinity."""
    required_items = _mappings(obj, "requiredDuringSchedulingIgnoredDuringExecution", path)
    required = tuple(_pod_affinity_term(item, item_path) for item_path, item in required_items)
    preferred = []
    for item_path, item in _mappings(obj, "preferredDuringSchedulingIgnoredDuringExecution", path):
        weight = _int_in_range(item, "weight", item_path, 1, 100)
        term = _optional_mapping(item, "podAffinityTerm", item_path)
        if term is None:
            raise _FieldError(_join(item_path, "podAffinityTerm"), "required")
        preferred.append(
            WeightedPodAffinityTerm(
                weight=weight, term=_pod_affinity_term(term, _join(item_path, "podAffinityTerm"))
            )
        )
    return required, tuple(preferred)


def _affinity(spec: Mapping[str, Any]) -> Affinity | None:
    affinity = _optional_mapping(spec, "affinity", "spec")
    if affinity is None:
        return None
    path = "spec.affinity"
    node = _optional_mapping(affinity, "nodeAffinity", path)
    pod = _optional_mapping(affinity, "podAffinity", path)
    anti = _optional_mapping(affinity, "podAntiAffinity", path)
    pod_affinity = anti_affinity = None
    if pod is not None:
        required, preferred = _pod_affinity_terms(pod, _join(path, "podAffinity"))
        pod_affinity = PodAffinity(required=required, preferred=preferred)
    if anti is not None:
        required, preferred = _pod_affinity_terms(anti, _join(path, "podAntiAffinity"))
        anti_affinity = PodAntiAffinity(required=required, preferred=preferred)
    return Affinity(
        node_affinity=None if node is None else _node_affinity(node, _join(path, "nodeAffinity")),
        pod_affinity=pod_affinity,
        pod_anti_affinity=anti_affinity,
    )


def _spread_constraint(obj: Mapping[str, Any], path: str) -> TopologySpreadConstraint:
    max_skew = _optional_int(obj, "maxSkew", path)
    if max_skew is None or max_skew < 1:
        raise _FieldError(_join(path, "maxSkew"), "required, expected an integer of at least 1")
    when_unsatisfiable = _choice(obj, "whenUnsatisfiable", path, WHEN_UNSATISFIABLE)
    min_domains = _optional_int(obj, "minDomains", path)
    if min_domains is not None:
        if min_domains < 1:
            raise _FieldError(_join(path, "minDomains"), f"{min_domains}: must be at least 1")
        if when_unsatisfiable != "DoNotSchedule":
            raise _FieldError(
                _join(path, "minDomains"), "allowed only with whenUnsatisfiable DoNotSchedule"
            )
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=_required_str(obj, "topologyKey", path),
        when_unsatisfiable=when_unsatisfiable,
        label_selector=_label_selector(obj, "labelSelector", path),
        min_domains=min_domains,
        node_affinity_policy=_optional_choice(
            obj, "nodeAffinityPolicy", path, NODE_INCLUSION_POLICIES
        ),
        node_taints_policy=_optional_choice(obj, "nodeTaintsPolicy", path, NODE_INCLUSION_POLICIES),
        match_label_keys=_str_tuple(obj, "matchLabelKeys", path),
    )


# --------------------------------------------------------------------------
# Parsing: pods


def _container_port(obj: Mapping[str, Any], path: str, host_network: bool) -> ContainerPort:
    container_port = _int_in_range(obj, "containerPort", path, 1, 65535)
    host_port = _optional_int(obj, "hostPort", path) or 0
    if not 0 <= host_port <= 65535:
        raise _FieldError(_join(path, "hostPort"), f"{host_port} out of range, expected 0-65535")
    if host_network and host_port == 0:
        host_port = container_port  # API server default for host-network pods
    protocol = _str(obj, "protocol", path) or "TCP"
    if protocol not in PORT_PROTOCOLS:
        raise _FieldError(
            _join(path, "protocol"),
            f"unknown protocol {_show(protocol)}, expected TCP, UDP or SCTP",
        )
    return ContainerPort(
        container_port=container_port,
        host_port=host_port,
        protocol=protocol,
        host_ip=_str(obj, "hostIP", path),
    )


def _container(obj: Mapping[str, Any], path: str, host_network: bool) -> Container:
    resources = _mapping(obj, "resources", path)
    resources_path = _join(path, "resources")
    requests = _resource_map(resources, "requests", resources_path)
    limits = _resource_map(resources, "limits", resources_path)
    for name, value in limits.items():
        requests.setdefault(name, value)  # API server default: requests = limits
    return Container(
        name=_required_str(obj, "name", path),
        image=_str(obj, "image", path),
        requests=requests,
        limits=limits,
        ports=tuple(
            _container_port(item, item_path, host_network)
            for item_path, item in _mappings(obj, "ports", path)
        ),
        restart_policy=_optional_str(obj, "restartPolicy", path),
    )


def _pod_level_requests(
    spec: Mapping[str, Any],
    containers: tuple[Container, ...],
    init_containers: tuple[Container, ...],
) -> dict[str, int]:
    """``spec.resources.requests`` with the API server's defaulting
    (``defaultPodRequests``): when pod-level limits are set, a missing request
    defaults to the containers' aggregate request (not for hugepages), else to
    the pod-level limit."""
    resources = _mapping(spec, "resources", "spec")
    if not resources:
        return {}
    requests = _resource_map(resources, "requests", "spec.resources")
    limits = _resource_map(resources, "limits", "spec.resources")
    for field, values in (("requests", requests), ("limits", limits)):
        for name in values:
            if not is_pod_level_resource(name):
                raise _FieldError(
                    f"spec.resources.{field}.{name}",
                    "pod-level resources support only cpu, memory and hugepages-*",
                )
    if limits:
        aggregate = aggregate_container_requests(containers, init_containers)
        for name in ("cpu", "memory"):
            if name not in requests and name in aggregate:
                requests[name] = aggregate[name]
        for name, value in limits.items():
            requests.setdefault(name, value)
    return requests


def _owner_reference(obj: Mapping[str, Any], path: str) -> OwnerReference:
    return OwnerReference(
        api_version=_str(obj, "apiVersion", path),
        kind=_required_str(obj, "kind", path),
        name=_required_str(obj, "name", path),
        uid=_str(obj, "uid", path),
        controller=_bool(obj, "controller", path),
    )


def _pod(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> Pod:
    spec = _mapping(obj, "spec", "")
    status = _mapping(obj, "status", "")
    host_network = _bool(spec, "hostNetwork", "spec")
    containers = tuple(
        _container(item, path, host_network) for path, item in _mappings(spec, "containers", "spec")
    )
    init_containers = tuple(
        _container(item, path, host_network)
        for path, item in _mappings(spec, "initContainers", "spec")
    )
    priority = _optional_int(spec, "priority", "spec")
    return Pod(
        namespace=namespace,
        name=name,
        uid=_str(meta, "uid", "metadata"),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        owner_references=tuple(
            _owner_reference(item, path)
            for path, item in _mappings(meta, "ownerReferences", "metadata")
        ),
        scheduler_name=_str(spec, "schedulerName", "spec") or "default-scheduler",
        node_name=_str(spec, "nodeName", "spec"),
        node_selector=_str_map(spec, "nodeSelector", "spec"),
        affinity=_affinity(spec),
        tolerations=tuple(
            _toleration(item, path) for path, item in _mappings(spec, "tolerations", "spec")
        ),
        topology_spread_constraints=tuple(
            _spread_constraint(item, path)
            for path, item in _mappings(spec, "topologySpreadConstraints", "spec")
        ),
        priority=0 if priority is None else priority,
        containers=containers,
        init_containers=init_containers,
        overhead=_resource_map(spec, "overhead", "spec"),
        pod_level_requests=_pod_level_requests(spec, containers, init_containers),
        phase=_str(status, "phase", "status"),
        scheduling_gates=tuple(
            _required_str(item, "name", path)
            for path, item in _mappings(spec, "schedulingGates", "spec")
        ),
        nominated_node_name=_str(status, "nominatedNodeName", "status"),
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=_str(meta, "resourceVersion", "metadata"),
        creation_timestamp=_timestamp(meta, "creationTimestamp", "metadata"),
    )


# --------------------------------------------------------------------------
# Parsing: nodes, namespaces


def _node(obj: Mapping[str, Any], meta: Mapping[str, Any], name: str) -> Node:
    spec = _mapping(obj, "spec", "")
    status = _mapping(obj, "status", "")
    capacity = _resource_map(status, "capacity", "status")
    if status.get("allocatable") is None:
        allocatable = dict(capacity)
    else:
        allocatable = _resource_map(status, "allocatable", "status")
    images = []
    for path, item in _mappings(status, "images", "status"):
        size = _optional_int(item, "sizeBytes", path) or 0
        images.append(ContainerImage(names=_str_tuple(item, "names", path), size_bytes=size))
    return Node(
        name=name,
        uid=_str(meta, "uid", "metadata"),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        allocatable=allocatable,
        capacity=capacity,
        taints=tuple(_taint(item, path) for path, item in _mappings(spec, "taints", "spec")),
        unschedulable=_bool(spec, "unschedulable", "spec"),
        images=tuple(images),
        addresses=tuple(
            (_str(item, "type", path), _str(item, "address", path))
            for path, item in _mappings(status, "addresses", "status")
        ),
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _namespace(obj: Mapping[str, Any], meta: Mapping[str, Any], name: str) -> Namespace:
    return Namespace(name=name, labels=_str_map(meta, "labels", "metadata"))


# --------------------------------------------------------------------------
# Public parsing API


def _metadata(
    kind: str, obj: object, origin: str, namespaced: bool
) -> tuple[Mapping[str, Any], str, str, str]:
    """(metadata, namespace, name, label) where label names the object in errors."""
    where = f" ({origin})" if origin else ""
    if not isinstance(obj, Mapping):
        got = describe_value(obj)
        raise ModelError(f"{kind}{where}: expected a {kind} object (a mapping), got {got}")
    name = ""
    try:
        meta = _mapping(obj, "metadata", "")
        name = _required_str(meta, "name", "metadata")
        declared = obj.get("kind")
        if declared is not None and declared != kind:
            raise _FieldError("kind", f"expected {kind}, got {describe_value(declared)}")
        namespace = (_str(meta, "namespace", "metadata") or "default") if namespaced else ""
    except _FieldError as error:
        label = f"{kind} {name}" if name else kind
        raise ModelError(f"{label}{where}: {error.path}: {error.message}") from None
    label = f"{kind} {namespace}/{name}" if namespaced else f"{kind} {name}"
    return meta, namespace, name, label + where


def pod_from_dict(obj: Mapping[str, Any], *, origin: str = "") -> Pod:
    """Build a Pod from a v1 Pod API object.

    ``origin`` (e.g. ``"document 3 of cluster.yaml"``) is added to error
    messages.
    """
    meta, namespace, name, label = _metadata("Pod", obj, origin, namespaced=True)
    try:
        return _pod(obj, meta, namespace, name)
    except _FieldError as error:
        raise ModelError(f"{label}: {error.path}: {error.message}") from None


def node_from_dict(obj: Mapping[str, Any], *, origin: str = "") -> Node:
    """Build a Node from a v1 Node API object."""
    meta, _, name, label = _metadata("Node", obj, origin, namespaced=False)
    try:
        return _node(obj, meta, name)
    except _FieldError as error:
        raise ModelError(f"{label}: {error.path}: {error.message}") from None


def namespace_from_dict(obj: Mapping[str, Any], *, origin: str = "") -> Namespace:
    """Build a Namespace from a v1 Namespace API object."""
    meta, _, name, label = _metadata("Namespace", obj, origin, namespaced=False)
    try:
        return _namespace(obj, meta, name)
    except _FieldError as error:
        raise ModelError(f"{label}: {error.path}: {error.message}") from None


_BUILDERS: dict[str, Callable[..., Pod | Node | Namespace]] = {
    "Pod": pod_from_dict,
    "Node": node_from_dict,
    "Namespace": namespace_from_dict,
}


def object_from_dict(obj: Mapping[str, Any], *, origin: str = "") -> Pod | Node | Namespace:
    """Build a Pod, Node or Namespace according to ``kind``; other kinds are errors."""
    where = f" ({origin})" if origin else ""
    if not isinstance(obj, Mapping):
        raise ModelError(f"object{where}: expected a Kubernetes object, got {describe_value(obj)}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ModelError(f"object{_object_name(obj, origin)}: kind: {_missing_kind(kind)}")
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise ModelError(
            f"{kind}{_object_name(obj, origin)}: kind: unsupported kind {_show(kind)}, "
            "expected Pod, Node or Namespace"
        )
    return builder(obj, origin=origin)


def _missing_kind(kind: object) -> str:
    got = "" if kind is None else f", got {describe_value(kind)}"
    return f"required (a Kubernetes object such as Pod, Node or Namespace){got}"


def _object_name(obj: Mapping[str, Any], origin: str) -> str:
    """`` ns/name (origin)``, `` name``, `` (origin)``... from whatever
    metadata there is, for naming objects we do not parse."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    where = f" ({origin})" if origin else ""
    if isinstance(name, str) and name:
        if isinstance(namespace, str) and namespace:
            return f" {namespace}/{name}{where}"
        return f" {name}{where}"
    return where


def load_objects(text: str, source: str = "<input>") -> LoadedObjects:
    """Pods, Nodes and Namespaces in a YAML (multi-document) or JSON text.

    Accepts ``kind: List`` and typed lists (``PodList``...) with ``items``;
    empty documents are skipped. Objects of other kinds, or core kinds with
    an apiVersion other than v1, go to ``skipped``. ``source`` names the
    input in errors.
    """
    with _gc_paused():
        return _load_documents(_documents(text, source), source)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building many objects: the objects are
    acyclic, and gen-2 collections over a growing heap cost about a third of
    the load time of a 100k-pod cluster."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _load_documents(documents: list[Any], source: str) -> LoadedObjects:
    loaded = LoadedObjects()
    for number, document in enumerate(documents, 1):
        if document is None:
            continue
        origin = f"document {number} of {source}"
        kind = document.get("kind") if isinstance(document, Mapping) else None
        if isinstance(kind, str) and kind.endswith("List") and "items" in document:
            item_kind = kind[: -len("List")] or None  # PodList items may omit kind
            path = f"{kind} ({origin})"
            items = document["items"]
            if items is None:
                continue
            if not isinstance(items, (list, tuple)):
                raise ModelError(f"{path}: items: {_expected('a list', items)}")
            for index, item in enumerate(items):
                _load_one(item, f"{origin}, items[{index}]", item_kind, loaded)
        else:
            _load_one(document, origin, None, loaded)
    return loaded


def _load_one(obj: object, origin: str, default_kind: str | None, loaded: LoadedObjects) -> None:
    if obj is None:
        return
    if not isinstance(obj, Mapping):
        raise ModelError(
            f"{origin}: expected a Kubernetes object (a mapping with apiVersion and kind), "
            f"got {describe_value(obj)}"
        )
    kind = obj.get("kind", default_kind)
    if not isinstance(kind, str) or not kind:
        raise ModelError(f"object{_object_name(obj, origin)}: kind: {_missing_kind(kind)}")
    builder = _BUILDERS.get(kind)
    if builder is None or obj.get("apiVersion") not in (None, "v1"):
        # Named objects are listed as "Service default/web"; unnamed by origin.
        loaded.skipped.append(f"{kind}{_object_name(obj, '' if _has_name(obj) else origin)}")
        loaded.others.append(obj)
        return
    result = builder(obj, origin=origin)
    if isinstance(result, Pod):
        loaded.pods.append(result)
    elif isinstance(result, Node):
        loaded.nodes.append(result)
    else:
        loaded.namespaces.append(result)


def _has_name(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    return isinstance(meta, Mapping) and isinstance(meta.get("name"), str) and bool(meta["name"])


def _documents(text: str, source: str) -> list[Any]:
    text = text.removeprefix("\ufeff")
    if text.lstrip()[:1] in ("{", "["):
        try:
            return [orjson.loads(text)]
        except orjson.JSONDecodeError as json_error:
            # Maybe YAML in flow style; if not, the JSON error is the useful one.
            try:
                return _yaml_documents(text, source)
            except ModelError:
                raise ModelError(
                    f"{source}: line {json_error.lineno}, column {json_error.colno}: "
                    f"invalid JSON: {json_error.msg}"
                ) from None
    return _yaml_documents(text, source)


def _yaml_documents(text: str, source: str) -> list[Any]:
    try:
        return list(yaml.load_all(text, Loader=_YAML_LOADER))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = error.problem or error.context or "syntax error"
        raise ModelError(f"{source}: {where}invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as error:
        code = ord(error.character) if isinstance(error.character, str) else error.character
        raise ModelError(
            f"{source}: character {error.position + 1}: invalid YAML: {error.reason} (#x{code:04x})"
        ) from None
    except yaml.YAMLError as error:
        raise ModelError(f"{source}: invalid YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise ModelError(f"{source}: invalid YAML: nested too deeply") from None


def load_file(path: str | os.PathLike[str]) -> LoadedObjects:
    """``load_objects`` on a file's contents; errors name the path."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as stream:
            text = stream.read()
    except FileNotFoundError:
        raise ModelError(f"{source}: no such file") from None
    except UnicodeDecodeError as error:
        raise ModelError(f"{source}: not UTF-8 text (byte {error.start})") from None
    except OSError as error:
        raise ModelError(f"{source}: cannot read: {error.strerror or error}") from None
    return load_objects(text, source)
