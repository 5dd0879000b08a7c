"""A user's exported cluster as a bench ``Setup`` (``scorer bench --cluster FILE --scale N``).

The file is what ``kubectl get nodes,pods,namespaces,replicasets,services,
poddisruptionbudgets -A -o yaml`` (or ``-o json``) writes: a ``kind: List``
of full API objects (managedFields, status, uids...); multi-document YAML
and typed lists (``PodList``) are read too. It goes through scorer's guarded
reader, with a larger size limit than ``scorer simulate`` uses (a
15,000-node / 150,000-pod export is over 1 GiB), and every object the bench
uses is decoded with ``scorer.model`` first, so a bad object gets scorer's
error naming the file, the item and the field. A YAML List laid out as
kubectl writes it is read item by item: read whole, libyaml builds a node for
every value of the file before the first object (6 GB for a 5,000-node /
50,000-pod export). JSON (``-o json``) reads several times faster than YAML.

What becomes of each object:

- Node, Namespace, Service, ReplicationController, ReplicaSet, StatefulSet
  and PodDisruptionBudget are kept, and so are the storage objects
  (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver,
  CSIStorageCapacity: ``Setup.storage``, without their status; a
  PersistentVolume's claimRef loses the claim's old uid); any other kind (Secret, ConfigMap,
  Event, Deployment...) is counted by kind in ``Setup.ignored`` (counts of
  the file, before ``scale``). Namespaces the pods and workloads are in that
  the file lacks are added (an API server needs them).
- Pods bound to a node (``spec.nodeName``) are ``init``; pending pods are
  ``measured`` (only those whose schedulerName is ``scheduler_name``, when
  given). Pods that hold nothing or would never be scheduled are counted
  instead: ``Pod (completed)`` (Succeeded, Failed), ``Pod (another
  scheduler)``, ``Pod (on a missing node)``, ``Pod (being deleted)``,
  ``Pod (scheduling gates)``.
- Objects are cleaned for creation through an API server: the fields the
  server owns go (managedFields, resourceVersion, uid, creationTimestamp,
  selfLink, generation) and so does kubectl's last-applied-configuration
  annotation; Nodes keep the status scorer reads (allocatable, capacity,
  conditions, images, addresses), bound pods keep status.phase and
  status.startTime (preemption orders victims by it), pending pods lose their
  status (a nomination from the live cluster is not part of the workload),
  Services lose their allocated IPs and node ports (another API server has
  other ranges), PodDisruptionBudgets keep disruptionsAllowed. In-process
  scheduling keys pods without a uid by namespace/name, so none is made up.

``scale`` N makes N copies of the nodes and the pods (copy 0 is the file as
it is): copy k renames node ``n`` to ``n-s<k>`` (its ``kubernetes.io/hostname``
label gets the same suffix, other labels such as the zone stay), pod ``p`` to
``p-s<k>``, and its bound pods move to the node's copy, node affinity
pinning them to a node name or hostname included (DaemonSet pods).
Namespaces, owners and budgets are not copied: the copies keep their labels
and ownerReferences, so the same owners select them. Claims and volumes are:
copy k of claim ``c`` is ``c-s<k>`` (its pods' ``claimName`` follow), of volume
``v`` is ``v-s<k>`` (its claimRef, a claim's ``volumeName`` and the node
names and hostnames its node affinity pins it to follow), a CSINode follows
its node; StorageClasses, CSIDrivers and CSIStorageCapacities are shared. A name past its limit
(253 characters, 63 for the hostname label) is shortened with a hash, and a
warning is logged.

``pods`` N: fewer pending pods than that are topped up with pending clones
of the bound pods ("pods like mine": round-robin, DaemonSet and mirror pods
left out as they are pinned to their node), named ``<name>-bench-<k>``,
without the PersistentVolumeClaim and ephemeral volumes of the pod cloned (a
clone has no claim of its own; sharing the original's would pin every clone
to its volume); more are cut to the first N.

Copies share the parts they do not change with their original (pod specs,
node statuses): treat a ``Setup`` as read-only.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from scorer.bench.spec import Setup
from scorer.errors import InputError, ModelError, ReadError
from scorer.inputs.describe import describe_value, printable
from scorer.inputs.reader import CLUSTER_LIMITS, Document, GiB, parse_documents, read_text
from scorer.model import (
    API_VERSIONS,
    READ_KINDS,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    object_from_dict,
)
from scorer.model.load import gc_paused

log = logging.getLogger(__name__)

# A 15,000-node / 150,000-pod export in kubectl's YAML passes 1 GiB (the cluster file limit of
# `scorer simulate`); SCORER_MAX_INPUT_BYTES still replaces this one.
BENCH_CLUSTER_LIMITS = attrs.evolve(CLUSTER_LIMITS, max_bytes=16 * GiB)

# A YAML List as kubectl (and PyYAML) write it: ``items:`` at the start of a line, each item at
# ``- `` at the start of a line, the list's other keys after them at the start of lines.
_ITEMS_KEY = re.compile(r"^items:[ \t]*\n", re.MULTILINE)
_ITEM_START = re.compile(r"^- ", re.MULTILINE)
_TOP_LEVEL_LINE = re.compile(r"^(?!- )\S", re.MULTILINE)
_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)(?:[ \t\r\n]|$)", re.MULTILINE)

HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_NAME = 253  # a DNS subdomain: node and pod names
MAX_LABEL_VALUE = 63

COMPLETED = "Pod (completed)"
OTHER_SCHEDULER = "Pod (another scheduler)"
MISSING_NODE = "Pod (on a missing node)"
DELETING = "Pod (being deleted)"
GATED = "Pod (scheduling gates)"

_SERVER_FIELDS = frozenset(
    {"managedFields", "resourceVersion", "uid", "creationTimestamp", "selfLink", "generation"}
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_NODE_STATUS = ("allocatable", "capacity", "conditions", "images", "addresses")
_BOUND_POD_STATUS = ("phase", "startTime")
_PDB_STATUS = ("disruptionsAllowed", "disruptedPods")
# Allocated by the API server from its own ranges: another server may refuse these values.
_SERVICE_ALLOCATED = frozenset({"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "healthCheckNodePort"})
_NOT_CLONED = frozenset({"deletionTimestamp", "deletionGracePeriodSeconds"})
_NODE_OWNERS = frozenset({"DaemonSet", "Node"})  # their pods are pinned to one node
_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_NODE_NAME_FIELD = "metadata.name"
_STORAGE_TYPES = (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver, CSIStorageCapacity)
_NAMESPACED_STORAGE = (PersistentVolumeClaim, CSIStorageCapacity)


def load_cluster_setup(
    path: str | os.PathLike[str],
    *,
    scale: int = 1,
    pods: int | None = None,
    scheduler_name: str | None = None,
) -> Setup:
    """The bench ``Setup`` of a cluster file (see the module docstring);
    ``InputError`` (a ``ReadError`` or ``ModelError`` for the file) naming
    what is wrong."""
    source = os.fspath(path)
    _check_whole("--scale", scale, 1)
    if pods is not None:
        _check_whole("--pods", pods, 0)
    with gc_paused():
        found = _Reader(source, scheduler_name).read()
        if not found.nodes:
            raise InputError(f"{source}: the cluster file has no Node objects")
        nodes, init, measured, storage = _scaled(found, scale)
        measured = _fitted(measured, init, pods, scheduler_name, source)
        _check_copy_names(nodes, init + measured, source)
        namespaces = found.namespaces + _missing_namespaces(found, init + measured)
    return Setup(
        nodes=nodes,
        init=init,
        measured=measured,
        namespaces=namespaces,
        workloads=found.workloads,
        ignored=dict(found.ignored.most_common()),
        storage=storage,
    )


def _check_whole(option: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{option}: expected a whole number of at least {least}, got {describe_value(value)}")
    if value < least:
        raise InputError(f"{option}: expected a whole number of at least {least}, got {value}")


@attrs.define(slots=True)
class _Found:
    """A cluster file's objects, cleaned, before scaling."""

    nodes: list[dict[str, Any]] = attrs.Factory(list)
    init: list[dict[str, Any]] = attrs.Factory(list)
    measured: list[dict[str, Any]] = attrs.Factory(list)
    namespaces: list[dict[str, Any]] = attrs.Factory(list)
    workloads: list[dict[str, Any]] = attrs.Factory(list)
    storage: list[dict[str, Any]] = attrs.Factory(list)
    ignored: Counter[str] = attrs.Factory(Counter)


