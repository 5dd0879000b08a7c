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

The field readers are in ``scorer.model.decode_fields``, selectors and affinity in
``scorer.model.decode_selectors``, the storage objects in ``scorer.model.decode_storage``.
"""

from __future__ import annotations

import functools
import hashlib
import types
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

import orjson

from scorer.errors import ModelError
from scorer.inputs.describe import describe_value, expected, join_path, printable, quote
from scorer.inputs.numbers import INT64_MAX
from scorer.model.decode_fields import (
    _EMPTY,
    FieldError,
    _bool,
    _flat_key,
    _int_in_range,
    _mapping,
    _mappings,
    _optional_choice,
    _optional_int,
    _optional_mapping,
    _optional_str,
    _owner_reference,
    _remember,
    _required_str,
    _resource_map,
    _str,
    _str_map,
    _str_tuple,
    _timestamp,
)
from scorer.model.decode_selectors import (
    _affinity,
    _label_selector,
    _spread_constraint,
    _taint,
    _toleration,
    parse_node_affinity,
)
from scorer.model.decode_storage import (
    _csi_driver,
    _csi_node,
    _csi_storage_capacity,
    _persistent_volume,
    _persistent_volume_claim,
    _storage_class,
)
from scorer.model.objects import (
    PORT_PROTOCOLS,
    PREEMPTION_POLICIES,
    Container,
    ContainerImage,
    ContainerPort,
    LabelSelector,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    SelectorOwner,
    Toleration,
    Volume,
)
from scorer.model.requests import aggregate_container_requests, is_pod_level_resource
from scorer.model.storage import (
    STORAGE_KINDS,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObject,
)

__all__ = [
    "API_VERSION",
    "API_VERSIONS",
    "DEFAULT_RBD_POOL",
    "MAX_IMAGE_SIZE_BYTES",
    "READ_KINDS",
    "VOLUME_SOURCES",
    "WORKLOAD_KINDS",
    "ClusterObject",
    "FieldError",
    "namespace_from_dict",
    "node_from_dict",
    "object_from_dict",
    "object_name",
    "parse_node_affinity",
    "pod_from_dict",
    "pod_update_from_dict",
    "storage_from_dict",
    "workload_from_dict",
]

_T = TypeVar("_T")

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
DEFAULT_RBD_POOL = "rbd"
# ImageLocality scales image sizes in float64 (as kube does) and sums them in
# int64: sizes up to 2^53 (8 PiB) are exact there and cannot overflow the sums.
MAX_IMAGE_SIZE_BYTES = 1 << 53



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
        tolerations=_tolerations(spec),
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
        bind_digest=b"" if spec.get("nodeName") else bind_digest(spec, meta),
    )
    _check_totals(pod)
    return pod


# Toleration lists already decoded (``_flat_key`` of the list -> the tolerations): the API server gives
# every pod the same two, for the not-ready and unreachable taints.
_TOLERATIONS: dict[Hashable, tuple[Toleration, ...]] = {}


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    items = spec.get("tolerations")
    key = _flat_key(items) if items else None
    tolerations = _TOLERATIONS.get(key) if key is not None else None
    if tolerations is None:
        tolerations = _remember(_TOLERATIONS, key, tuple(
            _toleration(item, path) for path, item in _mappings(spec, "tolerations", "spec")
        ))
    return tolerations


# The metadata fields _pod reads besides the name, namespace and resourceVersion.
_DIGEST_METADATA = ("uid", "labels", "annotations", "ownerReferences", "deletionTimestamp", "creationTimestamp")


def bind_digest(spec: Mapping[str, Any], meta: Mapping[str, Any]) -> bytes:
    """A digest of what ``_pod`` reads of a pod but its ``spec.nodeName``, its resourceVersion and its
    status: what binding it (kube-apiserver sets ``spec.nodeName``, the PodScheduled condition, a new
    resourceVersion) leaves as it was. Empty when the values are not JSON (a manifest's odd YAML):
    ``pod_update_from_dict`` then decodes in full."""
    if type(spec) is not dict or "nodeName" in spec:  # a pending pod's spec (a dict) has none: no copy
        spec = {k: v for k, v in spec.items() if k != "nodeName"}
    try:
        data = orjson.dumps([spec, [meta.get(field) for field in _DIGEST_METADATA]])
    except orjson.JSONEncodeError:
        return b""
    return hashlib.blake2b(data, digest_size=16).digest()


def pod_update_from_dict(old: Pod, obj: Mapping[str, Any]) -> Pod | None:
    """The new version ``obj`` of the unassigned pod ``old`` built from ``old`` when it changed only in
    ``spec.nodeName``, its status and resourceVersion (its binding, a nominatedNodeName), None otherwise
    (``pod_from_dict`` then decodes it in full). A watch delivers every pod scorer binds twice, pending then
    bound: the second time costs a digest, not a decode."""
    meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status") or _EMPTY
    if (not old.bind_digest or not isinstance(meta, Mapping) or not isinstance(spec, Mapping)
            or not isinstance(status, Mapping) or bind_digest(spec, meta) != old.bind_digest):
        return None
    try:
        node_name = _str(spec, "nodeName", "spec")
        return old.with_status(
            node_name=node_name,
            phase=_str(status, "phase", "status"),
            nominated_node_name=_str(status, "nominatedNodeName", "status"),
            resource_version=_str(meta, "resourceVersion", "metadata"),
            start_time=_timestamp(status, "startTime", "status"),
            bind_digest=b"" if node_name else old.bind_digest,
        )
    except FieldError:
        return None  # the full decode names the field


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
# Public parsing API


def _metadata(kind: str, obj: object, origin: str) -> tuple[Mapping[str, Any], str, str]:
    """(metadata, namespace, name); an error names the object (``_label``) and ``origin``."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        got = describe_value(obj)
        raise ModelError(f"{kind}{_where(origin)}: expected a {kind} object, got {got}")
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
        raise ModelError(f"{_label(kind, namespace, name)}{_where(origin)}: {error.path}: {error.message}") from None
    return meta, namespace, name


def _where(origin: str) -> str:
    """`` (origin)`` after an object's label in an error, nothing without an origin."""
    return f" ({origin})" if origin else ""


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
    meta, namespace, name = _metadata(kind, obj, origin)
    try:
        return build(obj, meta, namespace, name)
    except FieldError as error:
        raise ModelError(f"{_label(kind, namespace, name)}{_where(origin)}: {error.path}: {error.message}") from None


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
    where = _where(origin)
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
    where = _where(origin)
    if isinstance(name, str) and name:
        if isinstance(namespace, str) and namespace:
            return f" {printable(namespace)}/{printable(name)}{where}"
        return f" {printable(name)}{where}"
    return where
