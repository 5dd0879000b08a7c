"""LoadAware: filter and score nodes by their live CPU (and optionally memory) utilization.

In the spirit of Trimaran's TargetLoadPacking and Koordinator's
LoadAwareScheduling. One bulk Prometheus query per metric runs in the
background every ``source.refreshInterval`` (``cpu_utilization``, and
``memory_utilization`` when memory is scored or thresholded); Filter and
Score only read the last values.

Per node and resource the plugin predicts the utilization the node will
have (percent of allocatable)::

    predicted = 100 * (measured
                       + (sum of in-flight pods' estimates + incoming pod's estimate) / allocatable)

where ``measured`` is the metric (a fraction 0..1, clipped to it), the
in-flight pods are those placed on the node since its last sample
(``policy.inFlight``), and a pod's estimate is its non-zero request (kube's
100m CPU / 200Mi memory when it requests nothing) times
``estimator.<resource>ScalingFactor`` (Koordinator's 0.85 / 0.7).

Score (``strategy``), with the predicted utilization U and the target T
in percent:

* ``TargetPacking`` (Trimaran TLP): U > 100 -> 0; U <= T ->
  (100 - T) * U / T + T; else T * (100 - U) / (100 - T);
* ``LeastUtilized``: 100 - U, clipped to [0, 100].

Each resource's score is floored to an int, nodes without fresh data get the
data policy's score (``reader.apply_policy``), and the plugin's score is the
floored weighted mean over ``resources``. The raw score (``scorer explain``)
is the weighted mean predicted utilization in percent (rounded half up),
-1 when a scored resource has no fresh value for the node.

Filter (off by default): a node whose measured + in-flight utilization
(the incoming pod not included) is above ``usageThresholds.<resource>``
percent is Unschedulable; with ``policy.onMissing: filter`` nodes without
fresh data are rejected too (``reader.filter_unusable``). A node cooling
down is not a cluster event (metrics refresh in the background), so a
rejected pod is retried on the events that can lower the prediction (a
new node, more allocatable, a pod deleted) and at the latest when the
unschedulable queue flushes (5 minutes, kube's podMaxInUnschedulablePodsDuration).

Arguments are bounded (factors at most 10, weights 100, percentages 100),
so no prediction overflows; raw scores are capped at ``MAX_RAW_SCORE``.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from datetime import timedelta
from operator import attrgetter
from typing import Literal, cast

import attrs
import numpy as np

from scorer.plugin import (
    ADD,
    BY,
    DELETE,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    NODE,
    POD,
    RANGE,
    UPDATE_NODE_ALLOCATABLE,
    ClusterEvent,
    Code,
    CycleState,
    DataPolicyArgs,
    FilterVerdict,
    Handle,
    MetricReader,
    NodeBatch,
    PluginRegistry,
    Pod,
    Reading,
    RowMemo,
    SourceArgs,
    address_errors,
    fill_query,
    finite,
    metric_reader,
    policy_timing_errors,
    promql_duration,
    quote,
    template_errors,
)

NAME = "LoadAware"
CPU = "cpu"
MEMORY = "memory"
RESOURCES: tuple[str, ...] = (CPU, MEMORY)
METRICS = {CPU: "cpu_utilization", MEMORY: "memory_utilization"}
NON_ZERO_REQUEST = {CPU: attrgetter("non_zero_cpu"), MEMORY: attrgetter("non_zero_memory")}  # a pod's, per resource
QUERIES = {
    CPU: '1 - avg by ({by}) (rate(node_cpu_seconds_total{mode="idle"}[{range}]))',
    MEMORY: "1 - avg by ({by}) (node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)",
}
PLACEHOLDERS: tuple[str, ...] = (BY, RANGE)
LABELS = {CPU: "CPU", MEMORY: "memory"}
TARGET_PACKING = "TargetPacking"
LEAST_UTILIZED = "LeastUtilized"
STRATEGIES: tuple[str, ...] = (TARGET_PACKING, LEAST_UTILIZED)
DEFAULT_TIME_RANGE = timedelta(minutes=1)
MAX_RESOURCE_WEIGHT = 100
MAX_SCALING_FACTOR = 10.0
NO_DATA = -1  # raw score of a node without fresh data (never 0: no data is not "idle")
MAX_RAW_SCORE = 2**53  # raw scores (percent) are capped here: a 7Ei pod on a 1-byte node fits an int64
THRESHOLD_REASON = "node(s) {label} utilization above the LoadAware threshold ({threshold}%)"

# Predicted utilization is rounded to this many decimals (percent) and scores
# get EPS before flooring, so float noise (0.2 * 100 = 20.000000000000004)
# never moves a score by one point.
_DECIMALS = 6
_EPS = 1e-9


def _supported(values: tuple[str, ...]) -> str:
    return ", ".join(quote(v) for v in values)


@attrs.frozen(slots=True, kw_only=True)
class ResourceWeight:
    """``resources[i]``: a resource to score and its weight in the weighted mean."""

    name: str
    weight: int = 1

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        if self.name not in RESOURCES:
            errors.append(("name", f"Unsupported value: {quote(self.name)}: supported values: "
                                   f"{_supported(RESOURCES)}"))
        if not 1 <= self.weight <= MAX_RESOURCE_WEIGHT:
            errors.append(("weight", f"Invalid value: {self.weight}: must be in 1..{MAX_RESOURCE_WEIGHT}"))
        return errors


@attrs.frozen(slots=True, kw_only=True)
class UsageThresholds:
    """``usageThresholds``: percent of allocatable above which Filter rejects a node; 0 = off."""

    cpu: int = 0
    memory: int = 0

    def validate(self) -> list[tuple[str, str]]:
        return [(key, f"Invalid value: {value}: must be in 0..100 (percent; 0 turns the threshold off)")
                for key, value in ((CPU, self.cpu), (MEMORY, self.memory)) if not 0 <= value <= 100]

    def of(self, resource: str) -> int:
        return self.cpu if resource == CPU else self.memory


@attrs.frozen(slots=True, kw_only=True)
class EstimatorArgs:
    """``estimator``: a pod's estimated usage = its non-zero request x the resource's factor."""

    cpu_scaling_factor: float = 0.85
    memory_scaling_factor: float = 0.7

    def validate(self) -> list[tuple[str, str]]:
        return [(key, f"Invalid value: {value:g}: must be in (0, {MAX_SCALING_FACTOR:g}]: a fraction of "
                      "the request (0.85 = 85%)")
                for key, value in (("cpuScalingFactor", self.cpu_scaling_factor),
                                   ("memoryScalingFactor", self.memory_scaling_factor))
                if not 0 < value <= MAX_SCALING_FACTOR]

    def of(self, resource: str) -> float:
        return self.cpu_scaling_factor if resource == CPU else self.memory_scaling_factor


@attrs.frozen(slots=True, kw_only=True)
class LoadAwareArgs:
    """Args of LoadAware (see the README for the table)."""

    address: str = ""
    strategy: Literal["TargetPacking", "LeastUtilized"] = "TargetPacking"
    target_utilization: int = 40
    resources: tuple[ResourceWeight, ...] = (ResourceWeight(name=CPU, weight=1),)
    usage_thresholds: UsageThresholds = UsageThresholds()
    estimator: EstimatorArgs = EstimatorArgs()
    cpu_query: str = ""
    memory_query: str = ""
    time_range: timedelta = DEFAULT_TIME_RANGE
    source: SourceArgs = SourceArgs()
    policy: DataPolicyArgs = DataPolicyArgs()

    @property
    def read_resources(self) -> tuple[str, ...]:
        """Resources whose metric is read: scored or thresholded (cpu first)."""
        scored = {r.name for r in self.resources}
        return tuple(r for r in RESOURCES if r in scored or self.usage_thresholds.of(r) > 0)

    def promql(self, resource: str) -> str:
        """The query for ``resource`` with ``{by}`` and ``{range}`` filled in."""
        custom = self.cpu_query if resource == CPU else self.memory_query
        return fill_query(custom.strip() or QUERIES[resource], self.source, range=promql_duration(self.time_range))

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = list(address_errors(self.address))
        if self.strategy not in STRATEGIES:  # built in Python; the config checks the Literal itself
            errors.append(("strategy", f"Unsupported value: {quote(self.strategy)}: supported values: "
                                       f"{_supported(STRATEGIES)}"))
        if not 1 <= self.target_utilization <= 99:
            errors.append(("targetUtilization", f"Invalid value: {self.target_utilization}: must be in 1..99 "
                                                "(percent)"))
        if not self.resources:
            errors.append(("resources", "Required value: at least one of cpu, memory"))
        seen: set[str] = set()
        for i, resource in enumerate(self.resources):
            if resource.name in seen:
                errors.append((f"resources[{i}].name", f"Duplicate value: {quote(resource.name)}"))
            seen.add(resource.name)
        if self.time_range < timedelta(seconds=1):
            errors.append(("timeRange", "must be at least 1s"))
        for key, query in (("cpuQuery", self.cpu_query), ("memoryQuery", self.memory_query)):
            if query and not query.strip():
                errors.append((key, "must not be blank (omit it for the default query)"))
            errors.extend((key, message) for message in template_errors(query, PLACEHOLDERS))
        errors.extend(policy_timing_errors(self.source, self.policy))
        return errors


_SCORE_KEY = "Score" + NAME


@attrs.frozen(slots=True, eq=False)
class _Part:
    """One scored resource in one cycle."""

    reader: MetricReader
    reading: Reading
    predicted: np.ndarray | None  # percent, NaN where the node has no value (None: not needed)
    raw: np.ndarray  # the raw score if this were the only resource (int64, NO_DATA without fresh data)
    score: np.ndarray  # the strategy's score (int64), before the data policy
    weight: int


@attrs.frozen(slots=True, eq=False)
class _ScoreState:
    """What Score passes to NormalizeScore: one part per scored resource."""

    parts: tuple[_Part, ...]


def _score_state(state: CycleState) -> _ScoreState:
    found: _ScoreState = state.read(_SCORE_KEY)
    return found


class LoadAware:
    name = NAME

    def __init__(self, args: LoadAwareArgs, handle: Handle) -> None:
        self.args = args
        # One reader per metric read; a pod placed since a node's sample adds its estimate to the node.
        self.readers: dict[str, MetricReader] = {
            resource: metric_reader(handle, NAME, METRICS[resource], address=args.address,
                                    query=args.promql(resource), source=args.source, policy=args.policy,
                                    combine="mean", pod_estimate=functools.partial(self.estimate, resource=resource))
            for resource in args.read_resources
        }
        self.scored = tuple((r.name, r.weight) for r in args.resources)
        self.total_weight = sum(weight for _, weight in self.scored)
        self.single = len(self.scored) == 1 and self.total_weight == 1  # the score is one resource's
        self.thresholds = {r: args.usage_thresholds.of(r) for r in RESOURCES if args.usage_thresholds.of(r) > 0}
        self.threshold_reasons = {r: THRESHOLD_REASON.format(label=LABELS[r], threshold=t)
                                  for r, t in self.thresholds.items()}
        self.filtering = bool(self.thresholds) or args.policy.on_missing == "filter"
        # Filter's verdicts (per threshold) and Score's scores (per pod estimate) by node, kept between
        # cycles: a node's depend on it alone.
        self.over_memos = {resource: RowMemo(reader, functools.partial(self._over, resource))
                           for resource, reader in self.readers.items()}
        self.score_memos = {resource: RowMemo(reader, functools.partial(self._scores, resource))
                            for resource, reader in self.readers.items()}

    def events_to_register(self) -> list[ClusterEvent]:
        """What can lower a rejected node's prediction: a new node, more allocatable (in-flight load is
        relative to it), a deleted pod (its in-flight estimate goes, and its usage). A node cooling down
        is a metrics refresh, not a cluster event: the unschedulable queue's flush retries the pod."""
        return [ClusterEvent(NODE, ADD), ClusterEvent(NODE, UPDATE_NODE_ALLOCATABLE),
                ClusterEvent(POD, DELETE)]

    # -- Filter --------------------------------------------------------------------------
    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        """Thresholds (measured + in-flight, without the incoming pod) and ``onMissing: filter``."""
        if not self.filtering:
            return None
        verdict = FilterVerdict(len(nodes))
        for resource, reader in self.readers.items():
            reading = reader.read(nodes, state=state)
            reader.filter_unusable(reading, verdict)
            threshold = self.thresholds.get(resource)
            if threshold:
                (over,) = self.over_memos[resource].get(reading, nodes, threshold)
                verdict.reject(over, self.threshold_reasons[resource], Code.UNSCHEDULABLE)
        return verdict

    def _over(self, resource: str, reading: Reading, nodes: NodeBatch, threshold: Hashable) -> tuple[np.ndarray]:
        """Per node: fresh, and measured + in-flight above ``threshold`` percent (NaN never is)."""
        return (reading.usable & (self._predict(resource, reading, nodes, 0.0) > threshold),)

    # -- Score -----------------------------------------------------------------------------
    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        parts = []
        for resource, weight in self.scored:
            reader = self.readers[resource]
            reading = reader.read(nodes, state=state)
            # (the prediction only matters for a weighted mean of several resources)
            arrays = self.score_memos[resource].get(reading, nodes, self.estimate(pod, resource),
                                                    count=2 if self.single else None)
            parts.append(_Part(reader, reading, arrays[2] if len(arrays) > 2 else None, arrays[0], arrays[1], weight))
        state.write(_SCORE_KEY, _ScoreState(tuple(parts)))
        if self.single:  # one resource of weight 1: its raw score
            return parts[0].raw
        usable = np.logical_and.reduce([p.reading.usable for p in parts])
        mean = sum(p.weight * finite(cast(np.ndarray, p.predicted)) for p in parts) / self.total_weight
        return _raw_score(np.asarray(mean), usable)

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        parts = _score_state(state).parts
        if self.single:  # one resource of weight 1: its score
            return parts[0].reader.apply_policy(parts[0].score, parts[0].reading)
        total = np.zeros(len(scores), dtype=np.int64)
        for part in parts:
            total += part.weight * part.reader.apply_policy(part.score, part.reading)
        return total // self.total_weight

    def _scores(self, resource: str, reading: Reading, nodes: NodeBatch, estimate: Hashable
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per node, with a pod of ``estimate``: the raw score the prediction alone gives, the strategy's
        score (0% where the node has no fresh data: the data policy replaces it), and the prediction."""
        predicted = self._predict(resource, reading, nodes, cast(float, estimate))
        usable = reading.usable
        known = np.where(usable, predicted, 0.0)
        if self.args.strategy == LEAST_UTILIZED:
            score = least_utilized(known)
        else:
            score = target_packing(known, self.args.target_utilization)
        return _raw_score(predicted, usable), score, predicted

    # -- prediction ------------------------------------------------------------------
    def estimate(self, pod: Pod, resource: str) -> float:
        """A pod's estimated usage: non-zero request (millicores / bytes) x scaling factor."""
        return float(NON_ZERO_REQUEST[resource](pod)) * self.args.estimator.of(resource)

    def predict(self, resource: str, reading: Reading, nodes: NodeBatch, pod: Pod | None) -> np.ndarray:
        """Predicted utilization in percent per node: measured + in-flight (+ ``pod`` when given)."""
        return self._predict(resource, reading, nodes, None if pod is None else self.estimate(pod, resource))

    def _predict(self, resource: str, reading: Reading, nodes: NodeBatch, extra: float | None) -> np.ndarray:
        load = reading.in_flight_load()
        if extra:
            load += extra
        column = nodes.table.resource_index.get(resource)
        if column is None:
            allocatable = np.zeros(len(nodes), dtype=np.float64)
        else:
            allocatable = nodes.resource_matrix("allocatable")[:, column].astype(np.float64)
        if len(allocatable) and allocatable.min() > 0.0:
            added = np.divide(load, allocatable, out=load)
        else:  # a node without the resource adds nothing here; NodeResourcesFit rejects it if the pod needs it
            added = np.divide(load, allocatable, out=np.zeros_like(load), where=allocatable > 0)
        added += reading.transformed(_measured)
        added *= 100.0
        rounded: np.ndarray = np.round(added, _DECIMALS, out=added)
        return rounded


def _raw_score(predicted: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """The raw score: predicted percent rounded half up (capped), NO_DATA where not ``usable``.
    NaN (no value) is never usable; inf is capped as the largest float is."""
    raw = np.minimum(predicted, MAX_RAW_SCORE)
    raw += 0.5
    scores: np.ndarray = np.where(usable, np.floor(raw, out=raw), NO_DATA).astype(np.int64)
    return scores


def _measured(values: np.ndarray) -> np.ndarray:
    """The metric as a fraction in [0, 1] (NaN, no value, stays NaN)."""
    fraction: np.ndarray = np.clip(values, 0.0, 1.0)
    return fraction


def target_packing(predicted: np.ndarray, target: float) -> np.ndarray:
    """Trimaran TLP over predicted utilization (percent): int scores in [0, 100], floored."""
    u = np.asarray(predicted, dtype=np.float64)
    below = (MAX_NODE_SCORE - target) * u
    below /= target
    below += target
    above = MAX_NODE_SCORE - u
    above *= target
    above /= MAX_NODE_SCORE - target
    # Above 100% (and below a target under 100) ``above`` is negative: the clip gives MIN_NODE_SCORE.
    score = np.where(u <= target, below, above)
    score += _EPS
    return _clip_score(np.floor(score, out=score)).astype(np.int64)


def least_utilized(predicted: np.ndarray) -> np.ndarray:
    """``100 - U`` (percent), floored and clipped to [0, 100]."""
    u = np.asarray(predicted, dtype=np.float64)
    score = MAX_NODE_SCORE - u
    score += _EPS
    return _clip_score(np.floor(score, out=score)).astype(np.int64)


def _clip_score(score: np.ndarray) -> np.ndarray:
    """``score`` (a new float array) clipped to [MIN_NODE_SCORE, MAX_NODE_SCORE] in place."""
    clipped: np.ndarray = np.minimum(np.maximum(score, MIN_NODE_SCORE, out=score), MAX_NODE_SCORE, out=score)
    return clipped


def factory(args: LoadAwareArgs | None, handle: Handle) -> LoadAware:
    return LoadAware(args if args is not None else LoadAwareArgs(), handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=LoadAwareArgs, plugin_type=LoadAware)