class _Reader:
    """Reads one cluster file: decodes each object it uses, sorts and cleans it."""

    def __init__(self, source: str, scheduler_name: str | None) -> None:
        self.source = source
        self.scheduler_name = scheduler_name
        self.found = _Found()
        self.first_seen: dict[tuple[str, str], str] = {}
        self.bound: list[tuple[dict[str, Any], str]] = []  # (pod, node name): checked once nodes are known

    def read(self) -> _Found:
        for obj, origin, default_kind in _objects(self.source):
            self._add(obj, origin, default_kind)
        node_names = {node["metadata"]["name"] for node in self.found.nodes}
        for pod, node_name in self.bound:
            if node_name in node_names:
                self.found.init.append(pod)
            else:
                self.found.ignored[MISSING_NODE] += 1
        return self.found

    def _add(self, obj: Any, origin: str, default_kind: str | None) -> None:
        if not isinstance(obj, Mapping):
            raise ModelError(
                f"{origin}: expected a Kubernetes object (a mapping with apiVersion and kind), "
                f"got {describe_value(obj)}"
            )
        kind = obj.get("kind", default_kind)
        if isinstance(kind, str) and kind and kind not in READ_KINDS:
            if kind.endswith("List") and "items" in obj:
                raise ModelError(f"{origin}: a {printable(kind)} inside a list is not read; give its items directly")
            self.found.ignored[kind] += 1
            return
        decoded = object_from_dict(obj, origin=origin, kind=default_kind)
        kind = obj.get("kind") or default_kind
        assert isinstance(kind, str)  # object_from_dict checked it
        meta = obj["metadata"]
        name = meta["name"] if kind in ("Node", "Namespace") else f"{meta.get('namespace') or 'default'}/{meta['name']}"
        if isinstance(decoded, _STORAGE_TYPES):
            name = decoded.key  # the name alone for the cluster-scoped ones
        first = self.first_seen.get((kind, name))
        if first is not None:
            raise ModelError(f"{kind} {printable(name)} ({origin}): defined twice, first in {first}")
        self.first_seen[kind, name] = origin
        if isinstance(decoded, Pod):
            self._add_pod(obj, decoded)
        elif kind == "Node":
            self.found.nodes.append(_clean_node(obj))
        elif kind == "Namespace":
            self.found.namespaces.append(_object("Namespace", "v1", _metadata(obj["metadata"], namespaced=False)))
        elif isinstance(decoded, _STORAGE_TYPES):
            self.found.storage.append(_clean_storage(kind, obj, namespaced=isinstance(decoded, _NAMESPACED_STORAGE)))
        else:
            self.found.workloads.append(_clean_workload(kind, obj))

    def _add_pod(self, obj: Mapping[str, Any], pod: Pod) -> None:
        if pod.is_terminal:
            self.found.ignored[COMPLETED] += 1
        elif pod.node_name:
            self.bound.append((_clean_pod(obj, bound=True), pod.node_name))
        elif pod.deleting:
            self.found.ignored[DELETING] += 1
        elif pod.scheduling_gates:
            self.found.ignored[GATED] += 1
        elif self.scheduler_name is not None and pod.scheduler_name != self.scheduler_name:
            self.found.ignored[OTHER_SCHEDULER] += 1
        else:
            self.found.measured.append(_clean_pod(obj, bound=False))


