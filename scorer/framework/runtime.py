"""Framework: one profile's plugins, instantiated and run at each extension point.

Every plugin call goes through ``Framework._call`` (``_call_async`` at the
binding points, whose plugins may be async): a plugin that raises, or
returns what its extension point does not accept, becomes an Error status
``running <Point> plugin "<name>" (<distribution> <version>): <ExcType>:
<message>`` naming the plugin (``scorer.framework.plugincalls``: the results
checked per point, the message, the traceback under ``SCORER_DEBUG``), so the
scheduler keeps running. QueueSort, PreEnqueue and PostBind errors, which no
cycle reports, are logged. Filter and Score accept both plugin styles
(vectorized or per node) and present both as vectorized to the scheduling
algorithm.

Metrics go to ``handle.metrics`` (nothing is recorded when it is None), with
kube-scheduler's extension point names and status labels: every run of an
extension point records its duration
(``scheduler_framework_extension_point_duration_seconds``; Filter once per
call over a batch of nodes), and in the cycles PreFilter draws for sampling
(``CycleState.record_plugin_metrics``, about 10%) every plugin call records
its own (``scheduler_plugin_execution_duration_seconds``, with
``ScoreExtensionNormalize`` for NormalizeScore and ``Unreserve``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

import attrs
import numpy as np

from scorer.cache import ClusterCache
from scorer.errors import PluginError, debug_enabled
from scorer.framework.catalog import PluginInfo, extension_points_of
from scorer.framework.cycle_state import CycleState
from scorer.framework.interface import (
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostFilterPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from scorer.framework.plugincalls import (
    Convert,
    filter_call,
    plugin_failed,
    score_call,
    to_normalized,
    to_permit,
    to_post_filter,
    to_pre_filter,
    to_scores,
    to_status,
    to_verdict,
)
from scorer.framework.profile import FrameworkProfile
from scorer.framework.seams import Binder, EventRecorder
from scorer.framework.status import SUCCESS, Code, Status
from scorer.framework.types import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    FilterVerdict,
    NodeBatch,
    QueuedPodInfo,
    severity_level,
)
from scorer.logsummary import RepeatLog
from scorer.metrics import SchedulerMetrics
from scorer.model import Pod
from scorer.sources.hub import SourceHub
from scorer.state.nodeinfo import NodeInfo
from scorer.state.nodetable import NodeTable

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

# Extension point names, as kube-scheduler's metrics and messages spell them.
QUEUE_SORT = "QueueSort"
PRE_ENQUEUE = "PreEnqueue"
PRE_FILTER = "PreFilter"
FILTER = "Filter"
POST_FILTER = "PostFilter"
PRE_SCORE = "PreScore"
SCORE = "Score"
NORMALIZE_SCORE = "ScoreExtensionNormalize"
RESERVE = "Reserve"
UNRESERVE = "Unreserve"
PERMIT = "Permit"
PRE_BIND = "PreBind"
BIND = "Bind"
POST_BIND = "PostBind"
PRE_FILTER_EXTENSION = "PreFilterExtension"
# CycleState key where a PostFilter plugin that nominated a node leaves the pods it preempts there.
PREEMPTION_VICTIMS = "PostFilterPreemptionVictims"

_ROW_ZERO = np.zeros(1, dtype=np.int64)
_ROW_ZERO.flags.writeable = False
_SCRATCH_LAYOUTS = itertools.count(1 << 40)  # layout versions no real table reaches


def scratch_table(table: NodeTable, rows: np.ndarray) -> NodeTable:
    """A private copy of ``rows`` of ``table`` (``NodeTable.copy_rows``) to add and remove pods
    on without touching the cache: the nominated-pods pass and preemption's "what if" run the
    filters on it. Its ``layout_version`` is unique, so caches keyed by (table id, layout
    version) never mistake it for another table."""
    return table.copy_rows(rows, layout_version=next(_SCRATCH_LAYOUTS))


class WaitingPod:
    """A pod held by Permit plugins that returned Wait (kube's WaitingPod).

    Each waiting plugin must ``allow(plugin_name)``; one ``reject(plugin_name,
    message)`` ends the wait. Unanswered, the wait times out and the pod is
    requeued as unschedulable.
    """

    def __init__(self, pod: Pod, pending_plugins: set[str]) -> None:
        self.pod = pod
        self.pending_plugins = set(pending_plugins)
        self.rejection: Status | None = None
        self._done = asyncio.Event()

    def allow(self, plugin: str) -> None:
        self.pending_plugins.discard(plugin)
        if not self.pending_plugins:
            self._done.set()

    def reject(self, plugin: str, message: str) -> None:
        self.rejection = Status(Code.UNSCHEDULABLE, (message,), plugin)
        self._done.set()

    async def wait(self, timeout: float) -> Status:
        try:
            await asyncio.wait_for(self._done.wait(), timeout)
        except TimeoutError:
            return Status(Code.UNSCHEDULABLE, ("rejected due to timeout after waiting at permit",))
        return self.rejection if self.rejection is not None else Status()


class PodNominator(Protocol):
    """What the framework reads of the queue's nominator (``scorer.queue.Nominator``)."""

    def __bool__(self) -> bool: ...

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]: ...

    def nodes(self) -> list[str]: ...

    def node_of(self, pod: Pod) -> str | None: ...

    def add(self, pod: Pod, node_name: str = "") -> None: ...

    def delete(self, pod: Pod) -> None: ...


