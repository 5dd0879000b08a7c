"""Cluster sources and writers: the seam between the scheduler and a cluster.

``interface`` defines the Protocols (Binder, EventSink, EventRecorder,
ClusterSource, ObjectHandlers); ``memory`` is the in-memory cluster of
simulate, explain, the bench and the tests; ``recorder`` the buffered
EventRecorder over any sink. The API reflectors and client of ``scorer run``
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
