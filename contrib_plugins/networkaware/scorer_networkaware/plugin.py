"""NetworkAware: pods that ask for a kind of network run on nodes that offer it.

A pod asks with an annotation (``my-network-preference: high-speed``), a node
offers with a label (``network-topology=high-speed``). For a pod whose value
is one of ``values``, Filter keeps only the nodes whose label has that value
(unless ``requireMatch`` is false) and Score gives those nodes ``matchScore``,
the others ``mismatchScore``. Any other pod is not constrained: PreFilter and
PreScore return Skip, so it is neither filtered nor scored.

The node label is read as one integer code per NodeTable row, built when the
table's nodes change and kept across cycles otherwise, so a cycle costs a
dict lookup and one numpy comparison instead of a Python loop over nodes.
"""

from __future__ import annotations

import re

import attrs
import numpy as np

from scorer.plugin import (
    ADD,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    NODE,
    UNSCHEDULABLE_POD,
    UPDATE,
    UPDATE_NODE_LABEL,
    ClusterEvent,
    Code,
    CycleState,
    FilterVerdict,
    Handle,
    NodeBatch,
    PluginRegistry,
    Pod,
    Status,
    qualified_name_errors,
    quote,
)

NAME = "NetworkAware"
# One reason per requested value, so the FitError names the label to add:
# "0/3 nodes are available: 3 node(s) didn't have label network-topology=high-speed ...".
ERR_REASON = "node(s) didn't have label {label}={value} requested by pod annotation {annotation}"

# kube's IsValidLabelValue (without the empty value, which no pod can ask for).
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_MAX = 63


@attrs.frozen(slots=True, kw_only=True)
class NetworkAwareArgs:
    """Args of NetworkAware (``pluginConfig[].args``, camelCase keys).

    ``pod_annotation`` (``podAnnotation``): the pod annotation holding the
    requested network. ``node_label`` (``nodeLabel``): the node label holding
    the network a node offers. ``values``: the annotation values the plugin
    acts on; a pod with another value (or none) is not constrained.
    ``require_match`` (``requireMatch``): Filter rejects nodes whose label
    differs; false makes the annotation a preference (Score only).
    ``match_score``/``mismatch_score``: the scores of nodes that do / do not
    have the requested value, in [0, 100], match above mismatch.
    """

    pod_annotation: str = "my-network-preference"
    node_label: str = "network-topology"
    values: tuple[str, ...] = attrs.field(default=("high-speed",), converter=tuple)
    require_match: bool = True
    match_score: int = MAX_NODE_SCORE
    mismatch_score: int = MIN_NODE_SCORE

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        for path, key in (("podAnnotation", self.pod_annotation), ("nodeLabel", self.node_label)):
            if not key:
                errors.append((path, "Required value"))
            else:
                errors.extend((path, f"Invalid value: {quote(key)}: {m}") for m in qualified_name_errors(key))
        if not self.values:
            errors.append(("values", "Required value: at least one annotation value"))
        seen: set[str] = set()
        for i, value in enumerate(self.values):
            path = f"values[{i}]"
            if value in seen:
                errors.append((path, f"Duplicate value: {quote(value)}"))
            seen.add(value)
            problem = _label_value_error(value)
            if problem:
                errors.append((path, f"Invalid value: {quote(value)}: {problem}"))
        in_range = True
        for path, score in (("matchScore", self.match_score), ("mismatchScore", self.mismatch_score)):
            if not MIN_NODE_SCORE <= score <= MAX_NODE_SCORE:
                errors.append((path, f"Invalid value: {score}: must be in [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}]"))
                in_range = False
        if in_range and self.match_score <= self.mismatch_score:
            errors.append(
                ("matchScore", f"Invalid value: {self.match_score}: must be greater than mismatchScore "
                               f"({self.mismatch_score})")
            )
        return errors


def _label_value_error(value: str) -> str:
    """Why ``value`` can never be a node label value; "" if it can."""
    if not value:
        return "must be non-empty"
    if len(value) > _LABEL_VALUE_MAX:
        return f"must be no more than {_LABEL_VALUE_MAX} characters (a label value)"
    if not _LABEL_VALUE.match(value):
        return ("a label value must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character")
    return ""


class NetworkAware:
    name = NAME

    def __init__(self, args: NetworkAwareArgs, handle: Handle) -> None:
        self.args = args
        self._values = frozenset(args.values)

    def events_to_register(self) -> list[ClusterEvent]:
        """What may make a pod this plugin rejected schedulable: a new node, a
        relabelled node, or an update of the pod itself (its annotation)."""
        return [
            ClusterEvent(NODE, ADD),
            ClusterEvent(NODE, UPDATE_NODE_LABEL),
            ClusterEvent(UNSCHEDULABLE_POD, UPDATE),
        ]

    # -- filter --------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        if not self.args.require_match or self.requested_value(pod) is None:
            return Status.skip()
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        value = self.requested_value(pod)  # read again: PreFilter may be disabled
        if not self.args.require_match or value is None:
            return None
        verdict = FilterVerdict(len(nodes))
        reason = ERR_REASON.format(label=self.args.node_label, value=value, annotation=self.args.pod_annotation)
        # Unschedulable: relabelling a node resolves it (README, "Filter message and status code").
        verdict.reject(~self._matches(value, nodes), reason, Code.UNSCHEDULABLE)
        return verdict

    # -- score ---------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        return Status.skip() if self.requested_value(pod) is None else None

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        value = self.requested_value(pod)
        if value is None:  # PreScore disabled: no opinion, the same score everywhere
            return np.zeros(len(nodes), dtype=np.int64)
        return np.where(self._matches(value, nodes), self.args.match_score, self.args.mismatch_score).astype(
            np.int64
        )

    # -- helpers -------------------------------------------------------------------
    def requested_value(self, pod: Pod) -> str | None:
        """The network ``pod`` asks for, or None when the plugin does not constrain it."""
        value = pod.annotations.get(self.args.pod_annotation)
        return value if value in self._values else None

    def _matches(self, value: str, nodes: NodeBatch) -> np.ndarray:
        return nodes.label_column(self.args.node_label).equals(value, nodes.rows)


def factory(args: NetworkAwareArgs | None, handle: Handle) -> NetworkAware:
    return NetworkAware(args if args is not None else NetworkAwareArgs(), handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=NetworkAwareArgs, plugin_type=NetworkAware)