@attrs.define(slots=True)
class Handle:
    """What a plugin factory gets besides its args: the cluster and the profile.

    ``cache`` is the ClusterCache (read-only for plugins); ``binder`` binds a
    pod (``await binder.bind(pod, node_name)``; the assembly gives the cluster's
    ``ClusterWriter``, which VolumeBinding also writes through as a
    ``VolumeWriter``; None: no cluster to bind to); ``sources`` is the hub of metric inputs that
    metric-driven plugins read (None where the caller provides none);
    ``metrics`` the app's own Prometheus metrics.

    Set by the Scheduler for the profiles it runs (None when a plugin runs
    alone, in tests): ``nominator``, the queue's pods nominated to nodes
    (kube's PodNominator); ``recorder``, the EventRecorder (Events, pod
    status writes and victim deletions, enqueued without I/O); ``rng``, the
    scheduler's random source. ``framework`` is the profile's Framework
    (kube's PreemptHandle: filters on scratch nodes, PreFilter extensions).
    """

    cache: ClusterCache
    profile_name: str = "default-scheduler"
    binder: Binder | None = None
    sources: SourceHub | None = None
    metrics: SchedulerMetrics | None = None
    waiting_pods: dict[str, WaitingPod] = attrs.Factory(dict)  # by pod key
    nominator: PodNominator | None = None
    recorder: EventRecorder | None = None
    rng: random.Random | None = None
    framework: Framework | None = None

    def nominated_node(self, pod: Pod) -> str:
        """The node ``pod`` is nominated to: the nominator's (current even before the API write of
        ``nominatedNodeName`` came back), else the pod's own status; "" when none."""
        node = self.nominator.node_of(pod) if self.nominator else None
        return node or pod.nominated_node_name


@attrs.frozen(slots=True)
class FilterRecord:
    """The nodes one Filter plugin rejected (positions into the candidate rows, ascending)."""

    plugin: str
    positions: np.ndarray
    severity: np.ndarray
    reasons: tuple[tuple[str, np.ndarray], ...]

    def status_at(self, i: int) -> Status:
        verdict = FilterVerdict(len(self.positions))
        verdict.severity = self.severity
        verdict.reasons = list(self.reasons)
        return verdict.status_at(i, self.plugin)


_UNRESOLVABLE_LEVEL = severity_level(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)  # its severity in a FilterVerdict


