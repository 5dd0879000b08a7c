"""Kubernetes objects as the scheduler sees them: Pod, Node, Namespace and their parts.

Only what scheduling needs is kept. Resource maps hold canonical integers
(``scorer.quantity.resource_value``): millicores for cpu, units otherwise.
``scorer.model.decode`` builds these from API objects (applying the API
server's defaults), ``scorer.model.load`` from whole files.

The classes are frozen; their dict fields (labels, resource maps) must not be
mutated. Pods and Nodes hold dicts, so they are not hashable: key them by
``Pod.key`` or name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from scorer.inputs.describe import quote
from scorer.inputs.names import label_value_errors, qualified_name_errors
from scorer.inputs.numbers import parse_int64
from scorer.model.requests import pod_requests

# Re-exported by scorer.model (``from scorer.model import Pod``).
__all__ = [
    "LABEL_SELECTOR_OPERATORS",
    "NODE_FIELD_KEYS",
    "NODE_INCLUSION_POLICIES",
    "NODE_SELECTOR_OPERATORS",
    "PORT_PROTOCOLS",
    "TAINT_EFFECTS",
    "TERMINAL_PHASES",
    "TOLERATION_OPERATORS",
    "WHEN_UNSATISFIABLE",
    "Affinity",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "LabelSelector",
    "LabelSelectorRequirement",
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
    "PodDisruptionBudget",
    "PreferredSchedulingTerm",
    "PREEMPTION_POLICIES",
    "SelectorOwner",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "WeightedPodAffinityTerm",
    "untolerated_taints",
]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
TAINT_EFFECTS: tuple[str, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS: tuple[str, ...] = ("Equal", "Exists")
LABEL_SELECTOR_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
WHEN_UNSATISFIABLE: tuple[str, ...] = ("DoNotSchedule", "ScheduleAnyway")
NODE_INCLUSION_POLICIES: tuple[str, ...] = ("Honor", "Ignore")
PORT_PROTOCOLS: tuple[str, ...] = ("TCP", "UDP", "SCTP")
NODE_FIELD_KEYS: tuple[str, ...] = ("metadata.name",)
PREEMPTION_POLICIES: tuple[str, ...] = ("PreemptLowerPriority", "Never")


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
        return _set_based_match(self.key, self.operator, self.values, labels)


def _set_based_match(key: str, op: str, values: tuple[str, ...], labels: Mapping[str, str]) -> bool:
    """In, NotIn, Exists, DoesNotExist (kube's ``labels.Requirement``); False for other operators."""
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
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

    @property
    def canonical(self) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, tuple[str, ...]], ...]]:
        """A hashable form, equal for selectors that select the same pods by the same rules
        (label order and requirement order aside): for keying indexes and caches."""
        return (
            tuple(sorted(self.match_labels.items())),
            tuple(sorted((r.key, r.operator, tuple(sorted(r.values))) for r in self.match_expressions)),
        )

    def is_empty(self) -> bool:
        """No labels and no expressions: matches every pod (kube's ``selector.Empty()``)."""
        return not self.match_labels and not self.match_expressions


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
        if op in ("Gt", "Lt"):
            if self.key not in labels or len(self.values) != 1:
                return False
            have = parse_int64(labels[self.key])
            want = parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return _set_based_match(self.key, op, self.values, labels)


@attrs.frozen(slots=True, kw_only=True)
class NodeSelectorTerm:
    """Requirements AND-ed together; a term with none matches no node.

    ``match_fields`` support only the key ``metadata.name``.

    ``parse_error`` is why kube-scheduler cannot parse ``match_expressions``
    into a label selector (``labels.NewRequirement``: a key that is not a
    qualified name, a value that is not a valid label value, a Gt/Lt value
    that is not one integer...), None when it can. The API server accepts such
    terms; the scheduler fails them: a term with a parse error matches no node.
    """

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()
    parse_error: str | None = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        error = None
        for index, requirement in enumerate(self.match_expressions):
            problem = _requirement_parse_error(requirement)
            if problem is not None:
                error = f"matchExpressions[{index}]: {problem}"
                break
        object.__setattr__(self, "parse_error", error)

    def matches(self, node: Node) -> bool:
        if self.parse_error is not None:
            return False
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


