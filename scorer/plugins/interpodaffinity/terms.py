"""Pod affinity terms as InterPodAffinity evaluates them (kube's ``framework.AffinityTerm``).

A ``PodAffinityTerm`` of a pod (its *owner*) becomes an ``AffinityTerm``:

* namespaces: the term's ``namespaces``; when it has neither ``namespaces`` nor a
  ``namespaceSelector``, the owner's own namespace;
* namespace selector: ``namespaceSelector`` (None = selects no namespace, empty =
  every namespace), matched against the labels of the *other* pod's Namespace;
* selector: ``labelSelector`` (None = matches no pod, empty = every pod), with
  ``matchLabelKeys`` / ``mismatchLabelKeys`` (kube >= 1.29, where the API server
  merges them at pod creation) added as ``key In (owner's value)`` /
  ``key NotIn (owner's value)`` for each key the owner has;
* topology key.

A term *matches* a pod when the pod's namespace is in the namespaces or its
Namespace's labels match the namespace selector, and the selector matches the
pod's labels. For the incoming pod's own terms, the namespace selector is
resolved once per cycle against the cluster's Namespaces into a
``NamespaceSet`` (kube's ``mergeAffinityTermNamespacesIfNotEmpty``).

Selectors are checked as ``metav1.LabelSelectorAsSelector`` does (operator,
value counts, label keys and values); a term that fails raises ``TermError``
with kube's message (1.20 wording), which names the offending key or value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import attrs

from scorer.inputs.names import qualified_name_errors
from scorer.model import LabelSelector, LabelSelectorRequirement, Namespace, Pod, PodAffinityTerm

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_VALUE_MAX = 63
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

SelectorKey = tuple[object, ...] | None  # LabelSelector.canonical, None for a null selector


class TermError(ValueError):
    """A term's label or namespace selector is not a valid selector (kube's parse error)."""


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid label value (``IsValidLabelValue``); [] if it is."""
    errors = []
    if len(value) > _LABEL_VALUE_MAX:
        errors.append(f"must be no more than {_LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.match(value):
        errors.append(_LABEL_VALUE_MESSAGE)
    return errors


def _check_requirement(key: str, operator: str, values: Iterable[str]) -> None:
    """``labels.NewRequirement``'s checks, in its order, with its messages."""
    errors = qualified_name_errors(key)
    if errors:
        raise TermError(f"invalid label key {_go_quote(key)}: {'; '.join(errors)}")
    values = tuple(values)
    if operator in ("In", "NotIn") and not values:
        raise TermError("for 'in', 'notin' operators, values set can't be empty")
    if operator in ("Exists", "DoesNotExist") and values:
        raise TermError("values set must be empty for exists and does not exist")
    for value in values:
        errors = label_value_errors(value)
        if errors:
            raise TermError(
                f"invalid label value: {_go_quote(value)}: at key: {_go_quote(key)}: {'; '.join(errors)}"
            )


def check_selector(selector: LabelSelector | None) -> None:
    """Raise ``TermError`` if ``metav1.LabelSelectorAsSelector`` would refuse ``selector``."""
    if selector is None:
        return
    for key, value in selector.match_labels.items():
        _check_requirement(key, "In", (value,))
    for req in selector.match_expressions:
        if req.operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise TermError(f"{_go_quote(req.operator)} is not a valid pod selector operator")
        _check_requirement(req.key, req.operator, req.values)


def _go_quote(text: str) -> str:
    """Go's ``%q`` for the common case (a string without quotes or backslashes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A null selector matches nothing (``labels.Nothing``), an empty one everything."""
    return selector is not None and selector.matches(labels)


def selector_key(selector: LabelSelector | None) -> SelectorKey:
    return None if selector is None else selector.canonical


@attrs.frozen(slots=True)
class AffinityTerm:
    """One parsed pod affinity term (see the module docstring). Equal terms (same
    namespaces, selectors by canonical form, topology key) compare and hash equal,
    which is what lets the index group existing pods' terms."""

    namespaces: frozenset[str]
    namespace_selector_key: SelectorKey
    selector_key: SelectorKey
    topology_key: str
    namespace_selector: LabelSelector | None = attrs.field(eq=False, repr=False)
    selector: LabelSelector | None = attrs.field(eq=False, repr=False)

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str]) -> bool:
        """``pod`` (whose Namespace has ``namespace_labels``) is selected by this term."""
        if pod.namespace not in self.namespaces and not selector_matches(
            self.namespace_selector, namespace_labels
        ):
            return False
        return selector_matches(self.selector, pod.labels)

    def resolve(self, namespaces: Mapping[str, Namespace]) -> NamespaceSet:
        """The namespaces this term selects among ``namespaces`` (the cluster's)."""
        ns_selector = self.namespace_selector
        if ns_selector is None:
            return NamespaceSet(False, self.namespaces)
        if ns_selector.is_empty():
            return NamespaceSet(True, frozenset())
        selected = {name for name, ns in namespaces.items() if ns_selector.matches(ns.labels)}
        return NamespaceSet(False, self.namespaces | selected)


