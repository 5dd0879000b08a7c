"""Kubernetes objects as the scheduler sees them, and how they are read.

- ``scorer.model.objects``: the types (Pod, Node, Namespace, Container,
  Taint, Toleration, selectors, affinity, Volume...).
- ``scorer.model.storage``: the storage objects the volume plugins read
  (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver,
  CSIStorageCapacity).
- ``scorer.model.requests``: request arithmetic (a pod's effective and
  non-zero requests, as kube-scheduler counts them).
- ``scorer.model.decode``: API objects (dicts) to those types, with field
  paths in every error (``pod_from_dict``, ``node_from_dict``,
  ``workload_from_dict``, ``storage_from_dict``...); its parts in
  ``decode_fields`` (field readers), ``decode_selectors`` (selectors,
  affinity, tolerations) and ``decode_storage`` (the storage objects).
- ``scorer.model.load``: cluster files to ``LoadedObjects`` through the one
  guarded reader (``load_file``, ``load_objects``).

Every public name is re-exported here.
"""

from scorer.inputs.describe import describe_value
from scorer.inputs.numbers import parse_int64
from scorer.model import objects, storage
from scorer.model.decode import (
    API_VERSION,
    API_VERSIONS,
    DEFAULT_RBD_POOL,
    MAX_IMAGE_SIZE_BYTES,
    READ_KINDS,
    VOLUME_SOURCES,
    WORKLOAD_KINDS,
    ClusterObject,
    FieldError,
    namespace_from_dict,
    node_from_dict,
    object_from_dict,
    object_name,
    parse_node_affinity,
    pod_from_dict,
    pod_update_from_dict,
    storage_from_dict,
    workload_from_dict,
)
from scorer.model.load import LoadedObjects, load_file, load_objects
from scorer.model.objects import *  # noqa: F403  (the names of objects.__all__, re-exported below)
from scorer.model.requests import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    NON_ZERO_DEFAULTS,
    aggregate_container_requests,
    is_pod_level_resource,
    pod_requests,
)
from scorer.model.storage import *  # noqa: F403  (the names of storage.__all__, re-exported below)

__all__ = [
    "API_VERSION",
    "API_VERSIONS",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_RBD_POOL",
    "DEFAULT_MILLI_CPU_REQUEST",
    "MAX_IMAGE_SIZE_BYTES",
    "NON_ZERO_DEFAULTS",
    "READ_KINDS",
    "VOLUME_SOURCES",
    "WORKLOAD_KINDS",
    "ClusterObject",
    "FieldError",
    "LoadedObjects",
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
    "pod_update_from_dict",
    "pod_requests",
    "storage_from_dict",
    "workload_from_dict",
]
__all__ += objects.__all__
__all__ += [name for name in storage.__all__ if name not in __all__]
