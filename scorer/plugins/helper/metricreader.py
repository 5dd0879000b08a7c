"""MetricReader: one plugin's view of one source, under the plugin's data policy.

Per scheduling cycle a plugin calls ``reader.read(nodes)`` once and gets a
``Reading``: the value, its age and its state for every node of the batch,
plus the pods placed on those nodes since their last sample (in-flight).

States (``Reading.state``):

* ``fresh``: a value no older than ``maxAge``;
* ``stale``: a value older than ``maxAge`` (for example, Prometheus has been
  unreachable for longer than that: failed fetches keep the last value with
  its original sample time, so it ages);
* ``missing``: no value for the node (a new node, an exporter that is down,
  a label that does not map);
* ``warming-up``: the source has not had one successful fetch yet.

Policy (``onMissing``) for nodes that are not fresh: ``neutral`` scores 50,
``min`` 0, ``max`` 100, ``filter`` rejects the node at Filter (and scores
it 0 if the profile enables the plugin at Score only). Two cases fail open to
neutral whatever the policy says, so a metrics outage never blocks the
whole cluster: the source is warming up, or no node at all has fresh data.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from scorer.errors import PluginError
from scorer.framework import Code, FilterVerdict, NodeBatch
from scorer.framework.runtime import Handle
from scorer.framework.types import MAX_NODE_SCORE, MIN_NODE_SCORE
from scorer.model import Pod
from scorer.sources.args import DataPolicyArgs, SourceArgs
from scorer.sources.hub import SourceHub
from scorer.sources.source import MetricsSource
from scorer.sources.telemetry import STATES

FRESH, STALE, MISSING, WARMING_UP = 0, 1, 2, 3
STATE_NAMES: tuple[str, ...] = STATES  # indexed by the state codes above
#: In-flight sums saturate here instead of overflowing to inf (metric values near the float maximum).
FLOAT_MAX = float(np.finfo(np.float64).max)

NEUTRAL_SCORE = (MIN_NODE_SCORE + MAX_NODE_SCORE) // 2
# With ``filter``, rejected nodes never reach Score; if the profile runs the plugin
# at Score only, the node gets the lowest score instead.
POLICY_SCORES = {"neutral": NEUTRAL_SCORE, "min": MIN_NODE_SCORE, "max": MAX_NODE_SCORE, "filter": MIN_NODE_SCORE}


def finite(values: np.ndarray) -> np.ndarray:
    """``values`` with NaN as 0 and infinities as the largest float (the same array when all are
    finite, the common case: checking is several times cheaper than ``nan_to_num``)."""
    if np.isfinite(values).all():
        return values
    return np.nan_to_num(values, nan=0.0, posinf=FLOAT_MAX, neginf=-FLOAT_MAX)


def source_hub(handle: Handle) -> SourceHub:
    """The metric sources a plugin reads (``handle.sources``); an error naming the profile if it has none."""
    if handle.sources is None:
        raise PluginError(f"profile {handle.profile_name!r}: this plugin reads metrics, but the scheduler "
                          "was assembled without metric sources")
    return handle.sources


@attrs.frozen(slots=True)
class Reading:
    """What one plugin sees of one metric for the nodes of a batch (arrays in batch order)."""

    values: np.ndarray  # float64, NaN where the node has no value
    ages: np.ndarray  # float64 seconds since the sample, NaN where no value
    state: np.ndarray  # int8, one of FRESH, STALE, MISSING, WARMING_UP
    in_flight_positions: np.ndarray  # int64 batch positions, one per in-flight pod
    in_flight_pods: tuple[Pod, ...]
    fail_open: bool  # policy overridden to neutral: warming up, or no node has fresh data
    now: float

    @property
    def usable(self) -> np.ndarray:
        return self.state == FRESH

    def in_flight_counts(self) -> np.ndarray:
        return np.bincount(self.in_flight_positions, minlength=len(self.values)).astype(np.int64)

    def in_flight_sum(self, per_pod: np.ndarray) -> np.ndarray:
        """Per node, the sum of ``per_pod`` (one value per in-flight pod), saturated at the largest
        float: huge estimates never become inf or NaN, nor raise numpy warnings."""
        out = np.zeros(len(self.values), dtype=np.float64)
        if len(per_pod):
            with np.errstate(over="ignore", invalid="ignore"):
                np.add.at(out, self.in_flight_positions, per_pod)
            out = finite(out)
        return out


class MetricReader:
    """Reads ``source`` for ``plugin`` under ``policy``; cached per source generation and node layout."""

    def __init__(self, hub: SourceHub, plugin: str, metric: str, source: MetricsSource, policy: DataPolicyArgs,
                 source_args: SourceArgs) -> None:
        self.hub = hub
        self.plugin = plugin
        self.metric = metric
        self.source = source
        self.policy = policy
        self.max_age = policy.max_age_seconds(source_args)
        self.settle = policy.in_flight.settle_time.total_seconds()
        self.ttl = policy.in_flight.ttl.total_seconds()
        self._key: tuple[int, int, int] | None = None
        self._values_by_row = np.zeros(0)
        self._times_by_row = np.zeros(0)
        self._newest = -np.inf  # the newest sample time of any node (-inf: none)
        hub.bind(plugin, metric, source, self)

    def describe_policy(self) -> str:
        flight = f"in-flight settle {self.settle:g}s" if self.policy.in_flight.enabled else "in-flight off"
        return f"maxAge {self.max_age:g}s, onMissing {self.policy.on_missing}, {flight}"

    def _columns(self, table: Any) -> tuple[np.ndarray, np.ndarray]:
        data = self.source.data
        key = (id(table), table.layout_version, data.generation)
        if key != self._key:
            n = len(table.names)
            values = np.full(n, np.nan)
            times = np.full(n, np.nan)
            newest = -np.inf
            for row, name in enumerate(table.names):
                v = data.values.get(name)
                if v is not None:
                    values[row] = v
                    times[row] = t = data.sample_times[name]
                    if t > newest:
                        newest = t
            self._values_by_row, self._times_by_row, self._newest, self._key = values, times, newest, key
        return self._values_by_row, self._times_by_row

    def read(self, nodes: NodeBatch, now: float | None = None) -> Reading:
        now = self.hub.clock() if now is None else now
        table = nodes.table
        rows = nodes.rows
        values_by_row, times_by_row = self._columns(table)
        values = values_by_row[rows]
        times = times_by_row[rows]
        with np.errstate(invalid="ignore"):
            ages = np.maximum(now - times, 0.0)
        state = np.full(len(rows), FRESH, dtype=np.int8)
        missing = np.isnan(values)
        state[missing] = MISSING
        with np.errstate(invalid="ignore"):
            state[~missing & (ages > self.max_age)] = STALE
        warming = self.source.data.warming_up
        if warming:
            state[:] = WARMING_UP
            fail_open = True
        else:
            fail_open = not now - self._newest <= self.max_age  # no node has fresh data
        positions, pods = self._in_flight(table, rows, times_by_row, now)
        return Reading(values, ages, state, positions, pods, fail_open, now)

    def _in_flight(self, table: Any, rows: np.ndarray, times_by_row: np.ndarray, now: float
                   ) -> tuple[np.ndarray, tuple[Pod, ...]]:
        tracker = self.hub.in_flight
        if not self.policy.in_flight.enabled or not tracker.entries:
            return np.zeros(0, dtype=np.int64), ()
        tracker.prune(now, self.ttl)
        entry_rows, placed_at, pods = tracker.columns(table)
        if not len(entry_rows):
            return np.zeros(0, dtype=np.int64), ()
        position_of_row = np.full(len(table.names) + 1, -1, dtype=np.int64)  # last slot: unknown node
        position_of_row[rows] = np.arange(len(rows))
        positions = position_of_row[entry_rows]
        sampled = times_by_row[np.maximum(entry_rows, 0)] if len(times_by_row) else np.full(len(entry_rows), np.nan)
        # Counted until a sample taken ``settle`` seconds after the placement arrives.
        with np.errstate(invalid="ignore"):
            keep = (positions >= 0) & (np.isnan(sampled) | (sampled < placed_at + self.settle))
        if keep.all():  # the common case: every placement is still unseen, on a node of the batch
            return positions, pods
        chosen = np.flatnonzero(keep)
        return positions[chosen], tuple(pods[i] for i in chosen.tolist())

    # -- policy ------------------------------------------------------------------
    def apply_policy(self, scores: np.ndarray, reading: Reading) -> np.ndarray:
        """Scores in [0, 100] for fresh nodes; the policy's score for the others."""
        bad = reading.state != FRESH
        if not bad.any():
            return scores
        policy = "neutral" if reading.fail_open else self.policy.on_missing
        out = np.where(bad, POLICY_SCORES[policy], scores).astype(np.int64)
        self._count(reading, bad, policy)
        return out

    def filter_unusable(self, reading: Reading, verdict: FilterVerdict) -> None:
        """With ``onMissing: filter``, reject nodes without fresh data (unless failing open)."""
        if self.policy.on_missing != "filter" or reading.fail_open:
            return
        stale = reading.state == STALE
        missing = reading.state == MISSING
        verdict.reject(stale, f"node(s) had stale {self.metric} metrics (older than {self.max_age:g}s)",
                       Code.UNSCHEDULABLE)
        verdict.reject(missing, f"node(s) had no {self.metric} metrics", Code.UNSCHEDULABLE)
        self._count(reading, stale | missing, "filter")

    def _count(self, reading: Reading, bad: np.ndarray, policy: str) -> None:
        counts = np.bincount(reading.state[bad], minlength=len(STATE_NAMES))
        for state, count in enumerate(counts.tolist()):
            if count and state != FRESH:
                self.hub.telemetry.count_policy(self.plugin, STATE_NAMES[state], policy, count)

    # -- explain -----------------------------------------------------------------
    def explain(self, nodes: NodeBatch, now: float | None = None) -> dict[str, dict[str, Any]]:
        """Per node: value, age, state, in-flight pods, policy (JSON-ready)."""
        reading = self.read(nodes, now)
        counts = reading.in_flight_counts()
        names = nodes.names
        out: dict[str, dict[str, Any]] = {}
        for i, name in enumerate(names):
            value = float(reading.values[i])
            age = float(reading.ages[i])
            state = STATE_NAMES[int(reading.state[i])]
            out[name] = {
                "plugin": self.plugin,
                "value": None if np.isnan(value) else value,
                "ageSeconds": None if np.isnan(age) else round(age, 3),
                "state": state,
                "inFlightPods": int(counts[i]),
                "policy": "fresh" if state == "fresh" else
                          ("neutral (fail open)" if reading.fail_open else self.policy.on_missing),
            }
        return out
