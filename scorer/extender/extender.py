"""``Extender``: one profile's Filter and Score plugins over the nodes kube-scheduler sends.

kube-scheduler runs its own plugins, then calls the extender with the nodes
that passed them: ``filter`` runs the profile's PreFilter and Filter plugins
over those nodes (each call is a cycle of its own: a fresh ``CycleState``),
``prioritize`` its PreFilter, PreScore and Score plugins. Nodes are resolved by
name from scorer's cache (the service's watch), in both request forms: the
plugins read what the cache holds (allocatable, the pods on the node, metrics
by node name), exactly what a scorer cycle would.

* A node the cache does not know yet (its watch event has not arrived) passes
  Filter and gets the middle score (5): scorer cannot judge it, kube-scheduler's
  own plugins already did. ``scorer_extender_unknown_nodes_total`` counts them.
* Scores: scorer's total for a node is the weighted sum of the profile's
  normalized scores (0-100 each); the extender answers its weighted mean on
  kube's 0-10 scale, rounded half up: ``round(total * 10 / (100 * sum of
  weights))``. kube-scheduler multiplies it by the extender's ``weight`` and by
  10 and adds it to its own plugins' total.
* A plugin that fails (an Error status) makes the request fail with its message
  (``PluginFailure``); a metric source without data follows each plugin's data
  policy, as in a scorer cycle.
* The pod is not placed here: kube-scheduler binds it, and the pod watch then
  shows it bound, which counts it in flight for the metric plugins like any
  other placement.
* Scored ahead (``ScoreAhead``): kube-scheduler 1.20 follows a filter call with
  its own Score plugins over the nodes that passed (about 1-2 ms at 500 of them)
  and only then asks prioritize about those same nodes. So once filter's answer
  is written, the service computes prioritize's answer for that pod and those
  nodes while kube-scheduler scores, and the prioritize request that follows is
  answered from it: the same plugins on the state filter saw, in filter's own
  cycle state (PreFilter is not run again; the metric plugins score on the
  readings filter took), as kube-scheduler's own Filter and Score plugins see
  one snapshot per cycle. It is used only for
  the very pod (the same decoded object) and the very names filter passed (the
  same kept array), at most ``ScoreAhead.MAX_AGE`` after it was computed; it is
  computed only while kube-scheduler's last prioritize was of what its filter
  passed (a filter not followed by one, or a prioritize of anything else, stops
  it until a prioritize follows its filter again), for more than one passing
  node, and not while decisions are kept.

With ``keep`` > 0 the last ``keep`` decisions are kept for ``/debug/extender``:
per node, what ``scorer explain`` shows (Filter status, per-plugin scores, the
metrics each metric-driven plugin read), plus the score answered; for the first
``DECISION_NODES`` nodes of a request (``nodesOmitted`` counts the rest), so what
is kept stays bounded whatever a request holds.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

from scorer.cache import ClusterCache
from scorer.errors import ScorerError
from scorer.explain import metrics_by_node, status_json
from scorer.extender.wire import MAX_EXTENDER_PRIORITY, ExtenderArgs, NameList, NodeNames
from scorer.framework import Code, CycleState, NodeBatch, Status
from scorer.framework.runtime import Framework
from scorer.framework.types import MAX_NODE_SCORE
from scorer.model import Pod
from scorer.sources import SourceHub
from scorer.state.nodetable import NodeTable

#: The score of a node scorer's cache does not know (the middle of the 0-10 range).
UNKNOWN_NODE_SCORE = MAX_EXTENDER_PRIORITY // 2
#: A decision kept for /debug/extender shows at most this many nodes of its request.
DECISION_NODES = 1_000


class PluginFailure(ScorerError):
    """A plugin of the extender's profile failed (an Error status): the request fails with its message."""


def extender_scores(totals: np.ndarray, total_weight: int) -> np.ndarray:
    """Weighted totals of normalized scores (0-100 each) as their weighted mean on the 0-10 scale,
    rounded half up (0 when no plugin scored)."""
    if total_weight <= 0:
        return np.zeros(len(totals), dtype=np.int64)
    scale = MAX_NODE_SCORE * total_weight  # the largest total
    return (totals.astype(np.int64) * (2 * MAX_EXTENDER_PRIORITY) + scale) // (2 * scale)


