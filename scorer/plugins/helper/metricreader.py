"""MetricReader: one plugin's view of one source, under the plugin's data policy.

Per scheduling cycle a plugin calls ``reader.read(nodes)`` and gets a
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

Reading costs O(batch) numpy work and no Python loop over nodes or pods: a
source's values only change when it refreshes, and one placement adds one
in-flight pod, so the reader keeps, per node table, the values, sample
times and states by row (rebuilt when the source's data or the table's rows
change, and the states when a fresh value turns stale) and the in-flight
pods' count and per-pod sums by row (``Reading.in_flight_load``), updated
with the placements made since the last read and rebuilt when an entry goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from scorer.errors import PluginError
from scorer.framework import Code, FilterVerdict, NodeBatch
from scorer.framework.runtime import Handle
from scorer.framework.types import MAX_NODE_SCORE, MIN_NODE_SCORE
from scorer.model import Pod
from scorer.sources.args import DataPolicyArgs, SourceArgs
from scorer.sources.data import SourceData
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

#: A per-pod quantity summed over the in-flight pods of each node (``Reading.in_flight_load``).
PodQuantity = Callable[[Pod], float]

_NO_ENTRIES = np.zeros(0, dtype=np.int64)
#: Node tables a reader keeps rows for: the scheduler's, and the scratch copies nominated pods use.
_TABLES_KEPT = 4


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


class _InFlight:
    """The in-flight pods one reader counts on one table, by row, as of ``seen`` tracker entries.

    Never changed once a Reading holds it, except that ``sums`` gains a quantity the first time a
    plugin asks for it: the reader makes a new one for new placements (copying the arrays)."""

    __slots__ = ("epoch", "entry_rows", "pods", "kept", "counts", "sums")

    def __init__(self, epoch: int, entry_rows: np.ndarray, pods: tuple[Pod, ...], kept: np.ndarray,
                 counts: np.ndarray, sums: dict[PodQuantity, np.ndarray]) -> None:
        self.epoch = epoch
        self.entry_rows = entry_rows  # row per tracker entry (-1: a node not in the table)
        self.pods = pods  # per tracker entry
        self.kept = kept  # bool per tracker entry: counted (on a node of the table, not yet sampled)
        self.counts = counts  # int64 per table row
        self.sums = sums  # per quantity, float64 per table row (may hold inf: saturated when read)

    @property
    def seen(self) -> int:
        return len(self.entry_rows)

    def sum_of(self, quantity: PodQuantity, rows: int) -> np.ndarray:
        """Per table row, ``quantity`` summed over the kept entries, in entry order."""
        sums = self.sums.get(quantity)
        if sums is None:
            sums = self.sums[quantity] = _sum_rows(self.entry_rows, self.pods, self.kept, quantity, rows)
        return sums


def _sum_rows(entry_rows: np.ndarray, pods: tuple[Pod, ...], kept: np.ndarray, quantity: PodQuantity,
              rows: int, out: np.ndarray | None = None) -> np.ndarray:
    """``out`` (zeros if None) plus ``quantity`` of each kept entry's pod at its row, added in entry
    order (the order the whole sum would take: the same float result)."""
    out = np.zeros(rows, dtype=np.float64) if out is None else out
    chosen = np.flatnonzero(kept)
    if len(chosen):
        per_pod = np.fromiter((quantity(pods[i]) for i in chosen.tolist()), dtype=np.float64, count=len(chosen))
        with np.errstate(over="ignore", invalid="ignore"):
            np.add.at(out, entry_rows[chosen], per_pod)
    return out


class _Rows:
    """What a reader knows by row of one table: values, sample times, states, in-flight pods."""

    __slots__ = ("table", "layout", "generation", "values", "times", "newest", "state", "usable", "state_at",
                 "oldest_fresh", "in_flight")

    def __init__(self, table: Any, data: SourceData) -> None:
        self.table = table
        self.layout = table.layout_version
        self.generation = data.generation
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
        self.values, self.times, self.newest = values, times, newest
        self.state = np.zeros(0, dtype=np.int8)
        self.usable = np.zeros(0, dtype=bool)
        self.state_at = np.inf  # when ``state`` was computed (inf: never)
        self.oldest_fresh = np.nan  # the oldest sample time of a fresh node (NaN: none)
        self.in_flight: _InFlight | None = None

    def states(self, now: float, max_age: float) -> tuple[np.ndarray, np.ndarray]:
        """(state, usable) per row at ``now``. Ages only grow, so they are recomputed only when the
        clock went back or the oldest fresh value has aged past ``max_age`` (the same float test)."""
        oldest = self.oldest_fresh
        if not (self.state_at <= now and (oldest != oldest or now - oldest <= max_age)):  # NaN: no fresh node
            with np.errstate(invalid="ignore"):
                ages = np.maximum(now - self.times, 0.0)
                state = np.full(len(self.values), FRESH, dtype=np.int8)
                missing = np.isnan(self.values)
                state[missing] = MISSING
                state[~missing & (ages > max_age)] = STALE
            self.state, self.usable, self.state_at = state, state == FRESH, now
            fresh_times = self.times[self.usable]
            self.oldest_fresh = float(fresh_times.min()) if len(fresh_times) else np.nan
        return self.state, self.usable


class Reading:
    """What one plugin sees of one metric for the nodes of a batch (arrays in batch order).

    ``values`` (float64, NaN where the node has no value) and ``state`` (int8: FRESH, STALE,
    MISSING or WARMING_UP) are given; ages, the usable mask and the in-flight pods are worked
    out when asked for."""

    __slots__ = ("values", "state", "fail_open", "now", "_rows", "_times", "_usable", "_in_flight", "_positions")

    def __init__(self, values: np.ndarray, state: np.ndarray, fail_open: bool, now: float, rows: np.ndarray,
                 times_by_row: np.ndarray, usable: np.ndarray | None, in_flight: _InFlight | None) -> None:
        self.values = values
        self.state = state
        self.fail_open = fail_open  # policy overridden to neutral: warming up, or no node has fresh data
        self.now = now
        self._rows = rows
        self._times = times_by_row
        self._usable = usable
        self._in_flight = in_flight
        self._positions: np.ndarray | None = None

    @property
    def ages(self) -> np.ndarray:
        """float64 seconds since the sample, NaN where no value."""
        with np.errstate(invalid="ignore"):
            return np.maximum(self.now - self._times[self._rows], 0.0)

    @property
    def usable(self) -> np.ndarray:
        if self._usable is None:
            self._usable = self.state == FRESH
        return self._usable

    def in_flight_counts(self) -> np.ndarray:
        """int64 per node: the in-flight pods counted on it."""
        if self._in_flight is None:
            return np.zeros(len(self.values), dtype=np.int64)
        return self._in_flight.counts[self._rows]

    def in_flight_load(self, quantity: PodQuantity) -> np.ndarray:
        """Per node, ``quantity(pod)`` summed over its in-flight pods, saturated at the largest float.
        Pass the same callable every cycle: the sums by row are kept per callable and updated with
        each placement, instead of summed over every in-flight pod each time."""
        if self._in_flight is None:
            return np.zeros(len(self.values), dtype=np.float64)
        return finite(self._in_flight.sum_of(quantity, len(self._times))[self._rows])

    def in_flight_each(self, per_pod: float) -> np.ndarray:
        """Per node, ``per_pod`` added once per in-flight pod (as ``in_flight_sum`` of that value for
        every pod adds it: the same floats), saturated at the largest float."""
        counts = self.in_flight_counts()
        out = np.zeros(len(counts), dtype=np.float64)
        top = int(counts.max()) if len(counts) else 0
        if top:
            with np.errstate(over="ignore", invalid="ignore"):
                running = np.add.accumulate(np.concatenate(([0.0], np.full(top, per_pod))))
            out = finite(running[counts])
        return out

    # -- the in-flight pods one by one (explain, tests) ------------------------------------
    @property
    def in_flight_positions(self) -> np.ndarray:
        """int64 batch positions, one per in-flight pod on a node of the batch (entry order)."""
        return self._entries()[1]

    @property
    def in_flight_pods(self) -> tuple[Pod, ...]:
        chosen, _ = self._entries()
        pods = self._in_flight.pods if self._in_flight is not None else ()
        return tuple(pods[i] for i in chosen.tolist())

    def in_flight_sum(self, per_pod: np.ndarray) -> np.ndarray:
        """Per node, the sum of ``per_pod`` (one value per pod of ``in_flight_pods``), saturated at
        the largest float: huge estimates never become inf or NaN, nor raise numpy warnings."""
        out = np.zeros(len(self.values), dtype=np.float64)
        if len(per_pod):
            with np.errstate(over="ignore", invalid="ignore"):
                np.add.at(out, self.in_flight_positions, per_pod)
            out = finite(out)
        return out

    def _entries(self) -> tuple[np.ndarray, np.ndarray]:
        """(tracker entry indices, batch positions) of the in-flight pods on nodes of the batch."""
        flight = self._in_flight
        if flight is None:
            return _NO_ENTRIES, _NO_ENTRIES
        position_of_row = np.full(len(self._times) + 1, -1, dtype=np.int64)  # last slot: unknown node
        position_of_row[self._rows] = np.arange(len(self._rows))
        positions = position_of_row[flight.entry_rows]
        chosen = np.flatnonzero(flight.kept & (positions >= 0))
        return chosen, positions[chosen]


class MetricReader:
    """Reads ``source`` for ``plugin`` under ``policy``; what it derives by row is kept per node
    table until the source's data or the table's rows change."""

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
        self._tables: dict[int, _Rows] = {}  # by id(table), least recently read first
        hub.bind(plugin, metric, source, self)

    def describe_policy(self) -> str:
        flight = f"in-flight settle {self.settle:g}s" if self.policy.in_flight.enabled else "in-flight off"
        return f"maxAge {self.max_age:g}s, onMissing {self.policy.on_missing}, {flight}"

    def _rows(self, table: Any, data: SourceData) -> _Rows:
        rows = self._tables.pop(id(table), None)
        if rows is None or rows.table is not table or rows.layout != table.layout_version \
                or rows.generation != data.generation:
            rows = _Rows(table, data)
        self._tables[id(table)] = rows
        if len(self._tables) > _TABLES_KEPT:
            del self._tables[next(iter(self._tables))]
        return rows

    def read(self, nodes: NodeBatch, now: float | None = None) -> Reading:
        now = self.hub.clock() if now is None else now
        table = nodes.table
        rows = nodes.rows
        data = self.source.data
        by_row = self._rows(table, data)
        values = by_row.values[rows]
        usable: np.ndarray | None
        if data.warming_up:
            state, usable, fail_open = np.full(len(rows), WARMING_UP, dtype=np.int8), None, True
        else:
            state_by_row, usable_by_row = by_row.states(now, self.max_age)
            state, usable = state_by_row[rows], usable_by_row[rows]
            fail_open = not now - by_row.newest <= self.max_age  # no node has fresh data
        return Reading(values, state, fail_open, now, rows, by_row.times, usable,
                       self._in_flight(by_row, now))

    def _in_flight(self, by_row: _Rows, now: float) -> _InFlight | None:
        """The in-flight pods by row, brought up to date with the tracker (None: none are counted)."""
        tracker = self.hub.in_flight
        if not self.policy.in_flight.enabled or not tracker.entries:
            return None
        tracker.prune(now, self.ttl)
        entry_rows, placed_at, pods = tracker.columns(by_row.table)
        flight = by_row.in_flight
        if flight is not None and flight.epoch == tracker.epoch and flight.seen == len(entry_rows):
            return flight
        n = len(by_row.times)
        bases: dict[PodQuantity, np.ndarray | None]
        if flight is None or flight.epoch != tracker.epoch:  # entries went, or the columns were rebuilt
            start, counts, kept_before = 0, np.zeros(n, dtype=np.int64), np.zeros(0, dtype=bool)
            bases = dict.fromkeys(flight.sums if flight is not None else (), None)
        else:  # placements appended since the last read: the arrays are copied, Readings hold the old ones
            start, counts, kept_before = flight.seen, flight.counts.copy(), flight.kept
            bases = {quantity: sums.copy() for quantity, sums in flight.sums.items()}
        new_rows = entry_rows[start:]
        sampled = by_row.times[np.maximum(new_rows, 0)] if n else np.full(len(new_rows), np.nan)
        # Counted until a sample taken ``settle`` seconds after the placement arrives.
        with np.errstate(invalid="ignore"):
            kept = (new_rows >= 0) & (np.isnan(sampled) | (sampled < placed_at[start:] + self.settle))
        np.add.at(counts, new_rows[kept], 1)
        new_pods = pods[start:]
        sums = {quantity: _sum_rows(new_rows, new_pods, kept, quantity, n, base) for quantity, base in bases.items()}
        by_row.in_flight = flight = _InFlight(tracker.epoch, entry_rows, pods, np.concatenate((kept_before, kept)),
                                              counts, sums)
        return flight

    # -- policy ------------------------------------------------------------------
    def apply_policy(self, scores: np.ndarray, reading: Reading) -> np.ndarray:
        """Scores in [0, 100] for fresh nodes; the policy's score for the others."""
        if reading.usable.all():
            return scores
        bad = ~reading.usable
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
        ages = reading.ages
        names = nodes.names
        out: dict[str, dict[str, Any]] = {}
        for i, name in enumerate(names):
            value = float(reading.values[i])
            age = float(ages[i])
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