def _objects(source: str) -> Iterator[tuple[Any, str, str | None]]:
    """(object, origin, kind its list implies) for every object of the file, read
    item by item when it is one YAML ``List`` laid out as kubectl writes it."""
    text = read_text(source, limits=BENCH_CLUSTER_LIMITS)
    listed = _yaml_list_items(text, source)
    if listed is not None:
        items, default_kind = listed
        del text
        items.reverse()
        for index in range(len(items)):  # popped, so each raw object is freed once read
            yield items.pop(), f"document 1 of {source}, items[{index}]", default_kind
        return
    documents = parse_documents(text, source, limits=BENCH_CLUSTER_LIMITS)
    del text
    documents.reverse()
    while documents:
        yield from _items(documents.pop())


def _yaml_list_items(text: str, source: str) -> tuple[list[Any], str | None] | None:
    """The items of a YAML ``kind: List`` read one by one, and the kind they imply; None when the
    text is not one such document with its items at the start of lines (``items:`` then ``- ``
    lines), or when any piece does not read alone (the whole text then gives the exact error).

    libyaml builds a node for every value of a document before any object, with its position:
    5 GB for a 5,000-node / 50,000-pod export read at once, a few hundred KB item by item. Each
    item is read as ``items:\n- ...`` so it nests as deep as in the file, through the same
    reader and limits."""
    start = _ITEMS_KEY.search(text)
    if start is None or _DOCUMENT_MARKER.search(text):
        return None
    body = start.end()
    end_match = _TOP_LEVEL_LINE.search(text, body)
    end = len(text) if end_match is None else end_match.start()
    try:
        rest = parse_documents(text[: start.start()] + "items: []\n" + text[end:], source,
                               limits=BENCH_CLUSTER_LIMITS)
        if len(rest) != 1 or not isinstance(rest[0].data, dict):
            return None
        kind = rest[0].data.get("kind")
        if not (isinstance(kind, str) and kind.endswith("List")):
            return None
        starts = [match.start() for match in _ITEM_START.finditer(text, body, end)]
        if not starts or starts[0] != body:
            return None
        items = []
        for item_start, item_end in zip(starts, [*starts[1:], end], strict=True):
            piece = parse_documents("items:\n" + text[item_start:item_end], source, limits=BENCH_CLUSTER_LIMITS)
            data = piece[0].data if len(piece) == 1 else None
            if not (isinstance(data, dict) and isinstance(data.get("items"), list) and len(data["items"]) == 1):
                return None
            items.append(data["items"][0])
    except ReadError:
        return None
    return items, kind[: -len("List")] or None


