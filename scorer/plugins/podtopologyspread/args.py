"""PodTopologySpreadArgs: the default constraints and how they are chosen.

``defaultingType`` ``System`` (the default) spreads every pod that a Service,
ReplicationController, ReplicaSet or StatefulSet selects, and that has no
constraints of its own, with kube's built-in constraints
(``SYSTEM_DEFAULT_CONSTRAINTS``: hostname maxSkew 3, zone maxSkew 5, both
ScheduleAnyway); ``List`` uses ``defaultConstraints`` instead (none: no
default spreading). The selector of a default constraint is always derived
per pod from those owners, so the args may not give one.

Validation is kube's ``ValidatePodTopologySpreadArgs`` (v1): ``System`` with
non-empty ``defaultConstraints`` is invalid; each default constraint needs
``maxSkew > 0``, a non-empty ``topologyKey`` that is a valid label name,
``whenUnsatisfiable`` DoNotSchedule or ScheduleAnyway, no ``labelSelector``,
and no two constraints share ``{topologyKey, whenUnsatisfiable}``.
(v1beta1 defaulted an absent ``defaultingType`` to ``List`` when constraints
were given; v1beta2 and v1 always default it to ``System``, as here.)
"""

from __future__ import annotations

import attrs

from scorer.inputs.describe import quote
from scorer.inputs.names import qualified_name_errors
from scorer.model import WHEN_UNSATISFIABLE, TopologySpreadConstraint

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
DEFAULTING_TYPES: tuple[str, ...] = (SYSTEM_DEFAULTING, LIST_DEFAULTING)

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"

# kube's systemDefaultConstraints (plugin.go).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable="ScheduleAnyway"),
    TopologySpreadConstraint(max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable="ScheduleAnyway"),
)


@attrs.frozen(slots=True)
class PodTopologySpreadArgs:
    """Args of PodTopologySpread (kubescheduler.config.k8s.io/v1).

    ``default_constraints`` are ``TopologySpreadConstraint`` objects (the
    API's ``topologySpreadConstraints`` entries, without ``labelSelector``);
    ``defaulting_type`` is ``System`` or ``List``.
    """

    default_constraints: tuple[TopologySpreadConstraint, ...] = ()
    defaulting_type: str = SYSTEM_DEFAULTING

    @property
    def system_defaulted(self) -> bool:
        return self.defaulting_type == SYSTEM_DEFAULTING

    @property
    def effective_default_constraints(self) -> tuple[TopologySpreadConstraint, ...]:
        """The constraints a pod without its own gets (before its selector is derived)."""
        return SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else self.default_constraints

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        if self.defaulting_type not in DEFAULTING_TYPES:
            supported = ", ".join(quote(t) for t in DEFAULTING_TYPES)
            errors.append(("defaultingType",
                           f"Unsupported value: {quote(self.defaulting_type)}: supported values: {supported}"))
        elif self.system_defaulted and self.default_constraints:
            errors.append(("defaultingType",
                           f"Invalid value: {quote(self.defaulting_type)}: when .defaultConstraints are not empty"))
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            path = f"defaultConstraints[{i}]"
            if c.max_skew <= 0:
                errors.append((f"{path}.maxSkew", f"Invalid value: {c.max_skew}: not in valid range"))
            if not c.topology_key:
                errors.append((f"{path}.topologyKey", "Required value: can not be empty"))
            else:
                errors.extend((f"{path}.topologyKey", f"Invalid value: {quote(c.topology_key)}: {message}")
                              for message in qualified_name_errors(c.topology_key))
            if not c.when_unsatisfiable:
                errors.append((f"{path}.whenUnsatisfiable", "Required value: can not be empty"))
            elif c.when_unsatisfiable not in WHEN_UNSATISFIABLE:
                supported = ", ".join(quote(w) for w in WHEN_UNSATISFIABLE)
                errors.append((f"{path}.whenUnsatisfiable",
                               f"Unsupported value: {quote(c.when_unsatisfiable)}: supported values: {supported}"))
            if c.label_selector is not None:
                errors.append((f"{path}.labelSelector",
                               "Forbidden: constraint must not define a selector, as they deduced for each pod"))
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                errors.append((path, f"Duplicate value: {quote('{' + pair[0] + ', ' + pair[1] + '}')}"))
            seen.add(pair)
        return errors
