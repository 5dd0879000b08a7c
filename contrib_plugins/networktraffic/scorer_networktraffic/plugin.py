"""NetworkTraffic: favour nodes with less network traffic, measured by Prometheus.

The seed design queried Prometheus once per node per pod inside Score and
summed a byte counter over a window. Here one bulk query (``rate`` of the
counter, per node) runs in the background every ``source.refreshInterval``;
Score reads the last reading, adds the estimated traffic of pods placed
since each node's sample (so a burst spreads), and normalizes as the seed
does: ``100 - traffic * 100 / max traffic``, with all-zero traffic giving
every node 100 and nodes without fresh data getting the policy's score.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np

from scorer.framework import FilterVerdict, NodeBatch
from scorer.framework.types import MAX_NODE_SCORE
from scorer.inputs.duration import parse_duration
from scorer.plugins.helper.metricreader import MetricReader, Reading, source_hub
from scorer.sources import DataPolicyArgs, SourceArgs, address_errors

if TYPE_CHECKING:
    from scorer.framework import CycleState
    from scorer.model import Pod
    from scorer.registry import PluginRegistry

NAME = "NetworkTraffic"
DEFAULT_INTERFACE = "eth0"
DEFAULT_TIME_RANGE = timedelta(minutes=1)
NO_DATA = -1  # raw score of a node without a usable value (never 0: no data is not "no traffic")

_RATE = 'rate(node_network_{dir}_bytes_total{{device=~"{{device}}"}}[{{range}}])'
QUERIES = {
    "receive": "sum by ({by}) (" + _RATE.format(dir="receive") + ")",
    "transmit": "sum by ({by}) (" + _RATE.format(dir="transmit") + ")",
    "both": "sum by ({by}) (" + _RATE.format(dir="receive") + " + " + _RATE.format(dir="transmit") + ")",
}
METRICS = {
    "receive": "network_receive_bytes_per_second",
    "transmit": "network_transmit_bytes_per_second",
    "both": "network_bytes_per_second",
}
_STATE_KEY = "NetworkTraffic/reading"


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

    def promql(self, by: str) -> str:
        template = self.query or QUERIES[self.direction]
        ms = round(self.window.total_seconds() * 1000)
        window = f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"  # never truncate 1500ms to 1s
        return (template.replace("{by}", by).replace("{device}", self.device)
                .replace("{range}", window))

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
        if self.pod_traffic_estimate is not None and self.pod_traffic_estimate < 0:
            errors.append(("podTrafficEstimate", "must not be negative"))
        return errors


class NetworkTraffic:
    name = NAME

    def __init__(self, args: NetworkTrafficArgs, handle: Any) -> None:
        self.args = args
        hub = source_hub(handle)
        query = args.promql(args.source.node_mapping.mapping().group_labels())
        self.source = hub.source(plugin=NAME, metric=args.metric, address=args.prometheus_url, query=query,
                                 source_args=args.source, combine="sum")
        self.reader = MetricReader(hub, NAME, args.metric, self.source, args.policy, args.source)

    # Filter only acts with ``policy.onMissing: filter``.
    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        if self.args.policy.on_missing != "filter":
            return None
        verdict = FilterVerdict(len(nodes))
        self.reader.filter_unusable(self.reader.read(nodes), verdict)
        return verdict

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        reading = self.reader.read(nodes)
        traffic = reading.values + reading.in_flight_sum(
            np.full(len(reading.in_flight_pods), self._per_pod_estimate(reading, nodes)))
        state.write(_STATE_KEY, (reading, traffic))
        raw = np.where(reading.usable, np.nan_to_num(traffic), NO_DATA)
        return np.rint(raw).astype(np.int64)

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        reading, traffic = state.read(_STATE_KEY)
        return self.reader.apply_policy(normalize(traffic, reading.usable), reading)

    def _per_pod_estimate(self, reading: Reading, nodes: NodeBatch) -> float:
        """Traffic one new pod is expected to add: the configured estimate, or the mean traffic
        per running pod on the nodes with fresh data (each node counted as one pod of baseline)."""
        if self.args.pod_traffic_estimate is not None:
            return self.args.pod_traffic_estimate
        usable = reading.usable
        if not usable.any():
            return 0.0
        pods = nodes.requested("pods")[usable]
        return float(reading.values[usable].sum() / (pods.sum() + usable.sum()))


def normalize(traffic: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """``100 - traffic * 100 / max`` over the usable nodes; 100 for all when the max is 0."""
    out = np.zeros(len(traffic), dtype=np.int64)
    if not usable.any():
        return out
    values = np.where(usable, traffic, 0.0)
    highest = float(values.max())
    if highest <= 0:
        out[usable] = MAX_NODE_SCORE
        return out
    out[:] = MAX_NODE_SCORE - np.floor(values * MAX_NODE_SCORE / highest).astype(np.int64)
    return np.clip(out, 0, MAX_NODE_SCORE)


def factory(args: NetworkTrafficArgs | None, handle: Any) -> NetworkTraffic:
    return NetworkTraffic(args or NetworkTrafficArgs(), handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=NetworkTrafficArgs, plugin_type=NetworkTraffic)
