"""The scheduling cycle: the scheduling algorithm, then assume, Reserve and Permit.

``SchedulingCycle.schedule_pod`` is kube-scheduler's ``schedulePod``:
PreFilter, Filter over a sample of nodes (percentageOfNodesToScore,
round-robin start), PostFilter when nothing fits, PreScore/Score/NormalizeScore
over the feasible nodes, and a uniformly random choice among the best. It
does no I/O: it reads the ClusterCache's NodeTable.

``SchedulingCycle.run`` is kube's ``schedulingCycle`` for one popped pod: it
assumes the pod on the chosen node, runs Reserve and Permit, and returns the
``Attempt`` that the binding cycle (``scorer.binding``) completes, or the
failure, handled as kube's ``handleSchedulingFailure``: the pod is requeued, a
FailedScheduling Event and a PodScheduled=False condition are recorded, and
the attempt is counted in the scheduler's metrics.

``SchedulingCycle.end_flight`` is the one place where a failed pod's flight
ends, whoever saw the failure (this cycle, the binding cycle, the scheduler
when a cycle or a binding task crashed or was cancelled): it undoes what the
attempt did (the Permit wait, Reserve, the assumed pod), requeues the pod or
not, ends its flight in the queue, and records and counts the failure as its
parameters say.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from scorer.cache import CacheError, ClusterCache
from scorer.cluster.interface import EventRecorder
from scorer.framework.cycle_state import CycleState
from scorer.framework.events import EVENT_ASSIGNED_POD_DELETE
from scorer.framework.runtime import PREEMPTION_VICTIMS, FilterRecord, Framework, NodeStatuses, ScoreOutcome
from scorer.framework.status import Code, Status
from scorer.framework.types import NodeBatch, QueuedPodInfo
from scorer.metrics import SchedulerMetrics
from scorer.model import Pod
from scorer.queue import SchedulingQueue

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
NO_NODES_MSG = "no nodes available to schedule pods"
EVENT_NOTE_LIMIT = 1024

# Attempt results, as in scheduler_schedule_attempts_total{result}.
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"
SKIPPED = "skipped"  # not an attempt: a pod being deleted or already assumed (kube's skipPodSchedule)


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes to look for before scoring (kube's numFeasibleNodesToFind)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * pct // 100
    if num < MIN_FEASIBLE_NODES_TO_FIND:
        return MIN_FEASIBLE_NODES_TO_FIND
    return num


_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_ROWS.flags.writeable = False  # shared by every ScheduleResult that has no rows


@attrs.define(slots=True)
class ScheduleResult:
    """Everything one ``schedule_pod`` call found, for the cycle and for explain.

    ``failed_at`` names the extension point whose plugin returned an Error
    (PreFilter, Filter, PostFilter, PreScore, Score), empty otherwise;
    ``pre_score_status`` is PreScore's status when it ran.
    """

    pod: Pod
    profile: str
    num_all_nodes: int
    status: Status
    message: str = ""
    selected: str | None = None
    rows: np.ndarray = _NO_ROWS
    processed: int = 0
    feasible_positions: np.ndarray = _NO_ROWS
    records: tuple[FilterRecord, ...] = ()
    pre_filter_status: Status | None = None
    excluded_status: Status | None = None  # nodes a PreFilterResult left out
    excluded_rows: np.ndarray = _NO_ROWS
    scores: ScoreOutcome | None = None
    nominated: str | None = None
    victims: tuple[Pod, ...] = ()  # the pods preemption chose to delete for ``nominated``
    unschedulable_plugins: frozenset[str] = frozenset()
    failed_at: str = ""
    pre_score_status: Status | None = None

    @property
    def feasible_rows(self) -> np.ndarray:
        rows: np.ndarray = self.rows[self.feasible_positions]
        return rows

    def node_statuses(self, table: Any) -> dict[str, Status]:
        """Status of every rejected node that was evaluated, by node name."""
        return dict(self.statuses_view(table))

    def statuses_view(self, table: Any) -> NodeStatuses:
        """``node_statuses`` as a lazy mapping (a node's Status is made when looked up), with
        the UnschedulableAndUnresolvable nodes as a mask: what PostFilter gets."""
        return NodeStatuses(table.names, table.index, self.rows, self.records, self.pre_filter_status,
                            self.excluded_status, self.excluded_rows)

    def _error(self, status: Status, point: str) -> ScheduleResult:
        self.status = status
        self.message = status.message()
        self.failed_at = point
        return self


def fit_error_message(result: ScheduleResult, post_filter_msg: str = "") -> str:
    """kube-scheduler's FitError text: ``0/N nodes are available: <histogram>.``"""
    msg = NO_NODE_AVAILABLE_MSG.format(result.num_all_nodes) + ":"
    if result.pre_filter_status is not None:
        msg += f" {result.pre_filter_status.message()}."
    else:
        histogram: Counter[str] = Counter()
        for record in result.records:
            # A node's reasons are the reasons whose masks include it.
            for reason, mask in record.reasons:
                if reason:
                    histogram[reason] += int(mask.sum())
        if result.excluded_status is not None:
            for reason in result.excluded_status.reasons:
                histogram[reason] += len(result.excluded_rows)
        if histogram:
            msg += " " + ", ".join(sorted(f"{count} {reason}" for reason, count in histogram.items())) + "."
    if post_filter_msg:
        msg += f" {post_filter_msg}"
    return msg


@attrs.define(slots=True)
class Attempt:
    """A pod assumed on a node, waiting for its binding cycle.

    ``started`` is the ``timer`` reading when the scheduling cycle began (the
    attempt's duration metric runs from there); ``bound`` turns true once a
    Bind plugin bound the pod.
    """

    qpi: QueuedPodInfo
    framework: Framework
    state: CycleState
    pod: Pod
    node: str
    started: float
    result: ScheduleResult
    permit_wait: float = 0.0
    bound: bool = False


@attrs.define(slots=True)
class CycleReport:
    """How one scheduling attempt ended, for simulate's output (``outcome``: one of
    SCHEDULED, UNSCHEDULABLE, ERROR; SKIPPED for pods that were not attempted)."""

    pod: Pod
    profile: str
    result: ScheduleResult | None
    node: str | None
    outcome: str
    message: str = ""


class ScheduleAlgorithm:
    """kube's schedulePod with the state it keeps between cycles: the round-robin
    start index of the node sampling and the random source that breaks ties."""

    def __init__(self, cache: ClusterCache, *, percentage_of_nodes_to_score: int = 0,
                 rng: random.Random | None = None) -> None:
        self.cache = cache
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.rng = rng or random.Random()
        self.next_start_node_index = 0
        self.feasible_ratio = 1.0  # of the nodes the last sampling cycle filtered: sizes the next one's chunks
        # The same, per set of Filter plugins PreFilter skipped: pods that run the same Filters tend to pass
        # at the same rate (a pod whose claim pins it to one node passes 1 node in N; a plain pod nearly all).
        self.feasible_ratios: dict[frozenset[str], float] = {}

    def schedule_pod(
        self, fwk: Framework, state: CycleState, pod: Pod, *, evaluate_all: bool = False, score_all: bool = False
    ) -> ScheduleResult:
        """Find a node for ``pod``. ``evaluate_all`` filters every node (no sampling, no
        nominated-node shortcut, start index untouched); ``score_all`` scores even a
        single feasible node (``scorer.testing.run_plugin`` reports its scores)."""
        table = self.cache.table
        num_all = len(table)
        result = ScheduleResult(pod=pod, profile=fwk.profile_name, num_all_nodes=num_all, status=Status())
        if num_all == 0:
            result.status = Status(Code.UNSCHEDULABLE, (NO_NODES_MSG,))
            result.message = NO_NODES_MSG
            return result
        all_rows = table.rows()
        allowed, pf_status = fwk.run_pre_filter(state, pod, NodeBatch(table, all_rows))
        if not pf_status.is_success():
            if pf_status.code == Code.ERROR:
                return result._error(pf_status, "PreFilter")
            result.pre_filter_status = pf_status
            result.unschedulable_plugins = frozenset({pf_status.plugin})
            result.status = Status(Code.UNSCHEDULABLE, (), pf_status.plugin)
            return self._no_fit(fwk, state, result)

        candidates = all_rows
        if allowed is not None:
            keep = np.array([name in allowed for name in table.names], dtype=bool)
            candidates = all_rows[keep]
            result.excluded_rows = all_rows[~keep]
            if len(result.excluded_rows):
                result.excluded_status = Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    (f"node(s) didn't satisfy plugin(s) [{', '.join(state.narrowed_by)}]",),
                )

        # A pod that preemption nominated a node for tries that node first (kube >= 1.22).
        nominated_node = fwk.handle.nominated_node(pod)
        nominated_row = table.index.get(nominated_node) if nominated_node else None
        if nominated_row is not None and not evaluate_all:
            rows = np.array([nominated_row], dtype=np.int64)
            outcome = fwk.run_filters_with_nominated_pods(state, pod, table, rows)
            if outcome.error is None and outcome.alive.all():
                result.rows = rows
                result.processed = 1
                result.feasible_positions = np.array([0], dtype=np.int64)
                result.nominated = nominated_node
                return self._select(fwk, state, result, score_all)

        n = len(candidates)
        if evaluate_all:
            to_find = n
            start = 0
        else:
            to_find = num_feasible_nodes_to_find(
                fwk.percentage_of_nodes_to_score
                if fwk.percentage_of_nodes_to_score is not None
                else self.percentage_of_nodes_to_score,
                n,
            )
            if not fwk.has_score_plugins():
                to_find = min(to_find, 1)
            start = self.next_start_node_index % n if n else 0
        order = np.concatenate([candidates[start:], candidates[:start]]) if start else candidates
        alive = np.zeros(n, dtype=bool)
        records: list[FilterRecord] = []
        pos, found = 0, 0
        kind = frozenset(state.skip_filter_plugins)
        known = kind in self.feasible_ratios
        ratio = self.feasible_ratios.get(kind, self.feasible_ratio)
        sampling = _Sampling(max(to_find, 1), n, 1.0 if evaluate_all else ratio, trusted=known)
        while pos < n:
            chunk = order[pos : pos + sampling.next_size(pos, found)]
            outcome = fwk.run_filters_with_nominated_pods(state, pod, table, chunk)
            if outcome.error is not None:
                return result._error(outcome.error, "Filter")
            alive[pos : pos + len(chunk)] = outcome.alive
            if pos:
                records.extend(attrs.evolve(record, positions=record.positions + pos) for record in outcome.records)
            else:
                records.extend(outcome.records)
            found += int(np.count_nonzero(outcome.alive))
            pos += len(chunk)
            if sampling.done(alive, pos, found):
                break
        feasible = alive.nonzero()[0]
        processed = sampling.processed(feasible, pos)
        if not evaluate_all and pos:
            self.feasible_ratio = self.feasible_ratios[kind] = found / pos
            if len(self.feasible_ratios) > _MAX_RATIO_KINDS:  # bounded: a few plugin sets in practice
                self.feasible_ratios.clear()
        if processed < pos:
            feasible = feasible[:to_find]
            records = [_clip(record, processed) for record in records]
            records = [r for r in records if len(r.positions)]
        if not evaluate_all and n:
            self.next_start_node_index = (start + processed) % n
        result.rows = order
        result.processed = processed
        result.feasible_positions = feasible
        result.records = tuple(records)
        result.unschedulable_plugins = frozenset(r.plugin for r in records)
        if len(feasible) == 0:
            result.status = Status(Code.UNSCHEDULABLE)
            return self._no_fit(fwk, state, result)
        return self._select(fwk, state, result, score_all)

    def _no_fit(self, fwk: Framework, state: CycleState, result: ScheduleResult) -> ScheduleResult:
        post_msg = ""
        if fwk.points.get("postFilter"):
            node, status = fwk.run_post_filter(state, result.pod, result.statuses_view(self.cache.table))
            if status.code == Code.ERROR:
                return result._error(status, "PostFilter")
            if node:
                result.nominated = node
                result.victims = tuple(state.get(PREEMPTION_VICTIMS, ()))
            post_msg = status.message()
        result.message = fit_error_message(result, post_msg)
        result.status = Status(Code.UNSCHEDULABLE, (result.message,), result.status.plugin)
        return result

    def _select(self, fwk: Framework, state: CycleState, result: ScheduleResult, score_all: bool) -> ScheduleResult:
        table = self.cache.table
        feasible_rows = result.feasible_rows
        if len(feasible_rows) == 1 and not score_all:
            result.selected = table.names[int(feasible_rows[0])]
            return result
        batch = NodeBatch(table, feasible_rows)
        status = result.pre_score_status = fwk.run_pre_score(state, result.pod, batch)
        if not status.is_success():
            return result._error(status, "PreScore")
        scores = fwk.run_score(state, result.pod, batch)
        result.scores = scores
        if scores.error is not None:
            return result._error(scores.error, "Score")
        totals = scores.totals if fwk.has_score_plugins() else np.ones(len(batch), dtype=np.int64)
        best = (totals == totals.max()).nonzero()[0]
        pick = int(best[self.rng.randrange(len(best))]) if len(best) > 1 else int(best[0])
        result.selected = table.names[int(feasible_rows[pick])]
        return result