def _requirement_parse_error(requirement: NodeSelectorRequirement) -> str | None:
    """kube's ``labels.NewRequirement`` checks, as node affinity parses a term; None if it passes."""
    key, op, values = requirement.key, requirement.operator, requirement.values
    for problem in qualified_name_errors(key):
        return f"key: invalid label key {quote(key)}: {problem}"
    if op in ("In", "NotIn") and not values:
        return f"values: for 'in', 'notin' operators, values set can't be empty (operator {op})"
    if op in ("Exists", "DoesNotExist") and values:
        return f"values: values set must be empty for exists and does not exist (operator {op})"
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return f"values: for 'Gt', 'Lt' operators, exactly one value is required (operator {op})"
        if parse_int64(values[0]) is None:
            return (f"values: for 'Gt', 'Lt' operators, the value must be an integer, "
                    f"got {quote(values[0])}")
    elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
        return f"operator: unknown operator {quote(op)}"
    for value in values:
        for problem in label_value_errors(value):
            return f"values: invalid label value {quote(value)}: {problem}"
    return None


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
class Volume:
    """One entry of a pod's ``spec.volumes``.

    ``source`` is the key of its volume source as written (``persistentVolumeClaim``,
    ``ephemeral``, ``gcePersistentDisk``, ``awsElasticBlockStore``, ``iscsi``, ``rbd``,
    ``azureDisk``, ``cinder``, ``csi``, ``configMap``, ``emptyDir`` ...; ``""`` when the entry
    has none). Per source:

    - ``persistentVolumeClaim``: ``claim_name`` = ``claimName``, ``read_only``;
    - ``ephemeral``: ``claim_name`` = ``<pod name>-<volume name>``, the claim kube creates;
    - ``gcePersistentDisk``: ``disk`` = ``pdName``; ``awsElasticBlockStore``: ``volumeID``;
      ``iscsi``: ``iqn``; ``rbd``: ``image`` (with ``rbd_monitors`` and ``rbd_pool``, default
      ``rbd``); ``azureDisk``: ``diskURI``; ``cinder``: ``volumeID``; each with ``read_only``;
    - ``csi`` (inline CSI): ``driver``.
    """

    name: str
    source: str = ""
    claim_name: str = ""
    read_only: bool = False
    disk: str = ""
    rbd_monitors: tuple[str, ...] = ()
    rbd_pool: str = ""
    driver: str = ""

    @property
    def is_claim(self) -> bool:
        """A PersistentVolumeClaim or a generic ephemeral volume (both are claims)."""
        return self.source in ("persistentVolumeClaim", "ephemeral")


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

    ``pvc_claims`` names the PersistentVolumeClaims the pod's volumes use, in
    volume order: ``persistentVolumeClaim.claimName``, and for an ``ephemeral``
    volume the claim kube creates for it, ``<pod name>-<volume name>``.
    ``volumes`` holds every ``spec.volumes`` entry as the volume plugins read
    it (``Volume``); built directly, a pod may give ``pvc_claims`` alone.

    ``preemption_policy`` is ``spec.preemptionPolicy`` (``PREEMPTION_POLICIES``);
    ``start_time`` is ``status.startTime`` (RFC 3339, empty when unset), which
    preemption compares among victims.

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
    pvc_claims: tuple[str, ...] = ()
    volumes: tuple[Volume, ...] = ()
    priority: int = 0
    preemption_policy: str = "PreemptLowerPriority"
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
    start_time: str = ""
    # What a binding leaves as it was, in the API object this pod was decoded from (``decode.bind_digest``):
    # empty for a pod built directly or decoded bound; not part of the pod's identity.
    bind_digest: bytes = attrs.field(default=b"", eq=False, repr=False)

    requests: dict[str, int] = attrs.field(init=False, eq=False, repr=False)
    non_zero_cpu: int = attrs.field(init=False, eq=False, repr=False)
    non_zero_memory: int = attrs.field(init=False, eq=False, repr=False)
    host_ports: tuple[ContainerPort, ...] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        requests, non_zero_cpu, non_zero_memory = pod_requests(
            self.containers, self.init_containers, self.pod_level_requests, self.overhead
        )
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "non_zero_cpu", non_zero_cpu)
        object.__setattr__(self, "non_zero_memory", non_zero_memory)
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

    def with_status(self, *, node_name: str, phase: str, nominated_node_name: str, resource_version: str,
                    start_time: str, bind_digest: bytes) -> Pod:
        """This pod with another node, status and resourceVersion (a new version of it that changed only
        there), its derived attributes, which none of these change, copied rather than computed again as
        ``attrs.evolve`` would (two thirds of the cost)."""
        copy = object.__new__(Pod)
        for name in _POD_SLOTS:
            object.__setattr__(copy, name, getattr(self, name))
        for name, value in (("node_name", node_name), ("phase", phase), ("nominated_node_name", nominated_node_name),
                            ("resource_version", resource_version), ("start_time", start_time),
                            ("bind_digest", bind_digest)):
            object.__setattr__(copy, name, value)
        return copy

    @property
    def is_terminal(self) -> bool:
        """Succeeded or Failed: the pod's containers are done and it holds no resources
        (kube-scheduler's informer does not even list such pods)."""
        return self.phase in TERMINAL_PHASES

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


