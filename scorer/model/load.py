"""Cluster files: YAML or JSON texts to the Pods, Nodes, Namespaces, workloads and storage objects in them.

``load_file(path)`` and ``load_objects(text, source)`` read through the one
guarded reader (``scorer.inputs.reader``, with the cluster limits) and decode
every document (``scorer.model.decode``). A document may be one object, a
``kind: List`` or a typed list (``PodList``...) whose ``items`` may omit
``kind``; empty documents are skipped.

What the result (``LoadedObjects``) says about the input as a whole:

- the kinds read (``READ_KINDS``): Pod, Node, Namespace, and the workloads
  (``LoadedObjects.workloads``): Service, ReplicationController, ReplicaSet,
  StatefulSet (``SelectorOwner``, for default topology spreading) and
  PodDisruptionBudget (for preemption), and the storage kinds
  (``LoadedObjects.storage``, for the volume plugins): PersistentVolume,
  PersistentVolumeClaim, StorageClass, CSINode, CSIDriver, CSIStorageCapacity.
  An export of ``kubectl get pv,pvc,storageclass,csinode,csidriver -o yaml``
  reads as it is;
- objects of kinds scorer does not read (a Deployment, a ConfigMap) are kept
  in ``others`` and counted in one warning per load
  (``skipped 3 objects of kinds scorer does not read: 2 Deployment, 1
  ConfigMap``); ``MetricsSnapshot`` documents go to ``others`` without a
  warning, for the snapshot reader (``scorer.sources.static``);
- errors: a kind that is a near miss of a kind read (``pod``, ``Pods``,
  ``service``), a KubeSchedulerConfiguration (it belongs to ``--config``), an
  object whose apiVersion its kind does not have (``v1`` for Pod...,
  ``apps/v1`` for ReplicaSet...), two objects of the same kind and name (same
  namespace for namespaced kinds), and pods bound to one node whose
  requests add up beyond int64 (the columns they are summed into);
- warnings: a pod bound (``spec.nodeName``) to a node the input does not
  have; kube keeps such a pod, and it counts toward no node until that node
  appears. Pods in a terminal phase (Succeeded, Failed) hold nothing and are
  neither counted nor warned about.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from scorer.errors import ModelError, ReadError
from scorer.inputs.describe import describe_value, expected, printable, quote
from scorer.inputs.numbers import INT64_MAX
from scorer.inputs.reader import CLUSTER_LIMITS, Document, parse_documents, read_documents
from scorer.model.decode import READ_KINDS, ClusterObject, object_from_dict, object_name
from scorer.model.objects import Namespace, Node, Pod, PodDisruptionBudget, SelectorOwner
from scorer.model.storage import StorageObject

# Kinds other parts of scorer read from a cluster file.
SNAPSHOT_KIND = "MetricsSnapshot"
CONFIG_KIND = "KubeSchedulerConfiguration"
# Pods bound to missing nodes listed one by one in warnings; the rest are counted.
_LISTED_UNBOUND = 5


@attrs.frozen(slots=True)
class LoadedObjects:
    """What a cluster file holds.

    ``workloads`` holds the Services, ReplicationControllers, ReplicaSets,
    StatefulSets (``SelectorOwner``) and PodDisruptionBudgets, in file order;
    ``storage`` the PersistentVolumes, PersistentVolumeClaims, StorageClasses,
    CSINodes, CSIDrivers and CSIStorageCapacities (``scorer.model.storage``),
    in file order.
    ``skipped`` names the objects of kinds scorer does not read
    (``"Service default/web"``); ``others`` holds them (and MetricsSnapshot
    documents) as ``Document``s, for callers that read kinds of their own.
    ``warnings`` are one-line messages about the input (skipped kinds, pods
    bound to missing nodes) for the caller to show.
    """

    pods: list[Pod] = attrs.Factory(list)
    nodes: list[Node] = attrs.Factory(list)
    namespaces: list[Namespace] = attrs.Factory(list)
    workloads: list[SelectorOwner | PodDisruptionBudget] = attrs.Factory(list)
    storage: list[StorageObject] = attrs.Factory(list)
    skipped: list[str] = attrs.Factory(list)
    others: list[Any] = attrs.Factory(list)
    warnings: list[str] = attrs.Factory(list)


def load_file(path: str | os.PathLike[str]) -> LoadedObjects:
    """The objects of a cluster file; ``ModelError`` naming the file (and the
    document and object) for anything wrong with it."""
    source = os.fspath(path)
    with gc_paused():
        try:
            documents = read_documents(source, limits=CLUSTER_LIMITS)
        except ReadError as error:
            raise ModelError(str(error)) from None
        return _Loader(source).load(documents)


def load_objects(text: str | bytes, source: str = "<input>") -> LoadedObjects:
    """Like ``load_file`` for text in memory; ``source`` names it in messages."""
    with gc_paused():
        try:
            documents = parse_documents(text, source, limits=CLUSTER_LIMITS)
        except ReadError as error:
            raise ModelError(str(error)) from None
        return _Loader(source).load(documents)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
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


class _Loader:
    """Decodes the documents of one input and checks them as a whole."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.loaded = LoadedObjects()
        self.pod_origins: list[str] = []
        self.first_seen: dict[tuple[str, str], str] = {}
        self.skipped_kinds: Counter[str] = Counter()

    def load(self, documents: list[Document]) -> LoadedObjects:
        for document in documents:
            data = document.data
            if data is None:
                continue
            kind = data.get("kind") if isinstance(data, Mapping) else None
            if isinstance(kind, str) and kind.endswith("List") and "items" in data:
                self._add_list(document, kind, data["items"])
            else:
                self._add(data, document, None, None)
        self._check_bound_pods()
        if self.skipped_kinds:
            counts = ", ".join(f"{n} {printable(k)}" for k, n in self.skipped_kinds.most_common())
            total = sum(self.skipped_kinds.values())
            self.loaded.warnings.append(
                f"{self.source}: skipped {total} object{'s' if total != 1 else ''} of kinds "
                f"scorer does not read: {counts}"
            )
        return self.loaded

    def _add_list(self, document: Document, kind: str, items: Any) -> None:
        if items is None:
            return
        if not isinstance(items, (list, tuple)):
            raise ModelError(
                f"{printable(kind)} ({document.origin}): items: {expected('a list', items)}"
            )
        item_kind = kind[: -len("List")] or None  # PodList items may omit kind
        for index, item in enumerate(items):
            self._add(item, document, index, item_kind)

    def _add(self, obj: Any, document: Document, index: int | None, default_kind: str | None) -> None:
        if obj is None:
            return
        origin = document.origin if index is None else f"{document.origin}, items[{index}]"
        if not isinstance(obj, Mapping):
            raise ModelError(
                f"{origin}: expected a Kubernetes object (a mapping with apiVersion and kind), "
                f"got {describe_value(obj)}"
            )
        kind = obj.get("kind", default_kind)
        if kind in READ_KINDS or not isinstance(kind, str) or not kind:
            # (without a kind, object_from_dict raises the error that says so)
            self._record(object_from_dict(obj, origin=origin, kind=default_kind), origin)
            return
        name = object_name(obj, origin)
        if kind.endswith("List") and "items" in obj:
            raise ModelError(f"{origin}: a {printable(kind)} inside a list is not read; give its items directly")
        if kind == CONFIG_KIND:
            raise ModelError(
                f"{kind}{name}: a scheduler configuration is not a cluster object; "
                "give it with --config"
            )
        suggestion = _near_kind(kind)
        if suggestion is not None:
            raise ModelError(
                f"{printable(kind)}{name}: kind: unknown kind {quote(kind)}, "
                f"did you mean {quote(suggestion)}?"
            )
        as_document = document if index is None else attrs.evolve(document, data=obj, item=index)
        self.loaded.others.append(as_document)
        if kind != SNAPSHOT_KIND:
            # Named objects are listed as "Service default/web"; unnamed by origin.
            named = object_name(obj)
            self.loaded.skipped.append(f"{printable(kind)}{named or name}")
            self.skipped_kinds[kind] += 1

    def _record(self, result: ClusterObject, origin: str) -> None:
        if isinstance(result, (Node, Namespace)):
            kind, key = type(result).__name__, result.name
        elif isinstance(result, SelectorOwner):
            kind, key = result.kind, f"{result.namespace}/{result.name}"
        else:  # namespace/name, or the name of a cluster-scoped storage kind
            kind, key = type(result).__name__, result.key
        first = self.first_seen.get((kind, key))
        if first is not None:
            raise ModelError(f"{kind} {printable(key)} ({origin}): defined twice, first in {first}")
        self.first_seen[kind, key] = origin
        if isinstance(result, Pod):
            self.loaded.pods.append(result)
            self.pod_origins.append(origin)
        elif isinstance(result, Node):
            self.loaded.nodes.append(result)
        elif isinstance(result, Namespace):
            self.loaded.namespaces.append(result)
        elif isinstance(result, (SelectorOwner, PodDisruptionBudget)):
            self.loaded.workloads.append(result)
        else:
            self.loaded.storage.append(result)

    def _check_bound_pods(self) -> None:
        """Per-node totals must fit int64; pods bound to missing nodes are reported."""
        totals: dict[str, dict[str, int]] = {node.name: {} for node in self.loaded.nodes}
        unbound: list[str] = []
        for pod, origin in zip(self.loaded.pods, self.pod_origins, strict=True):
            if not pod.node_name or pod.is_terminal:
                continue
            node_totals = totals.get(pod.node_name)
            if node_totals is None:
                unbound.append(
                    f"Pod {printable(pod.key)} ({origin}): spec.nodeName {quote(pod.node_name)} "
                    f"names no Node of {self.source}; the pod counts toward no node"
                )
                continue
            amounts = (
                *pod.requests.items(),
                ("non-zero cpu", pod.non_zero_cpu),
                ("non-zero memory", pod.non_zero_memory),
            )
            for resource, amount in amounts:
                total = node_totals.get(resource, 0) + amount
                if total > INT64_MAX:
                    name = resource.removeprefix("non-zero ")
                    raise ModelError(
                        f"Pod {printable(pod.key)} ({origin}): "
                        f"spec.containers[*].resources.requests.{printable(name)}: with this pod, "
                        f"the pods bound to node {quote(pod.node_name)} request {total} in total, "
                        f"beyond the int64 limit of {INT64_MAX}"
                    )
                node_totals[resource] = total
        self.loaded.warnings.extend(unbound[:_LISTED_UNBOUND])
        if len(unbound) > _LISTED_UNBOUND:
            self.loaded.warnings.append(
                f"{self.source}: {len(unbound) - _LISTED_UNBOUND} more pods are bound to nodes "
                "that are not in it; they count toward no node"
            )


def _near_kind(kind: str) -> str | None:
    """The kind scorer reads that ``kind`` was probably meant to be
    (``pod``, ``Pods`` -> ``Pod``; ``podlist`` -> ``PodList``), else None."""
    lowered = kind.lower()
    for known in READ_KINDS:
        base = known.lower()
        if lowered in (base, base + "s") and kind != known:
            return known
        if lowered in (base + "list", base + "slist") and kind != known + "List":
            return known + "List"
    return None
