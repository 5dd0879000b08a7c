"""API objects (decoded JSON/YAML dicts with camelCase fields) to scheduling objects.

``pod_from_dict``, ``node_from_dict``, ``namespace_from_dict``,
``workload_from_dict`` (Service, ReplicationController, ReplicaSet,
StatefulSet, PodDisruptionBudget) and ``object_from_dict`` build the objects
of ``scorer.model.objects``; unknown fields are ignored (these are API
objects, not our config).

Every malformed value raises ``ModelError`` naming the object and the field
(``Pod default/web (document 2 of cluster.yaml):
spec.containers[0].resources.requests.cpu: invalid quantity "abc" ...``); no
KeyError/TypeError escapes for bad input. Values are described with
``scorer.inputs.describe``, the wording every decoder of scorer uses. Numbers
must fit the API's integer types (int64, int32 where kube uses it); an
apiVersion the kind does not have (``API_VERSIONS``: ``v1`` for the core
kinds, ``apps/v1`` for ReplicaSet and StatefulSet, ``policy/v1`` or
``policy/v1beta1`` for PodDisruptionBudget) is an error.

Selectors of the workloads, as kube-scheduler reads them: a Service without
``spec.selector`` selects nothing (None), ``selector: {}`` every pod of its
namespace (an empty LabelSelector); a ReplicationController, ReplicaSet or
StatefulSet whose selector is missing or empty, and a PodDisruptionBudget
whose selector is missing or empty, select nothing (None).

Node selector requirements are kept as written when their values are not
valid label values (or a Gt/Lt value is not an integer): the API server
accepts them, and the scheduler's parse fails the term, which then matches
no node (``NodeSelectorRequirement.parse_error``). Tolerations with the
operators Gt and Lt (a later Kubernetes feature, off here) are accepted and
tolerate nothing.

Objects from the API server have already been defaulted; manifests read from
files have not, so the parsers apply the API server defaults that change
scheduling (no-ops for objects that went through it):

- a container's requests default to its limits for each resource that has a
  limit and no request;
- with ``spec.hostNetwork``, a container port's hostPort defaults to its
  containerPort;
- pod-level requests (``spec.resources``, PodLevelResources) default from the
  containers' requests, then from pod-level limits.

``FieldError`` and the ``parse_*`` functions are public for plugins that
decode parts of API objects in their args (NodeAffinity's addedAffinity).
"""

from __future__ import annotations

import datetime
import functools
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from scorer.errors import ModelError, QuantityError
from scorer.inputs.describe import describe_value, expected, join_path, printable, quote
from scorer.inputs.numbers import INT64_MAX, int_range_error
from scorer.model.objects import (
    LABEL_SELECTOR_OPERATORS,
    NODE_FIELD_KEYS,
    NODE_INCLUSION_POLICIES,
    NODE_SELECTOR_OPERATORS,
    PORT_PROTOCOLS,
    PREEMPTION_POLICIES,
    TAINT_EFFECTS,
    TOLERATION_OPERATORS,
    WHEN_UNSATISFIABLE,
    Affinity,
    Container,
    ContainerImage,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    Node,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    PodDisruptionBudget,
    PreferredSchedulingTerm,
    SelectorOwner,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volume,
    WeightedPodAffinityTerm,
)
from scorer.model.requests import aggregate_container_requests, is_pod_level_resource
from scorer.model.storage import (
    ACCESS_MODES,
    ANN_STORAGE_CLASS_BETA,
    BINDING_MODES,
    CLAIM_PHASES,
    IMMEDIATE,
    STORAGE_KINDS,
    VOLUME_MODES,
    VOLUME_PHASES,
    ClaimRef,
    CSIDriver,
    CSINode,
    CSINodeDriver,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObject,
    TopologySelectorTerm,
)
from scorer.quantity import resource_value

_T = TypeVar("_T")
_R = TypeVar("_R")

