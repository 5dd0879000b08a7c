"""DefaultPreemption: the PostFilter that makes room for a pod that fits nowhere by
evicting lower-priority pods (kube's ``defaultpreemption``, reference §9).

When no node passed Filter, for a pod that may preempt (``preemptionPolicy``
is not ``Never``; and if it is already nominated to a node where a
lower-priority pod is terminating, it waits for that pod instead; a victim
counts as terminating from the moment its deletion is enqueued, see 4.):

1. Potential nodes: those whose Filter status was not
   UnschedulableAndUnresolvable (removing pods cannot help the others).
2. Dry run, from a random offset over the potential nodes, until
   ``max(n * minCandidateNodesPercentage / 100, minCandidateNodesAbsolute)``
   (capped at n) candidates are found, at least one without PDB violations.
   On a node: remove every pod of lower priority (PreFilter ``remove_pod``
   extensions update the cycle state); if the pod still does not fit, the
   node is no candidate. Else reprieve the removed pods, most important
   first (priority desc, then earlier start time), those whose eviction
   would violate a PodDisruptionBudget first: a pod whose return keeps the
   pod fitting stays; the others are the victims. A PDB is violated when its
   ``disruptionsAllowed`` would drop below 0 (pods listed in its
   ``disruptedPods`` are not counted again).
3. Pick one node (``pick_one_node``): fewest PDB violations; then the lowest
   highest-victim priority; then the smallest sum of (priority + 2^31);
   then the fewest victims; then the latest of the earliest start times of
   each node's highest-priority victims; then the first.
4. Prepare: every victim is deleted (enqueued on the recorder, written in
   order by the cluster writer, no I/O in the cycle) with a ``Preempted``
   Event ("Preempted by pod <uid> on node <node>"). kube's DELETE is done
   when its cycle ends; here the write comes later, so the cache assumes the
   deletion at once (``ClusterCache.assume_deleted``): a retry of the
   preemptor before the cluster shows the victims terminating waits for them
   as kube's does, instead of preempting them again. A victim waiting at
   Permit is rejected; lower-priority pods nominated to that node lose their
   nomination. The pod is nominated to the node (the cycle records it in the
   queue's nominator and in ``status.nominatedNodeName``) and retried when
   the victims are gone.

Without a candidate the status is ``preemption: 0/N nodes are available:
...`` over the nodes looked at ("Preemption is not helpful for scheduling"
for unresolvable ones, "No preemption victims found for incoming pod" for
nodes without lower-priority pods, the Filter reason for nodes where
removing them does not help), and the pod's nomination is cleared.

Vectorized: when no PreFilter extension keeps state for this pod (the
plain resource case), a window of nodes is copied into one scratch
NodeTable and each step (remove everything, then reprieve the k-th pod of
every node) is one batched Filter call over all the nodes of the window;
with such state (pod affinity, topology spread) each node gets its own
cloned cycle state and scratch row. Messages follow kube >= 1.22 (the
``preemption:`` text and victims sorted by importance); the rest is 1.20.
"""

from __future__ import annotations

import datetime
import functools
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.runtime import PREEMPTION_VICTIMS, FilterOutcome, NodeStatuses, scratch_table
from scorer.framework.status import Code, Status

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.interface import PreFilterExtensions
    from scorer.framework.runtime import Framework, Handle
    from scorer.model import Pod, PodDisruptionBudget
    from scorer.state.nodetable import NodeTable

NAME = "DefaultPreemption"
REASON_NOT_HELPFUL = "Preemption is not helpful for scheduling"
REASON_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING = "not eligible due to a terminating pod on the nominated node."
MSG_PREFIX = "preemption: "
MAX_INT32 = 2**31 - 1
_NOT_STARTED = datetime.datetime.max.replace(tzinfo=datetime.UTC)  # kube: a pod without startTime counts as now


@attrs.frozen(slots=True)
class DefaultPreemptionArgs:
    """Args of DefaultPreemption (kubescheduler.config.k8s.io/v1), kube's defaults."""

    min_candidate_nodes_percentage: int = attrs.field(default=10, metadata={"bits": 32})
    min_candidate_nodes_absolute: int = attrs.field(default=100, metadata={"bits": 32})

    def validate(self) -> list[tuple[str, str]]:
        """kube's ValidateDefaultPreemptionArgs."""
        errors: list[tuple[str, str]] = []
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= pct <= 100:
            errors.append(("minCandidateNodesPercentage", f"Invalid value: {pct}: not in valid range [0, 100]"))
        if absolute < 0:
            errors.append(("minCandidateNodesAbsolute", f"Invalid value: {absolute}: not in valid range [0, inf)"))
        if pct == 0 and absolute == 0:
            errors.append(("minCandidateNodesPercentage",
                           "Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"))
            errors.append(("minCandidateNodesAbsolute",
                           "Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"))
        return errors


