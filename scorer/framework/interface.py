"""The methods a plugin object may have, one Protocol per extension point.

A plugin is any object with a ``name`` attribute and the methods of some of
these Protocols (kube's framework/interface.go). ``PluginRegistry.register``
checks a plugin class against the Protocol of every extension point it
claims (``POINT_PROTOCOLS`` in ``scorer.framework.catalog``): each method
must be there, callable, and accept the arguments the framework passes.
Filter and Score come in two styles; a plugin implements one of them:

* vectorized (``filter_batch``, ``score_batch``): called once per cycle with a
  ``NodeBatch`` of all candidate nodes; returns a ``FilterVerdict`` / an int64
  array aligned with ``nodes.rows``. The built-ins use this style.
* per node (``filter``, ``score``): called once per node with a ``NodeInfo``;
  returns a ``Status`` (or None for success) / an int (or ``(int, Status)``).
  Simple to write; the framework adapts it to the vectorized loop.

Every method may return None for Success. Exceptions raised by a plugin
become an Error status naming the plugin; the scheduler keeps running and
the pod is retried with backoff. Scores must be in [0, 100] after
NormalizeScore (or raw, for plugins without it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

    from scorer.framework.cycle_state import CycleState
    from scorer.framework.events import ClusterEvent
    from scorer.framework.status import Status
    from scorer.framework.types import FilterVerdict, NodeBatch, PreFilterResult, QueuedPodInfo
    from scorer.model import Pod
    from scorer.state.nodeinfo import NodeInfo


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a name (the framework sets it to the registered name)."""

    name: str


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """True if ``a`` should be scheduled before ``b``."""


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: Pod) -> Status | None:
        """Before the pod enters the active queue; non-success gates it."""


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> list[ClusterEvent]:
        """The cluster events that may make a pod this plugin rejected schedulable again.
        A plugin that can reject pods and lacks this method is woken by every event."""


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> PreFilterResult | Status | None:
        """Once per cycle before Filter. Skip = do not call this plugin's Filter.
        A rejection makes the pod unschedulable on every node."""


@runtime_checkable
class PreFilterExtensions(Plugin, Protocol):
    """Optional, for PreFilter plugins whose PreFilter state counts other pods
    (kube's PreFilterExtensions). Preemption and the nominated-pods pass evaluate
    "what if this pod were added to / removed from that node" on a clone of the
    cycle state: these update the plugin's PreFilter state in ``state`` (a clone;
    replace or copy the value before changing it, never change a shared one in
    place). ``node`` is the node ``pod_info`` is added to or removed from.

    Optional: ``affected_by(state, pod, other) -> bool``, False when adding or
    removing ``other`` (anywhere) cannot change this plugin's PreFilter state for
    ``pod``. Preemption then dry-runs nodes whose victims affect no extension
    together, in bulk, instead of one state clone per node. Without it every pod
    counts as affecting the state (always correct, slower)."""

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo) -> Status | None:
        """``pod_to_add`` is now counted on ``node``."""

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status | None:
        """``pod_to_remove`` is no longer counted on ``node``."""


@runtime_checkable
class BatchFilterPlugin(Plugin, Protocol):
    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        """Vectorized Filter over candidate nodes."""


@runtime_checkable
class NodeFilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        """Per-node Filter."""


FilterPlugin = BatchFilterPlugin | NodeFilterPlugin


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: Pod, statuses: Mapping[str, Status]
    ) -> tuple[str | None, Status | None] | Status | None:
        """After no node fit; may nominate a node (preemption). Returns (node, status).
        ``statuses``: the Filter status of each rejected node, by name (read-only, lazy)."""


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        """Once per cycle before Score, with the feasible nodes. Skip = no Score."""


@runtime_checkable
class BatchScorePlugin(Plugin, Protocol):
    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        """Vectorized Score: one int per feasible node."""


@runtime_checkable
class NodeScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int | tuple[int, Status]:
        """Per-node Score."""


ScorePlugin = BatchScorePlugin | NodeScorePlugin


@runtime_checkable
class ScoreExtensions(Plugin, Protocol):
    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray | None:
        """Optional, for score plugins: map raw scores (int64 array, feasible-node order)
        into [0, 100]; return the new array or modify it in place and return None."""


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """The pod is assumed on ``node_name``; claim what it needs."""

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Undo ``reserve`` after a later failure (must be idempotent)."""


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> Status | tuple[Status, float] | None:
        """Approve, deny, or hold (Wait with a timeout in seconds) the binding."""


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Any:
        """Before Bind; may be async. Returns a Status or None."""


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Any:
        """Bind the pod; may be async. Skip passes to the next Bind plugin."""


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> Any:
        """After a successful bind; informational; may be async."""