API_VERSION = "v1"
# The apiVersions each kind is read in (the first is the one kube serves today).
API_VERSIONS: Mapping[str, tuple[str, ...]] = types.MappingProxyType({
    "Pod": (API_VERSION,),
    "Node": (API_VERSION,),
    "Namespace": (API_VERSION,),
    "Service": (API_VERSION,),
    "ReplicationController": (API_VERSION,),
    "ReplicaSet": ("apps/v1",),
    "StatefulSet": ("apps/v1",),
    "PodDisruptionBudget": ("policy/v1", "policy/v1beta1"),
    "PersistentVolume": (API_VERSION,),
    "PersistentVolumeClaim": (API_VERSION,),
    "StorageClass": ("storage.k8s.io/v1", "storage.k8s.io/v1beta1"),
    "CSINode": ("storage.k8s.io/v1", "storage.k8s.io/v1beta1"),
    "CSIDriver": ("storage.k8s.io/v1", "storage.k8s.io/v1beta1"),
    "CSIStorageCapacity": ("storage.k8s.io/v1", "storage.k8s.io/v1beta1", "storage.k8s.io/v1alpha1"),
})
_CLUSTER_SCOPED = frozenset({"Node", "Namespace", "PersistentVolume", "StorageClass", "CSINode", "CSIDriver"})
# The keys of a pod volume's source (core/v1 VolumeSource), in kube's order except that
# persistentVolumeClaim and ephemeral come first; other keys of a volume entry are ignored.
VOLUME_SOURCES: tuple[str, ...] = (
    "persistentVolumeClaim", "ephemeral", "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore",
    "gitRepo", "secret", "nfs", "iscsi", "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker",
    "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk",
    "photonPersistentDisk", "projected", "portworxVolume", "scaleIO", "storageos", "csi", "image",
)
# Volume sources naming a disk: (source key, the field naming the disk).
_DISK_FIELDS: Mapping[str, str] = types.MappingProxyType({
    "gcePersistentDisk": "pdName",
    "awsElasticBlockStore": "volumeID",
    "iscsi": "iqn",
    "rbd": "image",
    "azureDisk": "diskURI",
    "cinder": "volumeID",
})
# PersistentVolume in-tree sources the CSI translation knows: (source key, plugin name, handle field).
_PV_IN_TREE: tuple[tuple[str, str, str], ...] = (
    ("gcePersistentDisk", "kubernetes.io/gce-pd", "pdName"),
    ("awsElasticBlockStore", "kubernetes.io/aws-ebs", "volumeID"),
    ("azureDisk", "kubernetes.io/azure-disk", "diskURI"),
    ("cinder", "kubernetes.io/cinder", "volumeID"),
)
DEFAULT_RBD_POOL = "rbd"
# Toleration operators of a later Kubernetes (TaintTolerationComparisonOperators): accepted,
# and they tolerate nothing, as kube does with that feature off.
_DISABLED_TOLERATION_OPERATORS: tuple[str, ...] = ("Gt", "Lt")
# ImageLocality scales image sizes in float64 (as kube does) and sums them in
# int64: sizes up to 2^53 (8 PiB) are exact there and cannot overflow the sums.
MAX_IMAGE_SIZE_BYTES = 1 << 53
_EMPTY: Mapping[str, Any] = types.MappingProxyType({})


# --------------------------------------------------------------------------
# Parsing helpers. They raise FieldError with the field path; the
# *_from_dict functions add the object's name and raise ModelError.


class FieldError(Exception):
    """A malformed field: ``path`` (``spec.priority``) and what is wrong with it.

    Raised by the parse helpers; ``*_from_dict`` turn it into a ``ModelError``
    naming the object.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, message)
        self.path = path
        self.message = message


def _mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return _EMPTY
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise FieldError(join_path(path, key), expected("an object", value))


def _optional_mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    if value is None or type(value) is dict or isinstance(value, Mapping):
        return value
    raise FieldError(join_path(path, key), expected("an object", value))


def _list(obj: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
    value = obj.get(key)
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return value
    raise FieldError(join_path(path, key), expected("a list", value))


def _mappings(obj: Mapping[str, Any], key: str, path: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(path, item) for each entry of a list of mappings."""
    if obj.get(key) is None:
        return []
    base = join_path(path, key)
    result = []
    for index, item in enumerate(_list(obj, key, path)):
        item_path = f"{base}[{index}]"
        if type(item) is not dict and not isinstance(item, Mapping):
            raise FieldError(item_path, expected("an object", item))
        result.append((item_path, item))
    return result


def _str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise FieldError(join_path(path, key), expected("a string", value))


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    return _str(obj, key, path) or None


def _required_str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = _str(obj, key, path)
    if not value:
        raise FieldError(join_path(path, key), "required")
    return value


def _choice(
    obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...], what: str = "value"
) -> str:
    """A required string out of ``allowed`` (``what`` names it in the error: value, operator)."""
    value = _str(obj, key, path)
    if value in allowed:
        return value
    choices = ", ".join(allowed)
    if not value:
        raise FieldError(join_path(path, key), f"required, expected one of {choices}")
    raise FieldError(join_path(path, key), f"unknown {what} {quote(value)}, expected one of {choices}")


def _optional_choice(
    obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]
) -> str | None:
    return _choice(obj, key, path, allowed) if obj.get(key) is not None else None


def _optional_int(
    obj: Mapping[str, Any],
    key: str,
    path: str,
    bits: int = 64,
    low: int | None = None,
    high: int | None = None,
) -> int | None:
    """An integer that fits the API's ``bits``-bit type (narrowed to [low, high])."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise FieldError(join_path(path, key), expected("an integer", value))
    problem = int_range_error(value, bits, low, high)
    if problem is not None:
        raise FieldError(join_path(path, key), f"{quote(value)} {problem}")
    return value


def _int_in_range(obj: Mapping[str, Any], key: str, path: str, low: int, high: int) -> int:
    """A required integer in [low, high]."""
    value = _optional_int(obj, key, path)
    if value is None:
        raise FieldError(join_path(path, key), f"required, expected an integer {low}-{high}")
    if not low <= value <= high:
        raise FieldError(join_path(path, key), f"{value} out of range, expected {low}-{high}")
    return value


def _bool(obj: Mapping[str, Any], key: str, path: str) -> bool:
    value = obj.get(key)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise FieldError(join_path(path, key), expected("a boolean (true or false)", value))


def _str_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    """A map of strings (labels, annotations, nodeSelector). A null value is ""
    as in Go."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(join_path(path, key), expected("a map of strings", value))
    result = dict(value)
    for name, item in result.items():
        if not isinstance(name, str):
            raise FieldError(join_path(path, key), expected("string keys", name))
        if not isinstance(item, str):
            if item is None:
                result[name] = ""
                continue
            raise FieldError(join_path(join_path(path, key), name), expected("a string", item))
    return result