@attrs.frozen(slots=True)
class Candidate:
    """A node where preemption would make the pod fit: the victims, most important first."""

    node: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int = 0


class DefaultPreemption:
    name = NAME

    def __init__(self, args: DefaultPreemptionArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def post_filter(self, state: CycleState, pod: Pod, statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        metrics = self.handle.metrics
        candidate, status = self.preempt(state, pod, statuses)
        if candidate is None:
            if metrics is not None:
                metrics.preemption_attempts.inc()
            return None, status
        self.prepare_candidate(candidate, pod)
        if metrics is not None:
            metrics.observe_preemption(len(candidate.victims))
        state.write(PREEMPTION_VICTIMS, candidate.victims)
        return candidate.node, Status()

    # -- the algorithm, without side effects ------------------------------------------------
    def preempt(self, state: CycleState, pod: Pod, statuses: Mapping[str, Status]) -> tuple[Candidate | None, Status]:
        """The chosen candidate, or None and the Unschedulable status saying why."""
        nominated = self.handle.nominated_node(pod)
        ok, message = self.eligible(pod, nominated, statuses)
        if not ok:
            return None, Status(Code.UNSCHEDULABLE, (MSG_PREFIX + message,))
        candidates, node_statuses = self.find_candidates(state, pod, statuses)
        if not candidates:
            if nominated:
                self._clear_nomination(pod)
            return None, Status(Code.UNSCHEDULABLE, (MSG_PREFIX + fit_error(node_statuses),))
        return select_candidate(candidates), Status()

    def eligible(self, pod: Pod, nominated: str, statuses: Mapping[str, Status]) -> tuple[bool, str]:
        """kube's PodEligibleToPreemptOthers; a pod whose deletion the cache assumes (a victim
        of an earlier preemption, its deletion not yet seen) is terminating."""
        if pod.preemption_policy == "Never":
            return False, MSG_POLICY_NEVER
        if nominated:
            status = statuses.get(nominated)
            if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            cache = self.handle.cache
            row = cache.table.index.get(nominated)
            if row is not None and any(p.priority < pod.priority and cache.is_deleting(p)
                                       for p in cache.table.pods[row].values()):
                return False, MSG_TERMINATING
        return True, ""

    def num_candidates(self, num_nodes: int) -> int:
        """kube's calculateNumCandidates."""
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def find_candidates(self, state: CycleState, pod: Pod,
                        statuses: Mapping[str, Status]) -> tuple[list[Candidate], dict[str, Status]]:
        """The candidates of the dry run (those without PDB violations first) and the status of
        every node looked at that is no candidate."""
        table = self.handle.cache.table
        unresolvable = _unresolvable_mask(statuses, table)
        not_helpful = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (REASON_NOT_HELPFUL,), NAME)
        names = table.names
        node_statuses: dict[str, Status] = {names[row]: not_helpful for row in np.flatnonzero(unresolvable).tolist()}
        potential = np.flatnonzero(~unresolvable)
        if not len(potential):
            return [], node_statuses
        rng = self.handle.rng or random
        offset = rng.randrange(len(potential))
        wanted = self.num_candidates(len(potential))
        order = np.concatenate([potential[offset:], potential[:offset]]).astype(np.int64, copy=False)
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        fwk = self._framework()
        extensions = fwk.active_pre_filter_extensions(state)
        pos, size = 0, max(wanted, 1)
        while pos < len(order):
            if pos and (found := len(non_violating) + len(violating)) and non_violating:
                # Enough nodes for the candidates still wanted at the rate seen so far, plus a margin
                # (the windows only bound the work: candidates are taken in order whatever their size).
                size = min(size, (wanted - found) * pos // found + (wanted - found) // 4 + 8)
            window = order[pos: pos + size]
            if extensions:
                results = self._select_victims_with_extensions(fwk, extensions, state, pod, window)
            else:
                results = select_victims(fwk, state, pod, table, window, self._budgets)
            for name, victims, violations, status in results:
                if status is not None:
                    node_statuses[name] = status
                    continue
                group = non_violating if violations == 0 else violating
                if len(group) < wanted:
                    group.append(Candidate(name, victims, violations))
                if non_violating and len(non_violating) + len(violating) >= wanted:
                    return non_violating + violating, node_statuses
            pos += len(window)
            size *= 2
        return non_violating + violating, node_statuses

    def _select_victims_with_extensions(self, fwk: Framework, extensions: list[PreFilterExtensions],
                                        state: CycleState, pod: Pod, window: np.ndarray) -> list[NodeResult]:
        """``select_victims`` when PreFilter extensions keep state about other pods: a node
        whose lower-priority pods some extension may count (``affected_by``; an extension
        without it counts every pod) gets its own state clone and moves its pods one by one
        (kube's per-node path); the others leave every extension's state as it is, so they
        go through the bulk path together, on the shared state. Results in ``window`` order."""
        table = self.handle.cache.table
        priority = pod.priority
        own: list[int] = []
        shared: list[int] = []
        for row in window.tolist():
            lower = (p for p in table.pods[row].values() if p.priority < priority)
            if any(_affects(extension, state, pod, other) for other in lower for extension in extensions):
                own.append(row)
            else:
                shared.append(row)
        by_row: dict[int, NodeResult] = {}
        if shared:
            rows = np.array(shared, dtype=np.int64)
            by_row.update(zip(shared, select_victims(fwk, state, pod, table, rows, self._budgets,
                                                     extensions=False), strict=True))
        for row in own:
            (by_row[row],) = select_victims(fwk, state.clone(), pod, table, np.array([row]), self._budgets)
        return [by_row[row] for row in window.tolist()]

    # -- side effects -------------------------------------------------------------------------
    def prepare_candidate(self, candidate: Candidate, pod: Pod) -> None:
        """kube's PrepareCandidate: delete the victims (with their Preempted Events; each assumed
        deleted in the cache until the cluster shows it), reject the ones waiting at Permit, clear
        lower-priority nominations on the node."""
        recorder = self.handle.recorder
        for victim in candidate.victims:
            if recorder is not None:
                recorder.delete_pod(victim)
                self.handle.cache.assume_deleted(victim)
            waiting = self.handle.waiting_pods.get(victim.key)
            if waiting is not None:
                waiting.reject(NAME, "preempted")
            if recorder is not None:
                recorder.record(victim, "Normal", "Preempted", "Preempting",
                                f"Preempted by pod {pod.uid} on node {candidate.node}", related=pod)
        nominator = self.handle.nominator
        if nominator:
            for other in nominator.nominated_pods_for_node(candidate.node):
                if other.priority < pod.priority:
                    nominator.delete(other)
                    if recorder is not None:
                        recorder.clear_nominated_node(other)

    # -- helpers ------------------------------------------------------------------------------
    def _framework(self) -> Framework:
        fwk = self.handle.framework
        if fwk is None:
            raise RuntimeError("DefaultPreemption needs handle.framework (built by a Framework)")
        return fwk

    def _clear_nomination(self, pod: Pod) -> None:
        if self.handle.nominator:
            self.handle.nominator.delete(pod)
        if self.handle.recorder is not None:
            self.handle.recorder.clear_nominated_node(pod)

    def _budgets(self, namespace: str) -> list[PodDisruptionBudget]:
        return self.handle.cache.workloads.budgets_for(namespace)


# -- dry run on scratch nodes -------------------------------------------------------------------

# (node, victims, PDB violations, status): status None = a candidate
NodeResult = tuple[str, tuple["Pod", ...], int, "Status | None"]


def _affects(extension: PreFilterExtensions, state: CycleState, pod: Pod, other: Pod) -> bool:
    """May ``extension``'s ``remove_pod`` / ``add_pod`` of ``other`` change its state for ``pod``?
    True unless the extension says not (its optional ``affected_by``)."""
    affected_by = getattr(extension, "affected_by", None)
    if affected_by is None:
        return True
    try:
        return bool(affected_by(state, pod, other))
    except Exception:  # a plugin's error: take the path that asks it nothing
        return True


def select_victims(fwk: Framework, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray,
                   budgets: Callable[[str], list[PodDisruptionBudget]], *,
                   extensions: bool | None = None) -> list[NodeResult]:
    """kube's selectVictimsOnNode for every node of ``rows`` at once, on one scratch copy.

    ``state`` is changed through the PreFilter extensions: give each node its own clone
    when an extension is active (then ``rows`` is one node, and pods are removed and
    added one by one, each followed by the extensions' ``remove_pod`` / ``add_pod``).
    Without one, pods move in bulk (``NodeTable.remove_pods_at`` / ``add_pods_at``: one
    numpy operation per step). Each step is one Filter call over the nodes still
    concerned: first with every lower-priority pod removed, then with the k-th most
    important of them added back on every node that has one.
    """
    scratch = scratch_table(table, rows)
    if extensions is None:
        extensions = bool(fwk.active_pre_filter_extensions(state))
    names = scratch.names
    results: list[NodeResult | None] = [None] * len(names)
    order: list[list[Pod]] = []
    priority = pod.priority
    for i, name in enumerate(names):
        lower = [p for p in scratch.pods[i].values() if p.priority < priority]
        order.append(lower)
        if not lower:
            results[i] = (name, (), 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (REASON_NO_VICTIMS,), NAME))
            continue
        lower.sort(key=_importance_key)
        if not extensions:
            continue
        for victim in lower:
            scratch.remove_pod(victim, name)
            status = fwk.run_pre_filter_extension_remove_pod(state, pod, victim, scratch.node_info(i))
            if not status.is_success():
                results[i] = (name, (), 0, status)
                break
    concerned = [i for i in range(len(names)) if results[i] is None]
    # Without extensions every lower-priority pod moves in bulk: the flat list of them (node by
    # node, most important first), their request vectors computed once, and per node the
    # indices of its pods in the flat list, in reprieve order.
    flat: list[Pod] = []
    requests = np.zeros((0, 0), dtype=np.int64)
    indices: dict[int, list[int]] = {}
    if not extensions and concerned:
        flat_rows: list[int] = []
        for i in concerned:
            indices[i] = list(range(len(flat), len(flat) + len(order[i])))
            flat.extend(order[i])
            flat_rows.extend([i] * len(order[i]))
        requests = scratch.pod_requests(flat)
        scratch.remove_pods_at(flat_rows, flat, requests)
    if concerned:
        outcome = fwk.run_filters_with_nominated_pods(state, pod, scratch, np.array(concerned, dtype=np.int64))
        failed = _statuses(outcome, len(concerned))
        for j, i in enumerate(concerned):
            if failed[j] is not None:
                results[i] = (names[i], (), 0, failed[j])
    fitting = [i for i in range(len(names)) if results[i] is None]
    # Reprieve: PDB-violating pods first, each group most important first (kube sorts, then splits stably).
    violating: dict[int, set[str]] = {}
    for i in fitting:
        bad, good = split_by_pdb_violation(order[i], budgets)
        if bad:
            if not extensions:
                where = {id(p): k for p, k in zip(order[i], indices[i], strict=True)}
                indices[i] = [where[id(p)] for p in (*bad, *good)]
            order[i] = bad + good
            violating[i] = {p.key for p in bad}
    victims: dict[int, list[Pod]] = {i: [] for i in fitting}
    violations = dict.fromkeys(fitting, 0)
    step = 0
    while active := [i for i in fitting if step < len(order[i])]:
        back_pods = [order[i][step] for i in active]
        if extensions:
            for i, back in zip(active, back_pods, strict=True):
                scratch.add_pod(back, names[i])
                fwk.run_pre_filter_extension_add_pod(state, pod, back, scratch.node_info(i))
        else:
            back_at = [indices[i][step] for i in active]
            scratch.add_pods_at(active, back_pods, requests[back_at])
        outcome = fwk.run_filters_with_nominated_pods(state, pod, scratch, np.array(active, dtype=np.int64))
        alive = outcome.alive.tolist() if outcome.error is None else [False] * len(active)
        evicted: list[int] = []
        for j, i in enumerate(active):
            if alive[j]:
                continue
            back = back_pods[j]
            if extensions:
                scratch.remove_pod(back, names[i])
                fwk.run_pre_filter_extension_remove_pod(state, pod, back, scratch.node_info(i))
            else:
                evicted.append(j)
            victims[i].append(back)
            if i in violating and back.key in violating[i]:
                violations[i] += 1
        if evicted:
            scratch.remove_pods_at([active[j] for j in evicted], [back_pods[j] for j in evicted],
                                   requests[[back_at[j] for j in evicted]])
        step += 1
    for i in fitting:
        chosen = victims[i]
        if not chosen:
            results[i] = (names[i], (), 0, Status.error(f'expected at least one victim pod on node "{names[i]}"',
                                                        NAME))
            continue
        chosen.sort(key=importance)  # kube >= 1.22: highest priority first across both groups
        results[i] = (names[i], tuple(chosen), violations[i], None)
    return [r for r in results if r is not None]


def _unresolvable_mask(statuses: Mapping[str, Status], table: NodeTable) -> np.ndarray:
    """Bool per row of ``table``: the node's Filter status is UnschedulableAndUnresolvable
    (from the cycle's NodeStatuses without making a Status; any other mapping is walked)."""
    if isinstance(statuses, NodeStatuses) and statuses.names is table.names:
        mask = statuses.unresolvable_mask()
        if len(mask) == len(table):
            return mask
    mask = np.zeros(len(table), dtype=bool)
    if statuses:
        for row, name in enumerate(table.names):
            status = statuses.get(name)
            if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                mask[row] = True
    return mask


def _statuses(outcome: FilterOutcome, size: int) -> list[Status | None]:
    """Per position of a FilterOutcome: None where the node passed, else its status."""
    if outcome.error is not None:
        return [outcome.error] * size
    out: list[Status | None] = [None] * size
    for record in outcome.records:
        for j, pos in enumerate(record.positions.tolist()):
            if out[pos] is None:
                out[pos] = record.status_at(j)
    return out


def importance(pod: Pod) -> tuple[int, datetime.datetime]:
    """Sort key of kube's MoreImportantPod: higher priority first, then the earlier start."""
    return -pod.priority, start_time(pod)


def _importance_key(pod: Pod) -> tuple[int, datetime.datetime]:  # ``importance``, one call less per pod
    return -pod.priority, (_parse_start(pod.start_time) if pod.start_time else _NOT_STARTED)


def start_time(pod: Pod) -> datetime.datetime:
    """``status.startTime``; a pod without one counts as starting now (later than any start)."""
    return _parse_start(pod.start_time) if pod.start_time else _NOT_STARTED


@functools.lru_cache(maxsize=4096)
def _parse_start(text: str) -> datetime.datetime:
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return _NOT_STARTED
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def split_by_pdb_violation(pods: Sequence[Pod], budgets: Callable[[str], list[PodDisruptionBudget]]
                           ) -> tuple[list[Pod], list[Pod]]:
    """kube's filterPodsWithPDBViolation: (violating, non-violating), order kept. Each matching
    budget's ``disruptionsAllowed`` is decremented per pod (not for pods in its
    ``disruptedPods``); a pod whose eviction takes one below 0 violates it."""
    allowed: dict[tuple[str, str], int] = {}
    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.labels:  # a pod without labels matches no budget
            for budget in budgets(pod.namespace):
                if not budget.protects(pod) or pod.name in budget.disrupted_pods:
                    continue
                key = (budget.namespace, budget.name)
                left = allowed.get(key, budget.disruptions_allowed) - 1
                allowed[key] = left
                if left < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


def select_candidate(candidates: Sequence[Candidate]) -> Candidate:
    """kube's SelectCandidate / pickOneNodeForPreemption over non-empty ``candidates``."""
    if len(candidates) == 1:
        return candidates[0]
    return pick_one_node(candidates)


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate:
    """The six criteria of kube's pickOneNodeForPreemption, each keeping the best so far."""
    # The first four criteria at once: the candidates of the smallest tuple are those each
    # criterion in turn keeps.
    keys = [(c.num_pdb_violations, c.victims[0].priority,
             sum(v.priority for v in c.victims) + len(c.victims) * (MAX_INT32 + 1), len(c.victims))
            for c in candidates]
    best = min(keys)
    remaining = [c for c, k in zip(candidates, keys, strict=True) if k == best]
    if len(remaining) == 1:
        return remaining[0]
    # The latest of the earliest start times of each node's highest-priority victims; ties: the first.
    chosen = remaining[0]
    latest = _earliest_start_of_highest(chosen)
    for candidate in remaining[1:]:
        earliest = _earliest_start_of_highest(candidate)
        if earliest > latest:
            chosen, latest = candidate, earliest
    return chosen


def _earliest_start_of_highest(candidate: Candidate) -> datetime.datetime:
    top = candidate.victims[0].priority
    return min(start_time(v) for v in candidate.victims if v.priority == top)


def fit_error(statuses: dict[str, Status]) -> str:
    """kube's FitError text over the nodes preemption looked at."""
    histogram: Counter[str] = Counter()
    for status in statuses.values():
        for reason in status.reasons:
            histogram[reason] += 1
    text = f"0/{len(statuses)} nodes are available"
    if histogram:
        text += ": " + ", ".join(sorted(f"{count} {reason}" for reason, count in histogram.items()))
    return text + "."


def factory(args: DefaultPreemptionArgs | None, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args if args is not None else DefaultPreemptionArgs(), handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=DefaultPreemptionArgs, plugin_type=DefaultPreemption)
