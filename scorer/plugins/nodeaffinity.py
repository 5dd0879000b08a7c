"""NodeAffinity: Filter on the pod's ``nodeSelector``, its required node
affinity and the scheduler-enforced ``addedAffinity``; Score by the weights of
the preferred terms a node matches (kube's ``nodeaffinity``, reference §3.7).

Filter: the node matches every ``nodeSelector`` label and one of the
required terms (terms OR-ed, requirements AND-ed), and ``addedAffinity``'s
required terms; PreFilter narrows the nodes when every term pins
``metadata.name``. Score: the sum of the weights of the preferred terms
(the pod's and ``addedAffinity``'s) the node matches, then
DefaultNormalizeScore.

Selectors are evaluated per label key, per distinct label value: the node
labels of the table are turned into one integer code column per key (built
lazily and kept while the nodes do not change), a requirement is decided once
for each distinct value, and the answer is spread over the nodes by indexing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from scorer.framework.events import ADD, NODE, UPDATE_NODE_LABEL, ClusterEvent
from scorer.framework.status import Code, Status
from scorer.framework.types import FilterVerdict, NodeBatch, PreFilterResult
from scorer.model import (
    FieldError,
    NodeSelector,
    PreferredSchedulingTerm,
    parse_node_affinity,
)
from scorer.model import NodeAffinity as NodeAffinitySpec
from scorer.plugins.helper.nodeselector import NODE_NAME_FIELD, labels_mask, selector_mask, term_mask
from scorer.plugins.helper.normalize import default_normalize_score

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod

NAME = "NodeAffinity"
# kube's reasons (node_affinity.go): the pod's own selector/affinity, the
# args' addedAffinity, and PreFilter's matchFields terms naming no node at all.
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


@attrs.frozen(slots=True)
class NodeAffinityArgs:
    """Args of NodeAffinity.

    ``added_affinity`` is a node affinity applied to every pod: its required
    terms are AND-ed with the pod's, its preferred terms added to the score.
    Given as the API's ``NodeAffinity`` mapping (``requiredDuringScheduling...``),
    it is parsed into ``scorer.model.NodeAffinity`` on construction; a parse
    error leaves it None and is reported by ``validate``.
    """

    added_affinity: Any = None
    _parse_errors: tuple[tuple[str, str], ...] = attrs.field(
        default=(), init=False, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        raw = self.added_affinity
        if raw is None or isinstance(raw, NodeAffinitySpec):
            return
        parsed: NodeAffinitySpec | None = None
        errors: tuple[tuple[str, str], ...] = ()
        if not isinstance(raw, Mapping):
            errors = (("addedAffinity", f"expected an object, got {type(raw).__name__}"),)
        else:
            try:
                parsed = parse_node_affinity(raw, "addedAffinity")
            except FieldError as error:
                errors = ((error.path, error.message),)
            else:
                errors = _unparsable_terms(parsed)
        object.__setattr__(self, "added_affinity", parsed)
        object.__setattr__(self, "_parse_errors", errors)

    def validate(self) -> list[tuple[str, str]]:
        return list(self._parse_errors)


def _unparsable_terms(affinity: NodeAffinitySpec) -> tuple[tuple[str, str], ...]:
    """kube's New fails on addedAffinity terms it cannot parse (NodeSelectorTerm.parse_error)."""
    required = affinity.required.terms if affinity.required is not None else ()
    paths = [
        *(f"addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
          for i in range(len(required))),
        *(f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"
          for i in range(len(affinity.preferred))),
    ]
    terms = [*required, *(p.preference for p in affinity.preferred)]
    return tuple((path, term.parse_error) for path, term in zip(paths, terms, strict=True)
                 if term.parse_error is not None)


_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME


@attrs.frozen(slots=True)
class _PreFilterState:
    node_selector: Mapping[str, str]
    required: NodeSelector | None