def _str_tuple(obj: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    items = _list(obj, key, path)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise FieldError(f"{join_path(path, key)}[{index}]", expected("a string", item))
    return tuple(items)


def _resource_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, int]:
    """Resource name -> canonical integer; quantities must not be negative."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(
            join_path(path, key), expected('a map of resource name to quantity like "500m"', value)
        )
    result: dict[str, int] = {}
    for name, quantity in value.items():
        if not isinstance(name, str) or not name:
            raise FieldError(join_path(path, key), expected("resource names as keys", name))
        try:
            amount = resource_value(name, quantity)
        except QuantityError as error:
            raise FieldError(join_path(join_path(path, key), name), str(error)) from None
        if amount < 0:
            raise FieldError(
                join_path(join_path(path, key), name), f"must not be negative, got {quote(quantity)}"
            )
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
    if operator not in TOLERATION_OPERATORS and operator not in _DISABLED_TOLERATION_OPERATORS:
        raise FieldError(
            join_path(path, "operator"),
            f"unknown operator {quote(operator)}, expected one of Equal, Exists",
        )
    value = _str(obj, "value", path)
    if operator == "Exists" and value:
        raise FieldError(join_path(path, "value"), "must be empty when operator is Exists")
    if not key and operator != "Exists":
        raise FieldError(join_path(path, "operator"), "must be Exists when key is empty")
    effect = _str(obj, "effect", path)
    if effect and effect not in TAINT_EFFECTS:
        raise FieldError(
            join_path(path, "effect"),
            f"unknown effect {quote(effect)}, expected empty (all effects) "
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
    return _choice(obj, "operator", path, allowed, what="operator")


def _check_values(operator: str, values: tuple[str, ...], path: str) -> None:
    """Value rules shared by label and node selector requirements."""
    if operator in ("In", "NotIn") and not values:
        raise FieldError(join_path(path, "values"), f"must be non-empty when operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise FieldError(join_path(path, "values"), f"must be empty when operator is {operator}")
    if operator in ("Gt", "Lt") and len(values) != 1:
        # One value, as the API server checks; that it is an integer is the scheduler's
        # parse, which fails the term (NodeSelectorRequirement.parse_error).
        raise FieldError(
            join_path(path, "values"), f"must have exactly one value when operator is {operator}"
        )


def _label_selector(obj: Mapping[str, Any], key: str, path: str) -> LabelSelector | None:
    selector = _optional_mapping(obj, key, path)
    if selector is None:
        return None
    path = join_path(path, key)
    return LabelSelector(
        match_labels=_str_map(selector, "matchLabels", path),
        match_expressions=_match_expressions(
            selector, path, LABEL_SELECTOR_OPERATORS, LabelSelectorRequirement
        ),
    )


def _match_expressions(
    obj: Mapping[str, Any],
    path: str,
    operators: tuple[str, ...],
    requirement: Callable[..., _R],
) -> tuple[_R, ...]:
    """``matchExpressions`` of a label or node selector."""
    expressions = []
    for item_path, item in _mappings(obj, "matchExpressions", path):
        operator = _operator(item, item_path, operators)
        values = _str_tuple(item, "values", item_path)
        _check_values(operator, values, item_path)
        expressions.append(
            requirement(key=_required_str(item, "key", item_path), operator=operator, values=values)
        )
    return tuple(expressions)


def _node_selector_term(obj: Mapping[str, Any], path: str) -> NodeSelectorTerm:
    expressions = _match_expressions(obj, path, NODE_SELECTOR_OPERATORS, NodeSelectorRequirement)
    fields = []
    for item_path, item in _mappings(obj, "matchFields", path):
        key = _required_str(item, "key", item_path)
        if key not in NODE_FIELD_KEYS:
            raise FieldError(
                join_path(item_path, "key"), f"unsupported field {quote(key)}, expected metadata.name"
            )
        operator = _operator(item, item_path, ("In", "NotIn"))
        values = _str_tuple(item, "values", item_path)
        if len(values) != 1:
            raise FieldError(
                join_path(item_path, "values"), "must have exactly one value for matchFields"
            )
        fields.append(NodeSelectorRequirement(key=key, operator=operator, values=values))
    return NodeSelectorTerm(match_expressions=expressions, match_fields=tuple(fields))


def _node_selector(obj: Mapping[str, Any], key: str, path: str) -> NodeSelector | None:
    """A NodeSelector (``nodeSelectorTerms``, at least one) at ``obj[key]``; None when unset."""
    selector = _optional_mapping(obj, key, path)
    if selector is None:
        return None
    selector_path = join_path(path, key)
    terms = _mappings(selector, "nodeSelectorTerms", selector_path)
    if not terms:
        raise FieldError(join_path(selector_path, "nodeSelectorTerms"), "must have at least one term")
    return NodeSelector(terms=tuple(_node_selector_term(t, p) for p, t in terms))


def parse_node_affinity(obj: Mapping[str, Any], path: str) -> NodeAffinity:
    """A ``nodeAffinity`` object at ``path``; raises ``FieldError``."""
    required = _node_selector(obj, "requiredDuringSchedulingIgnoredDuringExecution", path)
    preferred = tuple(
        PreferredSchedulingTerm(weight=weight, preference=term)
        for weight, term in _preferred(obj, path, "preference", _node_selector_term)
    )
    return NodeAffinity(required=required, preferred=preferred)


def _preferred(
    obj: Mapping[str, Any], path: str, field: str, parse: Callable[[Mapping[str, Any], str], _T]
) -> list[tuple[int, _T]]:
    """(weight, term) of each ``preferredDuringSchedulingIgnoredDuringExecution`` entry."""
    result = []
    for item_path, item in _mappings(obj, "preferredDuringSchedulingIgnoredDuringExecution", path):
        weight = _int_in_range(item, "weight", item_path, 1, 100)
        term = _optional_mapping(item, field, item_path)
        if term is None:
            raise FieldError(join_path(item_path, field), "required")
        result.append((weight, parse(term, join_path(item_path, field))))
    return result


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
    preferred = tuple(
        WeightedPodAffinityTerm(weight=weight, term=term)
        for weight, term in _preferred(obj, path, "podAffinityTerm", _pod_affinity_term)
    )
    return required, preferred


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
        required, preferred = _pod_affinity_terms(pod, join_path(path, "podAffinity"))
        pod_affinity = PodAffinity(required=required, preferred=preferred)
    if anti is not None:
        required, preferred = _pod_affinity_terms(anti, join_path(path, "podAntiAffinity"))
        anti_affinity = PodAntiAffinity(required=required, preferred=preferred)
    return Affinity(
        node_affinity=None if node is None else parse_node_affinity(node, join_path(path, "nodeAffinity")),
        pod_affinity=pod_affinity,
        pod_anti_affinity=anti_affinity,
    )


def _spread_constraint(obj: Mapping[str, Any], path: str) -> TopologySpreadConstraint:
    max_skew = _optional_int(obj, "maxSkew", path, bits=32)
    if max_skew is None or max_skew < 1:
        raise FieldError(join_path(path, "maxSkew"), "required, expected an integer of at least 1")
    when_unsatisfiable = _choice(obj, "whenUnsatisfiable", path, WHEN_UNSATISFIABLE)
    min_domains = _optional_int(obj, "minDomains", path, bits=32)
    if min_domains is not None:
        if min_domains < 1:
            raise FieldError(join_path(path, "minDomains"), f"{min_domains}: must be at least 1")
        if when_unsatisfiable != "DoNotSchedule":
            raise FieldError(
                join_path(path, "minDomains"), "allowed only with whenUnsatisfiable DoNotSchedule"
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
        raise FieldError(join_path(path, "hostPort"), f"{host_port} out of range, expected 0-65535")
    if host_network and host_port == 0:
        host_port = container_port  # API server default for host-network pods
    protocol = _str(obj, "protocol", path) or "TCP"
    if protocol not in PORT_PROTOCOLS:
        raise FieldError(
            join_path(path, "protocol"),
            f"unknown protocol {quote(protocol)}, expected TCP, UDP or SCTP",
        )
    return ContainerPort(
        container_port=container_port,
        host_port=host_port,
        protocol=protocol,
        host_ip=_str(obj, "hostIP", path),
    )


def _container(obj: Mapping[str, Any], path: str, host_network: bool) -> Container:
    resources = _mapping(obj, "resources", path)
    resources_path = join_path(path, "resources")
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
                raise FieldError(
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


def _volumes(spec: Mapping[str, Any], pod_name: str) -> tuple[Volume, ...]:
    """``spec.volumes`` (see ``Volume``): each entry's one source (``VOLUME_SOURCES``) and the
    fields the volume plugins read."""
    volumes = []
    for path, entry in _mappings(spec, "volumes", "spec"):
        name = _required_str(entry, "name", path)
        present = [key for key in VOLUME_SOURCES if _optional_mapping(entry, key, path) is not None]
        if len(present) > 1:
            raise FieldError(path, f"{present[0]} and {present[1]}: a volume has only one source")
        if not present:
            volumes.append(Volume(name=name))
            continue
        source = present[0]
        volumes.append(_volume(name, source, entry[source], join_path(path, source), pod_name))
    return tuple(volumes)


def _volume(name: str, source: str, obj: Mapping[str, Any], path: str, pod_name: str) -> Volume:
    read_only = _bool(obj, "readOnly", path)
    if source == "persistentVolumeClaim":
        return Volume(name=name, source=source, claim_name=_required_str(obj, "claimName", path),
                      read_only=read_only)
    if source == "ephemeral":
        if _optional_mapping(obj, "volumeClaimTemplate", path) is None:
            raise FieldError(join_path(path, "volumeClaimTemplate"), "required")
        return Volume(name=name, source=source, claim_name=f"{pod_name}-{name}", read_only=read_only)
    if source == "csi":
        return Volume(name=name, source=source, driver=_required_str(obj, "driver", path), read_only=read_only)
    disk_field = _DISK_FIELDS.get(source)
    if disk_field is None:
        return Volume(name=name, source=source, read_only=read_only)
    disk = _required_str(obj, disk_field, path)
    if source != "rbd":
        return Volume(name=name, source=source, disk=disk, read_only=read_only)
    monitors = _str_tuple(obj, "monitors", path)
    if not monitors:
        raise FieldError(join_path(path, "monitors"), "required, expected a list of monitor addresses")
    return Volume(name=name, source=source, disk=disk, read_only=read_only, rbd_monitors=monitors,
                  rbd_pool=_str(obj, "pool", path) or DEFAULT_RBD_POOL)


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
    priority = _optional_int(spec, "priority", "spec", bits=32)
    volumes = _volumes(spec, name)
    pod = Pod(
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
        pvc_claims=tuple(volume.claim_name for volume in volumes if volume.is_claim),
        volumes=volumes,
        priority=0 if priority is None else priority,
        preemption_policy=_optional_choice(spec, "preemptionPolicy", "spec", PREEMPTION_POLICIES)
        or "PreemptLowerPriority",
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
        deleting=bool(_timestamp(meta, "deletionTimestamp", "metadata")),
        resource_version=_str(meta, "resourceVersion", "metadata"),
        creation_timestamp=_timestamp(meta, "creationTimestamp", "metadata"),
        start_time=_timestamp(status, "startTime", "status"),
    )
    _check_totals(pod)
    return pod


def _check_totals(pod: Pod) -> None:
    """The pod's effective requests must fit the int64 columns they are summed into."""
    totals = [*pod.requests.items(), ("cpu", pod.non_zero_cpu), ("memory", pod.non_zero_memory)]
    for name, value in totals:
        if value > INT64_MAX:
            raise FieldError(
                "spec",
                f"the {name} requests of the containers, init containers and overhead add up to "
                f"{value}, beyond the int64 limit of {INT64_MAX}",
            )