@attrs.define(eq=False)
class SchedulingCycle:
    """kube's schedulingCycle for the pods of every profile, and its failure handling.

    ``algorithm`` places pods; ``timer`` times attempts and the algorithm for
    ``metrics`` (``observe_attempt``, ``observe_algorithm``); ``on_report`` receives a CycleReport when an
    attempt ends (here for failures, from the binding cycle for the others).
    """

    cache: ClusterCache
    queue: SchedulingQueue
    recorder: EventRecorder
    algorithm: ScheduleAlgorithm
    metrics: SchedulerMetrics | None = attrs.field(default=None, kw_only=True)
    on_report: Callable[[CycleReport], None] | None = attrs.field(default=None, kw_only=True)
    timer: Callable[[], float] = attrs.field(default=time.perf_counter, kw_only=True)

    def run(self, qpi: QueuedPodInfo, fwk: Framework) -> Attempt | CycleReport:
        """Schedule one popped pod: the Attempt to bind, or the report of its failure."""
        pod = qpi.pod
        started = self.timer()
        if pod.deleting:
            self.recorder.record(pod, "Warning", "FailedScheduling", "Scheduling",
                                 f"skip schedule deleting pod: {pod.key}")
            self.queue.done(pod.key)
            return CycleReport(pod, fwk.profile_name, None, None, SKIPPED)
        cached = self.cache.pods.get(pod.key)
        if cached is not None and cached.uid == pod.uid:
            # Assumed (its binding is in flight) or already bound: an update re-queued it.
            self.queue.done(pod.key)
            return CycleReport(pod, fwk.profile_name, None, None, SKIPPED)
        state = CycleState()
        result = self.algorithm.schedule_pod(fwk, state, pod)
        if result.selected is None:
            return self.end_flight(qpi, fwk, result, result.status, started)
        if self.metrics is not None:
            self.metrics.observe_algorithm(self.timer() - started)
        node = result.selected
        try:
            self.cache.assume(pod, node)
        except CacheError as exc:
            return self.end_flight(qpi, fwk, result, Status.error(str(exc)), started)
        # kube's assume: an assumed pod counts on its node, no longer as nominated elsewhere.
        self.queue.nominator.delete(pod)
        status = fwk.run_reserve(state, pod, node)
        if not status.is_success():
            return self.end_flight(qpi, fwk, result, status if status.code == Code.ERROR else Status.error(
                f"running Reserve plugin \"{status.plugin}\": {status.message()}", status.plugin), started,
                state=state, forget=True)
        status, wait = fwk.run_permit(state, pod, node)
        if not status.is_success() and status.code != Code.WAIT:
            return self.end_flight(qpi, fwk, result, status, started, state=state, forget=True)
        return Attempt(qpi, fwk, state, pod, node, started, result,
                       permit_wait=wait if status.code == Code.WAIT else 0.0)

    def end_flight(self, qpi: QueuedPodInfo, fwk: Framework, result: ScheduleResult, status: Status,
                   started: float, *, waiting: bool = False, state: CycleState | None = None, forget: bool = False,
                   requeue: bool = True, frees_node: bool = False, record: bool = True, observe: bool = True,
                   report: bool = True) -> CycleReport:
        """End the flight of a pod whose attempt failed with ``status`` (an Error, or
        Unschedulable by ``result.unschedulable_plugins``); the report of the attempt.

        In this order, as far as the parameters say:

        * undo the attempt: ``waiting`` drops the pod from its profile's Permit
          waiting list, ``state`` runs Unreserve on ``result.selected`` with
          that cycle state, ``forget`` forgets the assumed pod;
        * ``requeue``: requeue the pod (an Error with backoff, else by its
          rejector plugins; ``add_unschedulable_if_not_present``); without it
          the pod only leaves the scheduler (a binding the cluster refused
          for good);
        * end its flight (``queue.done``); ``frees_node``: then tell the queue
          that an assigned pod left its node (``AssignedPodDelete``: pods its
          resources may now fit), after the requeue as kube defers it, so the
          event is not one this pod saw in flight;
        * ``record`` (kube's recordSchedulingFailure): the nomination that
          preemption made holds in the queue at once, before the API write
          of nominatedNodeName comes back; the FailedScheduling Event and the
          PodScheduled=False condition;
        * ``observe``: count the attempt (``observe``); ``report``: hand the
          report to ``on_report``.
        """
        pod = qpi.pod
        if waiting:
            fwk.handle.waiting_pods.pop(pod.key, None)
        if state is not None and result.selected is not None:  # the node Reserve ran on
            fwk.run_unreserve(state, pod, result.selected)
        if forget:
            self.cache.forget(pod)
        is_error = status.code == Code.ERROR
        message = status.message() or result.message
        if requeue:
            self.queue.add_unschedulable_if_not_present(
                qpi, unschedulable_plugins=() if is_error else result.unschedulable_plugins, error=is_error)
        self.queue.done(pod.key)
        if frees_node:
            self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE)
        if record:
            nominated = result.nominated if result.selected is None and not is_error else None
            if nominated:
                self.queue.nominator.add(pod, nominated)
            note = message if len(message) <= EVENT_NOTE_LIMIT else message[: EVENT_NOTE_LIMIT - 4] + " ..."
            self.recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", note)
            self.recorder.set_pod_condition(pod, "False", "SchedulerError" if is_error else "Unschedulable", message,
                                            nominated_node=nominated)
        outcome = ERROR if is_error else UNSCHEDULABLE
        if observe:
            self.observe(outcome, fwk, started)
        cycle_report = CycleReport(pod, fwk.profile_name, result, None, outcome, message)
        if report:
            self.report(cycle_report)
        return cycle_report

    def observe(self, outcome: str, fwk: Framework, started: float) -> None:
        """Count one attempt in ``scheduler_schedule_attempts_total`` and its duration."""
        if self.metrics is not None:
            self.metrics.observe_attempt(outcome, fwk.profile_name, self.timer() - started)

    def report(self, report: CycleReport) -> None:
        if self.on_report is not None:
            self.on_report(report)