class NodeStatuses(Mapping[str, Status]):
    """The Filter status of every rejected node of a cycle, by node name (what PostFilter
    plugins get), built lazily: a node's Status is made when it is looked up.

    ``rows`` are the table rows the Filter records' positions point into; later records,
    then ``excluded_rows`` (nodes a PreFilterResult left out), override earlier ones;
    with ``pre_filter_status`` every node of the table has that status. Iteration
    follows the order of first rejection. ``unresolvable_mask()`` is the
    UnschedulableAndUnresolvable nodes as a bool array over the table's rows (what
    preemption needs), without making any Status.
    """

    __slots__ = ("names", "index", "_rows", "_records", "_pre_filter", "_excluded", "_excluded_rows",
                 "_record_of", "_position_in", "_made")

    def __init__(self, names: Sequence[str], index: Mapping[str, int], rows: np.ndarray,
                 records: Sequence[FilterRecord], pre_filter_status: Status | None = None,
                 excluded_status: Status | None = None, excluded_rows: np.ndarray | None = None) -> None:
        self.names = names
        self.index = index
        self._rows = rows
        self._records = tuple(records)
        self._pre_filter = pre_filter_status
        self._excluded = excluded_status
        self._excluded_rows = excluded_rows if excluded_rows is not None and excluded_status is not None \
            else np.zeros(0, dtype=np.int64)
        # Per table row: the record that rejected it (-1 none, -2 excluded) and its position there.
        n = len(names)
        self._record_of = np.full(n, -1, dtype=np.int64)
        self._position_in = np.zeros(n, dtype=np.int64)
        if pre_filter_status is None:
            for k, record in enumerate(self._records):
                at = rows[record.positions]
                self._record_of[at] = k
                self._position_in[at] = np.arange(len(at))
            self._record_of[self._excluded_rows] = -2
        self._made: dict[int, Status] = {}

    def _row(self, name: str) -> int | None:
        row = self.index.get(name)
        if row is None or row >= len(self._record_of):
            return None
        if self._pre_filter is None and self._record_of[row] == -1:
            return None
        return row

    def __getitem__(self, name: str) -> Status:
        row = self._row(name)
        if row is None:
            raise KeyError(name)
        if self._pre_filter is not None:
            return self._pre_filter
        status = self._made.get(row)
        if status is None:
            k = int(self._record_of[row])
            if k == -2:
                status = cast(Status, self._excluded)
            else:
                status = self._records[k].status_at(int(self._position_in[row]))
            self._made[row] = status
        return status

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._row(name) is not None

    def __len__(self) -> int:
        if self._pre_filter is not None:
            return len(self._record_of)
        return int(np.count_nonzero(self._record_of != -1))

    def __iter__(self) -> Iterator[str]:
        names = self.names
        if self._pre_filter is not None:
            yield from names[: len(self._record_of)]
            return
        parts = [self._rows[record.positions] for record in self._records]
        parts.append(self._excluded_rows)
        every = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        _, first = np.unique(every, return_index=True)
        for row in every[np.sort(first)].tolist():
            yield names[row]

    def unresolvable_mask(self) -> np.ndarray:
        """Bool per table row: the node's status is UnschedulableAndUnresolvable."""
        n = len(self._record_of)
        if self._pre_filter is not None:
            return np.full(n, self._pre_filter.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE, dtype=bool)
        mask = np.zeros(n, dtype=bool)
        for record in self._records:
            mask[self._rows[record.positions]] = record.severity == _UNRESOLVABLE_LEVEL
        if self._excluded is not None:
            mask[self._excluded_rows] = self._excluded.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return mask


@attrs.frozen(slots=True)
class FilterOutcome:
    alive: np.ndarray
    records: tuple[FilterRecord, ...]
    error: Status | None = None


@attrs.frozen(slots=True)
class PluginScores:
    plugin: str
    weight: int
    raw: np.ndarray
    normalized: np.ndarray


@attrs.frozen(slots=True)
class ScoreOutcome:
    plugins: tuple[PluginScores, ...]
    totals: np.ndarray
    error: Status | None = None


def _extension_point(
    point: str, status_of: Callable[[Any], Status]
) -> Callable[[Callable[Concatenate[Framework, P], R]], Callable[Concatenate[Framework, P], R]]:
    """Record the duration and status of every run of an extension point (one
    ``perf_counter`` pair per run) when the framework has metrics, also of a point
    without plugins: kube-scheduler times every point it runs (its dashboards show
    Permit and PostBind of the default profile, which has no plugin there)."""

    def decorate(method: Callable[Concatenate[Framework, P], R]) -> Callable[Concatenate[Framework, P], R]:
        @functools.wraps(method)
        def run(self: Framework, /, *args: P.args, **kwargs: P.kwargs) -> R:
            metrics = self.handle.metrics
            if metrics is None:
                return method(self, *args, **kwargs)
            start = time.perf_counter()
            result = method(self, *args, **kwargs)
            seconds = time.perf_counter() - start
            metrics.observe_extension_point(point, status_of(result).code.label, self.profile_name, seconds)
            return result

        return run

    return decorate