def _items(document: Document) -> Iterator[tuple[Any, str, str | None]]:
    """(object, origin, kind its list implies) for a document: the items of a
    ``List`` or ``PodList``, else the document itself; each item is released
    from the document once yielded."""
    data = document.data
    if data is None:
        return
    kind = data.get("kind") if isinstance(data, Mapping) else None
    if not (isinstance(kind, str) and kind.endswith("List") and "items" in data):
        yield data, document.origin, None
        return
    items = data["items"]
    if items is None:
        return
    if not isinstance(items, list):
        raise ModelError(f"{printable(kind)} ({document.origin}): items: expected a list, got {describe_value(items)}")
    item_kind = kind[: -len("List")] or None  # PodList items may omit kind
    for index, item in enumerate(items):
        items[index] = None
        yield item, f"{document.origin}, items[{index}]", item_kind


# -- cleaning for an API server ---------------------------------------------------------------


def _object(kind: str, api_version: str, metadata: dict[str, Any], **parts: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **parts}


def _metadata(meta: Mapping[str, Any], *, namespaced: bool) -> dict[str, Any]:
    """Metadata without the fields the API server owns (or kubectl's copy of the last applied object)."""
    clean = {key: value for key, value in meta.items() if key not in _SERVER_FIELDS}
    annotations = clean.get("annotations")
    if isinstance(annotations, Mapping) and _LAST_APPLIED in annotations:
        kept = {key: value for key, value in annotations.items() if key != _LAST_APPLIED}
        if kept:
            clean["annotations"] = kept
        else:
            del clean["annotations"]
    if namespaced:
        clean["namespace"] = clean.get("namespace") or "default"
    return clean