_MAX_RATIO_KINDS = 64


@attrs.define(slots=True)
class _Sampling:
    """How many nodes Filter looks at, chunk by chunk, to find ``to_find`` feasible ones.

    The result is that of filtering chunks of ``to_find``, ``2 * to_find``, ``4 * to_find``... nodes
    until one ends with ``to_find`` found, and keeping the nodes up to the ``to_find``-th feasible one
    when there are more (``processed``): kube's result, whatever the chunks. The chunks are sized by
    the share of nodes that passed in the last cycle (``ratio``), so a Filter that rejects a few nodes
    costs one more small chunk at most, not a second pass over twice as many nodes. Nodes filtered
    past ``processed`` are dropped, as before."""

    to_find: int
    total: int
    ratio: float
    trusted: bool = False  # ``ratio`` was measured on pods that ran the same Filters: the first chunk follows it
    size: int = 0

    def boundary(self, pos: int) -> int:
        """The end of the doubling chunk that holds position ``pos - 1``."""
        end, size = self.to_find, self.to_find
        while end < pos:
            size *= 2
            end += size
        return min(end, self.total)

    def next_size(self, pos: int, found: int) -> int:
        """Enough nodes to find what is missing (one more once ``to_find`` are found), at the last
        cycle's pass rate plus a margin of four standard deviations of the number that pass (nodes
        passing independently at that rate) and 16; doubling while none is found."""
        rate = found / pos if pos else self.ratio
        if rate >= 1.0:  # every node passed: exactly what is missing, as the doubling chunks would
            self.size = self.to_find - found
        elif rate <= 0.0:
            self.size = 2 * self.size if pos else self.to_find
        else:
            need = self.to_find - found + 1
            margin = 4.0 * math.sqrt(need * (1.0 - rate)) / rate + 16
            estimate = int(min(need / rate + margin, self.total))
            # A rate from another kind of pod may be far off: at most twice the last chunk (or to_find).
            # One measured on pods like this one sizes the first chunk in full (a pod that passes 1 node
            # in 5,000 filters them in one chunk, not in chunks of 1x, 2x, 4x to_find).
            trusted_first = self.trusted and not pos
            self.size = estimate if trusted_first else min(estimate, 2 * max(self.size, self.to_find))
        self.size = max(self.size, 1)  # never an empty chunk (the loop would not advance)
        return self.size

    def done(self, alive: np.ndarray, pos: int, found: int) -> bool:
        if found < self.to_find:
            return False
        last = int(alive[:pos].nonzero()[0][self.to_find - 1]) + 1
        return found > self.to_find or pos >= self.boundary(last)

    def processed(self, feasible: np.ndarray, pos: int) -> int:
        """How many nodes count as processed: up to the ``to_find``-th feasible node when the doubling
        chunk it is in holds another one, else the whole chunk (or every node filtered)."""
        if len(feasible) < self.to_find:
            return pos
        last = int(feasible[self.to_find - 1]) + 1
        end = self.boundary(last)
        if len(feasible) > self.to_find and feasible[self.to_find] < end:
            return last
        return min(end, pos)


def _clip(record: FilterRecord, limit: int) -> FilterRecord:
    """``record`` without the positions from ``limit`` on (its positions ascend: a prefix stays)."""
    positions = record.positions
    if not len(positions) or positions[-1] < limit:
        return record
    keep = int(np.searchsorted(positions, limit))
    return FilterRecord(
        plugin=record.plugin,
        positions=positions[:keep],
        severity=record.severity[:keep],
        reasons=tuple((reason, mask[:keep]) for reason, mask in record.reasons),
    )
