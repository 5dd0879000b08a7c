"""Framework: one profile's plugins, instantiated and run at each extension point.

Every plugin call goes through ``_guard``: a plugin that raises becomes an
Error status naming the plugin and the extension point, so the scheduler
keeps running. Filter and Score accept both plugin styles (vectorized or
per node) and present both as vectorized to the scheduling algorithm.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from scorer.cache import ClusterCache
from scorer.errors import PluginError
from scorer.framework.catalog import PluginInfo, extension_points_of
from scorer.framework.cycle_state import CycleState
from scorer.framework.status import Code, Status
from scorer.framework.types import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    FilterVerdict,
    NodeBatch,
    PreFilterResult,
)
from scorer.metrics import SchedulerMetrics
from scorer.sources.hub import SourceHub


class _PluginRaised(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


class WaitingPod:
    """A pod held by Permit plugins that returned Wait (kube's WaitingPod).

    Each waiting plugin must ``allow(plugin_name)``; one ``reject(plugin_name,
    message)`` ends the wait. Unanswered, the wait times out and the pod is
    requeued as unschedulable.
    """

    def __init__(self, pod: Any, pending_plugins: set[str]) -> None:
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


@attrs.define(slots=True)
class Handle:
    """What a plugin factory gets besides its args: the cluster and the profile.

    ``cache`` is the ClusterCache (read-only for plugins); ``binder`` binds a
    pod (``await binder.bind(pod, node_name)``); ``sources`` is the hub of
    metric inputs that metric-driven plugins read (None where the caller
    provides none); ``metrics`` the app's own Prometheus metrics.
    """

    cache: ClusterCache
    profile_name: str = "default-scheduler"
    binder: Any = None
    sources: SourceHub | None = None
    metrics: SchedulerMetrics | None = None
    waiting_pods: dict[str, WaitingPod] = attrs.Factory(dict)  # by pod key


@attrs.frozen(slots=True)
class FilterRecord:
    """The nodes one Filter plugin rejected (positions into the candidate rows)."""

    plugin: str
    positions: np.ndarray
    severity: np.ndarray
    reasons: tuple[tuple[str, np.ndarray], ...]

    def status_at(self, i: int) -> Status:
        verdict = FilterVerdict(len(self.positions))
        verdict.severity = self.severity
        verdict.reasons = list(self.reasons)
        return verdict.status_at(i, self.plugin)


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


def _status(value: Any, plugin: str) -> Status:
    if value is None:
        return Status(plugin=plugin)
    if isinstance(value, Status):
        return value.with_plugin(plugin)
    raise TypeError(f"expected a Status or None, got {type(value).__name__}")


class Framework:
    """The plugins of one profile, in extension-point order, with weights."""

    def __init__(
        self,
        resolved: Any,
        catalog: Mapping[str, PluginInfo],
        handle: Handle,
    ) -> None:
        self.profile_name: str = resolved.scheduler_name
        self.percentage_of_nodes_to_score: int | None = resolved.percentage_of_nodes_to_score
        self.weights: dict[str, int] = dict(resolved.weights)
        self.handle = handle
        self.plugins: dict[str, Any] = {}
        self.points: dict[str, list[Any]] = {}
        for point, names in resolved.points.items():
            instances = []
            for name in names:
                plugin = self.plugins.get(name)
                if plugin is None:
                    plugin = self._build(name, catalog[name], resolved.args.get(name), handle)
                    self.plugins[name] = plugin
                if point not in extension_points_of(plugin):

                    raise PluginError(f'plugin "{name}" does not implement extension point {point}')
                instances.append(plugin)
            self.points[point] = instances
        self.queue_sort = (self.points.get("queueSort") or [None])[0]
        self.filter_plugins = self.points.get("filter", [])
        self.score_plugins = self.points.get("score", [])

    @staticmethod
    def _build(name: str, info: PluginInfo, args: Any, handle: Handle) -> Any:
        try:
            plugin = info.factory(args, handle)
        except Exception as exc:
            raise PluginError(f'plugin "{name}" ({info.source}) failed to initialize: {exc}') from exc
        if getattr(plugin, "name", None) != name:
            try:
                plugin.name = name
            except AttributeError:
                raise PluginError(f'plugin "{name}": its object has no writable "name"') from None
        return plugin

    # -- helpers ---------------------------------------------------------------
    @staticmethod
    def _guard(plugin: Any, point: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise _PluginRaised(
                Status.error(f'running {point} plugin "{plugin.name}": {type(exc).__name__}: {exc}', plugin.name)
            ) from exc

    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def list_plugins(self) -> dict[str, list[str]]:
        return {point: [p.name for p in plugins] for point, plugins in self.points.items()}

    # -- queue -----------------------------------------------------------------
    def less(self, a: Any, b: Any) -> bool:
        return bool(self.queue_sort.less(a, b))

    def run_pre_enqueue(self, pod: Any) -> Status:
        for plugin in self.points.get("preEnqueue", []):
            try:
                status = _status(self._guard(plugin, "PreEnqueue", plugin.pre_enqueue, pod), plugin.name)
            except (_PluginRaised, TypeError) as exc:
                status = exc.status if isinstance(exc, _PluginRaised) else Status.error(str(exc), plugin.name)
            if not status.is_success():
                return status
        return Status()

    # -- filtering ---------------------------------------------------------------
    def run_pre_filter(self, state: CycleState, pod: Any, batch: NodeBatch) -> tuple[frozenset[str] | None, Status]:
        """Returns the node names PreFilter narrowed the search to (None = all) and a status.

        A rejecting status carries the plugin name; Skip marks the plugin's
        Filter as skipped for this cycle. The plugins that narrowed the search
        are in ``state.narrowed_by`` afterwards (for the absent nodes' reason).
        """
        allowed: frozenset[str] | None = None
        for plugin in self.points.get("preFilter", []):
            try:
                result = self._guard(plugin, "PreFilter", plugin.pre_filter, state, pod, batch)
                if isinstance(result, PreFilterResult):
                    status = result.status.with_plugin(plugin.name)
                    if result.node_names is not None:
                        state.narrowed_by.append(plugin.name)
                        allowed = result.node_names if allowed is None else allowed & result.node_names
                else:
                    status = _status(result, plugin.name)
            except _PluginRaised as exc:
                return allowed, exc.status
            except TypeError as exc:
                return allowed, Status.error(f'PreFilter plugin "{plugin.name}": {exc}', plugin.name)
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
        return allowed, Status()

    def _filter_one(self, plugin: Any, state: CycleState, pod: Any, batch: NodeBatch) -> FilterVerdict:
        fn = getattr(plugin, "filter_batch", None)
        if fn is not None:
            verdict = self._guard(plugin, "Filter", fn, state, pod, batch)
            if verdict is None:
                return FilterVerdict(len(batch))
            if not isinstance(verdict, FilterVerdict) or verdict.size != len(batch):
                raise _PluginRaised(
                    Status.error(f'Filter plugin "{plugin.name}" returned {verdict!r}, expected a '
                                 f"FilterVerdict of {len(batch)} nodes", plugin.name)
                )
            return verdict
        verdict = FilterVerdict(len(batch))
        for i, info in enumerate(batch.node_infos()):
            result = self._guard(plugin, "Filter", plugin.filter, state, pod, info)
            try:
                status = _status(result, plugin.name)
            except TypeError as exc:
                raise _PluginRaised(Status.error(f'Filter plugin "{plugin.name}": {exc}', plugin.name)) from None
            if not status.is_success() and not status.is_skip():
                verdict.reject_one(i, status)
        return verdict

    def run_filters(self, state: CycleState, pod: Any, table: Any, rows: np.ndarray) -> FilterOutcome:
        """Run Filter plugins in order; a node rejected by one is not shown to the next."""
        alive = np.ones(len(rows), dtype=bool)
        records: list[FilterRecord] = []
        for plugin in self.filter_plugins:
            if plugin.name in state.skip_filter_plugins:
                continue
            positions = np.flatnonzero(alive)
            if len(positions) == 0:
                break
            batch = NodeBatch(table, rows[positions])
            try:
                verdict = self._filter_one(plugin, state, pod, batch)
            except _PluginRaised as exc:
                return FilterOutcome(alive, tuple(records), exc.status)
            failed = verdict.failed
            if not failed.any():
                continue
            errors = np.flatnonzero(verdict.severity == 4)
            if len(errors):
                status = verdict.status_at(int(errors[0]), plugin.name)
                return FilterOutcome(alive, tuple(records), status)
            idx = np.flatnonzero(failed)
            records.append(
                FilterRecord(
                    plugin=plugin.name,
                    positions=positions[idx],
                    severity=verdict.severity[idx],
                    reasons=tuple((reason, mask[idx]) for reason, mask in verdict.reasons),
                )
            )
            alive[positions[idx]] = False
        return FilterOutcome(alive, tuple(records))

    def run_post_filter(self, state: CycleState, pod: Any, statuses: dict[str, Status]) -> tuple[str | None, Status]:
        messages = []
        for plugin in self.points.get("postFilter", []):
            try:
                result = self._guard(plugin, "PostFilter", plugin.post_filter, state, pod, statuses)
            except _PluginRaised as exc:
                return None, exc.status
            node, status = result if isinstance(result, tuple) else (None, result)
            status = _status(status, plugin.name)
            if status.is_success():
                return node, status
            if status.code == Code.ERROR:
                return None, status
            if status.message():
                messages.append(status.message())
        return None, Status(Code.UNSCHEDULABLE, (", ".join(messages),) if messages else ())

    # -- scoring -----------------------------------------------------------------
    def run_pre_score(self, state: CycleState, pod: Any, batch: NodeBatch) -> Status:
        for plugin in self.points.get("preScore", []):
            try:
                status = _status(self._guard(plugin, "PreScore", plugin.pre_score, state, pod, batch), plugin.name)
            except _PluginRaised as exc:
                return exc.status
            except TypeError as exc:
                return Status.error(f'PreScore plugin "{plugin.name}": {exc}', plugin.name)
            if status.is_skip():
                state.skip_score_plugins.add(plugin.name)
            elif not status.is_success():
                return status
        return Status()

    def _score_one(self, plugin: Any, state: CycleState, pod: Any, batch: NodeBatch) -> np.ndarray:
        fn = getattr(plugin, "score_batch", None)
        if fn is not None:
            raw = self._guard(plugin, "Score", fn, state, pod, batch)
            try:
                scores = np.asarray(raw, dtype=np.int64).reshape(-1)
            except (TypeError, ValueError) as exc:
                raise _PluginRaised(Status.error(f'Score plugin "{plugin.name}": {exc}', plugin.name)) from None
            if len(scores) != len(batch):
                raise _PluginRaised(Status.error(
                    f'Score plugin "{plugin.name}" returned {len(scores)} scores for {len(batch)} nodes', plugin.name))
            return scores
        scores = np.zeros(len(batch), dtype=np.int64)
        for i, info in enumerate(batch.node_infos()):
            result = self._guard(plugin, "Score", plugin.score, state, pod, info)
            if isinstance(result, tuple):
                value, status = result
                status = _status(status, plugin.name)
                if not status.is_success():
                    raise _PluginRaised(status)
            else:
                value = result
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise _PluginRaised(Status.error(
                    f'Score plugin "{plugin.name}" returned {value!r} for node "{info.name}", expected an int',
                    plugin.name))
            scores[i] = int(value)
        return scores

    def run_score(self, state: CycleState, pod: Any, batch: NodeBatch) -> ScoreOutcome:
        results: list[PluginScores] = []
        totals = np.zeros(len(batch), dtype=np.int64)
        for plugin in self.score_plugins:
            if plugin.name in state.skip_score_plugins:
                continue
            try:
                raw = self._score_one(plugin, state, pod, batch)
                normalized = raw.copy()
                normalize = getattr(plugin, "normalize_score", None)
                if normalize is not None:
                    out = self._guard(plugin, "NormalizeScore", normalize, state, pod, normalized)
                    if out is not None:
                        normalized = np.asarray(out, dtype=np.int64).reshape(-1)
            except _PluginRaised as exc:
                return ScoreOutcome(tuple(results), totals, exc.status)
            bad = np.flatnonzero((normalized < MIN_NODE_SCORE) | (normalized > MAX_NODE_SCORE))
            if len(bad) or len(normalized) != len(batch):
                i = int(bad[0]) if len(bad) else 0
                value = int(normalized[i]) if len(normalized) else None
                return ScoreOutcome(tuple(results), totals, Status.error(
                    f'plugin "{plugin.name}" returns an invalid score {value} for node '
                    f'"{batch.names[i]}", it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] '
                    "after normalizing", plugin.name))
            weight = self.weights.get(plugin.name, 1)
            totals += normalized * weight
            results.append(PluginScores(plugin.name, weight, raw, normalized))
        return ScoreOutcome(tuple(results), totals)

    # -- reserve, permit, binding ------------------------------------------------
    def _run_simple(self, point: str, method: str, state: CycleState, pod: Any, node: str) -> Status:
        for plugin in self.points.get(point, []):
            try:
                status = _status(self._guard(plugin, point[0].upper() + point[1:], getattr(plugin, method),
                                             state, pod, node), plugin.name)
            except _PluginRaised as exc:
                return exc.status
            except TypeError as exc:
                return Status.error(f'{point} plugin "{plugin.name}": {exc}', plugin.name)
            if not status.is_success():
                return status
        return Status()

    def run_reserve(self, state: CycleState, pod: Any, node: str) -> Status:
        return self._run_simple("reserve", "reserve", state, pod, node)

    def run_unreserve(self, state: CycleState, pod: Any, node: str) -> None:
        for plugin in reversed(self.points.get("reserve", [])):
            fn = getattr(plugin, "unreserve", None)
            if fn is None:
                continue
            try:
                fn(state, pod, node)
            except Exception:  # unreserve must not stop the others
                pass

    def run_permit(self, state: CycleState, pod: Any, node: str) -> tuple[Status, float]:
        """Returns (status, wait timeout). Wait statuses are collected with the smallest timeout;
        the waiting plugins are registered in ``handle.waiting_pods`` for them to allow or reject."""
        wait: float | None = None
        waiting: set[str] = set()
        for plugin in self.points.get("permit", []):
            try:
                result = self._guard(plugin, "Permit", plugin.permit, state, pod, node)
            except _PluginRaised as exc:
                return exc.status, 0.0
            timeout = 0.0
            if isinstance(result, tuple):
                result, timeout = result
            status = _status(result, plugin.name)
            if status.code == Code.WAIT:
                wait = timeout if wait is None else min(wait, timeout)
                waiting.add(plugin.name)
            elif not status.is_success():
                return status, 0.0
        if wait is not None:
            self.handle.waiting_pods[pod.key] = WaitingPod(pod, waiting)
            return Status(Code.WAIT), wait
        return Status(), 0.0

    async def _run_async(self, point: str, method: str, state: CycleState, pod: Any, node: str,
                         stop_on_success: bool = False) -> Status:
        label = point[0].upper() + point[1:]
        for plugin in self.points.get(point, []):
            try:
                result = getattr(plugin, method)(state, pod, node)
                if inspect.isawaitable(result):
                    result = await result
                status = _status(result, plugin.name)
            except Exception as exc:
                return Status.error(f'running {label} plugin "{plugin.name}": {type(exc).__name__}: {exc}',
                                    plugin.name)
            if status.is_skip():
                continue
            if not status.is_success():
                return status
            if stop_on_success:
                return status
        if stop_on_success:
            return Status(Code.SKIP)
        return Status()

    async def run_pre_bind(self, state: CycleState, pod: Any, node: str) -> Status:
        return await self._run_async("preBind", "pre_bind", state, pod, node)

    async def run_bind(self, state: CycleState, pod: Any, node: str) -> Status:
        """Bind plugins in order until one succeeds; Skip passes to the next."""
        return await self._run_async("bind", "bind", state, pod, node, stop_on_success=True)

    async def run_post_bind(self, state: CycleState, pod: Any, node: str) -> None:
        await self._run_async("postBind", "post_bind", state, pod, node)

