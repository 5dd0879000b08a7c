"""MetricReader: one plugin's view of one source, under the plugin's data policy.

A plugin builds its reader once, with ``metric_reader(handle, ...)`` (the
source comes from the hub, shared by the plugins with the same query), and
per scheduling cycle calls ``reader.read(nodes, state=state)``: it gets a
``Reading``, the value, its age and its state for every node of the batch,
plus the pods placed on those nodes since their last sample (in-flight);
later batches of the cycle get the same view. Plugin authors reach all of
this through ``scorer.plugin``.

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
with the placements made since, when a reading first needs them, and rebuilt
when an entry goes.

What a plugin derives from a reading is kept for it the same way: the
in-flight load of the reader's ``pod_estimate`` by row
(``Reading.in_flight_load``), elementwise transforms of the values
(``Reading.transformed``), figures over the whole table
(``Reading.per_table``), and per-node results by row between cycles
(``RowMemo``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import attrs
import numpy as np

from scorer.errors import PluginError
from scorer.framework import Code, CycleState, FilterVerdict, NodeBatch
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
#: New in-flight entries up to this many are added to a reader's sums one by one (cheaper than numpy).
_ONE_BY_ONE = 8
#: Node tables a reader keeps rows for: the scheduler's, and the scratch copies nominated pods use.
_TABLES_KEPT = 4


def finite(values: np.ndarray) -> np.ndarray:
    """``values`` with NaN as 0 and infinities as the largest float (the same array when all are
    finite, the common case: checking is several times cheaper than ``nan_to_num``)."""
    if np.isfinite(values).all():
        return values
    replaced: np.ndarray = np.nan_to_num(values, nan=0.0, posinf=FLOAT_MAX, neginf=-FLOAT_MAX)
    return replaced


_T = TypeVar("_T")


def source_hub(handle: Handle) -> SourceHub:
    """The metric sources a plugin reads (``handle.sources``); an error naming the profile if it has none."""
    if handle.sources is None:
        raise PluginError(f"profile {handle.profile_name!r}: this plugin reads metrics, but the scheduler "
                          "was assembled without metric sources")
    return handle.sources


class _InFlight:
    """The in-flight pods one reader counts on one table, by row: updated in place with the tracker's
    new entries while its epoch holds (``seen`` entries so far), replaced when it changes."""

    __slots__ = ("epoch", "seen", "counts", "top", "sums", "overflowed")

    def __init__(self, epoch: int, rows: int) -> None:
        self.epoch = epoch
        self.seen = 0
        self.counts = np.zeros(rows, dtype=np.int64)
        self.top = 0  # the largest count
        self.sums: dict[PodQuantity, np.ndarray] = {}  # float64 per row
        self.overflowed = False  # some sum is not finite: saturated when read


class _Entries:
    """The tracker's first ``seen`` entries as a Reading saw them, and the reader's test of which count
    (a plain slotted class: one is made per placement and reader, attrs' frozen init costs more)."""

    __slots__ = ("rows", "placed_at", "pods", "sampled", "settle")

    def __init__(self, rows: np.ndarray, placed_at: np.ndarray, pods: Sequence[Pod], sampled: np.ndarray,
                 settle: float) -> None:
        self.rows = rows  # table row per entry (-1: a node not in the table)
        self.placed_at = placed_at
        self.pods = pods  # indexed by entry (may hold later ones)
        self.sampled = sampled  # sample time per table row
        self.settle = settle

    def kept(self) -> np.ndarray:
        """Per entry: counted, on a node of the table whose last sample is older than the placement plus
        ``settle`` (a sample taken ``settle`` seconds after it shows the pod's load)."""
        sampled = self.sampled[np.maximum(self.rows, 0)] if len(self.sampled) else np.full(len(self.rows), np.nan)
        with np.errstate(invalid="ignore"):
            kept: np.ndarray = (self.rows >= 0) & (np.isnan(sampled) | (sampled < self.placed_at + self.settle))
        return kept

    def sum_rows(self, quantity: PodQuantity, kept: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out`` plus ``quantity`` of each kept entry's pod at its row, added in entry order."""
        chosen = np.flatnonzero(kept)
        if len(chosen):
            pods = self.pods
            per_pod = np.fromiter((quantity(pods[i]) for i in chosen.tolist()), np.float64, len(chosen))
            with np.errstate(over="ignore", invalid="ignore"):
                np.add.at(out, self.rows[chosen], per_pod)
        return out


def _count_entries(flight: _InFlight, entries: _Entries, end: int) -> None:
    """Count the entries up to ``end`` that ``flight`` has not seen (a few: one by one; else
    vectorized), each added after the earlier ones, as a sum over all of them adds it."""
    start = flight.seen
    if end - start > _ONE_BY_ONE:
        new = _Entries(entries.rows[start:end], entries.placed_at[start:end], entries.pods[start:end],
                       entries.sampled, entries.settle)
        kept = new.kept()
        np.add.at(flight.counts, new.rows[kept], 1)
        flight.top = int(flight.counts.max()) if len(flight.counts) else 0
        for quantity, sums in flight.sums.items():
            new.sum_rows(quantity, kept, sums)
            flight.overflowed |= not np.isfinite(sums).all()
    else:
        sampled, counts, sums_by_quantity, pods = entries.sampled, flight.counts, flight.sums.items(), entries.pods
        placed_at = entries.placed_at[start:end].tolist()
        for i, row in enumerate(entries.rows[start:end].tolist(), start):
            if row < 0:
                continue
            t = float(sampled[row])
            if t == t and not t < placed_at[i - start] + entries.settle:  # sampled since
                continue
            count = counts[row] = counts[row] + 1
            if count > flight.top:
                flight.top = int(count)
            pod = pods[i]
            for quantity, sums in sums_by_quantity:
                total = sums[row] = float(sums[row]) + quantity(pod)  # Python floats overflow to inf silently
                flight.overflowed |= not math.isfinite(total)
    flight.seen = end


class _Rows:
    """What a reader knows by row of one table: values, sample times, states, in-flight pods."""

    __slots__ = ("table", "layout", "generation", "values", "times", "newest", "state", "usable", "all_fresh",
                 "state_at", "oldest_fresh", "in_flight", "flight_entries", "flight_changes", "transformed",
                 "per_table")

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
        self.all_fresh = False  # every row is fresh: so is every batch
        self.state_at = np.inf  # when ``state`` was computed (inf: never)
        self.oldest_fresh = np.nan  # the oldest sample time of a fresh node (NaN: none)
        self.in_flight: _InFlight | None = None
        self.flight_entries: _Entries | None = None  # the tracker's columns as of ``flight_changes`` changes
        self.flight_changes = -1
        self.transformed: dict[Callable[[np.ndarray], np.ndarray], np.ndarray] = {}
        self.per_table: dict[Callable[..., Any], Any] = {}  # ``Reading.per_table``'s results

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
            self.all_fresh = bool(self.usable.all())
            fresh_times = self.times[self.usable]
            self.oldest_fresh = float(fresh_times.min()) if len(fresh_times) else np.nan
        return self.state, self.usable


class Reading:
    """What one plugin sees of one metric for the nodes of a batch (arrays in batch order).

    ``values`` (float64, NaN where the node has no value), ``state`` (int8: FRESH, STALE,
    MISSING or WARMING_UP), the usable mask, ages and the in-flight pods are gathered from the
    reader's arrays by row when first asked for (a plugin that keeps its results by node asks
    for none of them), the in-flight sums while no placement came since the read."""

    __slots__ = ("fail_open", "now", "_rows", "_by_row", "_times", "_state_by_row", "_usable_by_row", "_values",
                 "_state", "_usable", "_all_usable", "_in_flight", "_seen", "_entries", "_estimate")

    def __init__(self, fail_open: bool, now: float, rows: np.ndarray, by_row: _Rows,
                 states: tuple[np.ndarray, np.ndarray] | None, in_flight: tuple[_InFlight, _Entries] | None,
                 estimate: PodQuantity | None = None) -> None:
        self.fail_open = fail_open  # policy overridden to neutral: warming up, or no node has fresh data
        self.now = now
        self._estimate = estimate  # the reader's ``pod_estimate``: what ``in_flight_load()`` sums
        self._rows = rows
        self._by_row = by_row
        self._times = by_row.times
        # (state, usable) by row; None while the source warms up (every node WARMING_UP).
        self._state_by_row: np.ndarray | None = states[0] if states is not None else None
        self._usable_by_row: np.ndarray | None = states[1] if states is not None else None
        self._values: np.ndarray | None = None
        self._state: np.ndarray | None = None
        self._usable: np.ndarray | None = None
        self._all_usable = True if states is not None and by_row.all_fresh else None
        self._in_flight: _InFlight | None = in_flight[0] if in_flight is not None else None
        self._entries: _Entries | None = in_flight[1] if in_flight is not None else None
        # The entries this reading counts: the tracker's as of the read. The reader's sums by row are
        # brought up to them when first asked for (most cycles ask for none: results kept by row).
        self._seen = len(self._entries.rows) if self._entries is not None else 0

    def of_rows(self, rows: np.ndarray) -> Reading:
        """The same reading (time, states, in-flight pods) for other rows of the table."""
        states = None if self._state_by_row is None or self._usable_by_row is None \
            else (self._state_by_row, self._usable_by_row)
        in_flight = None if self._in_flight is None or self._entries is None else (self._in_flight, self._entries)
        return Reading(self.fail_open, self.now, rows, self._by_row, states, in_flight, self._estimate)

    @property
    def ages(self) -> np.ndarray:
        """float64 seconds since the sample, NaN where no value."""
        with np.errstate(invalid="ignore"):
            ages: np.ndarray = np.maximum(self.now - self._times[self._rows], 0.0)
        return ages

    @property
    def values(self) -> np.ndarray:
        if self._values is None:
            self._values = self._by_row.values[self._rows]
        return self._values

    @property
    def state(self) -> np.ndarray:
        if self._state is None:
            self._state = np.full(len(self._rows), WARMING_UP, dtype=np.int8) if self._state_by_row is None \
                else self._state_by_row[self._rows]
        return self._state

    @property
    def usable(self) -> np.ndarray:
        if self._usable is None:
            self._usable = self.state == FRESH if self._usable_by_row is None else self._usable_by_row[self._rows]
        return self._usable

    @property
    def all_usable(self) -> bool:
        """Every node of the batch has fresh data (known without a pass when every node of the table has)."""
        if self._all_usable is None:
            self._all_usable = bool(self.usable.all())
        return self._all_usable

    def transformed(self, transform: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``transform(values)`` for the nodes of the batch, worked out once over every node per source
        reading and node layout (``transform`` works elementwise; pass the same one every cycle)."""
        by_row = self._by_row
        out = by_row.transformed.get(transform)
        if out is None:
            out = by_row.transformed[transform] = transform(by_row.values)
        of_batch: np.ndarray = out[self._rows]
        return of_batch

    def per_table(self, compute: Callable[[Reading, NodeBatch], _T]) -> _T:
        """``compute(reading, nodes)`` over every node of the table (this reading's time, states and
        in-flight pods), worked out once per source reading and node layout and kept until either
        changes: for figures a score needs from all nodes (the largest value, a mean per pod). Pass the
        same callable every cycle (a function or a bound method)."""
        by_row = self._by_row
        if compute not in by_row.per_table:
            rows = by_row.table.rows()
            by_row.per_table[compute] = compute(self.of_rows(rows), NodeBatch(by_row.table, rows))
        computed: _T = by_row.per_table[compute]
        return computed

    def _current(self) -> _InFlight | None:
        """The reader's sums by row, brought up to this reading's entries, if they are still those."""
        flight = self._in_flight
        if flight is None:
            return None
        if flight.seen < self._seen and self._entries is not None:
            _count_entries(flight, self._entries, self._seen)
        return flight if flight.seen == self._seen else None

    def in_flight_counts(self) -> np.ndarray:
        """int64 per node: the in-flight pods counted on it."""
        flight = self._current()
        if flight is not None:
            counts: np.ndarray = flight.counts[self._rows]
            return counts
        return np.bincount(self.in_flight_positions, minlength=len(self._rows)).astype(np.int64)

    def in_flight_load(self, quantity: PodQuantity | None = None) -> np.ndarray:
        """Per node, the reader's ``pod_estimate`` (or ``quantity``) of a pod summed over its in-flight
        pods (the floats ``in_flight_sum`` gives), saturated at the largest float. The reader keeps the
        sums by row and adds each placement once, instead of summing every in-flight pod per read (a
        ``quantity`` given here: pass the same callable every cycle)."""
        if quantity is None:
            if self._estimate is None:
                raise ValueError("in_flight_load() needs a per-pod quantity: give the reader a pod_estimate")
            quantity = self._estimate
        flight, entries = self._current(), self._entries
        if flight is None or entries is None:
            pods = self.in_flight_pods
            return self.in_flight_sum(np.fromiter(map(quantity, pods), np.float64, len(pods)))
        sums = flight.sums.get(quantity)
        if sums is None:
            sums = flight.sums[quantity] = entries.sum_rows(quantity, entries.kept(), np.zeros(len(self._times)))
            flight.overflowed |= not np.isfinite(sums).all()
        return finite(sums[self._rows]) if flight.overflowed else sums[self._rows]

    def in_flight_each(self, per_pod: float) -> np.ndarray:
        """Per node, ``per_pod`` added once per in-flight pod (the floats ``in_flight_sum`` of that
        value for every pod gives), saturated at the largest float."""
        counts = self.in_flight_counts()
        flight = self._current()
        top = flight.top if flight is not None else int(counts.max()) if len(counts) else 0  # at least the batch's
        if not top or per_pod == 0.0:
            return np.zeros(len(counts), dtype=np.float64)
        if top <= 3 and 0.0 < per_pod < FLOAT_MAX / 4:  # 0 + p, + p, + p: k * p rounded once, as one product
            product: np.ndarray = counts * per_pod
            return product
        running = np.full(top + 1, per_pod)  # running[k]: k copies of per_pod added one after the other
        running[0] = 0.0
        if abs(per_pod) * (top + 1) < FLOAT_MAX / 2:  # no sum overflows (NaN fails the test)
            sums: np.ndarray = np.add.accumulate(running, out=running)[counts]
            return sums
        with np.errstate(over="ignore", invalid="ignore"):
            np.add.accumulate(running, out=running)
        return finite(running[counts])

    # -- the in-flight pods one by one (explain, tests) ------------------------------------
    @property
    def in_flight_positions(self) -> np.ndarray:
        """int64 batch positions, one per in-flight pod on a node of the batch (entry order)."""
        return self._chosen()[1]

    @property
    def in_flight_pods(self) -> tuple[Pod, ...]:
        chosen, _ = self._chosen()
        pods = self._entries.pods if self._entries is not None else ()
        return tuple(pods[i] for i in chosen.tolist())

    def in_flight_sum(self, per_pod: np.ndarray) -> np.ndarray:
        """Per node, the sum of ``per_pod`` (one value per pod of ``in_flight_pods``), saturated at
        the largest float: huge estimates never become inf or NaN, nor raise numpy warnings."""
        out = np.zeros(len(self._rows), dtype=np.float64)
        if len(per_pod):
            with np.errstate(over="ignore", invalid="ignore"):
                np.add.at(out, self.in_flight_positions, per_pod)
            out = finite(out)
        return out

    def _chosen(self) -> tuple[np.ndarray, np.ndarray]:
        """(entry indices, batch positions) of the in-flight pods counted on nodes of the batch."""
        entries = self._entries
        if entries is None:
            return _NO_ENTRIES, _NO_ENTRIES
        position_of_row = np.full(len(self._times) + 1, -1, dtype=np.int64)  # last slot: unknown node
        position_of_row[self._rows] = np.arange(len(self._rows))
        positions = position_of_row[entries.rows]
        chosen = np.flatnonzero(entries.kept() & (positions >= 0))
        return chosen, positions[chosen]


class MetricReader:
    """Reads ``source`` for ``plugin`` under ``policy``; what it derives by row is kept per node
    table until the source's data or the table's rows change. ``pod_estimate`` is what one pod adds to
    the metric (``Reading.in_flight_load()`` sums it over the in-flight pods); ``metric_reader`` builds
    a reader with its source."""

    def __init__(self, hub: SourceHub, plugin: str, metric: str, source: MetricsSource, policy: DataPolicyArgs,
                 source_args: SourceArgs, *, pod_estimate: PodQuantity | None = None) -> None:
        self.hub = hub
        self.plugin = plugin
        self.metric = metric
        self.source = source
        self.policy = policy
        self.pod_estimate = pod_estimate
        self.max_age = policy.max_age_seconds(source_args)
        self.settle = policy.in_flight.settle_time.total_seconds()
        self.ttl = policy.in_flight.ttl.total_seconds()
        self._tables: dict[int, _Rows] = {}  # by id(table), least recently read first
        self._last: _Rows | None = None  # the one read last
        self._state_key = f"MetricReader/{plugin}/{metric}/{id(self)}"  # its reading in a CycleState
        hub.bind(plugin, metric, source, self)

    def describe_policy(self) -> str:
        flight = f"in-flight settle {self.settle:g}s" if self.policy.in_flight.enabled else "in-flight off"
        return f"maxAge {self.max_age:g}s, onMissing {self.policy.on_missing}, {flight}"

    def _rows(self, table: Any, data: SourceData) -> _Rows:
        last = self._last
        if last is not None and last.table is table and last.layout == table.layout_version \
                and last.generation == data.generation:
            return last
        rows = self._tables.pop(id(table), None)
        if rows is None or rows.table is not table or rows.layout != table.layout_version \
                or rows.generation != data.generation:
            rows = _Rows(table, data)
        self._tables[id(table)] = rows
        if len(self._tables) > _TABLES_KEPT:
            del self._tables[next(iter(self._tables))]
        self._last = rows
        return rows

    def read(self, nodes: NodeBatch, now: float | None = None, state: CycleState | None = None) -> Reading:
        """The reading of ``nodes`` at ``now`` (the hub's clock by default). Given the cycle's ``state``,
        the reader reads once per cycle: later batches of the same table (Filter's next chunk, Score)
        get the first reading's time, states and in-flight pods, so the cycle sees one view."""
        if state is not None:
            first: Reading | None = state.get(self._state_key)
            if first is not None and first._by_row.table is nodes.table:
                return first.of_rows(nodes.rows)
            reading = self.read(nodes, now)
            state.write(self._state_key, reading)
            return reading
        now = self.hub.clock() if now is None else now
        table = nodes.table
        rows = nodes.rows
        data = self.source.data
        by_row = self._rows(table, data)
        if data.warming_up:
            return Reading(True, now, rows, by_row, None, self._in_flight(by_row, now), self.pod_estimate)
        fail_open = not now - by_row.newest <= self.max_age  # no node has fresh data
        return Reading(fail_open, now, rows, by_row, by_row.states(now, self.max_age), self._in_flight(by_row, now),
                       self.pod_estimate)

    def _in_flight(self, by_row: _Rows, now: float) -> tuple[_InFlight, _Entries] | None:
        """The in-flight pods by row, brought up to date with the tracker (None: none are counted)."""
        tracker = self.hub.in_flight
        if not self.policy.in_flight.enabled or not tracker.entries:
            return None
        tracker.prune(now, self.ttl)
        flight, entries = by_row.in_flight, by_row.flight_entries
        if flight is not None and entries is not None and by_row.flight_changes == tracker.changes:
            return flight, entries  # nothing placed or removed since the last read
        entry_rows, placed_at, pods = tracker.columns(by_row.table)
        entries = by_row.flight_entries = _Entries(entry_rows, placed_at, pods, by_row.times, self.settle)
        by_row.flight_changes = tracker.changes
        if flight is None or flight.epoch != tracker.epoch:  # entries went, or the columns were rebuilt
            flight = by_row.in_flight = _InFlight(tracker.epoch, len(by_row.times))
        return flight, entries  # (the new entries are counted when a reading first needs them)

    # -- policy ------------------------------------------------------------------
    def apply_policy(self, scores: np.ndarray, reading: Reading) -> np.ndarray:
        """Scores in [0, 100] for fresh nodes; the policy's score for the others."""
        if reading.all_usable:
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


def metric_reader(handle: Handle, plugin: str, metric: str, *, address: str, query: str, source: SourceArgs,
                  policy: DataPolicyArgs, combine: str = "sum", pod_estimate: PodQuantity | None = None
                  ) -> MetricReader:
    """The reader of ``metric`` for ``plugin``, built when the plugin is: its source is asked of the
    handle's hub (shared with every plugin that asks for the same query; from the metrics snapshot when
    the scheduler reads one, else Prometheus at ``address``, queried in the background every
    ``source.refreshInterval``). ``query`` is PromQL, its ``{by}`` filled (``fill_query``); ``combine``
    (``sum`` or ``mean``) joins several series of one node; ``pod_estimate(pod)`` is what a pod placed
    since a node's sample adds to the metric (``Reading.in_flight_load()``). Raises PluginError when the
    profile has no metric sources, ValueError for args the hub cannot use (no address, unreadable files)."""
    hub = source_hub(handle)
    found = hub.source(plugin=plugin, metric=metric, address=address, query=query, source_args=source,
                       combine=combine)
    return MetricReader(hub, plugin, metric, found, policy, source, pod_estimate=pod_estimate)


#: Arrays over the nodes of a batch (one value each), from the reader's reading of them and a key.
RowCompute = Callable[[Reading, NodeBatch, Hashable], tuple[np.ndarray, ...]]


_NO_KEY: Hashable = object()  # a RowMemo's previous key before its first call


@attrs.define(slots=True, eq=False)
class _MemoRows:
    """A RowMemo's arrays over every row of one table, and what they were computed from."""

    table: Any
    by_row: _Rows  # the reader's rows, values and states they were computed from
    usable: np.ndarray
    flight: _InFlight | None
    nodes_version: int
    key: Hashable
    seen: int  # in-flight entries accounted for
    arrays: tuple[np.ndarray, ...]
    stale: np.ndarray  # bool per row: an in-flight pod came since its values were computed
    any_stale: bool = False


class RowMemo:
    """Per-node results a plugin derives from one reader, kept by table row between cycles.

    For results that depend on each node alone (its value, state, in-flight pods and the node's
    own data such as allocatable; not on the other nodes of the batch), ``get`` gathers the
    batch's rows of arrays computed over the whole table, instead of computing them every cycle.
    They are computed again when the source's data, the states, the in-flight columns, the
    nodes or ``key`` change; a placement only marks its node, computed again when a batch next
    holds it. ``key`` is what the results depend on besides the node (a threshold, the incoming
    pod's estimate): a key unlike the previous call's is computed on the batch alone, so pods
    that all differ cost no pass over the table; the arrays over the table are built when a key
    comes again (pods of one workload are alike). ``compute(reading, nodes, key)`` must give the
    same values for a node whatever batch it is in: then ``get`` returns exactly what ``compute``
    would on the batch.
    """

    def __init__(self, reader: MetricReader, compute: RowCompute) -> None:
        self.reader = reader
        self.compute = compute
        self._tables: dict[int, _MemoRows] = {}  # by id(table), oldest first
        self._last_key: Hashable = _NO_KEY  # the key of the previous call

    def get(self, reading: Reading, nodes: NodeBatch, key: Hashable, count: int | None = None
            ) -> tuple[np.ndarray, ...]:
        """``compute(reading, nodes, key)``, from the rows kept (``reading`` is ``nodes``' just read);
        only its first ``count`` arrays if given."""
        if key != self._last_key:  # a new key: on the batch alone
            self._last_key = key
            return tuple(self.compute(reading, nodes, key)[:count])
        table, rows = nodes.table, nodes.rows
        by_row, flight = reading._by_row, reading._in_flight  # (the new placements need not be counted here)
        memo = self._tables.get(id(table))
        # The reader's rows are of one table, layout and source data; a new in-flight epoch is a new flight.
        if memo is None or memo.by_row is not by_row or memo.usable is not by_row.usable or memo.flight is not flight \
                or memo.nodes_version != table.nodes_version or memo.key != key:
            everything = NodeBatch(table, table.rows())
            arrays = self.compute(self.reader.read(everything, reading.now), everything, key)
            memo = _MemoRows(table, by_row, by_row.usable, flight, table.nodes_version, key, reading._seen,
                             arrays, np.zeros(len(table), dtype=bool))
            self._tables.pop(id(table), None)
            self._tables[id(table)] = memo
            if len(self._tables) > _TABLES_KEPT:
                del self._tables[next(iter(self._tables))]
        if reading._seen > memo.seen and reading._entries is not None:
            stale = memo.stale
            for row in reading._entries.rows[memo.seen:reading._seen].tolist():  # a placement or two per cycle
                if row >= 0:
                    stale[row] = True
            memo.seen, memo.any_stale = reading._seen, True
        if memo.any_stale and np.count_nonzero(memo.stale[rows]):  # (count_nonzero: cheaper than any())
            self._refresh(memo, reading, nodes, key)
        return tuple([array[rows] for array in memo.arrays[:count]])

    def _refresh(self, memo: _MemoRows, reading: Reading, nodes: NodeBatch, key: Hashable) -> None:
        """Compute again every row marked stale (the batch holds one): in one call, as batches go round
        the table, for the placements of the cycles since the last time."""
        stale = memo.stale.nonzero()[0]
        batch = NodeBatch(nodes.table, stale)
        for array, values in zip(memo.arrays, self.compute(self.reader.read(batch, reading.now), batch, key),
                                 strict=True):
            array[stale] = values
        memo.stale[stale] = False
        memo.any_stale = False

