"""The API resources the reflectors read, one ``Resource`` each, and the handlers they go to.

``RESOURCES`` describes every resource ``scorer run`` reads in one line: its
path (and older group versions), the kind the object handlers name, the
decoder of ``scorer.model`` and how a changed object is told;
``WORKLOAD_RESOURCES`` and ``STORAGE_RESOURCES`` name the kinds that share
one set of handlers. ``bind_handlers`` finds a resource's
``on_<kind>_add/_update/_delete`` methods on an ``ObjectHandlers`` object.
How a resource is listed and watched is ``scorer.kube.reflector``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from scorer.model import (
    TERMINAL_PHASES,
    namespace_from_dict,
    node_from_dict,
    pod_from_dict,
    pod_update_from_dict,
    workload_from_dict,
)
from scorer.model.decode import storage_from_dict


def _resource_version(obj: Any) -> Any:
    return obj.resource_version


@attrs.frozen(slots=True)
class Resource:
    """A resource the reflectors read.

    ``name`` is the API's plural (the metric label, the task name); ``kind``
    names the objects in messages and the handlers (``on_<kind>_add``,
    ``_update``, ``_delete``) unless ``handlers`` names them (``workload``:
    one set of handlers for Services, ReplicaSets...; ``storage``: one for
    PVs, PVCs, StorageClasses and the CSI objects); ``fallback_paths`` are
    older group versions of ``path``, read when the server does not serve
    ``path``'s (see ``scorer.kube.reflector``'s Versions); ``optional``: the
    server may serve it in none of them (then nothing is read and the
    reflector counts as synced); ``decode`` builds the model object from the API's JSON and raises
    ``ModelError`` for a malformed one; ``namespaced`` keys objects
    ``namespace/name`` (else ``name``); ``version`` gives a decoded object's
    resourceVersion, to tell changed objects in a re-list (None: the objects
    are compared, for models that keep no resourceVersion); ``update``, given
    the last object delivered and the API's JSON of its new version, builds the
    new object more cheaply than ``decode`` where it can, else returns None;
    ``deferrable``, given an object of the first list, returns its place among the
    objects delivered after the sync (lowest first), or None for one delivered
    with the list (see ``scorer.kube.reflector``'s List).
    """

    name: str
    path: str
    kind: str
    decode: Callable[[Mapping[str, Any]], Any]
    namespaced: bool = False
    version: Callable[[Any], Any] | None = None
    handlers: str = ""
    fallback_paths: tuple[str, ...] = ()
    optional: bool = False
    update: Callable[[Any, Mapping[str, Any]], Any] | None = None
    deferrable: Callable[[Mapping[str, Any]], int | None] | None = None

    @property
    def handler_kind(self) -> str:
        return self.handlers or self.kind

    def key(self, raw: Mapping[str, Any]) -> str | None:
        """The store key of an API object (None when its metadata has no name)."""
        meta = raw.get("metadata")
        if not isinstance(meta, Mapping):
            return None
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            return None
        if not self.namespaced:
            return name
        namespace = meta.get("namespace")
        return f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{name}"

    def changed(self, old: Any, new: Any) -> bool:
        if self.version is None:
            return bool(old != new)
        return bool(self.version(old) != self.version(new))


def unassigned_pod(raw: Mapping[str, Any]) -> bool:
    """A pod that no node holds yet (no ``spec.nodeName``): one kube-scheduler may ask its extender about."""
    spec = raw.get("spec")
    return isinstance(spec, Mapping) and not spec.get("nodeName")


def _waiting_pod_order(raw: Mapping[str, Any]) -> int | None:
    """A pod that only waits to be scheduled (no node, no nominated node, not finished): minus its priority,
    so that the highest priorities come first; None for any other pod (it is part of what the scheduler
    must know before it places one: bound pods use nodes, a nomination reserves room on one)."""
    spec, status = raw.get("spec"), raw.get("status")
    if not isinstance(spec, Mapping) or spec.get("nodeName"):
        return None
    if isinstance(status, Mapping) and (status.get("nominatedNodeName")
                                        or status.get("phase") in TERMINAL_PHASES):
        return None
    priority = spec.get("priority")
    return -priority if type(priority) is int else 0


def _workload(kind: str) -> Callable[[Mapping[str, Any]], Any]:
    """The decoder of one workload kind (list items carry no ``kind``)."""
    return functools.partial(workload_from_dict, kind=kind)


def _storage(kind: str) -> Callable[[Mapping[str, Any]], Any]:
    """The decoder of one storage kind (list items carry no ``kind``)."""
    return functools.partial(storage_from_dict, kind=kind)


RESOURCES: dict[str, Resource] = {r.name: r for r in (
    Resource("namespaces", "/api/v1/namespaces", "namespace", namespace_from_dict),
    Resource("services", "/api/v1/services", "service", _workload("Service"), namespaced=True,
             version=_resource_version, handlers="workload"),
    Resource("replicationcontrollers", "/api/v1/replicationcontrollers", "replicationcontroller",
             _workload("ReplicationController"), namespaced=True, version=_resource_version, handlers="workload"),
    Resource("replicasets", "/apis/apps/v1/replicasets", "replicaset", _workload("ReplicaSet"),
             namespaced=True, version=_resource_version, handlers="workload"),
    Resource("statefulsets", "/apis/apps/v1/statefulsets", "statefulset", _workload("StatefulSet"),
             namespaced=True, version=_resource_version, handlers="workload"),
    Resource("poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", "poddisruptionbudget",
             _workload("PodDisruptionBudget"), namespaced=True, version=_resource_version, handlers="workload",
             fallback_paths=("/apis/policy/v1beta1/poddisruptionbudgets",)),
    Resource("nodes", "/api/v1/nodes", "node", node_from_dict, version=_resource_version),
    # The volume plugins' objects (reference kube-scheduler.md §10.1), classes before what names them.
    Resource("storageclasses", "/apis/storage.k8s.io/v1/storageclasses", "storageclass", _storage("StorageClass"),
             version=_resource_version, handlers="storage"),
    Resource("csidrivers", "/apis/storage.k8s.io/v1/csidrivers", "csidriver", _storage("CSIDriver"),
             version=_resource_version, handlers="storage"),
    Resource("csinodes", "/apis/storage.k8s.io/v1/csinodes", "csinode", _storage("CSINode"),
             version=_resource_version, handlers="storage"),
    Resource("csistoragecapacities", "/apis/storage.k8s.io/v1/csistoragecapacities", "csistoragecapacity",
             _storage("CSIStorageCapacity"), namespaced=True, version=_resource_version, handlers="storage",
             fallback_paths=("/apis/storage.k8s.io/v1beta1/csistoragecapacities",
                             "/apis/storage.k8s.io/v1alpha1/csistoragecapacities"), optional=True),
    Resource("persistentvolumes", "/api/v1/persistentvolumes", "persistentvolume", _storage("PersistentVolume"),
             version=_resource_version, handlers="storage"),
    Resource("persistentvolumeclaims", "/api/v1/persistentvolumeclaims", "persistentvolumeclaim",
             _storage("PersistentVolumeClaim"), namespaced=True, version=_resource_version, handlers="storage"),
    Resource("pods", "/api/v1/pods", "pod", pod_from_dict, namespaced=True, version=_resource_version,
             update=pod_update_from_dict, deferrable=_waiting_pod_order),
)}
# The workload kinds (Services, controllers, PodDisruptionBudgets), in RESOURCES order.
WORKLOAD_RESOURCES: tuple[str, ...] = tuple(r.name for r in RESOURCES.values() if r.handlers == "workload")
# The storage kinds (the volume plugins' objects), in RESOURCES order.
STORAGE_RESOURCES: tuple[str, ...] = tuple(r.name for r in RESOURCES.values() if r.handlers == "storage")


@attrs.frozen(slots=True)
class BoundHandlers:
    """The handler methods one resource's changes go to."""

    add: Callable[[Any], None]
    update: Callable[[Any, Any], None]
    delete: Callable[[Any], None]


def bind_handlers(resource: Resource, handlers: object) -> BoundHandlers:
    """The bound ``on_<kind>_add/_update/_delete`` methods of ``handlers``."""
    try:
        return BoundHandlers(*(getattr(handlers, f"on_{resource.handler_kind}_{change}")
                               for change in ("add", "update", "delete")))
    except AttributeError as error:
        raise TypeError(f"{type(handlers).__name__} cannot receive {resource.name}: {error}") from None
