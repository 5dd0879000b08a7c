"""InterPodAffinity: the plugin (kube's ``interpodaffinity``, reference §3.11).

Filter (PreFilter builds three counts per topology pair ``(key, value)``):

* ``affinity[(k, v)]``: existing pods matching *all* the incoming pod's required
  affinity terms, counted once per term ``t`` at ``(t.key, value of the pod's
  node)``;
* ``anti[(k, v)]``: existing pods matching each required anti-affinity term;
* ``existing_anti[(k, v)]``: existing pods' required anti-affinity terms that
  the incoming pod matches, at their node's value.

A node fails, with the first of these that applies:

1. it lacks a required affinity term's key, or some term has
   ``affinity[(t.key, node value)] == 0`` -- unless ``affinity`` is empty
   everywhere and the pod matches all its own terms (the first pod of a group)
   -> UnschedulableAndUnresolvable "node(s) didn't match pod affinity rules";
2. some anti-affinity term has ``anti[(t.key, node value)] > 0``
   -> Unschedulable "node(s) didn't match pod anti-affinity rules";
3. some node label ``(k, v)`` has ``existing_anti[(k, v)] > 0``
   -> Unschedulable "node(s) didn't satisfy existing pods anti-affinity rules".

(kube 1.20 also added "node(s) didn't match pod affinity/anti-affinity" to each;
later releases give the one reason, as here.) PreFilter returns Skip when the
pod has no required terms and no existing pod's anti-affinity matches it
(kube >= 1.25); an invalid selector in any of the pod's terms is
UnschedulableAndUnresolvable "parsing pod: ..." naming the value.

Score (PreScore builds ``score[(k, v)]``, summed over existing pods P on nodes with label k):

* incoming preferred affinity term matched by P: ``+weight``; anti-affinity: ``-weight``;
* P's required affinity term matched by the incoming pod: ``+hardPodAffinityWeight`` (if > 0);
* P's preferred affinity term matched by the incoming pod: ``+weight``; anti: ``-weight``.

``raw(node) = Σ_k score[(k, node's value of k)]``. Normalize (current kube's,
reference §3.11): ``min``/``max`` over the scored nodes' raws (kube <= 1.2x
anchored both at 0), ``score = int(100 × (raw − min) / (max − min))`` when
``max > min``, else 0: raws 10 and 5 give 100 and 0.
PreScore returns Skip when nothing contributed, or with
``ignorePreferredTermsOfExistingPods`` when the incoming pod has no preferred
terms (kube >= 1.26 skips the whole score then, existing pods' required
affinity included).

Namespaces: a term selects its ``namespaces``, else its owner's namespace; a
``namespaceSelector`` adds the Namespaces (``handle.cache.namespaces``) whose
labels it matches ({} = all, as kube >= 1.22 does); ``matchLabelKeys`` /
``mismatchLabelKeys`` add ``key In/NotIn (owner's value)`` (kube >= 1.29).
Terminating pods count (kube's NodeInfo lists them).

Indexed, not scanned: the incoming pod's terms read
``cache.pod_index.selector_counts(namespace, selector)`` per selected namespace
(per-node counts kept up to date by the cache); existing pods' terms come from
the ``ExistingTerms`` extension index, one group per distinct term. Per-node
counts become per-value counts with one ``np.bincount`` over the table's label
codes, so a cycle is O(nodes) numpy plus O(distinct terms), never O(pods).
State is keyed by topology values, so Filter, ``add_pod`` and ``remove_pod``
work on any NodeBatch (preemption's scratch tables).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.events import ADD, ALL, NODE, POD, UPDATE_NODE_LABEL, ClusterEvent
from scorer.framework.status import Code, Status
from scorer.framework.types import MAX_NODE_SCORE, FilterVerdict, NodeBatch
from scorer.model import LabelSelector, Pod
from scorer.plugins.interpodaffinity.index import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    ExistingTerms,
    RowSums,
    TopologyCounts,
)
from scorer.plugins.interpodaffinity.terms import (
    AffinityTerm,
    NamespaceSet,
    PodTerms,
    all_of,
    pod_terms,
)

if TYPE_CHECKING:
    from scorer.cache import ClusterCache
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.state.nodeinfo import NodeInfo

NAME = "InterPodAffinity"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
MAX_HARD_POD_AFFINITY_WEIGHT = 100


@attrs.frozen(slots=True)
class InterPodAffinityArgs:
    """Args of InterPodAffinity (kube's defaults: weight 1, preferred terms of existing pods used).

    ``hard_pod_affinity_weight`` is the score an existing pod's *required*
    affinity term adds when the incoming pod matches it (0 turns that off).
    ``ignore_preferred_terms_of_existing_pods`` skips scoring for pods without
    preferred pod (anti-)affinity terms of their own.
    """

    hard_pod_affinity_weight: int = attrs.field(default=1, metadata={"bits": 32})
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self) -> list[tuple[str, str]]:
        weight = self.hard_pod_affinity_weight
        if not 0 <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
            return [("hardPodAffinityWeight",
                     f"Invalid value: {weight}: not in valid range [0, {MAX_HARD_POD_AFFINITY_WEIGHT}]")]
        return []


_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

Counts = dict[str, TopologyCounts]  # topology key -> counts per value


@attrs.define(slots=True)
class _PreFilterState:
    """What Filter needs (see the module docstring); ``clone`` copies the counts, which
    ``add_pod`` / ``remove_pod`` change."""

    affinity_terms: tuple[tuple[AffinityTerm, NamespaceSet], ...]
    anti_affinity_terms: tuple[tuple[AffinityTerm, NamespaceSet], ...]
    matches_own_affinity: bool
    namespace_labels: Mapping[str, str]
    affinity: Counts
    anti_affinity: Counts
    existing_anti_affinity: Counts

    def clone(self) -> _PreFilterState:
        return attrs.evolve(
            self,
            affinity={k: c.clone() for k, c in self.affinity.items()},
            anti_affinity={k: c.clone() for k, c in self.anti_affinity.items()},
            existing_anti_affinity={k: c.clone() for k, c in self.existing_anti_affinity.items()},
        )


@attrs.frozen(slots=True)
class _PreScoreState:
    scores: Counts  # topology key -> summed weight per value


def _pre_filter_state(state: CycleState) -> _PreFilterState | None:
    found: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
    return found


def _pre_score_state(state: CycleState) -> _PreScoreState | None:
    found: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
    return found


class InterPodAffinity:
    name = NAME

    def __init__(self, args: InterPodAffinityArgs, cache: ClusterCache) -> None:
        self.args = args
        self.cache = cache
        self.existing = cache.pod_index.extension(NAME, ExistingTerms)

    def events_to_register(self) -> list[ClusterEvent]:
        """Any pod change (a deleted or relabelled pod may lift a rule, an added one satisfy
        affinity), a new node, or a node's labels changing."""
        return [ClusterEvent(POD, ALL), ClusterEvent(NODE, ADD), ClusterEvent(NODE, UPDATE_NODE_LABEL)]

    # -- helpers over the indexes ------------------------------------------------------
    def _namespace_labels(self, pod: Pod) -> Mapping[str, str]:
        namespace = self.cache.namespaces.get(pod.namespace)
        return namespace.labels if namespace is not None else {}

    def _matching(self, namespaces: NamespaceSet, selector: LabelSelector | None) -> np.ndarray | None:
        """Per row of the cache table, the existing pods in ``namespaces`` that ``selector``
        matches (None when there are none); may be a shared array: do not modify it."""
        if selector is None:
            return None
        index = self.cache.pod_index
        table = self.cache.table
        total: np.ndarray | None = None
        owned = False
        for namespace in namespaces.among(index.by_namespace):
            counts = index.selector_counts(namespace, selector)
            if not counts.total:
                continue
            rows = counts.per_row(table)
            if total is None:
                total = rows
            elif owned:
                total += rows
            else:
                total, owned = total + rows, True
        return total

    def _existing(self, kind: int, pod: Pod, labels: Mapping[str, str], sums: RowSums, weight: int | None,
                  sign: int) -> None:
        """Add the existing pods' terms of ``kind`` that ``pod`` matches to ``sums``, each
        weighted by ``weight`` (its own weight when None) times ``sign``."""
        table = self.cache.table
        for term, term_weight, counts in self.existing.of_kind(kind):
            if term.matches(pod, labels):
                sums.add(term.topology_key, counts.per_row(table), sign * (term_weight if weight is None else weight))

    # -- filter --------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        terms, error = pod_terms(pod)
        if error is not None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"parsing pod: {error}",))
        if not (self.existing.groups[REQUIRED_ANTI_AFFINITY] or terms.required_affinity
                or terms.required_anti_affinity):
            return Status.skip()  # nothing to count: the state below would be empty (most pods, most cycles)
        pre = self._build_pre_filter_state(pod, terms)
        if not (pre.existing_anti_affinity or terms.required_affinity or terms.required_anti_affinity):
            return Status.skip()
        state.write(_PRE_FILTER_KEY, pre)
        return None

    def _build_pre_filter_state(self, pod: Pod, terms: PodTerms) -> _PreFilterState:
        table = self.cache.table
        namespaces = self.cache.namespaces
        labels = self._namespace_labels(pod)
        existing = RowSums(table)
        if self.existing.groups[REQUIRED_ANTI_AFFINITY]:
            self._existing(REQUIRED_ANTI_AFFINITY, pod, labels, existing, 1, 1)
        affinity_terms = tuple((t, t.resolve(namespaces)) for t in terms.required_affinity)
        anti_terms = tuple((t, t.resolve(namespaces)) for t in terms.required_anti_affinity)
        affinity = RowSums(table)
        if affinity_terms:
            # An existing pod counts when it matches every term (kube's podMatchesAllAffinityTerms).
            together = affinity_terms[0][1]
            for _, nset in affinity_terms[1:]:
                together &= nset
            rows = self._matching(together, all_of(t.selector for t, _ in affinity_terms))
            if rows is not None:
                for term, _ in affinity_terms:
                    affinity.add(term.topology_key, rows)
        anti = RowSums(table)
        for term, nset in anti_terms:
            rows = self._matching(nset, term.selector)
            if rows is not None:
                anti.add(term.topology_key, rows)
        return _PreFilterState(
            affinity_terms=affinity_terms,
            anti_affinity_terms=anti_terms,
            matches_own_affinity=bool(affinity_terms) and all(_selects(t, ns, pod) for t, ns in affinity_terms),
            namespace_labels=labels,
            affinity=_nonzero(affinity.counts()),
            anti_affinity=_nonzero(anti.counts()),
            existing_anti_affinity=_nonzero(existing.counts()),
        )

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict:
        verdict = FilterVerdict(len(nodes))
        pre = _pre_filter_state(state)
        if pre is None:  # PreFilter disabled
            terms, error = pod_terms(pod)
            if error is not None:
                verdict.reject(np.ones(len(nodes), dtype=bool), f"parsing pod: {error}",
                               Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
                return verdict
            pre = self._build_pre_filter_state(pod, terms)
        fails_affinity = np.zeros(len(nodes), dtype=bool)
        if pre.affinity_terms:
            pods_exist = np.ones(len(nodes), dtype=bool)
            for term, _ in pre.affinity_terms:
                column = nodes.label_column(term.topology_key)
                missing = column.code_of.get(None)
                if missing is not None:
                    fails_affinity |= column.codes[nodes.rows] == missing
                counts = pre.affinity.get(term.topology_key)
                if counts is None:
                    pods_exist[:] = False
                else:
                    pods_exist &= counts.for_batch(nodes) > 0
            first_of_group = pre.matches_own_affinity and not any(c.any() for c in pre.affinity.values())
            if not first_of_group:
                fails_affinity |= ~pods_exist
        verdict.reject(fails_affinity, ERR_REASON_AFFINITY, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        failed = fails_affinity
        fails_anti = np.zeros(len(nodes), dtype=bool)
        for term, _ in pre.anti_affinity_terms:
            counts = pre.anti_affinity.get(term.topology_key)
            if counts is not None:
                fails_anti |= counts.for_batch(nodes) > 0
        verdict.reject(fails_anti & ~failed, ERR_REASON_ANTI_AFFINITY, Code.UNSCHEDULABLE)
        failed = failed | fails_anti
        fails_existing = np.zeros(len(nodes), dtype=bool)
        for counts in pre.existing_anti_affinity.values():
            fails_existing |= counts.for_batch(nodes) > 0
        verdict.reject(fails_existing & ~failed, ERR_REASON_EXISTING_ANTI_AFFINITY, Code.UNSCHEDULABLE)
        return verdict

    # -- PreFilterExtensions -----------------------------------------------------------
    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo) -> Status | None:
        return self._update(state, pod, pod_to_add, node, +1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status | None:
        return self._update(state, pod, pod_to_remove, node, -1)

    def affected_by(self, state: CycleState, pod: Pod, other: Pod) -> bool:
        """Whether ``_update`` may count ``other``: it has required anti-affinity terms, or the
        pod's required affinity terms all select it, or one of its anti-affinity terms does."""
        pre = _pre_filter_state(state)
        if pre is None:
            return False
        other_terms, _ = pod_terms(other)
        if other_terms.required_anti_affinity:
            return True
        if pre.affinity_terms and all(_selects(t, ns, other) for t, ns in pre.affinity_terms):
            return True
        return any(_selects(term, nset, other) for term, nset in pre.anti_affinity_terms)

    def _update(self, state: CycleState, pod: Pod, other: Pod, node: NodeInfo, delta: int) -> Status | None:
        """kube's ``preFilterState.updateWithPod``, on a copy of the state written back."""
        pre = _pre_filter_state(state)
        if pre is None:  # PreFilter skipped: nothing to update
            return None
        pre = pre.clone()
        labels = node.node.labels
        other_terms, _ = pod_terms(other)
        for term in other_terms.required_anti_affinity:
            if term.matches(pod, pre.namespace_labels):
                _bump(pre.existing_anti_affinity, term.topology_key, labels, delta)
        if pre.affinity_terms and all(_selects(t, ns, other) for t, ns in pre.affinity_terms):
            for term, _ in pre.affinity_terms:
                _bump(pre.affinity, term.topology_key, labels, delta)
        for term, nset in pre.anti_affinity_terms:
            if _selects(term, nset, other):
                _bump(pre.anti_affinity, term.topology_key, labels, delta)
        state.write(_PRE_FILTER_KEY, pre)
        return None

    # -- score ---------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        terms, error = pod_terms(pod)
        if error is not None:  # PreFilter rejects such a pod first
            return Status(Code.ERROR, (f"parsing pod: {error}",))
        if not terms.preferred and (self.args.ignore_preferred_terms_of_existing_pods
                                    or not any(self.existing.groups[kind] for kind, _, _ in self._scoring_kinds())):
            return Status.skip()  # no term to score (without one, ``_build_scores`` finds no score)
        scores = self._build_scores(pod, terms)
        if not scores:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, _PreScoreState(scores))
        return None

    def _build_scores(self, pod: Pod, terms: PodTerms) -> Counts:
        table = self.cache.table
        namespaces = self.cache.namespaces
        sums = RowSums(table)
        hits = RowSums(table)  # unweighted: which values got any contribution at all
        for sign, weighted in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for weight, term in weighted:
                rows = self._matching(term.resolve(namespaces), term.selector)
                if rows is not None:
                    sums.add(term.topology_key, rows, sign * weight)
                    hits.add(term.topology_key, rows)
        labels = self._namespace_labels(pod)
        for kind, kind_weight, sign in self._scoring_kinds():
            if self.existing.groups[kind]:
                self._existing(kind, pod, labels, sums, kind_weight, sign)
                self._existing(kind, pod, labels, hits, 1, 1)
        touched = {key for key, counts in hits.counts().items() if counts.any()}
        return {key: counts for key, counts in sums.counts().items() if key in touched}

    def _scoring_kinds(self) -> list[tuple[int, int | None, int]]:
        """(kind, weight: the term's own when None, sign) of the existing pods' terms that score."""
        hard = self.args.hard_pod_affinity_weight
        kinds: list[tuple[int, int | None, int]] = [(PREFERRED_AFFINITY, None, 1), (PREFERRED_ANTI_AFFINITY, None, -1)]
        if hard > 0:
            kinds.insert(0, (REQUIRED_AFFINITY, hard, 1))
        return kinds

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        pre = _pre_score_state(state)
        if pre is None:  # PreScore disabled
            pre = _PreScoreState(self._build_scores(pod, pod_terms(pod)[0]))
        total = np.zeros(len(nodes), dtype=np.int64)
        for counts in pre.scores.values():
            total += counts.for_batch(nodes)
        return total

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray | None:
        pre = _pre_score_state(state)
        if pre is not None and not pre.scores:
            return None
        # min and max over the scored nodes, not anchored at 0 (kube >= 1.2x; reference §3.11:
        # raws 10 and 5 normalize to 100 and 0).
        low = int(scores.min()) if len(scores) else 0
        high = int(scores.max()) if len(scores) else 0
        if high <= low:
            return np.zeros(len(scores), dtype=np.int64)
        # float64 in kube's order: 100 * ((raw - min) / (max - min)), truncated.
        scaled = float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(high - low))
        return scaled.astype(np.int64)


def _selects(term: AffinityTerm, namespaces: NamespaceSet, pod: Pod) -> bool:
    """The incoming pod's ``term`` (namespaces resolved) selects ``pod``."""
    return pod.namespace in namespaces and term.selector is not None and term.selector.matches(pod.labels)


def _nonzero(counts: Counts) -> Counts:
    return {key: c for key, c in counts.items() if c.any()}


def _bump(counts: Counts, key: str, labels: Mapping[str, str], delta: int) -> None:
    value = labels.get(key)
    if value is None:
        return
    entry = counts.get(key)
    if entry is None:
        entry = counts[key] = TopologyCounts(key)
    entry.add(value, delta)


def factory(args: InterPodAffinityArgs | None, handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(args if args is not None else InterPodAffinityArgs(), handle.cache)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=InterPodAffinityArgs, plugin_type=InterPodAffinity)