def _picked(obj: Mapping[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: obj[key] for key in keys if key in obj} if isinstance(obj, Mapping) else {}


def _clean_node(obj: Mapping[str, Any]) -> dict[str, Any]:
    return _object(
        "Node", "v1", _metadata(obj["metadata"], namespaced=False),
        spec=dict(obj.get("spec") or {}), status=_picked(obj.get("status"), _NODE_STATUS),
    )


def _clean_pod(obj: Mapping[str, Any], *, bound: bool) -> dict[str, Any]:
    pod = _object("Pod", "v1", _metadata(obj["metadata"], namespaced=True), spec=dict(obj.get("spec") or {}))
    if bound:
        pod["status"] = _picked(obj.get("status"), _BOUND_POD_STATUS)
    return pod


def _clean_workload(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    if kind == "Service":
        spec = _service_spec(spec)
    workload = _object(kind, obj.get("apiVersion") or API_VERSIONS[kind][0],
                       _metadata(obj["metadata"], namespaced=True), spec=dict(spec))
    if kind == "PodDisruptionBudget":
        workload["status"] = _picked(obj.get("status"), _PDB_STATUS)
    return workload


def _clean_storage(kind: str, obj: Mapping[str, Any], *, namespaced: bool) -> dict[str, Any]:
    """A storage object without its status (the PersistentVolume controller sets it again); a
    PersistentVolume's claimRef names its claim without the uid and resourceVersion of the
    exported cluster (the claim gets a new uid), as a pre-binding does."""
    clean = {key: value for key, value in obj.items() if key not in ("metadata", "status")}
    clean["apiVersion"] = obj.get("apiVersion") or API_VERSIONS[kind][0]
    clean["kind"] = kind
    clean["metadata"] = _metadata(obj["metadata"], namespaced=namespaced)
    spec = obj.get("spec")
    if kind == "PersistentVolume" and isinstance(spec, Mapping) and isinstance(spec.get("claimRef"), Mapping):
        ref = {key: value for key, value in spec["claimRef"].items() if key not in ("uid", "resourceVersion")}
        clean["spec"] = {**spec, "claimRef": ref}
    return clean


def _service_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A Service's spec without what its API server allocated (headless services stay headless)."""
    clean = {key: value for key, value in spec.items() if key not in _SERVICE_ALLOCATED}
    if spec.get("clusterIP") == "None":
        clean["clusterIP"] = "None"
    ports = spec.get("ports")
    if isinstance(ports, list):
        clean["ports"] = [
            {key: value for key, value in port.items() if key != "nodePort"} if isinstance(port, Mapping) else port
            for port in ports
        ]
    return clean


def _missing_namespaces(found: _Found, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Namespaces the pods and workloads are in that the file does not list (an API server needs them)."""
    listed = {namespace["metadata"]["name"] for namespace in found.namespaces}
    used = dict.fromkeys(obj["metadata"]["namespace"] for obj in (*pods, *found.workloads))
    return [
        _object("Namespace", "v1", {"name": name, "labels": {"kubernetes.io/metadata.name": name}})
        for name in used
        if name not in listed
    ]


# -- scale ----------------------------------------------------------------------------------------


def _scaled(found: _Found, scale: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]],
                                                list[dict[str, Any]]]:
    """Nodes, bound pods, pending pods and storage objects of ``scale`` copies of the cluster (copy 0 as
    read)."""
    nodes, init, measured, storage = list(found.nodes), list(found.init), list(found.measured), list(found.storage)
    claims = {f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in found.storage
              if obj["kind"] == "PersistentVolumeClaim"}
    for k in range(1, scale):
        suffix = f"-s{k}"
        renamed: dict[str, str] = {}
        rehosted: dict[str, str] = {}
        for node in found.nodes:
            nodes.append(_node_copy(node, suffix, renamed, rehosted))
        init.extend(_pod_copy(pod, suffix, renamed, rehosted, claims) for pod in found.init)
        measured.extend(_pod_copy(pod, suffix, renamed, rehosted, claims) for pod in found.measured)
        storage.extend(copy for obj in found.storage
                       if (copy := _storage_copy(obj, suffix, renamed, rehosted)) is not None)
    return nodes, init, measured, storage


def _node_copy(node: dict[str, Any], suffix: str, renamed: dict[str, str], rehosted: dict[str, str]) -> dict[str, Any]:
    """Copy of ``node`` named with ``suffix``; ``renamed`` and ``rehosted`` learn its name and hostname."""
    meta = node["metadata"]
    name = _suffixed(meta["name"], suffix, MAX_NAME, "node name")
    renamed[meta["name"]] = name
    labels = meta.get("labels") or {}
    copy_meta = {**meta, "name": name}
    hostname = labels.get(HOSTNAME_LABEL)
    if isinstance(hostname, str):
        new_hostname = _suffixed(hostname, suffix, MAX_LABEL_VALUE, f"{HOSTNAME_LABEL} label")
        rehosted[hostname] = new_hostname
        copy_meta["labels"] = {**labels, HOSTNAME_LABEL: new_hostname}
    return {**node, "metadata": copy_meta}


def _pod_copy(pod: dict[str, Any], suffix: str, renamed: dict[str, str], rehosted: dict[str, str],
              claims: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """Copy of ``pod`` named with ``suffix``, on its node's copy and pinned to node copies where it was pinned;
    its claims of the file (``claims``: namespace/name) are the claims' copies."""
    meta = pod["metadata"]
    spec = _repinned(pod["spec"], renamed, rehosted)
    node_name = spec.get("nodeName")
    if node_name:
        spec = {**spec, "nodeName": renamed[node_name]}
    volumes = spec.get("volumes")
    if claims and isinstance(volumes, list):
        namespace = meta.get("namespace") or "default"
        spec = {**spec, "volumes": [_claim_copy(volume, namespace, suffix, claims) for volume in volumes]}
    return {**pod, "metadata": {**meta, "name": _suffixed(meta["name"], suffix, MAX_NAME, "pod name")}, "spec": spec}


def _claim_copy(volume: Any, namespace: str, suffix: str, claims: frozenset[str] | set[str]) -> Any:
    source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
    if not isinstance(source, Mapping):
        return volume
    name = source.get("claimName")
    if not isinstance(name, str) or f"{namespace}/{name}" not in claims:
        return volume
    return {**volume, "persistentVolumeClaim": {**source, "claimName": _suffixed(name, suffix, MAX_NAME,
                                                                                 "claim name")}}


def _storage_copy(obj: dict[str, Any], suffix: str, renamed: dict[str, str],
                  rehosted: dict[str, str]) -> dict[str, Any] | None:
    """Copy ``suffix`` of a claim, a volume or a CSINode (None: a shared object, not copied)."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "CSINode":
        name = renamed.get(meta["name"])
        return None if name is None else {**obj, "metadata": {**meta, "name": name}}
    if kind not in ("PersistentVolume", "PersistentVolumeClaim"):
        return None
    copy = {**obj, "metadata": {**meta, "name": _suffixed(meta["name"], suffix, MAX_NAME, f"{kind} name")}}
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return copy
    spec = dict(spec)
    if kind == "PersistentVolumeClaim" and isinstance(spec.get("volumeName"), str) and spec["volumeName"]:
        spec["volumeName"] = _suffixed(spec["volumeName"], suffix, MAX_NAME, "PersistentVolume name")
    if kind == "PersistentVolume":
        ref = spec.get("claimRef")
        if isinstance(ref, Mapping) and isinstance(ref.get("name"), str):
            spec["claimRef"] = {**ref, "name": _suffixed(ref["name"], suffix, MAX_NAME, "claim name")}
        affinity = spec.get("nodeAffinity")
        required = affinity.get("required") if isinstance(affinity, Mapping) else None
        if (isinstance(affinity, Mapping) and isinstance(required, Mapping)
                and isinstance(required.get("nodeSelectorTerms"), list)):
            mapped = _mapped_node_affinity({"requiredDuringSchedulingIgnoredDuringExecution": required},
                                           renamed, rehosted)
            spec["nodeAffinity"] = {**affinity, "required": mapped["requiredDuringSchedulingIgnoredDuringExecution"]}
    copy["spec"] = spec
    return copy


def _repinned(spec: dict[str, Any], renamed: dict[str, str], rehosted: dict[str, str]) -> dict[str, Any]:
    """``spec`` with node names (``matchFields`` on metadata.name) and hostnames (nodeSelector,
    ``matchExpressions`` on kubernetes.io/hostname) it pins the pod to mapped to the copies."""
    node_selector = spec.get("nodeSelector")
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    if not (isinstance(node_selector, Mapping) and HOSTNAME_LABEL in node_selector) and not node_affinity:
        return spec  # the common case: nothing to map, nothing copied
    spec = dict(spec)
    if isinstance(node_selector, Mapping) and HOSTNAME_LABEL in node_selector:
        hostname = node_selector[HOSTNAME_LABEL]
        spec["nodeSelector"] = {**node_selector, HOSTNAME_LABEL: rehosted.get(hostname, hostname)}
    if isinstance(node_affinity, Mapping):
        assert isinstance(affinity, Mapping)
        spec["affinity"] = {**affinity, "nodeAffinity": _mapped_node_affinity(node_affinity, renamed, rehosted)}
    return spec


def _mapped_node_affinity(
    node_affinity: Mapping[str, Any], renamed: dict[str, str], rehosted: dict[str, str]
) -> dict[str, Any]:
    def term(selector_term: Any) -> Any:
        if not isinstance(selector_term, Mapping):
            return selector_term
        return {
            **selector_term,
            **_mapped_requirements(selector_term, "matchFields", _NODE_NAME_FIELD, renamed),
            **_mapped_requirements(selector_term, "matchExpressions", HOSTNAME_LABEL, rehosted),
        }

    mapped = dict(node_affinity)
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, Mapping) and isinstance(required.get("nodeSelectorTerms"), list):
        mapped["requiredDuringSchedulingIgnoredDuringExecution"] = {
            **required, "nodeSelectorTerms": [term(item) for item in required["nodeSelectorTerms"]]
        }
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if isinstance(preferred, list):
        mapped["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {**item, "preference": term(item.get("preference"))} if isinstance(item, Mapping) else item
            for item in preferred
        ]
    return mapped


def _mapped_requirements(term: Mapping[str, Any], field: str, key: str, names: dict[str, str]) -> dict[str, Any]:
    """``{field: requirements}`` with the values of the requirements on ``key`` mapped by ``names``
    (``{}`` when the term has no such field)."""
    requirements = term.get(field)
    if not isinstance(requirements, list):
        return {}

    def mapped(requirement: Any) -> Any:
        if not (isinstance(requirement, Mapping) and requirement.get("key") == key):
            return requirement
        values = requirement.get("values") or []
        return {**requirement, "values": [names.get(value, value) for value in values]}

    return {field: [mapped(requirement) for requirement in requirements]}


def _suffixed(name: str, suffix: str, limit: int, what: str) -> str:
    """``name + suffix``, shortened with a hash of it when longer than ``limit`` (logged)."""
    full = name + suffix
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:10]
    kept = name[: limit - len(suffix) - len(digest) - 1].rstrip("-._")
    short = f"{kept}-{digest}{suffix}"
    log.warning("%s %r is longer than %d characters: shortened to %r", what, full, limit, short)
    return short


def _check_copy_names(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], source: str) -> None:
    """The copies' names must not be names the file already has (a node ``n-s1`` in a file scaled by 2)."""
    for kind, names in (
        ("Node", [node["metadata"]["name"] for node in nodes]),
        ("Pod", [f"{pod['metadata']['namespace']}/{pod['metadata']['name']}" for pod in pods]),
    ):
        if len(set(names)) != len(names):
            twice = next(name for name, count in Counter(names).items() if count > 1)
            raise InputError(
                f"{source}: {kind} {printable(twice)} is both in the file and the name of a copy made by "
                "--scale or --pods; rename it or use another scale"
            )


# -- pods like mine -------------------------------------------------------------------------------


def _fitted(
    measured: list[dict[str, Any]],
    init: list[dict[str, Any]],
    pods: int | None,
    scheduler_name: str | None,
    source: str,
) -> list[dict[str, Any]]:
    """``pods`` pending pods: the first of ``measured``, then clones of the bound pods."""
    if pods is None or pods == len(measured):
        return measured
    if pods < len(measured):
        return measured[:pods]
    templates = [pod for pod in init if not _pinned_to_its_node(pod)] or init
    if not templates:
        raise InputError(
            f"{source}: --pods {pods}: the cluster has {len(measured)} pending pods and no bound pods "
            "to make more like them"
        )
    clones = (_clone(templates[k % len(templates)], k, scheduler_name) for k in range(pods - len(measured)))
    return [*measured, *clones]


def _pinned_to_its_node(pod: Mapping[str, Any]) -> bool:
    """A DaemonSet pod or a static pod's mirror: a copy would fit only the node it is pinned to."""
    meta = pod["metadata"]
    owners = meta.get("ownerReferences") or ()
    annotations = meta.get("annotations") or {}
    return _MIRROR_ANNOTATION in annotations or any(
        isinstance(owner, Mapping) and owner.get("kind") in _NODE_OWNERS for owner in owners
    )


def _clone(pod: Mapping[str, Any], k: int, scheduler_name: str | None) -> dict[str, Any]:
    """A pending copy of bound ``pod``, named ``<name>-bench-<k>``."""
    meta = {key: value for key, value in pod["metadata"].items() if key not in _NOT_CLONED}
    meta["name"] = _suffixed(meta["name"], f"-bench-{k}", MAX_NAME, "pod name")
    spec = {key: value for key, value in pod["spec"].items() if key != "nodeName"}
    volumes = spec.get("volumes")
    if isinstance(volumes, list):  # no claim of its own: leave the original's out
        spec["volumes"] = [v for v in volumes if not (isinstance(v, Mapping) and
                                                      ("persistentVolumeClaim" in v or "ephemeral" in v))]
    if scheduler_name is not None:
        spec["schedulerName"] = scheduler_name
    return _object("Pod", pod.get("apiVersion", "v1"), meta, spec=spec)