class Framework:
    """The plugins of one profile, in extension-point order, with weights."""

    def __init__(self, profile: FrameworkProfile, catalog: Mapping[str, PluginInfo], handle: Handle) -> None:
        self.profile_name: str = profile.scheduler_name
        self.percentage_of_nodes_to_score: int | None = profile.percentage_of_nodes_to_score
        self.weights: dict[str, int] = dict(profile.weights)
        self.handle = handle
        if handle.framework is None:
            handle.framework = self
        if handle.metrics is not None:
            handle.metrics.declare_profile(self.profile_name)
        self.plugins: dict[str, Plugin] = {}
        self.points: dict[str, list[Plugin]] = {}
        # The distribution of every plugin not scorer's own, for the messages of its failures.
        self.origins: dict[str, str] = {}
        self._repeats = RepeatLog(logger)
        for point, names in profile.points.items():
            instances = []
            for name in names:
                plugin = self.plugins.get(name)
                if plugin is None:
                    info = catalog[name]
                    plugin = self._build(name, info, profile.args.get(name), handle)
                    self.plugins[name] = plugin
                    if info.source != "scorer":
                        self.origins[name] = info.origin
                if point not in extension_points_of(plugin):
                    raise PluginError(f'plugin "{name}" does not implement extension point {point}')
                instances.append(plugin)
            self.points[point] = instances
        # Typed views of ``points``: every plugin there implements the point (checked above).
        self.queue_sort = next(iter(cast(list[QueueSortPlugin], self.points.get("queueSort", []))), None)
        self.pre_enqueue_plugins = cast(list[PreEnqueuePlugin], self.points.get("preEnqueue", []))
        self.pre_filter_plugins = cast(list[PreFilterPlugin], self.points.get("preFilter", []))
        # PreFilter plugins whose state counts other pods (AddPod/RemovePod extensions).
        self.pre_filter_extensions = [cast(PreFilterExtensions, p) for p in self.pre_filter_plugins
                                      if callable(getattr(p, "add_pod", None))
                                      and callable(getattr(p, "remove_pod", None))]
        self.filter_plugins = cast(list[FilterPlugin], self.points.get("filter", []))
        self.post_filter_plugins = cast(list[PostFilterPlugin], self.points.get("postFilter", []))
        self.pre_score_plugins = cast(list[PreScorePlugin], self.points.get("preScore", []))
        self.score_plugins = cast(list[ScorePlugin], self.points.get("score", []))
        self.reserve_plugins = cast(list[ReservePlugin], self.points.get("reserve", []))
        self.permit_plugins = cast(list[PermitPlugin], self.points.get("permit", []))
        # Both styles as one vectorized call per plugin (the per-node ones adapted).
        self._filters = [(plugin, filter_call(plugin)) for plugin in self.filter_plugins]
        self._scores = [
            (plugin, score_call(plugin), plugin.normalize_score if isinstance(plugin, ScoreExtensions) else None)
            for plugin in self.score_plugins
        ]

    @staticmethod
    def _build(name: str, info: PluginInfo, args: Any, handle: Handle) -> Plugin:
        try:
            plugin = info.factory(args, handle)
        except Exception as exc:
            message = f"{info.describe()} failed to initialize: {exc}"
            if debug_enabled():
                logger.error("%s", message, exc_info=exc)
            raise PluginError(message) from exc
        if getattr(plugin, "name", None) != name:
            try:
                plugin.name = name
            except AttributeError:
                raise PluginError(f'plugin "{name}": its object has no writable "name"') from None
        return cast(Plugin, plugin)

    # -- calling plugins -----------------------------------------------------------
    def _call(self, point: str, plugin: Plugin, sampled: bool, fn: Callable[..., Any], args: tuple[Any, ...],
              convert: Convert[T]) -> tuple[T | None, Status]:
        """Call one plugin method: its result as ``(value, status)``; an exception, or a result
        ``convert`` refuses, becomes ``(None, Error status)``. Timed when ``sampled``."""
        start = time.perf_counter() if sampled else 0.0
        try:
            value, status = convert(fn(*args), plugin.name, args)
        except Exception as exc:
            value, status = None, plugin_failed(point, plugin.name, self.origins.get(plugin.name, ""), exc)
        if sampled:
            self._observe_plugin(plugin.name, point, status, start)
        return value, status

    async def _call_async(self, point: str, plugin: Plugin, sampled: bool, fn: Callable[..., Any],
                          args: tuple[Any, ...]) -> Status:
        """``_call`` for methods that may be coroutines (PreBind, Bind, PostBind)."""
        start = time.perf_counter() if sampled else 0.0
        try:
            result = fn(*args)
            _, status = to_status(await result if inspect.isawaitable(result) else result, plugin.name, args)
        except Exception as exc:
            status = plugin_failed(point, plugin.name, self.origins.get(plugin.name, ""), exc)
        if sampled:
            self._observe_plugin(plugin.name, point, status, start)
        return status

    def _observe_plugin(self, plugin: str, point: str, status: Status, start: float) -> None:
        metrics = self.handle.metrics
        if metrics is not None:
            metrics.observe_plugin(plugin, point, status.code.label, time.perf_counter() - start)

    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def list_plugins(self) -> dict[str, list[str]]:
        return {point: [p.name for p in plugins] for point, plugins in self.points.items()}

    # -- queue -----------------------------------------------------------------
    def sort_function(self) -> Callable[[QueuedPodInfo, QueuedPodInfo], bool]:
        """What the queue orders pods with: scorer's own queueSort plugin's ``less`` itself (the
        queue calls it ~20 times per pop); for another distribution's, ``less``, which logs a
        plugin that raises."""
        if self.queue_sort is not None and self.queue_sort.name not in self.origins:
            return self.queue_sort.less
        return self.less

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """The queueSort plugin's Less; one that raises is logged (once per 30 s, with a count) and
        the two pods are taken as equal, so the queue keeps working."""
        plugin = self.queue_sort
        if plugin is None:
            raise PluginError(f'profile "{self.profile_name}" has no queueSort plugin')
        try:
            return bool(plugin.less(a, b))
        except Exception as exc:
            status = plugin_failed(QUEUE_SORT, plugin.name, self.origins.get(plugin.name, ""), exc)
            self._repeats.error(f"queueSort {plugin.name}", "%s (pods %s and %s taken as equal)", status.message(),
                                a.pod.key, b.pod.key)
            return False

    def run_pre_enqueue(self, pod: Pod) -> Status:
        """PreEnqueue plugins in order; the first that does not admit the pod gates it. An Error
        (the plugin raised) is also logged: no cycle runs for a gated pod to report it."""
        for plugin in self.pre_enqueue_plugins:
            _, status = self._call(PRE_ENQUEUE, plugin, False, plugin.pre_enqueue, (pod,), to_status)
            if not status.is_success():
                if status.code == Code.ERROR:
                    logger.error("%s (pod %s stays gated until it changes)", status.message(), pod.key)
                return status
        return SUCCESS

    # -- filtering ---------------------------------------------------------------
    @_extension_point(PRE_FILTER, lambda result: result[1])
    def run_pre_filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> tuple[frozenset[str] | None, Status]:
        """Returns the node names PreFilter narrowed the search to (None = all) and a status.

        A rejecting status carries the plugin name; Skip marks the plugin's
        Filter as skipped for this cycle. The plugins that narrowed the search
        are in ``state.narrowed_by`` afterwards (for the absent nodes' reason).
        This is where a cycle draws whether it records per-plugin metrics.
        """
        metrics = self.handle.metrics
        sampled = state.record_plugin_metrics = metrics is not None and metrics.sample_plugins()
        allowed: frozenset[str] | None = None
        for plugin in self.pre_filter_plugins:
            names, status = self._call(PRE_FILTER, plugin, sampled, plugin.pre_filter, (state, pod, batch),
                                       to_pre_filter)
            if names is not None:
                state.narrowed_by.append(plugin.name)
                allowed = names if allowed is None else allowed & names
            if status.is_skip():
                state.skip_filter_plugins.add(plugin.name)
                continue
            if not status.is_success():
                return allowed, status
            if allowed is not None and not allowed:
                return allowed, Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    (f"node(s) didn't satisfy plugin(s) [{', '.join(state.narrowed_by)}] simultaneously",),
                    plugin.name,
                )
        return allowed, SUCCESS

    @_extension_point(FILTER, lambda outcome: outcome.error or SUCCESS)
    def run_filters(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> FilterOutcome:
        """Run Filter plugins in order; a node rejected by one is not shown to the next."""
        sampled = state.record_plugin_metrics
        skipped = state.skip_filter_plugins
        alive = np.ones(len(rows), dtype=bool)
        records: list[FilterRecord] = []
        if not len(rows):
            return FilterOutcome(alive, ())
        positions: np.ndarray | None = None  # None until a node is rejected: every position
        batch = NodeBatch(table, rows)
        for plugin, call in self._filters:
            if plugin.name in skipped:
                continue
            if positions is not None and not len(positions):
                break
            verdict, status = self._call(FILTER, plugin, sampled, call, (state, pod, batch), to_verdict)
            if status is not SUCCESS and not status.is_success():
                return FilterOutcome(alive, tuple(records), status)
            if verdict is None or not verdict.reasons:  # a verdict rejects a node only with a reason
                continue
            idx, severity = verdict.rejected()
            if not len(idx):
                continue
            at = idx if positions is None else positions[idx]  # None: the batch is every position
            records.append(FilterRecord(plugin.name, at, severity,
                                        tuple((reason, mask[idx]) for reason, mask in verdict.reasons)))
            alive[at] = False
            positions = alive.nonzero()[0]  # the next plugin sees the nodes still alive
            batch = NodeBatch(table, rows[positions])
        return FilterOutcome(alive, tuple(records))

    def run_filters_with_nominated_pods(self, state: CycleState, pod: Pod, table: NodeTable,
                                        rows: np.ndarray) -> FilterOutcome:
        """kube's RunFilterPluginsWithNominatedPods over a batch: ``run_filters``, then, for
        the nodes still alive that have nominated pods of priority >= the pod's (other
        than the pod itself), the filters again with those pods added to a scratch copy
        of the node and to a clone of ``state`` (PreFilter ``add_pod`` extensions). A
        node passes only if both passes do. Nodes without such pods take no extra
        work, and without nominations this is ``run_filters``."""
        outcome = self.run_filters(state, pod, table, rows)
        nominator = self.handle.nominator
        if outcome.error is not None or not nominator or not len(rows):
            return outcome
        nominated_rows = [row for row in (table.index.get(name) for name in nominator.nodes()) if row is not None]
        if not nominated_rows:
            return outcome
        has_nominated = np.zeros(len(table), dtype=bool)
        has_nominated[nominated_rows] = True
        candidates = np.flatnonzero(has_nominated[rows] & outcome.alive)
        if not len(candidates):
            return outcome
        alive = outcome.alive
        records = list(outcome.records)
        me = pod.uid or pod.key
        concerned: list[tuple[int, int, list[Pod]]] = []  # (position, row, pods added)
        for pos in candidates.tolist():
            row = int(rows[pos])
            added = [p for p in nominator.nominated_pods_for_node(table.names[row])
                     if p.priority >= pod.priority and (p.uid or p.key) != me]
            if added:
                concerned.append((pos, row, added))
        if not concerned:
            return outcome
        if not self.active_pre_filter_extensions(state):
            # No PreFilter state depends on other pods: every node's filters at once, on one scratch copy.
            return self._filter_with_pods_added_batch(state, pod, table, outcome, concerned)
        for pos, row, added in concerned:
            extra = self._filter_with_pods_added(state, pod, table, row, added)
            if extra.error is not None:
                return FilterOutcome(alive, tuple(records), extra.error)
            if extra.alive[0]:
                continue
            if alive is outcome.alive:
                alive = alive.copy()
            alive[pos] = False
            position = np.array([pos], dtype=np.int64)
            records.extend(attrs.evolve(record, positions=position) for record in extra.records)
        if alive is outcome.alive:
            return outcome
        return FilterOutcome(alive, tuple(records))

    def _filter_with_pods_added_batch(self, state: CycleState, pod: Pod, table: NodeTable, outcome: FilterOutcome,
                                      concerned: list[tuple[int, int, list[Pod]]]) -> FilterOutcome:
        """``_filter_with_pods_added`` for several nodes in one Filter call (no active PreFilter
        extension: the state does not change with the pods added)."""
        scratch = scratch_table(table, np.array([row for _, row, _ in concerned], dtype=np.int64))
        scratch.add_pods_at([i for i, (_, _, added) in enumerate(concerned) for _ in added],
                            [other for _, _, added in concerned for other in added])
        extra = self.run_filters(state.clone(), pod, scratch, scratch.rows())
        if extra.error is not None:
            return FilterOutcome(outcome.alive, outcome.records, extra.error)
        if extra.alive.all():
            return outcome
        where = np.array([pos for pos, _, _ in concerned], dtype=np.int64)
        alive = outcome.alive.copy()
        alive[where[~extra.alive]] = False
        records = list(outcome.records)
        records.extend(attrs.evolve(record, positions=where[record.positions]) for record in extra.records)
        return FilterOutcome(alive, tuple(records))

    def _filter_with_pods_added(self, state: CycleState, pod: Pod, table: NodeTable, row: int,
                                added: list[Pod]) -> FilterOutcome:
        """The filters on a scratch copy of one node with ``added`` pods on it (kube's addNominatedPods)."""
        scratch = scratch_table(table, np.array([row], dtype=np.int64))
        name = scratch.names[0]
        extended = state.clone()
        extensions = self.active_pre_filter_extensions(state)
        for other in added:
            scratch.add_pod(other, name)
            if extensions:
                status = self.run_pre_filter_extension_add_pod(extended, pod, other, scratch.node_info(0))
                if not status.is_success():
                    return FilterOutcome(np.zeros(1, dtype=bool), (), status)
        return self.run_filters(extended, pod, scratch, _ROW_ZERO)

    def active_pre_filter_extensions(self, state: CycleState) -> list[PreFilterExtensions]:
        """The PreFilter plugins with AddPod/RemovePod extensions whose Filter runs this cycle."""
        skipped = state.skip_filter_plugins
        return [p for p in self.pre_filter_extensions if p.name not in skipped] if skipped else \
            self.pre_filter_extensions

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod,
                                         node: NodeInfo) -> Status:
        """kube's RunPreFilterExtensionAddPod: every active extension's ``add_pod``, in order;
        a failure is an Error naming the plugin."""
        return self._run_extension("AddPod", "add_pod", state, pod, pod_to_add, node)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod,
                                            node: NodeInfo) -> Status:
        """kube's RunPreFilterExtensionRemovePod (see ``run_pre_filter_extension_add_pod``)."""
        return self._run_extension("RemovePod", "remove_pod", state, pod, pod_to_remove, node)

    def _run_extension(self, what: str, method: str, state: CycleState, pod: Pod, other: Pod,
                       node: NodeInfo) -> Status:
        for plugin in self.active_pre_filter_extensions(state):
            _, status = self._call(PRE_FILTER_EXTENSION + what, plugin, False, getattr(plugin, method),
                                   (state, pod, other, node), to_status)
            if not status.is_success():
                return Status.error(f'error while running {what} for plugin "{plugin.name}" while scheduling '
                                    f'pod "{pod.key}": {status.message()}', plugin.name)
        return SUCCESS

    @_extension_point(POST_FILTER, lambda result: result[1])
    def run_post_filter(self, state: CycleState, pod: Pod,
                        statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        messages = []
        for plugin in self.post_filter_plugins:
            node, status = self._call(POST_FILTER, plugin, state.record_plugin_metrics, plugin.post_filter,
                                      (state, pod, statuses), to_post_filter)
            if status.is_success():
                return node, status.with_plugin(plugin.name)
            if status.code == Code.ERROR:
                return None, status
            if status.message():
                messages.append(status.message())
        return None, Status(Code.UNSCHEDULABLE, (", ".join(messages),) if messages else ())

    # -- scoring -----------------------------------------------------------------
    @_extension_point(PRE_SCORE, lambda status: status)
    def run_pre_score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> Status:
        sampled = state.record_plugin_metrics
        for plugin in self.pre_score_plugins:
            _, status = self._call(PRE_SCORE, plugin, sampled, plugin.pre_score, (state, pod, batch), to_status)
            if status.is_skip():
                state.skip_score_plugins.add(plugin.name)
            elif not status.is_success():
                return status
        return SUCCESS

    @_extension_point(SCORE, lambda outcome: outcome.error or SUCCESS)
    def run_score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> ScoreOutcome:
        sampled = state.record_plugin_metrics
        skipped = state.skip_score_plugins
        size = len(batch)
        results: list[PluginScores] = []
        totals = np.zeros(size, dtype=np.int64)
        for plugin, call, normalize in self._scores:
            if plugin.name in skipped:
                continue
            raw, status = self._call(SCORE, plugin, sampled, call, (state, pod, batch), to_scores)
            normalized = raw
            if raw is not None and normalize is not None:
                normalized, status = self._call(NORMALIZE_SCORE, plugin, sampled, normalize,
                                                (state, pod, raw.copy()), to_normalized)
            if raw is None or normalized is None:
                return self._score_outcome(results, totals, batch, status)
            if len(normalized) != size:
                results.append(PluginScores(plugin.name, 1, raw, normalized))
                return self._score_outcome(results, totals, batch)
            weight = self.weights.get(plugin.name, 1)
            totals += normalized if weight == 1 else normalized * weight
            results.append(PluginScores(plugin.name, weight, raw, normalized))
        return self._score_outcome(results, totals, batch)

    @staticmethod
    def _score_outcome(results: list[PluginScores], totals: np.ndarray, batch: NodeBatch,
                       error: Status | None = None) -> ScoreOutcome:
        """The outcome of the plugins scored, in order. The first one whose normalized scores are not
        one per node in [MIN_NODE_SCORE, MAX_NODE_SCORE] ends it with an Error (as if it had run last);
        else ``error`` (of a plugin that failed after them) does, if any."""
        size = len(batch)
        wrong_length = bool(results) and len(results[-1].normalized) != size  # (it ended the loop)
        # Every plugin's scores in one reduction, as uint64 (negative scores are above the maximum too).
        if not wrong_length and not (size and results and np.concatenate(
                [result.normalized for result in results]).view(np.uint64).max() > MAX_NODE_SCORE):
            return ScoreOutcome(tuple(results), totals, error)
        for i, result in enumerate(results):
            normalized = result.normalized
            if len(normalized) != size:
                message = f"{len(normalized)} scores for {size} nodes after normalizing"
            elif size and normalized.view(np.uint64).max() > MAX_NODE_SCORE:
                j = int(np.flatnonzero((normalized < MIN_NODE_SCORE) | (normalized > MAX_NODE_SCORE))[0])
                message = (f'an invalid score {int(normalized[j])} for node "{batch.names[j]}", it should in the '
                           f"range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")
            else:
                continue
            return ScoreOutcome(tuple(results[:i]), totals,
                                Status.error(f'plugin "{result.plugin}" returns {message}', result.plugin))
        return ScoreOutcome(tuple(results), totals, error)  # (not reached: the reduction covered every plugin)

    # -- reserve, permit, binding ------------------------------------------------
    @_extension_point(RESERVE, lambda status: status)
    def run_reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        sampled = state.record_plugin_metrics
        for plugin in self.reserve_plugins:
            _, status = self._call(RESERVE, plugin, sampled, plugin.reserve, (state, pod, node), to_status)
            if not status.is_success():
                return status
        return SUCCESS

    @_extension_point(UNRESERVE, lambda _: SUCCESS)
    def run_unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order. One that fails is logged
        (plugin, pod, node) and the others still run, as in kube-scheduler."""
        sampled = state.record_plugin_metrics
        for plugin in reversed(self.reserve_plugins):
            unreserve = getattr(plugin, "unreserve", None)
            if unreserve is None:
                continue
            _, status = self._call(UNRESERVE, plugin, sampled, unreserve, (state, pod, node), to_status)
            if not status.is_success():
                logger.error("%s (pod %s, node %s)", status.message(), pod.key, node)

    @_extension_point(PERMIT, lambda result: result[0])
    def run_permit(self, state: CycleState, pod: Pod, node: str) -> tuple[Status, float]:
        """Returns (status, wait timeout). Wait statuses are collected with the smallest timeout;
        the waiting plugins are registered in ``handle.waiting_pods`` for them to allow or reject."""
        sampled = state.record_plugin_metrics
        wait: float | None = None
        waiting: set[str] = set()
        for plugin in self.permit_plugins:
            timeout, status = self._call(PERMIT, plugin, sampled, plugin.permit, (state, pod, node), to_permit)
            if status.code == Code.WAIT:
                timeout = timeout or 0.0
                wait = timeout if wait is None else min(wait, timeout)
                waiting.add(plugin.name)
            elif not status.is_success():
                return status, 0.0
        if wait is not None:
            self.handle.waiting_pods[pod.key] = WaitingPod(pod, waiting)
            return Status(Code.WAIT), wait
        return SUCCESS, 0.0

    async def run_pre_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        return await self._run_binding(PRE_BIND, "preBind", "pre_bind", state, pod, node)

    async def run_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        """Bind plugins in order until one succeeds; Skip passes to the next (all Skip -> Skip)."""
        return await self._run_binding(BIND, "bind", "bind", state, pod, node, first_success=True)

    async def run_post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        """PostBind plugins (informational: the pod is bound); one that fails is logged."""
        status = await self._run_binding(POST_BIND, "postBind", "post_bind", state, pod, node)
        if not status.is_success():
            logger.error("%s (pod %s, node %s)", status.message(), pod.key, node)

    async def _run_binding(self, point: str, key: str, method: str, state: CycleState, pod: Pod, node: str,
                           *, first_success: bool = False) -> Status:
        plugins = self.points.get(key, [])
        metrics = self.handle.metrics
        start = time.perf_counter() if metrics is not None else 0.0
        outcome = Status(Code.SKIP) if first_success else SUCCESS
        for plugin in plugins:
            status = await self._call_async(point, plugin, state.record_plugin_metrics, getattr(plugin, method),
                                            (state, pod, node))
            if status.is_skip():
                continue
            if not status.is_success() or first_success:
                if point == PRE_BIND and status.code == Code.ERROR and not status.message().startswith("running "):
                    # kube's RunPreBindPlugins wraps a plugin's error so the event names the plugin.
                    status = Status.error(f'running {point} plugin "{plugin.name}": {status.message()}',
                                          plugin.name)
                outcome = status
                break
        if metrics is not None:
            metrics.observe_extension_point(point, outcome.code.label, self.profile_name, time.perf_counter() - start)
        return outcome