class Extender:
    """The extender verbs over profile ``fwk`` and the scheduler's ``cache``."""

    def __init__(self, fwk: Framework, cache: ClusterCache, sources: SourceHub | None = None, *,
                 keep: int = 0, clock: Any = time.time) -> None:
        self.fwk = fwk
        self.cache = cache
        self.sources = sources
        self.clock = clock
        self.decisions: collections.deque[dict[str, Any]] | None = collections.deque(maxlen=keep) if keep else None
        self.on_unknown: Callable[[int], object] | None = None  # told how many names the cache did not know
        self.names = NodeNames()  # the node names of past requests (``read_args``), and the filter's answers
        # ``_rows_by_id``: the rows by id, the table and the (layout_version, generation) they were made for
        self._rows = np.empty(0, np.int64)
        self._rows_table: NodeTable | None = None
        self._rows_key = (-1, -1)
        self.last_passed: NameList | None = None  # the last filter's passing names, when kept (``_passed``)
        self.last_state: CycleState | None = None  # the last filter's cycle state (None: it ran no plugin)

    @property
    def profile(self) -> str:
        return self.fwk.profile_name

    def _resolve(self, args: ExtenderArgs) -> tuple[np.ndarray, Sequence[str]]:
        """(table rows of the nodes the cache knows, their names), in request order."""
        table, names = self.cache.table, args.node_names
        ids = self.names.current_ids(args.kept)
        if ids is not None:  # (the names' rows by id: numpy, no lookup by name)
            rows = self._rows_by_id(table)[ids]
        else:
            rows = np.fromiter(map(table.index.get, names, itertools.repeat(-1)), np.int64, len(names))
        known = rows >= 0
        if known.all():  # (the common case: every name known)
            return rows, names
        if self.on_unknown is not None:
            self.on_unknown(len(names) - int(np.count_nonzero(known)))
        return rows[known], [name for name, ok in zip(names, known.tolist(), strict=True) if ok]

    def _rows_by_id(self, table: NodeTable) -> np.ndarray:
        """The table row of each name ``self.names`` keeps, by id (-1: not in the table); made again when
        the table's rows move (its ``layout_version``) or the names are dropped (their ``generation``),
        extended with the names learnt since."""
        names = self.names
        key = (table.layout_version, names.generation)
        if table is not self._rows_table or key != self._rows_key:
            self._rows_table, self._rows_key, self._rows = table, key, np.empty(0, np.int64)
        if len(self._rows) < len(names):
            new = names.names_by_id[len(self._rows):]
            self._rows = np.concatenate([self._rows, np.fromiter(map(table.index.get, new, itertools.repeat(-1)),
                                                                 np.int64, len(new))])
        return self._rows

    # -- filter ------------------------------------------------------------------------
    def filter(self, args: ExtenderArgs) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(the names that pass, in request order; Unschedulable nodes and why; UnschedulableAndUnresolvable
        nodes and why). ``PluginFailure`` when a plugin fails."""
        fwk, pod, table = self.fwk, args.pod, self.cache.table
        self.last_state = None
        rows, known = self._resolve(args)
        statuses: dict[str, Status] = {}
        rejected: np.ndarray | None = None  # by request position (every name known, none narrowed)
        if len(rows):
            state = self.last_state = CycleState()
            allowed, status = fwk.run_pre_filter(state, pod, NodeBatch(table, rows))
            _raise_error(status, "PreFilter")
            if not status.is_success():  # PreFilter rejects the pod on every node
                statuses = dict.fromkeys(known, status)
            else:
                if allowed is not None:  # a PreFilterResult narrowed the nodes
                    narrowed = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                      (f"node(s) didn't satisfy plugin(s) [{', '.join(state.narrowed_by)}]",))
                    keep = np.array([name in allowed for name in known], dtype=bool)
                    statuses = {name: narrowed for name, kept in zip(known, keep.tolist(), strict=True) if not kept}
                    rows, known = rows[keep], [name for name, kept in zip(known, keep.tolist(), strict=True) if kept]
                outcome = fwk.run_filters(state, pod, table, rows)
                if outcome.error is not None:
                    _raise_error(outcome.error, "Filter")
                for record in outcome.records:
                    positions = record.positions.tolist()
                    if len(record.reasons) == 1 and not np.count_nonzero(record.severity != record.severity[0]):
                        status = record.status_at(0)  # one reason, one code: one status for all its nodes
                        statuses.update((known[position], status) for position in positions)
                    else:
                        for i, position in enumerate(positions):
                            statuses[known[position]] = record.status_at(i)
                if known is args.node_names and outcome.records:
                    rejected = np.zeros(len(known), dtype=bool)
                    for record in outcome.records:
                        rejected[record.positions] = True
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        reasons: dict[int, str] = {}  # by id of the Status: most nodes share a few
        for name, status in statuses.items():
            reason = reasons.get(id(status))
            if reason is None:
                reason = reasons[id(status)] = _reason(status)
            (unresolvable if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else failed)[name] = reason
        passed = self._passed(args, statuses, rejected)
        if self.decisions is not None:
            self._record("filter", args, {name: {"feasible": name not in statuses,
                                                 "filter": status_json(statuses.get(name))}
                                          for name in args.node_names[:DECISION_NODES]})
        return passed, failed, unresolvable

    def _passed(self, args: ExtenderArgs, statuses: dict[str, Status], rejected: np.ndarray | None) -> list[str]:
        """The names that pass (no status; ``rejected``, when given, marks those with one by position), in
        request order. Read through ``self.names`` (``args.kept``), they are kept there under their JSON with
        their ids: kube-scheduler sends them to prioritize next."""
        ids = self.names.current_ids(args.kept)
        self.last_passed = None
        if ids is None:
            return [name for name in args.node_names if name not in statuses] if statuses else list(args.node_names)
        if statuses:
            if rejected is None:
                rejected = np.fromiter(map(statuses.__contains__, args.node_names), bool, len(ids))
            passing = np.logical_not(rejected)
            passed = list(itertools.compress(args.node_names, passing.tolist()))
            ids = ids[passing]
        else:
            passed = list(args.node_names)
        self.last_passed = self.names.keep_list(orjson.dumps(passed), tuple(passed), ids)
        return passed

    # -- prioritize --------------------------------------------------------------------
    def prioritize(self, args: ExtenderArgs, state: CycleState | None = None) -> list[int]:
        """The 0-10 score of every node of the request, in its order. ``PluginFailure`` when a plugin fails.
        ``state``: the cycle state of the filter that passed these nodes, for the same pod (``ScoreAhead``):
        PreFilter is not run again, and the plugins score on what that filter read and kept, as Score
        follows Filter in one cycle state in a scorer cycle."""
        fwk, pod, table = self.fwk, args.pod, self.cache.table
        rows, known = self._resolve(args)
        by_name: dict[str, int] = {}
        details: dict[str, dict[str, Any]] = {}
        if len(rows):
            batch = NodeBatch(table, rows)
            if state is None:
                state = CycleState()
                _, status = fwk.run_pre_filter(state, pod, batch)  # (plugins may score from PreFilter's state)
                _raise_error(status, "PreFilter")
            _raise_error(fwk.run_pre_score(state, pod, batch), "PreScore")
            outcome = fwk.run_score(state, pod, batch)
            if outcome.error is not None:
                _raise_error(outcome.error, "Score")
            total_weight = sum(plugin.weight for plugin in outcome.plugins)
            scores: list[int] = extender_scores(outcome.totals, total_weight).tolist()
            if len(scores) == len(args.node_names) and self.decisions is None:  # every node known
                return scores
            by_name = dict(zip(known, scores, strict=True))
            if self.decisions is not None:
                for i, name in enumerate(known[:DECISION_NODES]):
                    per_plugin = {p.plugin: {"raw": int(p.raw[i]), "normalized": int(p.normalized[i]),
                                             "weight": p.weight, "weighted": int(p.normalized[i]) * p.weight}
                                  for p in outcome.plugins}
                    details[name] = {"scores": per_plugin, "total": int(outcome.totals[i])}
        answer = [by_name.get(name, UNKNOWN_NODE_SCORE) for name in args.node_names]
        if self.decisions is not None:
            self._record("prioritize", args, {name: {**details.get(name, {"scores": {}, "total": 0, "unknown": True}),
                                                     "extenderScore": score}
                                              for name, score in zip(args.node_names[:DECISION_NODES],
                                                                     answer[:DECISION_NODES], strict=True)})
        return answer

    # -- /debug/extender ---------------------------------------------------------------
    def _record(self, verb: str, args: ExtenderArgs, nodes: dict[str, dict[str, Any]]) -> None:
        assert self.decisions is not None
        table = self.cache.table
        rows = np.array([table.index[name] for name in nodes if name in table.index], dtype=np.int64)
        metrics = metrics_by_node(self.sources, self.fwk, NodeBatch(table, rows)) if self.sources is not None else {}
        for name, entry in nodes.items():
            entry["metrics"] = metrics.get(name, {})
        self.decisions.append({"verb": verb, "pod": args.pod.key, "profile": self.profile,
                               "at": round(self.clock(), 3), "nodes": nodes,
                               "nodesOmitted": max(len(args.node_names) - DECISION_NODES, 0)})


class ScoreAhead:
    """prioritize's answer for the pod and the nodes the last filter passed, computed before it is asked
    (module docstring, "Scored ahead"). One answer at a time: kube-scheduler asks about one pod at a time.

    The caller (``scorer.extender.http``) tells it each filter (``filtered``: whether to compute ahead)
    and offers each prioritize (``take``: the answer and the node names it found unknown, or None to
    compute it as usual); ``store`` keeps an answer computed ahead. ``counted`` is told each answer's end:
    ``"used"`` (taken) or ``"unused"`` (dropped untaken)."""

    #: An answer computed ahead is not used after this many seconds (kube-scheduler asks within ms).
    MAX_AGE = 1.0

    def __init__(self, counted: Callable[[str], object] = lambda result: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.counted = counted
        self.clock = clock
        self.enabled = False  # kube-scheduler followed its last filter with a prioritize of what passed
        self._last: tuple[Pod, NameList] | None = None  # the last filter's pod and passing names
        self._answer: tuple[Pod, NameList, bytes, int, float] | None = None

    def filtered(self, pod: Pod, passed: NameList | None, *, keeping_decisions: bool = False) -> bool:
        """A filter for ``pod`` passed ``passed`` (None: not kept); whether to compute prioritize's answer
        for them now. An answer computed for the filter before that was not asked for stops it."""
        if self._answer is not None:
            self._answer = None
            self.counted("unused")
            self.enabled = False
        self._last = (pod, passed) if passed is not None else None
        return self.enabled and passed is not None and len(passed.names) > 1 and not keeping_decisions

    def wanted(self, pod: Pod, passed: NameList) -> bool:
        """Whether an answer for ``pod`` and ``passed`` is still to be computed: no filter and no prioritize
        came since that filter."""
        return self._last is not None and self._last[0] is pod and self._last[1] is passed

    def store(self, pod: Pod, passed: NameList, answer: bytes, unknown: int = 0) -> None:
        """Keep ``answer`` for ``pod`` and ``passed`` (``unknown``: how many of the names the cache did not
        know), unless another request came in between."""
        if self.wanted(pod, passed):
            self._answer = (pod, passed, answer, unknown, self.clock())

    def take(self, pod: Pod, names: NameList | None) -> tuple[bytes, int] | None:
        """The answer computed ahead for a prioritize of ``pod`` over ``names``, None when there is none
        for them (or it is older than ``MAX_AGE``). A prioritize of what the last filter passed (the same
        decoded pod, the same kept names) turns computing ahead on; any other turns it off: a pod decoded
        anew for each request (larger than ``PodCache`` keeps) or names not kept never match, and are then
        not computed twice."""
        last, self._last = self._last, None
        follows = last is not None and last[0] is pod and last[1] is names
        self.enabled = follows
        answer, self._answer = self._answer, None
        if answer is None:
            return None
        if follows and self.clock() - answer[4] <= self.MAX_AGE:  # (an answer is stored for the last filter)
            self.counted("used")
            return answer[2], answer[3]
        self.counted("unused")
        return None


def _raise_error(status: Status, point: str) -> None:
    if status.code == Code.ERROR:
        raise PluginFailure(f"{point}: {status.message()}")


def _reason(status: Status) -> str:
    return ", ".join(reason for reason in status.reasons if reason) or \
        (f"rejected by {status.plugin}" if status.plugin else status.code.label)
