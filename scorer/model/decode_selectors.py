"""Decoding selectors, affinity, taints, tolerations and topology spread constraints (parts of pods and
nodes; ``scorer.model.decode`` has the rules they follow).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from scorer.inputs.describe import join_path, quote
from scorer.model.decode_fields import (
    FieldError,
    _choice,
    _int_in_range,
    _mappings,
    _optional_choice,
    _optional_int,
    _optional_mapping,
    _required_str,
    _str,
    _str_map,
    _str_tuple,
)
from scorer.model.objects import (
    LABEL_SELECTOR_OPERATORS,
    NODE_FIELD_KEYS,
    NODE_INCLUSION_POLICIES,
    NODE_SELECTOR_OPERATORS,
    TAINT_EFFECTS,
    TOLERATION_OPERATORS,
    WHEN_UNSATISFIABLE,
    Affinity,
    LabelSelector,
    LabelSelectorRequirement,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)

_T = TypeVar("_T")
_R = TypeVar("_R")
# Toleration operators of a later Kubernetes (TaintTolerationComparisonOperators): accepted,
# and they tolerate nothing, as kube does with that feature off.
_DISABLED_TOLERATION_OPERATORS: tuple[str, ...] = ("Gt", "Lt")


def _taint(obj: Mapping[str, Any], path: str) -> Taint:
    return Taint(
        key=_required_str(obj, "key", path),
        value=_str(obj, "value", path),
        effect=_choice(obj, "effect", path, TAINT_EFFECTS),
    )


def _toleration(obj: Mapping[str, Any], path: str) -> Toleration:
    key = _str(obj, "key", path)
    operator = _str(obj, "operator", path) or "Equal"
    if operator not in TOLERATION_OPERATORS and operator not in _DISABLED_TOLERATION_OPERATORS:
        raise FieldError(
            join_path(path, "operator"),
            f"unknown operator {quote(operator)}, expected one of Equal, Exists",
        )
    value = _str(obj, "value", path)
    if operator == "Exists" and value:
        raise FieldError(join_path(path, "value"), "must be empty when operator is Exists")
    if not key and operator != "Exists":
        raise FieldError(join_path(path, "operator"), "must be Exists when key is empty")
    effect = _str(obj, "effect", path)
    if effect and effect not in TAINT_EFFECTS:
        raise FieldError(
            join_path(path, "effect"),
            f"unknown effect {quote(effect)}, expected empty (all effects) "
            "or one of NoSchedule, PreferNoSchedule, NoExecute",
        )
    return Toleration(
        key=key,
        operator=operator,
        value=value,
        effect=effect,
        toleration_seconds=_optional_int(obj, "tolerationSeconds", path),
    )


def _operator(obj: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> str:
    return _choice(obj, "operator", path, allowed, what="operator")


def _check_values(operator: str, values: tuple[str, ...], path: str) -> None:
    """Value rules shared by label and node selector requirements."""
    if operator in ("In", "NotIn") and not values:
        raise FieldError(join_path(path, "values"), f"must be non-empty when operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise FieldError(join_path(path, "values"), f"must be empty when operator is {operator}")
    if operator in ("Gt", "Lt") and len(values) != 1:
        # One value, as the API server checks; that it is an integer is the scheduler's
        # parse, which fails the term (NodeSelectorRequirement.parse_error).
        raise FieldError(
            join_path(path, "values"), f"must have exactly one value when operator is {operator}"
        )


def _label_selector(obj: Mapping[str, Any], key: str, path: str) -> LabelSelector | None:
    selector = _optional_mapping(obj, key, path)
    if selector is None:
        return None
    path = join_path(path, key)
    return LabelSelector(
        match_labels=_str_map(selector, "matchLabels", path),
        match_expressions=_match_expressions(
            selector, path, LABEL_SELECTOR_OPERATORS, LabelSelectorRequirement
        ),
    )


def _match_expressions(
    obj: Mapping[str, Any],
    path: str,
    operators: tuple[str, ...],
    requirement: Callable[..., _R],
) -> tuple[_R, ...]:
    """``matchExpressions`` of a label or node selector."""
    expressions = []
    for item_path, item in _mappings(obj, "matchExpressions", path):
        operator = _operator(item, item_path, operators)
        values = _str_tuple(item, "values", item_path)
        _check_values(operator, values, item_path)
        expressions.append(
            requirement(key=_required_str(item, "key", item_path), operator=operator, values=values)
        )
    return tuple(expressions)


def _node_selector_term(obj: Mapping[str, Any], path: str) -> NodeSelectorTerm:
    expressions = _match_expressions(obj, path, NODE_SELECTOR_OPERATORS, NodeSelectorRequirement)
    fields = []
    for item_path, item in _mappings(obj, "matchFields", path):
        key = _required_str(item, "key", item_path)
        if key not in NODE_FIELD_KEYS:
            raise FieldError(
                join_path(item_path, "key"), f"unsupported field {quote(key)}, expected metadata.name"
            )
        operator = _operator(item, item_path, ("In", "NotIn"))
        values = _str_tuple(item, "values", item_path)
        if len(values) != 1:
            raise FieldError(
                join_path(item_path, "values"), "must have exactly one value for matchFields"
            )
        fields.append(NodeSelectorRequirement(key=key, operator=operator, values=values))
    return NodeSelectorTerm(match_expressions=expressions, match_fields=tuple(fields))


def _node_selector(obj: Mapping[str, Any], key: str, path: str) -> NodeSelector | None:
    """A NodeSelector (``nodeSelectorTerms``, at least one) at ``obj[key]``; None when unset."""
    selector = _optional_mapping(obj, key, path)
    if selector is None:
        return None
    selector_path = join_path(path, key)
    terms = _mappings(selector, "nodeSelectorTerms", selector_path)
    if not terms:
        raise FieldError(join_path(selector_path, "nodeSelectorTerms"), "must have at least one term")
    return NodeSelector(terms=tuple(_node_selector_term(t, p) for p, t in terms))


def parse_node_affinity(obj: Mapping[str, Any], path: str) -> NodeAffinity:
    """A ``nodeAffinity`` object at ``path``; raises ``FieldError``."""
    required = _node_selector(obj, "requiredDuringSchedulingIgnoredDuringExecution", path)
    preferred = tuple(
        PreferredSchedulingTerm(weight=weight, preference=term)
        for weight, term in _preferred(obj, path, "preference", _node_selector_term)
    )
    return NodeAffinity(required=required, preferred=preferred)


def _preferred(
    obj: Mapping[str, Any], path: str, field: str, parse: Callable[[Mapping[str, Any], str], _T]
) -> list[tuple[int, _T]]:
    """(weight, term) of each ``preferredDuringSchedulingIgnoredDuringExecution`` entry."""
    result = []
    for item_path, item in _mappings(obj, "preferredDuringSchedulingIgnoredDuringExecution", path):
        weight = _int_in_range(item, "weight", item_path, 1, 100)
        term = _optional_mapping(item, field, item_path)
        if term is None:
            raise FieldError(join_path(item_path, field), "required")
        result.append((weight, parse(term, join_path(item_path, field))))
    return result


def _pod_affinity_term(obj: Mapping[str, Any], path: str) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=_label_selector(obj, "labelSelector", path),
        namespaces=_str_tuple(obj, "namespaces", path),
        topology_key=_required_str(obj, "topologyKey", path),
        namespace_selector=_label_selector(obj, "namespaceSelector", path),
        match_label_keys=_str_tuple(obj, "matchLabelKeys", path),
        mismatch_label_keys=_str_tuple(obj, "mismatchLabelKeys", path),
    )


def _pod_affinity_terms(
    obj: Mapping[str, Any], path: str
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    """(required, preferred) of a podAffinity or podAntiAffinity."""
    required_items = _mappings(obj, "requiredDuringSchedulingIgnoredDuringExecution", path)
    required = tuple(_pod_affinity_term(item, item_path) for item_path, item in required_items)
    preferred = tuple(
        WeightedPodAffinityTerm(weight=weight, term=term)
        for weight, term in _preferred(obj, path, "podAffinityTerm", _pod_affinity_term)
    )
    return required, preferred


def _affinity(spec: Mapping[str, Any]) -> Affinity | None:
    affinity = _optional_mapping(spec, "affinity", "spec")
    if affinity is None:
        return None
    path = "spec.affinity"
    node = _optional_mapping(affinity, "nodeAffinity", path)
    pod = _optional_mapping(affinity, "podAffinity", path)
    anti = _optional_mapping(affinity, "podAntiAffinity", path)
    pod_affinity = anti_affinity = None
    if pod is not None:
        required, preferred = _pod_affinity_terms(pod, join_path(path, "podAffinity"))
        pod_affinity = PodAffinity(required=required, preferred=preferred)
    if anti is not None:
        required, preferred = _pod_affinity_terms(anti, join_path(path, "podAntiAffinity"))
        anti_affinity = PodAntiAffinity(required=required, preferred=preferred)
    return Affinity(
        node_affinity=None if node is None else parse_node_affinity(node, join_path(path, "nodeAffinity")),
        pod_affinity=pod_affinity,
        pod_anti_affinity=anti_affinity,
    )


def _spread_constraint(obj: Mapping[str, Any], path: str) -> TopologySpreadConstraint:
    max_skew = _optional_int(obj, "maxSkew", path, bits=32)
    if max_skew is None or max_skew < 1:
        raise FieldError(join_path(path, "maxSkew"), "required, expected an integer of at least 1")
    when_unsatisfiable = _choice(obj, "whenUnsatisfiable", path, WHEN_UNSATISFIABLE)
    min_domains = _optional_int(obj, "minDomains", path, bits=32)
    if min_domains is not None:
        if min_domains < 1:
            raise FieldError(join_path(path, "minDomains"), f"{min_domains}: must be at least 1")
        if when_unsatisfiable != "DoNotSchedule":
            raise FieldError(
                join_path(path, "minDomains"), "allowed only with whenUnsatisfiable DoNotSchedule"
            )
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=_required_str(obj, "topologyKey", path),
        when_unsatisfiable=when_unsatisfiable,
        label_selector=_label_selector(obj, "labelSelector", path),
        min_domains=min_domains,
        node_affinity_policy=_optional_choice(
            obj, "nodeAffinityPolicy", path, NODE_INCLUSION_POLICIES
        ),
        node_taints_policy=_optional_choice(obj, "nodeTaintsPolicy", path, NODE_INCLUSION_POLICIES),
        match_label_keys=_str_tuple(obj, "matchLabelKeys", path),
    )