@attrs.frozen(slots=True)
class NamespaceSet:
    """The namespaces a term of the incoming pod selects: ``every`` namespace, or ``names``."""

    every: bool
    names: frozenset[str]

    def __contains__(self, namespace: str) -> bool:
        return self.every or namespace in self.names

    def __and__(self, other: NamespaceSet) -> NamespaceSet:
        if self.every:
            return other
        if other.every:
            return self
        return NamespaceSet(False, self.names & other.names)

    def among(self, present: Mapping[str, object]) -> list[str]:
        """The namespaces of this set among the keys of ``present`` (the namespaces with pods)."""
        if self.every:
            return list(present)
        return [ns for ns in self.names if ns in present]


def affinity_term(owner: Pod, term: PodAffinityTerm) -> AffinityTerm:
    """Parse ``term`` of pod ``owner``; raises ``TermError`` for an invalid selector."""
    check_selector(term.label_selector)
    check_selector(term.namespace_selector)
    selector = term.label_selector
    if selector is not None and (term.match_label_keys or term.mismatch_label_keys):
        added = [
            LabelSelectorRequirement(key=key, operator="In", values=(owner.labels[key],))
            for key in term.match_label_keys if key in owner.labels
        ] + [
            LabelSelectorRequirement(key=key, operator="NotIn", values=(owner.labels[key],))
            for key in term.mismatch_label_keys if key in owner.labels
        ]
        if added:
            selector = LabelSelector(
                match_labels=dict(selector.match_labels),
                match_expressions=(*selector.match_expressions, *added),
            )
    if term.namespaces or term.namespace_selector is not None:
        namespaces = frozenset(term.namespaces)
    else:
        namespaces = frozenset((owner.namespace,))
    return AffinityTerm(
        namespaces=namespaces,
        namespace_selector_key=selector_key(term.namespace_selector),
        selector_key=selector_key(selector),
        topology_key=term.topology_key,
        namespace_selector=term.namespace_selector,
        selector=selector,
    )


def all_of(selectors: Iterable[LabelSelector | None]) -> LabelSelector | None:
    """One selector matching what every one of ``selectors`` matches (None if one is null)."""
    selectors = list(selectors)
    if any(s is None for s in selectors):
        return None
    if len(selectors) == 1:
        return selectors[0]
    expressions: list[LabelSelectorRequirement] = []
    for selector in selectors:
        assert selector is not None
        expressions += [
            LabelSelectorRequirement(key=key, operator="In", values=(value,))
            for key, value in selector.match_labels.items()
        ]
        expressions += selector.match_expressions
    return LabelSelector(match_expressions=tuple(expressions))


@attrs.frozen(slots=True)
class PodTerms:
    """A pod's pod affinity terms by kind; preferred ones with their weight."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[tuple[int, AffinityTerm], ...] = ()
    preferred_anti_affinity: tuple[tuple[int, AffinityTerm], ...] = ()

    @property
    def preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)


NO_TERMS = PodTerms()


def pod_terms(pod: Pod) -> tuple[PodTerms, str | None]:
    """The parsed terms of ``pod`` and the first parse error (kube's ``NewPodInfo``).

    A kind (required affinity, required anti-affinity, preferred ...) with an
    invalid term is left empty, as kube leaves it nil; the error reads like
    kube's (``requiredAffinityTerms: invalid label value: ...``).
    """
    affinity = pod.affinity
    if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
        return NO_TERMS, None
    pa, paa = affinity.pod_affinity, affinity.pod_anti_affinity
    errors: list[str] = []

    def required(kind: str, terms: tuple[PodAffinityTerm, ...]) -> tuple[AffinityTerm, ...]:
        try:
            return tuple(affinity_term(pod, t) for t in terms)
        except TermError as error:
            errors.append(f"{kind}: {error}")
            return ()

    def preferred(kind: str, terms: Iterable[tuple[int, PodAffinityTerm]]) -> tuple[tuple[int, AffinityTerm], ...]:
        try:
            return tuple((weight, affinity_term(pod, t)) for weight, t in terms)
        except TermError as error:
            errors.append(f"{kind}: {error}")
            return ()

    terms = PodTerms(
        required_affinity=required("requiredAffinityTerms", pa.required if pa else ()),
        required_anti_affinity=required("requiredAntiAffinityTerms", paa.required if paa else ()),
        preferred_affinity=preferred(
            "preferredAffinityTerms", ((w.weight, w.term) for w in (pa.preferred if pa else ()))
        ),
        preferred_anti_affinity=preferred(
            "preferredAntiAffinityTerms", ((w.weight, w.term) for w in (paa.preferred if paa else ()))
        ),
    )
    return terms, (errors[0] if errors else None)