# --------------------------------------------------------------------------
# Parsing: nodes, namespaces


def _node(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> Node:
    spec = _mapping(obj, "spec", "")
    status = _mapping(obj, "status", "")
    capacity = _resource_map(status, "capacity", "status")
    if status.get("allocatable") is None:
        allocatable = dict(capacity)
    else:
        allocatable = _resource_map(status, "allocatable", "status")
    images = []
    for path, item in _mappings(status, "images", "status"):
        size = _optional_int(item, "sizeBytes", path, low=0, high=MAX_IMAGE_SIZE_BYTES) or 0
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


def _namespace(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> Namespace:
    return Namespace(name=name, labels=_str_map(meta, "labels", "metadata"))


# --------------------------------------------------------------------------
# Parsing: workloads (the objects that select pods)


def _service(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> SelectorOwner:
    spec = _mapping(obj, "spec", "")
    # GetPodServices: a nil selector selects nothing, ``{}`` every pod of the namespace.
    selector = None
    if spec.get("selector") is not None:
        selector = LabelSelector(match_labels=_str_map(spec, "selector", "spec"))
    return _owner("Service", meta, namespace, name, selector)


def _replication_controller(
    obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str
) -> SelectorOwner:
    labels = _str_map(_mapping(obj, "spec", ""), "selector", "spec")
    # GetPodControllers: "an rc with a nil or empty selector ... should match nothing".
    selector = LabelSelector(match_labels=labels) if labels else None
    return _owner("ReplicationController", meta, namespace, name, selector)


def _controller(kind: str) -> Callable[[Mapping[str, Any], Mapping[str, Any], str, str], SelectorOwner]:
    """A ReplicaSet or StatefulSet: ``spec.selector`` a LabelSelector, empty selecting nothing."""

    def build(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> SelectorOwner:
        selector = _label_selector(_mapping(obj, "spec", ""), "selector", "spec")
        return _owner(kind, meta, namespace, name, _none_if_empty(selector))

    return build


def _owner(
    kind: str, meta: Mapping[str, Any], namespace: str, name: str, selector: LabelSelector | None
) -> SelectorOwner:
    return SelectorOwner(
        kind=kind,
        namespace=namespace,
        name=name,
        selector=selector,
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _none_if_empty(selector: LabelSelector | None) -> LabelSelector | None:
    return None if selector is None or selector.is_empty() else selector


def _disruption_budget(
    obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str
) -> PodDisruptionBudget:
    spec = _mapping(obj, "spec", "")
    status = _mapping(obj, "status", "")
    disrupted = _optional_mapping(status, "disruptedPods", "status") or _EMPTY
    for pod_name in disrupted:
        if not isinstance(pod_name, str):
            raise FieldError("status.disruptedPods", expected("pod names as keys", pod_name))
    allowed = _optional_int(status, "disruptionsAllowed", "status", bits=32, low=0)
    return PodDisruptionBudget(
        namespace=namespace,
        name=name,
        # Preemption: "A PDB with a nil or empty selector matches nothing."
        selector=_none_if_empty(_label_selector(spec, "selector", "spec")),
        disruptions_allowed=allowed or 0,
        disrupted_pods=frozenset(disrupted),
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


# --------------------------------------------------------------------------
# Parsing: storage (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver,
# CSIStorageCapacity)


def _storage_quantity(obj: Mapping[str, Any], key: str, path: str) -> int | None:
    """A storage quantity in bytes (``"10Gi"``), not negative; None when unset."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FieldError(join_path(path, key), expected('a quantity like "10Gi"', value))
    try:
        amount = resource_value("storage", value)
    except QuantityError as error:
        raise FieldError(join_path(path, key), str(error)) from None
    if amount < 0:
        raise FieldError(join_path(path, key), f"must not be negative, got {quote(value)}")
    return amount


def _choices(obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A list of strings out of ``allowed`` (``accessModes``)."""
    values = _str_tuple(obj, key, path)
    for index, value in enumerate(values):
        if value not in allowed:
            raise FieldError(f"{join_path(path, key)}[{index}]",
                             f"unknown value {quote(value)}, expected one of {', '.join(allowed)}")
    return values


def _defaulted_choice(obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...], default: str) -> str:
    """A string out of ``allowed``; ``default`` (the API server's) when unset or empty."""
    if not obj.get(key):
        return default
    return _choice(obj, key, path, allowed)


def _storage_class_name(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """The beta annotation ``volume.beta.kubernetes.io/storage-class`` wins over
    ``spec.storageClassName`` (kube's ``GetPersistentVolume(Claim)Class``)."""
    annotations = _str_map(meta, "annotations", "metadata")
    if ANN_STORAGE_CLASS_BETA in annotations:
        return annotations[ANN_STORAGE_CLASS_BETA]
    return _str(spec, "storageClassName", "spec")


def _claim_ref(spec: Mapping[str, Any]) -> ClaimRef | None:
    ref = _optional_mapping(spec, "claimRef", "spec")
    if ref is None:
        return None
    path = "spec.claimRef"
    return ClaimRef(
        namespace=_str(ref, "namespace", path),
        name=_required_str(ref, "name", path),
        uid=_str(ref, "uid", path),
        resource_version=_str(ref, "resourceVersion", path),
    )


def _persistent_volume(
    obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str
) -> PersistentVolume:
    spec = _mapping(obj, "spec", "")
    status = _mapping(obj, "status", "")
    csi = _optional_mapping(spec, "csi", "spec")
    in_tree = in_tree_handle = ""
    for source, plugin, handle_field in _PV_IN_TREE:
        source_obj = _optional_mapping(spec, source, "spec")
        if source_obj is not None:
            in_tree = plugin
            in_tree_handle = _required_str(source_obj, handle_field, join_path("spec", source))
            break
    capacity = _storage_quantity(_mapping(spec, "capacity", "spec"), "storage", "spec.capacity")
    node_affinity = _optional_mapping(spec, "nodeAffinity", "spec")
    return PersistentVolume(
        name=name,
        uid=_str(meta, "uid", "metadata"),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        storage_class=_storage_class_name(meta, spec),
        capacity=capacity or 0,
        access_modes=_choices(spec, "accessModes", "spec", ACCESS_MODES),
        volume_mode=_defaulted_choice(spec, "volumeMode", "spec", VOLUME_MODES, "Filesystem"),
        claim_ref=_claim_ref(spec),
        node_affinity=None if node_affinity is None else _node_selector(
            node_affinity, "required", "spec.nodeAffinity"),
        phase=_defaulted_choice(status, "phase", "status", VOLUME_PHASES, ""),
        csi_driver="" if csi is None else _required_str(csi, "driver", "spec.csi"),
        csi_handle="" if csi is None else _required_str(csi, "volumeHandle", "spec.csi"),
        in_tree=in_tree,
        in_tree_handle=in_tree_handle,
        volume_attributes_class=_str(spec, "volumeAttributesClassName", "spec"),
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _persistent_volume_claim(
    obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str
) -> PersistentVolumeClaim:
    spec = _mapping(obj, "spec", "")
    status = _mapping(obj, "status", "")
    resources = _mapping(spec, "resources", "spec")
    requests = _mapping(resources, "requests", "spec.resources")
    return PersistentVolumeClaim(
        namespace=namespace,
        name=name,
        uid=_str(meta, "uid", "metadata"),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        owner_references=tuple(
            _owner_reference(item, path) for path, item in _mappings(meta, "ownerReferences", "metadata")
        ),
        access_modes=_choices(spec, "accessModes", "spec", ACCESS_MODES),
        volume_name=_str(spec, "volumeName", "spec"),
        storage_class=_storage_class_name(meta, spec),
        request=_storage_quantity(requests, "storage", "spec.resources.requests"),
        selector=_label_selector(spec, "selector", "spec"),
        volume_mode=_defaulted_choice(spec, "volumeMode", "spec", VOLUME_MODES, "Filesystem"),
        volume_attributes_class=_str(spec, "volumeAttributesClassName", "spec"),
        phase=_defaulted_choice(status, "phase", "status", CLAIM_PHASES, ""),
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _topology_term(obj: Mapping[str, Any], path: str) -> TopologySelectorTerm:
    expressions = []
    for item_path, item in _mappings(obj, "matchLabelExpressions", path):
        values = _str_tuple(item, "values", item_path)
        if not values:
            raise FieldError(join_path(item_path, "values"), "required, expected at least one value")
        expressions.append((_required_str(item, "key", item_path), values))
    return TopologySelectorTerm(match_label_expressions=tuple(expressions))


def _storage_class(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> StorageClass:
    # A StorageClass has no spec: its fields are at the top level.
    return StorageClass(
        name=name,
        provisioner=_required_str(obj, "provisioner", ""),
        volume_binding_mode=_defaulted_choice(obj, "volumeBindingMode", "", BINDING_MODES, IMMEDIATE),
        allowed_topologies=tuple(
            _topology_term(item, path) for path, item in _mappings(obj, "allowedTopologies", "")
        ),
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _csi_node(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> CSINode:
    spec = _mapping(obj, "spec", "")
    drivers = []
    for path, item in _mappings(spec, "drivers", "spec"):
        allocatable = _mapping(item, "allocatable", path)
        drivers.append(CSINodeDriver(
            name=_required_str(item, "name", path),
            node_id=_str(item, "nodeID", path),
            allocatable=_optional_int(allocatable, "count", join_path(path, "allocatable"), bits=32, low=0),
            topology_keys=_str_tuple(item, "topologyKeys", path),
        ))
    return CSINode(
        name=name,
        drivers=tuple(drivers),
        annotations=_str_map(meta, "annotations", "metadata"),
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _csi_driver(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> CSIDriver:
    spec = _mapping(obj, "spec", "")
    return CSIDriver(
        name=name,
        storage_capacity=_bool(spec, "storageCapacity", "spec") if spec.get("storageCapacity") is not None else None,
        attach_required=_bool(spec, "attachRequired", "spec") if spec.get("attachRequired") is not None else True,
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _csi_storage_capacity(
    obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str
) -> CSIStorageCapacity:
    # Like a StorageClass, a CSIStorageCapacity keeps its fields at the top level.
    return CSIStorageCapacity(
        namespace=namespace,
        name=name,
        storage_class_name=_required_str(obj, "storageClassName", ""),
        node_topology=_label_selector(obj, "nodeTopology", ""),
        capacity=_storage_quantity(obj, "capacity", ""),
        maximum_volume_size=_storage_quantity(obj, "maximumVolumeSize", ""),
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


# --------------------------------------------------------------------------
# Public parsing API


def _metadata(kind: str, obj: object, origin: str) -> tuple[Mapping[str, Any], str, str, str]:
    """(metadata, namespace, name, label) where label names the object in errors."""
    where = f" ({origin})" if origin else ""
    if not isinstance(obj, Mapping):
        got = describe_value(obj)
        raise ModelError(f"{kind}{where}: expected a {kind} object, got {got}")
    name = namespace = ""
    try:
        meta = _mapping(obj, "metadata", "")
        name = _required_str(meta, "name", "metadata")
        if kind not in _CLUSTER_SCOPED:
            namespace = _str(meta, "namespace", "metadata") or "default"
        declared = obj.get("kind")
        if declared is not None and declared != kind:
            raise FieldError("kind", f"expected {kind}, got {describe_value(declared)}")
        api_version = obj.get("apiVersion")
        versions = API_VERSIONS[kind]
        if api_version is not None and api_version not in versions:
            wanted = (
                f"{quote(versions[0])} (the only version of {kind})"
                if len(versions) == 1
                else " or ".join(quote(v) for v in versions)
            )
            raise FieldError("apiVersion", f"expected {wanted}, got {describe_value(api_version)}")
    except FieldError as error:
        raise ModelError(f"{_label(kind, namespace, name)}{where}: {error.path}: {error.message}") from None
    return meta, namespace, name, _label(kind, namespace, name) + where


def _label(kind: str, namespace: str, name: str) -> str:
    """``Pod ns/name``, ``Node name``, or the kind alone while the name is unknown."""
    if not name:
        return kind
    return f"{kind} {printable(namespace)}/{printable(name)}" if namespace else f"{kind} {printable(name)}"


def pod_from_dict(obj: Mapping[str, Any], *, origin: str = "") -> Pod:
    """Build a Pod from a v1 Pod API object.

    ``origin`` (e.g. ``"document 3 of cluster.yaml"``) is added to error
    messages.
    """
    return _decode("Pod", obj, origin, _pod)


def node_from_dict(obj: Mapping[str, Any], *, origin: str = "") -> Node:
    """Build a Node from a v1 Node API object."""
    return _decode("Node", obj, origin, _node)


def namespace_from_dict(obj: Mapping[str, Any], *, origin: str = "") -> Namespace:
    """Build a Namespace from a v1 Namespace API object."""
    return _decode("Namespace", obj, origin, _namespace)


def _decode(
    kind: str,
    obj: Mapping[str, Any],
    origin: str,
    build: Callable[[Mapping[str, Any], Mapping[str, Any], str, str], _T],
) -> _T:
    """``build(obj, metadata, namespace, name)``; a FieldError becomes a ModelError naming the object."""
    meta, namespace, name, label = _metadata(kind, obj, origin)
    try:
        return build(obj, meta, namespace, name)
    except FieldError as error:
        raise ModelError(f"{label}: {error.path}: {error.message}") from None


_WORKLOAD_BUILDERS: dict[str, Callable[..., SelectorOwner | PodDisruptionBudget]] = {
    "Service": _service,
    "ReplicationController": _replication_controller,
    "ReplicaSet": _controller("ReplicaSet"),
    "StatefulSet": _controller("StatefulSet"),
    "PodDisruptionBudget": _disruption_budget,
}
WORKLOAD_KINDS: tuple[str, ...] = tuple(_WORKLOAD_BUILDERS)


def workload_from_dict(
    obj: Mapping[str, Any], *, origin: str = "", kind: str | None = None
) -> SelectorOwner | PodDisruptionBudget:
    """Build a SelectorOwner (Service, ReplicationController, ReplicaSet, StatefulSet) or a
    PodDisruptionBudget; ``kind`` (else ``obj["kind"]``) must be one of ``WORKLOAD_KINDS``."""
    return _decode_one_of(_WORKLOAD_BUILDERS, obj, origin, kind)


def _decode_one_of(builders: Mapping[str, Callable[..., _T]], obj: Mapping[str, Any], origin: str,
                   kind: str | None) -> _T:
    """Decode ``obj`` with the builder of its kind (``kind``, else ``obj["kind"]``), one of ``builders``."""
    declared = kind if kind is not None else obj.get("kind") if isinstance(obj, Mapping) else None
    build = builders.get(declared) if isinstance(declared, str) else None
    if build is None:
        raise ModelError(
            f"object{object_name(obj, origin) if isinstance(obj, Mapping) else ''}: kind: "
            f"expected one of {', '.join(builders)}, got {describe_value(declared)}"
        )
    assert isinstance(declared, str)
    return _decode(declared, obj, origin, build)


_STORAGE_BUILDERS: dict[str, Callable[..., StorageObject]] = {
    "StorageClass": _storage_class,
    "CSIDriver": _csi_driver,
    "CSINode": _csi_node,
    "CSIStorageCapacity": _csi_storage_capacity,
    "PersistentVolume": _persistent_volume,
    "PersistentVolumeClaim": _persistent_volume_claim,
}
assert tuple(_STORAGE_BUILDERS) == STORAGE_KINDS


def storage_from_dict(obj: Mapping[str, Any], *, origin: str = "", kind: str | None = None) -> StorageObject:
    """Build a PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver or
    CSIStorageCapacity (``scorer.model.storage``); ``kind`` (else ``obj["kind"]``) must be one
    of ``STORAGE_KINDS``.

    Manifests get the API server's defaults: volumeMode Filesystem, a StorageClass's
    volumeBindingMode Immediate, an rbd pool ``rbd``. The storage class of a PV or PVC is the
    ``volume.beta.kubernetes.io/storage-class`` annotation if set, else ``spec.storageClassName``.
    """
    return _decode_one_of(_STORAGE_BUILDERS, obj, origin, kind)


READ_KINDS: tuple[str, ...] = ("Pod", "Node", "Namespace", *WORKLOAD_KINDS, *STORAGE_KINDS)
ClusterObject = (
    Pod | Node | Namespace | SelectorOwner | PodDisruptionBudget
    | PersistentVolume | PersistentVolumeClaim | StorageClass | CSINode | CSIDriver | CSIStorageCapacity
)
_BUILDERS: dict[str, Callable[..., ClusterObject]] = {
    "Pod": pod_from_dict,
    "Node": node_from_dict,
    "Namespace": namespace_from_dict,
    **{kind: functools.partial(workload_from_dict, kind=kind) for kind in WORKLOAD_KINDS},
    **{kind: functools.partial(storage_from_dict, kind=kind) for kind in STORAGE_KINDS},
}


def object_from_dict(
    obj: Mapping[str, Any], *, origin: str = "", kind: str | None = None
) -> ClusterObject:
    """Build a Pod, Node, Namespace, workload or storage object according to ``kind`` (``obj["kind"]``,
    else the ``kind`` given, as for the items of a ``PodList``); other kinds
    are errors."""
    where = f" ({origin})" if origin else ""
    if not isinstance(obj, Mapping):
        raise ModelError(f"object{where}: expected a Kubernetes object, got {describe_value(obj)}")
    declared = obj.get("kind", kind)
    if not isinstance(declared, str) or not declared:
        got = "" if declared is None else f", got {describe_value(declared)}"
        raise ModelError(
            f"object{object_name(obj, origin)}: kind: "
            f"required (a Kubernetes object such as Pod, Node or Namespace){got}"
        )
    builder = _BUILDERS.get(declared)
    if builder is None:
        raise ModelError(
            f"{printable(declared)}{object_name(obj, origin)}: kind: unsupported kind "
            f"{quote(declared)}, expected one of {', '.join(READ_KINDS)}"
        )
    return builder(obj, origin=origin)


def object_name(obj: Mapping[str, Any], origin: str = "") -> str:
    """`` ns/name (origin)``, `` name (origin)``, `` (origin)``: whatever
    metadata there is, for naming objects that are not (or not yet) decoded."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    where = f" ({origin})" if origin else ""
    if isinstance(name, str) and name:
        if isinstance(namespace, str) and namespace:
            return f" {printable(namespace)}/{printable(name)}{where}"
        return f" {printable(name)}{where}"
    return where
