"""Cluster sources and writers: the seam between the scheduler and a cluster.

``interface`` holds the Protocols (ClusterSource, ObjectHandlers; Binder,
EventSink, ClusterWriter, EventRecorder re-exported from the framework's
``scorer.framework.seams``); ``memory`` is the in-memory cluster of
simulate, explain, the bench and the tests; ``recorder`` the buffered
EventRecorder over any ClusterWriter. The API reflectors and client of ``scorer run``
are the second implementation.
"""

from scorer.cluster.interface import (
    BindConflict,
    Binder,
    ClusterSource,
    ClusterWriter,
    EventRecorder,
    EventSink,
    ObjectHandlers,
)
from scorer.cluster.memory import InMemoryCluster
from scorer.cluster.recorder import BufferedRecorder

__all__ = [
    "BindConflict",
    "Binder",
    "BufferedRecorder",
    "ClusterSource",
    "ClusterWriter",
    "EventRecorder",
    "EventSink",
    "InMemoryCluster",
    "ObjectHandlers",
]
