"""Kubernetes objects as the scheduler sees them, and how they are read.

- ``scorer.model.objects``: the types (Pod, Node, Namespace, Container,
  Taint, Toleration, selectors, affinity...).
- ``scorer.model.requests``: request arithmetic (a pod's effective and
  non-zero requests, as kube-scheduler counts them).
- ``scorer.model.decode``: API objects (dicts) to those types, with field
  paths in every error (``pod_from_dict``, ``node_from_dict``...).
- ``scorer.model.load``: cluster files to ``LoadedObjects`` through the one
  guarded reader (``load_file``, ``load_objects``).

Every public name is re-exported here.
"""

from scorer.inputs.describe import describe_value
from scorer.inputs.numbers import parse_int64
from scorer.model.decode import (
    API_VERSION,
    MAX_IMAGE_SIZE_BYTES,
    READ_KINDS,
    FieldError,
    namespace_from_dict,
    node_from_dict,
    object_from_dict,
    object_name,
    parse_node_affinity,
    pod_from_dict,
)
from scorer.model.load import LoadedObjects, load_file, load_objects
from scorer.model.objects import (
    LABEL_SELECTOR_OPERATORS,
    NODE_FIELD_KEYS,
    NODE_INCLUSION_POLICIES,
    NODE_SELECTOR_OPERATORS,
    PORT_PROTOCOLS,
    TAINT_EFFECTS,
    TERMINAL_PHASES,
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
    PreferredSchedulingTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    untolerated_taints,
)
from scorer.model.requests import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    NON_ZERO_DEFAULTS,
    aggregate_container_requests,
    is_pod_level_resource,
    pod_requests,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "LABEL_SELECTOR_OPERATORS",
    "MAX_IMAGE_SIZE_BYTES",
    "NODE_FIELD_KEYS",
    "NODE_INCLUSION_POLICIES",
    "NODE_SELECTOR_OPERATORS",
    "NON_ZERO_DEFAULTS",
    "PORT_PROTOCOLS",
    "READ_KINDS",
    "TAINT_EFFECTS",
    "TERMINAL_PHASES",
    "TOLERATION_OPERATORS",
    "WHEN_UNSATISFIABLE",
    "Affinity",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "FieldError",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LoadedObjects",
    "Namespace",
    "Node",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OwnerReference",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodAntiAffinity",
    "PreferredSchedulingTerm",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "WeightedPodAffinityTerm",
    "aggregate_container_requests",
    "describe_value",
    "is_pod_level_resource",
    "load_file",
    "load_objects",
    "namespace_from_dict",
    "node_from_dict",
    "object_from_dict",
    "object_name",
    "parse_int64",
    "parse_node_affinity",
    "pod_from_dict",
    "pod_requests",
    "untolerated_taints",
]
