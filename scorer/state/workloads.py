"""Workloads: the objects that select pods, by namespace.

Services, ReplicationControllers, ReplicaSets and StatefulSets
(``SelectorOwner``) give PodTopologySpread its system default selector (kube's
``helper.DefaultSelector``); PodDisruptionBudgets tell preemption which
victims it may take. The cluster source feeds them like nodes and pods; a
cycle reads them without I/O.
"""

from __future__ import annotations

from scorer.model import LabelSelector, LabelSelectorRequirement, Pod, PodDisruptionBudget, SelectorOwner


class Workloads:
    def __init__(self) -> None:
        self.owners: dict[str, dict[str, SelectorOwner]] = {}  # namespace -> key -> owner
        self.pdbs: dict[str, dict[str, PodDisruptionBudget]] = {}  # namespace -> key -> budget

    def __len__(self) -> int:
        return sum(map(len, self.owners.values())) + sum(map(len, self.pdbs.values()))

    def add(self, obj: SelectorOwner | PodDisruptionBudget) -> None:
        """Add or replace (by kind, namespace and name)."""
        if isinstance(obj, SelectorOwner):
            self.owners.setdefault(obj.namespace, {})[obj.key] = obj
        else:
            self.pdbs.setdefault(obj.namespace, {})[obj.key] = obj

    def remove(self, obj: SelectorOwner | PodDisruptionBudget) -> None:
        store: dict[str, dict[str, SelectorOwner]] | dict[str, dict[str, PodDisruptionBudget]]
        store = self.owners if isinstance(obj, SelectorOwner) else self.pdbs
        in_namespace = store.get(obj.namespace)
        if in_namespace is not None:
            in_namespace.pop(obj.key, None)
            if not in_namespace:
                del store[obj.namespace]

    def owners_of(self, pod: Pod) -> list[SelectorOwner]:
        """The Services, ReplicationControllers, ReplicaSets and StatefulSets selecting ``pod``."""
        return [owner for owner in self.owners.get(pod.namespace, {}).values() if owner.selects(pod)]

    def default_selector(self, pod: Pod) -> LabelSelector | None:
        """kube's ``helper.DefaultSelector``: the selectors of everything selecting ``pod``,
        AND-ed (Services' label maps merged, then the controllers' requirements added).
        None when nothing selects the pod (no default spreading)."""
        match_labels: dict[str, str] = {}
        expressions: list[LabelSelectorRequirement] = []
        found = False
        for owner in self.owners_of(pod):
            selector = owner.selector
            assert selector is not None  # selects() is false for owners without one
            found = True
            if owner.kind in ("Service", "ReplicationController"):
                match_labels.update(selector.match_labels)
            else:
                # Requirements of a LabelSelector: matchLabels as equality, then the expressions.
                expressions.extend(LabelSelectorRequirement(key=k, operator="In", values=(v,))
                                   for k, v in selector.match_labels.items())
                expressions.extend(selector.match_expressions)
        if not found:
            return None
        selector = LabelSelector(match_labels=match_labels, match_expressions=tuple(expressions))
        return None if selector.is_empty() else selector

    def budgets_for(self, namespace: str) -> list[PodDisruptionBudget]:
        return list(self.pdbs.get(namespace, {}).values())
