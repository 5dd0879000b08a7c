"""Cluster events: the changes that may make pending pods schedulable.

Plugins declare the events they care about (``events_to_register``); the
event handlers turn every object change into one of these; the queue moves
the pods whose rejecting plugins registered a matching event.
"""

from __future__ import annotations

import attrs

# Event resources (kube's framework/types.go EventResource).
WILDCARD = "*"
NODE = "Node"
NAMESPACE = "Namespace"
POD = "Pod"
ASSIGNED_POD = "AssignedPod"  # a pod bound to a node
UNSCHEDULABLE_POD = "UnschedulablePod"  # a pod in the unschedulable pool
PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "StorageClass"
CSI_NODE = "CSINode"
CSI_DRIVER = "CSIDriver"
CSI_STORAGE_CAPACITY = "CSIStorageCapacity"

# Event actions (kube's ActionType); the ``Update*`` ones are parts of ``Update``.
ALL = "All"
ADD = "Add"
DELETE = "Delete"
UPDATE = "Update"
UPDATE_NODE_ALLOCATABLE = "UpdateNodeAllocatable"
UPDATE_NODE_LABEL = "UpdateNodeLabel"
UPDATE_NODE_TAINT = "UpdateNodeTaint"  # taints, and spec.unschedulable
UPDATE_NODE_ANNOTATION = "UpdateNodeAnnotation"
UPDATE_POD_LABEL = "UpdatePodLabel"
UPDATE_POD_SCALE_DOWN = "UpdatePodScaleDown"
UPDATE_POD_SCHEDULING_GATES_ELIMINATED = "UpdatePodSchedulingGatesEliminated"
UPDATE_POD_TOLERATION = "UpdatePodToleration"
# An update of a pod that changed nothing kube names: matches only plugins that registered
# the generic Update (kube's updatePodOther), labelled like kube's "AssignedPodUpdate".
UPDATE_POD_OTHER = "UpdatePodOther"

# Labels of the queue's own events, as counted by scheduler_queue_incoming_pods_total.
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
FORCE_ACTIVATE = "ForceActivate"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
POD_ADD = "PodAdd"


@attrs.frozen(slots=True)
class ClusterEvent:
    """A change in the cluster that may make pending pods schedulable.

    ``resource`` is a kind ("Node", "Pod", "AssignedPod", "UnschedulablePod",
    "*" ...), ``action`` an action type ("Add", "Delete", "Update",
    "UpdateNodeLabel", ..., "All"). ``custom_label`` replaces the default label
    ``resource + action`` (used by the queue's own wildcard events).
    """

    resource: str
    action: str
    custom_label: str | None = None

    @property
    def label(self) -> str:
        """The event label of metrics and logs (``NodeAdd``, ``UnschedulableTimeout``)."""
        return self.custom_label or f"{self.resource}{self.action}"

    @property
    def is_wildcard(self) -> bool:
        """A ``*`` event moves every non-gated unschedulable pod."""
        return self.resource == WILDCARD


EVENT_FORCE_ACTIVATE = ClusterEvent(WILDCARD, ALL, FORCE_ACTIVATE)
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, ALL, UNSCHEDULABLE_TIMEOUT)
EVENT_UNSCHEDULABLE_POD_UPDATE = ClusterEvent(UNSCHEDULABLE_POD, UPDATE)


def matches(registered: ClusterEvent, event: ClusterEvent) -> bool:
    """True if a plugin that registered ``registered`` is interested in ``event``.

    Resources match when equal, when ``registered`` is ``*``, or when a
    registered ``Pod`` meets an ``AssignedPod``/``UnschedulablePod`` event.
    Actions match when equal, when either is ``All``, or when either is the
    generic ``Update`` and the other any ``Update*`` action (kube compares
    action bit masks).
    """
    resource_ok = registered.resource in (WILDCARD, event.resource) or (
        registered.resource == POD and event.resource in (ASSIGNED_POD, UNSCHEDULABLE_POD)
    )
    return resource_ok and _actions_overlap(registered.action, event.action)


def _actions_overlap(a: str, b: str) -> bool:
    if a == b or ALL in (a, b):
        return True
    if a == UPDATE:
        return b.startswith(UPDATE)
    if b == UPDATE:
        return a.startswith(UPDATE)
    return False


# The events the event handlers and the binding cycle send most.
EVENT_NODE_ADD = ClusterEvent(NODE, ADD)
EVENT_NODE_DELETE = ClusterEvent(NODE, DELETE)
EVENT_ASSIGNED_POD_ADD = ClusterEvent(ASSIGNED_POD, ADD)
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(ASSIGNED_POD, DELETE)
EVENT_NAMESPACE_ADD = ClusterEvent(NAMESPACE, ADD)
EVENT_NAMESPACE_UPDATE = ClusterEvent(NAMESPACE, UPDATE)
EVENT_NAMESPACE_DELETE = ClusterEvent(NAMESPACE, DELETE)
