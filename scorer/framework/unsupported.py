"""Hard constraints no plugin of the profile evaluates: the pod is not placed.

kube-scheduler's default profile has plugins that scorer does not implement
yet; resolution skips them with a warning (``scorer.config.defaults``). A pod
whose placement depends on one of them would otherwise be placed as if its
constraint did not exist. So before any PreFilter plugin runs, the framework
(``Framework.run_pre_filter``) checks each pod for the hard constraints below:

==============================================  =============
the pod has                                     needs
==============================================  =============
PersistentVolumeClaim volumes, or ephemeral     VolumeBinding
volumes (kube creates a claim for each)
==============================================  =============

Pod affinity, anti-affinity and topology spread constraints were checked
here too until scorer implemented InterPodAffinity and PodTopologySpread. A
profile that disables those plugins ignores such constraints, as
kube-scheduler does: disabling a plugin is the user's choice, not a gap.

A pod with one of them is rejected at PreFilter with
UnschedulableAndUnresolvable; ``status.plugin`` is the missing plugin (the
first in kube's order when several are), so the queue records it as the
rejector plugin, and the FailedScheduling event, the PodScheduled condition
and ``simulate``/``explain`` show the FitError ``0/<N> nodes are available:
<message>.``, whose message names each missing plugin::

    pod has a volume backed by a PersistentVolumeClaim, which needs the
    VolumeBinding plugin; scorer does not implement it yet, so the pod is not
    placed

The check steps aside for a plugin that the pod's profile enables at preFilter
or filter: an installed plugin of that name evaluates the constraint. One that
is installed but not enabled there is named as such (``... it is not enabled
in profile "default-scheduler", so the pod is not placed``). It is
part of the framework, not a plugin, so every profile has it and no
configuration turns it off by accident.

Requeueing: nothing in the cluster can make such a pod placeable, only a change
of the pod itself (or a scorer with the plugin). ``requeue_events`` gives the
queue the events to register for these rejectors: the pod's own update; the
queue's 5-minute unschedulable timeout retries it as well.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Protocol

import attrs

from scorer.framework.events import UNSCHEDULABLE_POD, UPDATE, ClusterEvent
from scorer.framework.status import Code, Status
from scorer.inputs.describe import quote
from scorer.model import Pod

VOLUME_BINDING = "VolumeBinding"

# The points where a plugin evaluates these constraints; enabled at either, the check steps aside.
EVALUATING_POINTS: tuple[str, ...] = ("preFilter", "filter")

# What may make a pod these rejectors rejected placeable: its own update (an UnschedulablePod
# event is only ever sent to the updated pod itself). The queue's wildcard events (the
# 5-minute timeout, ForceActivate) move every pod anyway.
REQUEUE_EVENTS: tuple[ClusterEvent, ...] = (ClusterEvent(UNSCHEDULABLE_POD, UPDATE),)


def _count(n: int, one: str, many: str) -> str:
    return one if n == 1 else f"{n} {many}"


def _volumes(pod: Pod) -> tuple[str, bool] | None:
    n = len(pod.pvc_claims)
    if not n:
        return None
    return _count(n, "a volume backed by a PersistentVolumeClaim", "volumes backed by PersistentVolumeClaims"), n > 1


@attrs.frozen(slots=True)
class Constraint:
    """A hard constraint and the plugin that evaluates it. ``find(pod)`` describes the
    pod's constraint (``"required pod affinity"``) and whether that is plural, or None."""

    plugin: str
    find: Callable[[Pod], tuple[str, bool] | None]


# In kube's default plugin order (reference §2.1): the first missing one is the rejector.
CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint(VOLUME_BINDING, _volumes),
)
GUARDED_PLUGINS: tuple[str, ...] = tuple(dict.fromkeys(c.plugin for c in CONSTRAINTS))


class UnsupportedConstraints:
    """The check for one profile. ``missing`` holds the guarded plugins the profile does not
    enable at preFilter or filter (in plugin order); ``installed`` those of them that the
    catalog has, which the message calls "not enabled" instead of "not implemented"."""

    __slots__ = ("_constraints", "installed", "missing", "profile_name")

    def __init__(self, profile_name: str, points: Mapping[str, Collection[str]], installed: Collection[str]) -> None:
        self.profile_name = profile_name
        enabled = {name for point in EVALUATING_POINTS for name in points.get(point, ())}
        self.missing: tuple[str, ...] = tuple(name for name in GUARDED_PLUGINS if name not in enabled)
        self.installed = frozenset(name for name in self.missing if name in installed)
        self._constraints = tuple(c for c in CONSTRAINTS if c.plugin in self.missing)

    def check(self, pod: Pod) -> Status | None:
        """None when the pod needs none of the missing plugins, else its rejection:
        UnschedulableAndUnresolvable, ``plugin`` = the first missing plugin it needs."""
        if not self._constraints or not pod.pvc_claims:
            return None  # the common pod: nothing to look at
        needs: dict[str, list[tuple[str, bool]]] = {}
        for constraint in self._constraints:
            what = constraint.find(pod)
            if what is not None:
                needs.setdefault(constraint.plugin, []).append(what)
        if not needs:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (self._message(needs),), next(iter(needs)))

    def _message(self, needs: dict[str, list[tuple[str, bool]]]) -> str:
        clauses = []
        for plugin, whats in needs.items():
            verb = "need" if len(whats) > 1 or whats[0][1] else "needs"
            clauses.append(f"{_join([what for what, _ in whats])}, which {verb} the {plugin} plugin")
        plugins = list(needs)
        absent = [p for p in plugins if p not in self.installed]
        disabled = [p for p in plugins if p in self.installed]
        single = len(plugins) == 1
        profile = quote(self.profile_name)
        if not disabled:
            why = f"scorer does not implement {'it' if single else 'them'} yet"
        elif not absent:
            why = f"{'it is' if single else 'they are'} not enabled in profile {profile}"
        else:
            verb = "is" if len(disabled) == 1 else "are"
            why = f"scorer does not implement {_join(absent)} yet and {_join(disabled)} {verb} not enabled in " \
                  f"profile {profile}"
        # The clauses have commas of their own: ", and" before the last one, even of two.
        listed = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + ", and " + clauses[-1]
        return f"pod has {listed}; {why}, so the pod is not placed"


def _join(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b, and c``."""
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


class _Guarded(Protocol):
    @property
    def plugins(self) -> Mapping[str, Any]: ...

    @property
    def unsupported(self) -> UnsupportedConstraints: ...


def requeue_events(frameworks: Iterable[_Guarded]) -> dict[str, list[ClusterEvent]]:
    """The events to register (the queue's ``plugin_events``) for the guarded plugins that reject
    pods in some profile and are a plugin in none: ``REQUEUE_EVENTS``. Without them the queue
    would treat these rejectors as interested in every cluster event."""
    frameworks = list(frameworks)
    events: dict[str, list[ClusterEvent]] = {}
    for fwk in frameworks:
        for name in fwk.unsupported.missing:
            if not any(name in other.plugins for other in frameworks):
                events.setdefault(name, list(REQUEUE_EVENTS))
    return events