@attrs.frozen(slots=True)
class _PreScoreState:
    preferred: tuple[PreferredSchedulingTerm, ...]  # the pod's own preferred terms


def _pre_filter_state(state: CycleState) -> _PreFilterState | None:
    found: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
    return found


def _pre_score_state(state: CycleState) -> _PreScoreState | None:
    found: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
    return found


class NodeAffinity:
    name = NAME

    def __init__(self, args: NodeAffinityArgs) -> None:
        self.args = args
        added = args.added_affinity
        self.added_required: NodeSelector | None = added.required if added is not None else None
        # kube keeps the added preferred terms (possibly none) whenever addedAffinity is set.
        self.added_preferred: tuple[PreferredSchedulingTerm, ...] | None = (
            added.preferred if added is not None else None
        )

    def events_to_register(self) -> list[ClusterEvent]:
        """A new node, or a node's labels changing."""
        return [ClusterEvent(NODE, ADD), ClusterEvent(NODE, UPDATE_NODE_LABEL)]

    def _preferred_sum(
        self, terms: Iterable[PreferredSchedulingTerm], nodes: NodeBatch
    ) -> np.ndarray:
        total = np.zeros(len(nodes), dtype=np.int64)
        for term in terms:
            if term.weight == 0:
                continue
            total += np.where(term_mask(term.preference, nodes), term.weight, 0)
        return total

    # -- filter --------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeBatch
    ) -> PreFilterResult | Status | None:
        required = _required_of(pod)
        if required is None and self.added_required is None and not pod.node_selector:
            return Status.skip()  # nothing to filter for this pod
        state.write(_PRE_FILTER_KEY, _PreFilterState(pod.node_selector, required))
        if required is None or not required.terms:
            return None
        # Terms are OR-ed: only if every term pins metadata.name can the nodes be narrowed.
        names: frozenset[str] | None = None
        for term in required.terms:
            term_names: frozenset[str] | None = None
            for req in term.match_fields:
                if req.key == NODE_NAME_FIELD and req.operator == "In":
                    values = frozenset(req.values)
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                return None
            names = term_names if names is None else names | term_names
        if names is not None and not names:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))
        if names:
            return PreFilterResult(node_names=names)
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict:
        verdict = FilterVerdict(len(nodes))
        enforced_fail = np.zeros(len(nodes), dtype=bool)
        if self.added_required is not None:
            enforced_fail = ~selector_mask(self.added_required, nodes)
            verdict.reject(enforced_fail, ERR_REASON_ENFORCED, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        pre = _pre_filter_state(state)
        if pre is None:  # PreFilter disabled
            pre = _PreFilterState(pod.node_selector, _required_of(pod))
        match = labels_mask(pre.node_selector, nodes)
        if pre.required is not None:
            match &= selector_mask(pre.required, nodes)
        verdict.reject(~match & ~enforced_fail, ERR_REASON_POD, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict

    # -- score ---------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        preferred = _preferred_of(pod)
        if not preferred and self.added_preferred is None:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, _PreScoreState(preferred))
        return None

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        pre = _pre_score_state(state)
        preferred = pre.preferred if pre is not None else _preferred_of(pod)  # None: PreScore disabled
        return self._preferred_sum((*(self.added_preferred or ()), *preferred), nodes)

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        return default_normalize_score(scores, reverse=False)


def _required_of(pod: Pod) -> NodeSelector | None:
    affinity = pod.affinity
    if affinity is None or affinity.node_affinity is None:
        return None
    return affinity.node_affinity.required


def _preferred_of(pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
    affinity = pod.affinity
    if affinity is None or affinity.node_affinity is None:
        return ()
    return affinity.node_affinity.preferred


def factory(args: NodeAffinityArgs | None, handle: Handle) -> NodeAffinity:
    return NodeAffinity(args if args is not None else NodeAffinityArgs())


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=NodeAffinityArgs, plugin_type=NodeAffinity)