_POD_SLOTS = tuple(field.name for field in attrs.fields(Pod))  # the derived ones (init=False) too

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


# --------------------------------------------------------------------------
# Objects that select pods: owners (default spreading) and disruption budgets


@attrs.frozen(slots=True, kw_only=True)
class SelectorOwner:
    """A Service, ReplicationController, ReplicaSet or StatefulSet, as default spreading reads it.

    ``kind`` is ``Service``, ``ReplicationController``, ``ReplicaSet`` or ``StatefulSet``. ``selector`` selects the pods
    it owns, None when it selects nothing: a Service without ``spec.selector``,
    or a controller whose selector is missing or empty (kube: "match nothing,
    not everything"). A Service's (or ReplicationController's) map selector is
    ``LabelSelector(match_labels=...)``; a Service with ``selector: {}``
    selects every pod of its namespace, as kube's lister does.
    """

    kind: str
    namespace: str = "default"
    name: str
    selector: LabelSelector | None = None
    resource_version: str = ""

    @property
    def key(self) -> str:
        """``kind/namespace/name``."""
        return f"{self.kind}/{self.namespace}/{self.name}"

    def selects(self, pod: Pod) -> bool:
        return self.selector is not None and pod.namespace == self.namespace and self.selector.matches(pod.labels)


@attrs.frozen(slots=True, kw_only=True)
class PodDisruptionBudget:
    """A PodDisruptionBudget (policy/v1 or v1beta1), as preemption reads it.

    ``selector`` is None when missing or empty: such a budget protects no pod
    (kube's preemption). ``disruptions_allowed`` is ``status.disruptionsAllowed``;
    ``disrupted_pods`` the names in ``status.disruptedPods`` (evictions the API
    server already counted, not counted again).
    """

    namespace: str = "default"
    name: str
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0
    disrupted_pods: frozenset[str] = frozenset()
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def protects(self, pod: Pod) -> bool:
        """The budget counts ``pod``: same namespace, its selector matches (and is not empty)."""
        return self.selector is not None and pod.namespace == self.namespace and self.selector.matches(pod.labels)
