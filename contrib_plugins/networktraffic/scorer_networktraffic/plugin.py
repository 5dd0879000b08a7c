"""NetworkTraffic: favour nodes with less network traffic, measured by Prometheus.

The seed design queried Prometheus once per node per pod inside Score and
summed a byte counter over a window. Here one bulk query (``rate`` of the
counter, per node) runs in the background every ``source.refreshInterval``;
Score reads the last reading, adds the estimated traffic of pods placed
since each node's sample (so a burst spreads), and normalizes as the seed
does: ``100 - floor(traffic * 100 / max traffic)``, with all-zero traffic
giving every node 100 and nodes without fresh data getting the policy's
score. Traffic is computed divided by the largest value in play, so values
near the float maximum (a broken exporter) never overflow: the busiest node
scores 0 and the others keep their relative scores.

Filter acts only with ``policy.onMissing: filter`` (nodes without fresh
data). A metrics refresh is not a cluster event, so a pod it rejected is
retried when a node is added, or at the latest when the unschedulable queue
flushes (5 minutes, as kube-scheduler's podMaxInUnschedulablePodsDuration).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from datetime import timedelta
from typing import Any, Literal, cast

import attrs
import numpy as np

from scorer.plugin import (
    ADD,
    BY,
    DEVICE,
    FLOAT_MAX,
    MAX_NODE_SCORE,
    NODE,
    RANGE,
    ClusterEvent,
    CycleState,
    DataPolicyArgs,
    FilterVerdict,
    Handle,
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
    parse_duration,
    policy_timing_errors,
    promql_duration,
    template_errors,
)

NAME = "NetworkTraffic"
DEFAULT_INTERFACE = "eth0"
DEFAULT_TIME_RANGE = timedelta(minutes=1)
NO_DATA = -1  # raw score of a node without a usable value (never 0: no data is not "no traffic")
MAX_POD_TRAFFIC_ESTIMATE = 1e12  # bytes/s (1 TB/s): far above any NIC, far below overflow
MAX_RAW_SCORE = 2**53  # raw scores (bytes/s) are capped here: exact in a float, fits an int64

_RATE = 'rate(node_network_{dir}_bytes_total{{device=~"{{device}}"}}[{{range}}])'
QUERIES = {
    "receive": "sum by ({by}) (" + _RATE.format(dir="receive") + ")",
    "transmit": "sum by ({by}) (" + _RATE.format(dir="transmit") + ")",
    "both": "sum by ({by}) (" + _RATE.format(dir="receive") + " + " + _RATE.format(dir="transmit") + ")",
}
PLACEHOLDERS: tuple[str, ...] = (BY, DEVICE, RANGE)
METRICS = {
    "receive": "network_receive_bytes_per_second",
    "transmit": "network_transmit_bytes_per_second",
    "both": "network_bytes_per_second",
}


@attrs.frozen(slots=True, kw_only=True)
class NetworkTrafficArgs:
    """Args; the seeds' names are accepted as aliases (``ip``/``prometheusAddress`` for ``address``,
    ``deviceName`` for ``networkInterface``, ``timeRangeInMinutes`` for ``timeRange``)."""

    address: str = ""
    ip: str = ""
    prometheus_address: str = ""
    network_interface: str = ""
    device_name: str = ""
    time_range: Any = None  # seconds (int, as in the seeds) or a duration string ("90s", "2m")
    time_range_in_minutes: int | None = None
    direction: Literal["receive", "transmit", "both"] = "receive"
    query: str = ""
    pod_traffic_estimate: float | None = None  # bytes/s per in-flight pod; None = derived from the data
    source: SourceArgs = SourceArgs()
    policy: DataPolicyArgs = DataPolicyArgs()

    @property
    def prometheus_url(self) -> str:
        return self.address or self.ip or self.prometheus_address

    @property
    def device(self) -> str:
        return self.network_interface or self.device_name or DEFAULT_INTERFACE

    @property
    def window(self) -> timedelta:
        if self.time_range_in_minutes is not None:
            return timedelta(minutes=self.time_range_in_minutes)
        if self.time_range is None:
            return DEFAULT_TIME_RANGE
        if isinstance(self.time_range, str):
            return parse_duration(self.time_range)
        return timedelta(seconds=self.time_range)

    @property
    def metric(self) -> str:
        return METRICS[self.direction]

    def promql(self) -> str:
        """The query with ``{by}``, ``{device}`` and ``{range}`` filled in."""
        return fill_query(self.query or QUERIES[self.direction], self.source, device=self.device,
                          range=promql_duration(self.window))

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        given = [k for k, v in (("address", self.address), ("ip", self.ip),
                                ("prometheusAddress", self.prometheus_address)) if v]
        if len(given) > 1:
            errors.append((given[1], f"is an alias of {given[0]}; give only one"))
        for key in given[:1]:
            errors.extend(address_errors(self.prometheus_url, key))
        if self.network_interface and self.device_name:
            errors.append(("deviceName", "is an alias of networkInterface; give only one"))
        if self.time_range is not None and self.time_range_in_minutes is not None:
            errors.append(("timeRangeInMinutes", "is an alias of timeRange; give only one"))
        if isinstance(self.time_range, bool) or not isinstance(self.time_range, (int, str, type(None))):
            errors.append(("timeRange", "expected seconds (an integer) or a duration such as 2m"))
        else:
            try:
                window = self.window
            except ValueError as exc:
                errors.append(("timeRange", f"{exc}; expected seconds or a duration such as 2m"))
            except OverflowError:
                errors.append(("timeRangeInMinutes" if self.time_range_in_minutes is not None else "timeRange",
                               "is too large"))
            else:
                if window < timedelta(seconds=1):
                    errors.append(("timeRangeInMinutes" if self.time_range_in_minutes is not None else "timeRange",
                                   "must be at least 1s"))
        if '"' in self.device or "\\" in self.device:
            errors.append(("networkInterface", "must not contain quotes or backslashes"))
        errors.extend(("query", message) for message in template_errors(self.query, PLACEHOLDERS))
        estimate = self.pod_traffic_estimate
        if estimate is not None:
            if not math.isfinite(estimate):
                errors.append(("podTrafficEstimate", f"must be a finite number, got {estimate}"))
            elif estimate < 0:
                errors.append(("podTrafficEstimate", "must not be negative"))
            elif estimate > MAX_POD_TRAFFIC_ESTIMATE:
                errors.append(("podTrafficEstimate", f"must be at most {MAX_POD_TRAFFIC_ESTIMATE:g} (bytes/s "
                                                     f"per pod), got {estimate:g}"))
        errors.extend(policy_timing_errors(self.source, self.policy))
        return errors


_SCORE_KEY = "Score" + NAME


@attrs.frozen(slots=True, eq=False)
class _ScoreState:
    """What Score passes to NormalizeScore: the reading and each node's traffic, divided by a power
    of two (``_Estimate.scale``: normalizing is the same on any scale), negative traffic as 0 (it
    scores as 0 does). NormalizeScore may change ``traffic`` in place (the cycle's own copy)."""

    reading: Reading
    traffic: np.ndarray  # at least 0; NaN where the node has no value


def _score_state(state: CycleState) -> _ScoreState:
    found: _ScoreState = state.read(_SCORE_KEY)
    return found


@attrs.frozen(slots=True)
class _Estimate:
    """Worked out once per metrics reading and node layout, over every node of the table: the power of
    two traffic is divided by, and the per-pod estimate (divided by it too)."""

    scale: float
    per_pod: float


class NetworkTraffic:
    name = NAME

    def __init__(self, args: NetworkTrafficArgs, handle: Handle) -> None:
        self.args = args
        self.reader = metric_reader(handle, NAME, args.metric, address=args.prometheus_url, query=args.promql(),
                                    source=args.source, policy=args.policy, combine="sum")
        self.source = self.reader.source
        # Each node's traffic and raw score depend on it alone (its value, its in-flight pods) once the
        # estimate is fixed: kept by row between cycles, computed again for the nodes that get a pod.
        self.memo = RowMemo(self.reader, self._per_node)

    def events_to_register(self) -> list[ClusterEvent]:
        """Filter rejects only nodes without fresh data (``onMissing: filter``). Fresh data comes with a
        metrics refresh, which is not a cluster event (the unschedulable queue's 5-minute flush retries
        the pod); a new node is the one change of the cluster that may bring a node with data."""
        return [ClusterEvent(NODE, ADD)]

    # Filter only acts with ``policy.onMissing: filter``.
    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        if self.args.policy.on_missing != "filter":
            return None
        verdict = FilterVerdict(len(nodes))
        self.reader.filter_unusable(self.reader.read(nodes, state=state), verdict)
        return verdict

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        reading = self.reader.read(nodes, state=state)
        traffic, raw = self.memo.get(reading, nodes, reading.per_table(self._estimate))
        state.write(_SCORE_KEY, _ScoreState(reading, traffic))
        return raw

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        score_state = _score_state(state)
        reading = score_state.reading
        if reading.all_usable:  # every node usable, its traffic finite
            return _normalize_finite(score_state.traffic)
        return self.reader.apply_policy(normalize(score_state.traffic, reading.usable), reading)

    def _estimate(self, whole: Reading, every: NodeBatch) -> _Estimate:
        """The scale and the per-pod estimate, from every node of the table with fresh data when a
        metrics reading (or a new node layout) is first read, kept until the next one (``per_table``).

        The scale is a power of two near the largest fresh value or the configured estimate, so no sum
        overflows whatever the metric says, and every result is what the unscaled arithmetic gives
        (dividing by a power of two is exact). The per-pod estimate is the configured one, or the mean
        traffic per running pod on the nodes with fresh data, each node counted as one pod of baseline:
        sum(values) / (pods + nodes), with the pods bound when the reading is first read (pods placed
        since are in flight: the reading does not show their traffic yet)."""
        usable = whole.usable
        fresh = whole.values if whole.all_usable else whole.values[usable]
        configured = self.args.pod_traffic_estimate
        scale = _power_of_two_below(max(float(np.abs(fresh).max()) if len(fresh) else 0.0, configured or 0.0))
        with np.errstate(under="ignore"):  # tiny / huge flushes to 0: harmless
            per_pod = configured / scale if configured is not None else 0.0
            if configured is None and len(fresh):
                pods = every.requested("pods")[usable].sum()
                per_pod = float((fresh / scale).sum() / (pods + len(fresh)))
        return _Estimate(scale, per_pod)

    def _per_node(self, reading: Reading, nodes: NodeBatch, key: Hashable) -> tuple[np.ndarray, np.ndarray]:
        """Per node, (value + in-flight pods x per-pod estimate) / scale, at least 0 (NaN stays NaN), and
        the raw score: bytes/s rounded, capped at +-MAX_RAW_SCORE (clipped before multiplying: never
        overflows), NO_DATA where the node has no usable value."""
        estimate = cast(_Estimate, key)
        with np.errstate(under="ignore"):  # tiny / huge flushes to 0: harmless
            traffic = reading.values / estimate.scale
            traffic += reading.in_flight_each(estimate.per_pod)
        cap = MAX_RAW_SCORE / estimate.scale
        # NaN (no value) stays NaN here and gets NO_DATA; traffic is finite elsewhere (scaled).
        raw = np.minimum(np.maximum(traffic, -cap), cap)
        raw *= estimate.scale
        np.rint(raw, out=raw)
        raw = (raw if reading.all_usable else np.where(reading.usable, raw, NO_DATA)).astype(np.int64)
        return np.maximum(traffic, 0.0, out=traffic), raw


def normalize(traffic: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """``100 - floor(traffic * 100 / max)`` over the usable nodes; 100 for all when the max is 0.

    Infinite traffic counts as the largest float and negative traffic as 0 (it scores 100 either
    way); values are divided by a power of two near the max first, so ``traffic * 100`` stays finite."""
    if not usable.any():
        return np.zeros(len(traffic), dtype=np.int64)
    values = finite(np.where(usable, np.maximum(traffic, 0.0), 0.0))
    highest = float(values.max())
    if highest <= 0:
        return np.where(usable, MAX_NODE_SCORE, 0)
    return _normalize_finite(values, highest)


def _normalize_finite(values: np.ndarray, highest: float | None = None) -> np.ndarray:
    """``normalize`` of finite traffic, at least 0, every node usable (``values``, a new array, is
    changed in place; ``highest`` is its max if known)."""
    highest = float(values.max()) if highest is None else highest
    if highest <= 0:
        return np.full(len(values), MAX_NODE_SCORE, dtype=np.int64)
    if highest > FLOAT_MAX / MAX_NODE_SCORE:  # ``traffic * 100`` would overflow: on a power-of-two scale
        scale = _power_of_two_below(highest)  # (exact: the same quotients, rounded the same)
        values /= scale
        highest /= scale
    values *= MAX_NODE_SCORE
    values /= highest
    # In [0, 100]: 0 <= values <= highest, and the largest gives 100 (or a hair above, floored to 100);
    # at least 0, so truncating to int is flooring.
    floored = values.astype(np.int64)
    return np.subtract(MAX_NODE_SCORE, floored, out=floored)


def _power_of_two_below(value: float) -> float:
    """The largest power of two not above ``value`` (at least 1): dividing by it is exact."""
    if not value > 1.0:
        return 1.0
    return math.ldexp(1.0, math.frexp(min(value, FLOAT_MAX))[1] - 1)


def factory(args: NetworkTrafficArgs | None, handle: Handle) -> NetworkTraffic:
    return NetworkTraffic(args if args is not None else NetworkTrafficArgs(), handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=NetworkTrafficArgs, plugin_type=NetworkTraffic)
