"""The volume binder of VolumeBinding (kube's ``volumebinding/binder.go``, reference §10.6).

* ``pod_claims`` / ``check_claims`` / ``classify_claims``: PreFilter's claim lookups and the
  split into bound, unbound WaitForFirstConsumer ("delay") and unbound immediate claims, with
  the PersistentVolumes of each delay claim's class as of PreFilter.
* ``VolumeFinder``: FindPodVolumes over a batch of nodes. Bound claims: the PV's node affinity
  (after the CSI migration translation, per node). Delay claims: kube's static PV selection
  (``FindMatchingVolume``: smallest fitting PV, pre-bound PVs first), then the provisioning
  checks (provisioner, ``allowedTopologies``, CSIStorageCapacity) for the claims left.
  Vectorized: every node selector and label selector is evaluated once per distinct selector
  over the whole node table (cached while the nodes do not change) and gathered for the batch;
  static selection walks each claim's candidate PVs in selection order with a mask of the nodes
  still undecided, so no per-node Python loop runs except to assemble the passing nodes'
  ``PodVolumes``.
* ``assume_pod_volumes`` / ``revert_pod_volumes``: Reserve and Unreserve on the assume cache.
* ``check_bindings``: one check of PreBind's wait (``BindingCheck``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from scorer.framework.types import NodeBatch
from scorer.model import LabelSelector, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from scorer.model.storage import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    ClaimRef,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    TopologySelectorTerm,
)
from scorer.plugins.helper.csi import (
    AWS_EBS,
    CINDER,
    GCE_PD,
    TranslationError,
    is_csi_migration_on_for_plugin,
    is_plugin_migrated_on_node,
    translate_pv,
)
from scorer.plugins.helper.nodeselector import label_selector_mask, requirement_mask, selector_mask
from scorer.state.volumes import AssumeError, VolumeObjects, resource_version_number

if TYPE_CHECKING:
    from scorer.model import Node, Pod
    from scorer.state import NodeTable

# Filter reasons (kube's ConflictReason, 1.33-1.35), in the order they are reported.
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

_AVAILABLE = "Available"
_LOST = "Lost"
_EPHEMERAL = "ephemeral"

# csi-translation-lib's translateTopologyFromInTreeToCSI: the CSI zone key per in-tree plugin
# (Azure Disk's PV translation leaves the node affinity alone).
_CSI_ZONE_KEYS = {GCE_PD: "topology.gke.io/zone", AWS_EBS: "topology.ebs.csi.aws.com/zone",
                  CINDER: "topology.cinder.csi.openstack.org/zone"}
_ZONE_GA, _REGION_GA = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
_ZONE_BETA, _REGION_BETA = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"


class BinderError(Exception):
    """An internal error of the binder: an Error status (not a rejection)."""


# -- claims ---------------------------------------------------------------------------


@attrs.frozen(slots=True)
class PodClaims:
    """A pod's claims as PreFilter classified them (from the assume cache).

    ``delay``: unbound claims of a WaitForFirstConsumer class without ``volumeName``, in
    volume order; ``pvs_by_class``: the PVs of each of their classes that they could take at
    PreFilter (no claimRef, or one naming one of these claims: ``VolumeObjects.candidate_pvs``; assumed
    copies included), name order.
    """

    bound: tuple[PersistentVolumeClaim, ...] = ()
    delay: tuple[PersistentVolumeClaim, ...] = ()
    immediate: tuple[PersistentVolumeClaim, ...] = ()
    pvs_by_class: dict[str, tuple[PersistentVolume, ...]] = attrs.Factory(dict)


@attrs.frozen(slots=True)
class StaticBinding:
    """A delay claim and the existing PV chosen for it."""

    pvc: PersistentVolumeClaim
    pv: PersistentVolume


@attrs.frozen(slots=True)
class PodVolumes:
    """What binding the pod on one node takes (kube's ``PodVolumes``): PVs to bind to claims,
    and claims to provision there."""

    static_bindings: tuple[StaticBinding, ...] = ()
    dynamic_provisions: tuple[PersistentVolumeClaim, ...] = ()


EMPTY_POD_VOLUMES = PodVolumes()


def pod_claims(pod: Pod) -> tuple[tuple[str, bool], ...]:
    """``(claim name, is ephemeral)`` of the pod's PersistentVolumeClaim and generic ephemeral
    volumes, in volume order (a pod built with ``pvc_claims`` alone: those, not ephemeral)."""
    if pod.volumes:
        return tuple((v.claim_name, v.source == _EPHEMERAL) for v in pod.volumes if v.is_claim)
    return tuple((name, False) for name in pod.pvc_claims)


def claim_key(pod: Pod, name: str) -> str:
    return f"{pod.namespace}/{name}"


def not_owned_message(pod: Pod, pvc: PersistentVolumeClaim) -> str:
    return f"PVC {pvc.namespace}/{pvc.name} was not created for pod {pod.namespace}/{pod.name} (pod is not owner)"


def is_owned_by(pvc: PersistentVolumeClaim, pod: Pod) -> bool:
    """kube's ``ephemeral.VolumeIsForPod``: same namespace, and the PVC's controller owner
    reference is the pod (by UID)."""
    controller = next((ref for ref in pvc.owner_references if ref.controller), None)
    return pvc.namespace == pod.namespace and controller is not None and controller.uid == pod.uid


def check_claims(pod: Pod, claims: Iterable[tuple[str, bool]], volumes: VolumeObjects) -> str | None:
    """kube's ``podHasPVCs`` checks on the delivered PVCs: why the pod cannot be scheduled
    (UnschedulableAndUnresolvable), or None."""
    for name, ephemeral in claims:
        pvc = volumes.api_pvc(claim_key(pod, name))
        if pvc is None:
            if ephemeral:
                return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
            return f'persistentvolumeclaim "{name}" not found'
        if pvc.phase == _LOST:
            return f'persistentvolumeclaim "{pvc.name}" bound to non-existent persistentvolume "{pvc.volume_name}"'
        if pvc.deleting:
            return f'persistentvolumeclaim "{pvc.name}" is being deleted'
        if ephemeral and not is_owned_by(pvc, pod):
            return not_owned_message(pod, pvc)
    return None


def is_delay_binding(pvc: PersistentVolumeClaim, volumes: VolumeObjects) -> bool:
    """kube's ``IsDelayBindingMode``: the claim's class exists and is WaitForFirstConsumer."""
    if not pvc.storage_class:
        return False
    storage_class = volumes.classes.get(pvc.storage_class)
    return storage_class is not None and storage_class.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER


def classify_claims(pod: Pod, claims: Iterable[tuple[str, bool]], volumes: VolumeObjects) -> PodClaims:
    """kube's ``GetPodVolumeClaims`` (reads the assume cache). Raises BinderError."""
    bound: list[PersistentVolumeClaim] = []
    delay: list[PersistentVolumeClaim] = []
    immediate: list[PersistentVolumeClaim] = []
    for name, ephemeral in claims:
        key = claim_key(pod, name)
        pvc = volumes.pvc(key)
        if pvc is None:
            raise BinderError(f'error getting PVC "{key}": could not find v1.PersistentVolumeClaim "{key}"')
        if ephemeral and not is_owned_by(pvc, pod):
            raise BinderError(not_owned_message(pod, pvc))
        if pvc.fully_bound:
            bound.append(pvc)
        elif is_delay_binding(pvc, volumes) and not pvc.volume_name:
            delay.append(pvc)
        else:  # an Immediate class, no or an unknown class, or pre-bound (volumeName set)
            immediate.append(pvc)
    keys = [pvc.key for pvc in delay]
    pvs_by_class = {pvc.storage_class: tuple(volumes.candidate_pvs(pvc.storage_class, keys)) for pvc in delay}
    return PodClaims(tuple(bound), tuple(delay), tuple(immediate), pvs_by_class)


def all_bound(pod: Pod, volumes: VolumeObjects) -> bool:
    """kube's ``arePodVolumesBound``: every claim of the pod is fully bound (assume cache)."""
    for name, ephemeral in pod_claims(pod):
        pvc = volumes.pvc(claim_key(pod, name))
        if pvc is None or (ephemeral and not is_owned_by(pvc, pod)) or not pvc.fully_bound:
            return False
    return True


# -- PV rules (component-helpers storage/volume) -------------------------------------


def is_bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """kube's ``IsVolumeBoundToClaim``: claimRef names the claim (a claimRef UID must match)."""
    ref = pv.claim_ref
    if ref is None or ref.name != pvc.name or ref.namespace != pvc.namespace:
        return False
    return not ref.uid or ref.uid == pvc.uid


def _access_modes_ok(pvc: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    return all(mode in pv.access_modes for mode in pvc.access_modes)


def _candidates(pvc: PersistentVolumeClaim, pvs: Sequence[PersistentVolume]) -> tuple[
        list[PersistentVolume], list[PersistentVolume]]:
    """The node-independent part of kube's ``FindMatchingVolume``: ``(pre-bound, others)``.

    Pre-bound PVs (claimRef names this claim) in list order; the first one not taken by an
    earlier claim decides a node (its node affinity matches, or the claim is unmatched there).
    The others (Available, selector, class, access modes) sorted by capacity, first seen first
    on ties: the first whose node affinity matches a node is the smallest fitting PV there.
    The VolumeAttributesClass gate is taken as on (GA in 1.34): classes must be equal.
    """
    request = pvc.request or 0
    pre_bound: list[PersistentVolume] = []
    others: list[PersistentVolume] = []
    for pv in pvs:
        if pv.claim_ref is not None and not is_bound_to_claim(pv, pvc):
            continue
        if pv.capacity < request or pv.volume_mode != pvc.volume_mode:
            continue
        if pv.volume_attributes_class != pvc.volume_attributes_class or pv.deleting:
            continue
        if is_bound_to_claim(pv, pvc):
            pre_bound.append(pv)
            continue
        if pv.phase != _AVAILABLE:
            continue
        if pvc.selector is not None and not pvc.selector.matches(pv.labels):
            continue
        if pv.storage_class != pvc.storage_class or not _access_modes_ok(pvc, pv):
            continue
        others.append(pv)
    others.sort(key=lambda pv: pv.capacity)
    return pre_bound, others


def bind_volume_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """kube's ``GetBindVolumeToClaim``: ``(pv with claimRef to pvc, changed)``; adds
    ``pv.kubernetes.io/bound-by-controller: yes`` unless the PV was already bound to it."""
    changed = False
    new = pv
    ref = pv.claim_ref
    if ref is None or ref.name != pvc.name or ref.namespace != pvc.namespace or ref.uid != pvc.uid:
        claim_ref = ClaimRef(namespace=pvc.namespace, name=pvc.name, uid=pvc.uid,
                             resource_version=pvc.resource_version)
        new = attrs.evolve(new, claim_ref=claim_ref)
        changed = True
    if not is_bound_to_claim(pv, pvc) and ANN_BOUND_BY_CONTROLLER not in new.annotations:
        new = attrs.evolve(new, annotations={**new.annotations, ANN_BOUND_BY_CONTROLLER: "yes"})
        changed = True
    return new, changed


# -- CSI migration of bound in-tree PVs ------------------------------------------------


def _affinity_values(selector: NodeSelector | None, key: str) -> list[str]:
    if selector is None:
        return []
    return [value for term in selector.terms for req in term.match_expressions if req.key == key
            for value in req.values]


def _replace_key(selector: NodeSelector, old: str, new: str) -> NodeSelector:
    return NodeSelector(terms=tuple(
        attrs.evolve(term, match_expressions=tuple(
            attrs.evolve(req, key=new) if req.key == old else req for req in term.match_expressions))
        for term in selector.terms))


def translated_affinity(pv: PersistentVolume) -> NodeSelector | None:
    """The node affinity of ``pv`` after csi-translation-lib's ``TranslateInTreePVToCSI``
    (``translateTopologyFromInTreeToCSI``) for GCE PD, AWS EBS and Cinder: the zone key of the
    node affinity (GA if present, else beta) becomes the CSI driver's topology key; without one,
    the PV's zone label (``__``-separated values) is added to every term under that key; a beta
    region key in the node affinity becomes the GA one. Other plugins: unchanged."""
    csi_key = _CSI_ZONE_KEYS.get(pv.in_tree)
    affinity = pv.node_affinity
    if csi_key is None:
        return affinity
    if _affinity_values(affinity, _ZONE_GA):
        zone_key, region_key = _ZONE_GA, _REGION_GA
    elif _affinity_values(affinity, _ZONE_BETA):
        zone_key, region_key = _ZONE_BETA, _REGION_BETA
    elif _ZONE_GA in pv.labels or _ZONE_BETA not in pv.labels:
        zone_key, region_key = _ZONE_GA, _REGION_GA
    else:
        zone_key, region_key = _ZONE_BETA, _REGION_BETA
    if affinity is not None and _affinity_values(affinity, zone_key):
        affinity = _replace_key(affinity, zone_key, csi_key)
    elif zone_key in pv.labels:
        zones = tuple(sorted({z.strip() for z in pv.labels[zone_key].split("__") if z.strip()}))
        if zones:  # (kube refuses to translate a PV whose zone label holds no zone; kept as is here)
            requirement = NodeSelectorRequirement(key=csi_key, operator="In", values=zones)
            terms = affinity.terms if affinity is not None and affinity.terms else (NodeSelectorTerm(),)
            affinity = NodeSelector(terms=tuple(
                attrs.evolve(term, match_expressions=(*term.match_expressions, requirement)) for term in terms))
    if region_key == _REGION_BETA and affinity is not None and _affinity_values(affinity, _REGION_BETA):
        affinity = _replace_key(affinity, _REGION_BETA, _REGION_GA)
    return affinity


def is_migrated(pv: PersistentVolume) -> bool:
    """The PV is an in-tree volume whose CSI migration kube-scheduler applies (per node, with
    the CSINode's migrated-plugins annotation)."""
    return bool(pv.in_tree) and is_csi_migration_on_for_plugin(pv.in_tree)


def effective_affinity(pv: PersistentVolume, volumes: VolumeObjects, node_name: str) -> NodeSelector | None:
    """kube's ``tryTranslatePVToCSI`` then the node affinity, for one node. Raises BinderError
    when the translation fails."""
    if not is_migrated(pv) or not is_plugin_migrated_on_node(volumes.csi_nodes.get(node_name), pv.in_tree):
        return pv.node_affinity
    try:
        translate_pv(pv)
    except TranslationError as exc:
        raise BinderError(f"could not translate pv: {exc}") from None
    return translated_affinity(pv)


def affinity_matches(selector: NodeSelector | None, node: Node) -> bool:
    """kube's ``CheckNodeAffinity``: no node affinity matches every node."""
    return selector is None or selector.matches(node)


# -- selectors over node tables ----------------------------------------------------------


_MAX_SELECTORS_BY_ID = 100_000  # selector objects kept for node_rows (each holds a PV's node affinity)


class SelectorMasks:
    """Node selectors and label selectors evaluated over every row of one node table, cached
    until the table's nodes change (``nodes_version``); a batch gathers its rows."""

    __slots__ = ("_table", "_version", "_nodes", "_rows", "_labels", "_by_value", "_rows_by_id")

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._version = -1
        self._nodes: dict[NodeSelector, np.ndarray] = {}
        self._rows: dict[NodeSelector | None, np.ndarray] = {}
        self._labels: dict[object, np.ndarray] = {}
        # label key -> (rows sorted by value code, start of each code's run in them)
        self._by_value: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        # node_rows by the selector object itself (held, so its id is not reused): hashing a selector
        # (frozen attrs, nested) costs more than the lookup; a PV keeps its selector object.
        self._rows_by_id: dict[int, tuple[NodeSelector, np.ndarray]] = {}

    def _fresh(self, table: NodeTable) -> None:
        if self._table is not table or self._version != table.nodes_version:
            self._table, self._version = table, table.nodes_version
            self._nodes.clear()
            self._rows.clear()
            self._labels.clear()
            self._by_value.clear()
            self._rows_by_id.clear()

    def node_rows(self, selector: NodeSelector | None, table: NodeTable) -> np.ndarray:
        """The table rows the selector matches (None: every row), ascending. A selector of one
        term of ``In`` expressions (a local PV's ``hostname In [node]``) is answered from an
        index of the rows by label value, without a pass over the table."""
        self._fresh(table)
        if selector is not None:
            known = self._rows_by_id.get(id(selector))
            if known is not None and known[0] is selector:
                return known[1]
        rows = self._rows.get(selector)
        if rows is None:
            if selector is None:
                rows = np.arange(len(table), dtype=np.int64)
            elif _is_in_term(selector):
                rows = self._in_rows(selector.terms[0], table)
            else:
                full = self._nodes.get(selector)
                rows = np.flatnonzero(full if full is not None else _selector_rows(selector, table))
            self._rows[selector] = rows
        if selector is not None:
            if len(self._rows_by_id) > _MAX_SELECTORS_BY_ID:
                self._rows_by_id.clear()
            self._rows_by_id[id(selector)] = (selector, rows)
        return rows

    def _in_rows(self, term: NodeSelectorTerm, table: NodeTable) -> np.ndarray:
        rows: np.ndarray | None = None
        for req in term.match_expressions:
            column = table.label_column(req.key)
            index = self._by_value.get(req.key)
            if index is None:
                order = np.argsort(column.codes, kind="stable")
                starts = np.searchsorted(column.codes[order], np.arange(len(column.code_of) + 1))
                index = self._by_value[req.key] = (order, starts)
            order, starts = index
            codes = sorted({column.code_of[v] for v in req.values if v in column.code_of})
            hit = (np.sort(np.concatenate([order[starts[c]:starts[c + 1]] for c in codes])) if codes
                   else np.zeros(0, dtype=np.int64))
            rows = hit if rows is None else np.intersect1d(rows, hit, assume_unique=True)
        return rows if rows is not None else np.zeros(0, dtype=np.int64)

    def node_selector(self, selector: NodeSelector | None, nodes: NodeBatch) -> np.ndarray:
        """Bool per batch node: the selector matches (None: every node)."""
        if selector is None:
            return np.ones(len(nodes), dtype=bool)
        table = nodes.table
        self._fresh(table)
        full = self._nodes.get(selector)
        if full is None:
            full = self._nodes[selector] = _selector_rows(selector, table)
        mask: np.ndarray = full[nodes.rows]
        return mask

    def label_selector(self, selector: LabelSelector, nodes: NodeBatch) -> np.ndarray:
        """Bool per batch node: its labels match ``selector``."""
        table = nodes.table
        self._fresh(table)
        key = selector.canonical
        full = self._labels.get(key)
        if full is None:
            full = self._labels[key] = label_selector_mask(selector, NodeBatch(table, table.rows()))
        mask: np.ndarray = full[nodes.rows]
        return mask


def _is_in_term(selector: NodeSelector) -> bool:
    """One term, with ``In`` expressions only (no fields), that parses."""
    if len(selector.terms) != 1:
        return False
    term = selector.terms[0]
    return (term.parse_error is None and not term.match_fields and bool(term.match_expressions)
            and all(req.operator == "In" for req in term.match_expressions))


def _selector_rows(selector: NodeSelector, table: NodeTable) -> np.ndarray:
    """Bool per table row: the selector matches."""
    return selector_mask(selector, NodeBatch(table, table.rows()))


def _topology_mask(terms: tuple[TopologySelectorTerm, ...], nodes: NodeBatch) -> np.ndarray:
    """kube's ``MatchTopologySelectorTerms``: no terms match every node; a term without
    expressions matches none; a term matches when every key has one of its values."""
    if not terms:
        return np.ones(len(nodes), dtype=bool)
    match = np.zeros(len(nodes), dtype=bool)
    for term in terms:
        if not term.match_label_expressions:
            continue
        hit = np.ones(len(nodes), dtype=bool)
        for key, values in term.match_label_expressions:
            hit &= requirement_mask(NodeSelectorRequirement(key=key, operator="In", values=values), nodes)
        match |= hit
    return match


def _capacity_sufficient(capacity: CSIStorageCapacity, request: int) -> bool:
    limit = capacity.maximum_volume_size if capacity.maximum_volume_size is not None else capacity.capacity
    return limit is not None and limit >= request


# -- FindPodVolumes over a batch ------------------------------------------------------------


@attrs.define(slots=True)
class FindResult:
    """FindPodVolumes over a batch: per node the four reason flags (True = the reason applies),
    internal errors, the nodes that pass, and what binding takes on each (``pod_volumes_at``,
    made when asked: most passing nodes are never chosen)."""

    node_conflict: np.ndarray
    bind_conflict: np.ndarray
    not_enough_space: np.ndarray
    pv_not_exist: np.ndarray
    errors: list[tuple[str, np.ndarray]]
    passing: np.ndarray  # bool per batch position
    # Per unbound claim matched: (claim, its candidates, the candidate index chosen per position, -1 none);
    # per claim to provision: (claim, bool per position).
    static: list[tuple[PersistentVolumeClaim, list[PersistentVolume], np.ndarray]] = attrs.Factory(list)
    provisions: list[tuple[PersistentVolumeClaim, np.ndarray]] = attrs.Factory(list)

    def reasons(self) -> list[tuple[str, np.ndarray]]:
        return [(ERR_REASON_NODE_CONFLICT, self.node_conflict), (ERR_REASON_BIND_CONFLICT, self.bind_conflict),
                (ERR_REASON_NOT_ENOUGH_SPACE, self.not_enough_space), (ERR_REASON_PV_NOT_EXIST, self.pv_not_exist)]

    def pod_volumes_at(self, i: int) -> PodVolumes:
        """The PodVolumes of the passing node at batch position ``i``."""
        if not self.static and not self.provisions:
            return EMPTY_POD_VOLUMES
        bindings = tuple(StaticBinding(pvc, pvs[int(chosen[i])]) for pvc, pvs, chosen in self.static
                         if chosen[i] >= 0)
        return PodVolumes(bindings, tuple(pvc for pvc, needs in self.provisions if needs[i]))


class VolumeFinder:
    """kube's ``FindPodVolumes`` for a batch of nodes (reference §10.6.2-10.6.4).

    ``memo`` lives as long as one cycle's PreFilter state (one pod, one view of the volumes): the
    node-independent candidates of each claim, and for the first claim matched (no earlier claim's
    choice to exclude) the candidate each node of the whole table would take, so the Filter calls
    of a cycle's chunks only gather their rows."""

    def __init__(self, volumes: VolumeObjects, masks: SelectorMasks, memo: dict[Any, Any] | None = None) -> None:
        self.volumes = volumes
        self.masks = masks
        self.memo: dict[Any, Any] = {} if memo is None else memo

    def find(self, claims: PodClaims, nodes: NodeBatch) -> FindResult:
        n = len(nodes)
        none = np.zeros(n, dtype=bool)
        errors: list[tuple[str, np.ndarray]] = []
        node_conflict, pv_not_exist = self._bound(claims.bound, nodes, errors)
        bind_conflict, not_enough = none, none
        static: list[tuple[PersistentVolumeClaim, list[PersistentVolume], np.ndarray]] = []
        provisions: list[tuple[PersistentVolumeClaim, np.ndarray]] = []
        if claims.delay:
            bind_conflict, not_enough, static, provisions = self._unbound(claims, nodes, errors)
        failed = node_conflict | bind_conflict | not_enough | pv_not_exist
        erred = none.copy()
        for _, mask in errors:
            erred |= mask
        return FindResult(node_conflict & ~erred, bind_conflict & ~erred, not_enough & ~erred,
                          pv_not_exist & ~erred, errors, ~(failed | erred), static, provisions)

    # -- bound claims ---------------------------------------------------------------
    def _bound(self, bound: tuple[PersistentVolumeClaim, ...], nodes: NodeBatch,
               errors: list[tuple[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """kube's ``checkBoundClaims``, per node: the first claim whose PV is missing (every node
        still checking: PV not found) or whose PV's node affinity fails the node (conflict)."""
        n = len(nodes)
        conflict = np.zeros(n, dtype=bool)
        missing = np.zeros(n, dtype=bool)
        checking = np.ones(n, dtype=bool)
        for pvc in bound:
            pv = self.volumes.pv(pvc.volume_name)
            if pv is None:
                missing = checking
                break
            match = self._bound_affinity(pv, nodes, checking, errors)
            conflict |= checking & ~match
            checking = checking & match
            if not checking.any():
                break
        return conflict, missing

    def _bound_affinity(self, pv: PersistentVolume, nodes: NodeBatch, checking: np.ndarray,
                        errors: list[tuple[str, np.ndarray]]) -> np.ndarray:
        match = self.masks.node_selector(pv.node_affinity, nodes)
        if not is_migrated(pv):
            return match
        csi_nodes = self.volumes.csi_nodes
        migrated = np.fromiter((is_plugin_migrated_on_node(csi_nodes.get(name), pv.in_tree) for name in nodes.names),
                               dtype=bool, count=len(nodes))
        if not migrated.any():
            return match
        try:
            translate_pv(pv)
        except TranslationError as exc:
            failed = migrated & checking
            if failed.any():
                errors.append((f"could not translate pv: {exc}", failed))
            untranslated: np.ndarray = match & ~migrated
            return untranslated
        return np.where(migrated, self.masks.node_selector(translated_affinity(pv), nodes), match)

    # -- unbound delay claims -----------------------------------------------------------
    def _unbound(self, claims: PodClaims, nodes: NodeBatch, errors: list[tuple[str, np.ndarray]]) -> tuple[
            np.ndarray, np.ndarray, list[tuple[PersistentVolumeClaim, list[PersistentVolume], np.ndarray]],
            list[tuple[PersistentVolumeClaim, np.ndarray]]]:
        n = len(nodes)
        # A claim that already has a selected node fits that node only (fast path: the node's other
        # claims are not looked at); it goes straight to the provisioning checks there.
        selected = [pvc for pvc in claims.delay if ANN_SELECTED_NODE in pvc.annotations]
        other_node = np.zeros(n, dtype=bool)
        for pvc in selected:
            other_node |= ~nodes.named((pvc.annotations[ANN_SELECTED_NODE],))
        active = ~other_node
        to_match = sorted((pvc for pvc in claims.delay if ANN_SELECTED_NODE not in pvc.annotations),
                          key=lambda pvc: pvc.request or 0)
        static = self._match(to_match, claims.pvs_by_class, nodes, active)
        provisions = [(pvc, active) for pvc in selected]
        provisions += [(pvc, active & (indices < 0)) for pvc, _, indices in static]
        unprovisionable, short = self._provision(provisions, nodes, errors)
        return other_node | unprovisionable, short, static, provisions

    def _match(self, claims: list[PersistentVolumeClaim], pvs_by_class: dict[str, tuple[PersistentVolume, ...]],
               nodes: NodeBatch, active: np.ndarray) -> list[tuple[PersistentVolumeClaim, list[PersistentVolume],
                                                                   np.ndarray]]:
        """kube's ``findMatchingVolumes``: per claim (by request, ascending) the index of the PV
        chosen on each node into its candidate list, -1 where none; a PV chosen for an earlier
        claim on a node is not a candidate there.

        Pre-bound PVs are walked in order (the first free one decides a node). The others, in
        selection order, as ``(node position, candidate index)`` pairs from each PV's matching
        rows (``SelectorMasks.node_rows``): each node takes its smallest index. A PV without node
        affinity that no earlier claim took covers every node, so the walk stops there."""
        n = len(nodes)
        position = np.full(len(nodes.table), -1, dtype=np.int64)
        position[nodes.rows] = np.arange(n, dtype=np.int64)
        ids: dict[str, int] = {}  # PV name -> id, for the earlier claims' choices
        earlier: list[np.ndarray] = []  # per earlier claim: the id of the PV it took on each node, -1 none
        out = []
        for pvc in claims:
            pre_bound, others = self._candidates(pvc, pvs_by_class)
            candidates = pre_bound + others
            cand_ids = np.array([ids.setdefault(pv.name, len(ids)) for pv in candidates], dtype=np.int64)
            if not earlier:  # nothing taken yet: the whole table's choice, once per cycle
                chosen = np.where(active, self._table_choice(pvc, pre_bound, others, nodes.table)[nodes.rows], -1)
                earlier.append(np.where(chosen >= 0, cand_ids[np.maximum(chosen, 0)] if len(cand_ids) else -1, -1))
                out.append((pvc, candidates, chosen))
                continue
            chosen = np.full(n, -1, dtype=np.int64)
            undecided = active.copy()
            for j, pv in enumerate(pre_bound):
                free = undecided.copy()
                for taken in earlier:
                    free &= taken != cand_ids[j]
                hit = free & self.masks.node_selector(pv.node_affinity, nodes)
                chosen[hit] = j
                undecided &= ~free  # the first free pre-bound PV decides a node, matching or not
            if others and undecided.any():
                self._smallest(others, len(pre_bound), cand_ids, earlier, nodes, position, undecided, chosen)
            earlier.append(np.where(chosen >= 0, cand_ids[np.maximum(chosen, 0)] if len(cand_ids) else -1, -1))
            out.append((pvc, candidates, chosen))
        return out

    def _candidates(self, pvc: PersistentVolumeClaim, pvs_by_class: dict[str, tuple[PersistentVolume, ...]]
                    ) -> tuple[list[PersistentVolume], list[PersistentVolume]]:
        key = ("candidates", pvc.key)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = _candidates(pvc, pvs_by_class.get(pvc.storage_class, ()))
        return found

    def _table_choice(self, pvc: PersistentVolumeClaim, pre_bound: list[PersistentVolume],
                      others: list[PersistentVolume], table: NodeTable) -> np.ndarray:
        """Per table row, the index (into pre-bound + others) of the PV the claim takes there when no
        earlier claim took any, -1 for none: the first pre-bound PV decides every node (it matches or
        the claim is unmatched there); else the first of ``others`` whose node affinity matches."""
        key = ("table", pvc.key)
        full = self.memo.get(key)
        if full is not None:
            return full  # type: ignore[no-any-return]
        full = np.full(len(table), -1, dtype=np.int64)
        if pre_bound:
            full[self.masks.node_rows(pre_bound[0].node_affinity, table)] = 0
        elif others:
            rows: list[np.ndarray] = []
            for pv in others:
                rows.append(self.masks.node_rows(pv.node_affinity, table))
                if pv.node_affinity is None:
                    break  # it matches every node: no later PV is reached
            counts = [len(r) for r in rows]
            all_rows = np.concatenate(rows)
            indices = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
            # The first occurrence of each row is its smallest index (indices ascend).
            unique, first = np.unique(all_rows, return_index=True)
            full[unique] = indices[first]
        self.memo[key] = full
        return full

    def _smallest(self, others: list[PersistentVolume], first: int, cand_ids: np.ndarray, earlier: list[np.ndarray],
                  nodes: NodeBatch, position: np.ndarray, undecided: np.ndarray, chosen: np.ndarray) -> None:
        """Set ``chosen`` of the undecided nodes to the first of ``others`` (indices from ``first``)
        whose node affinity matches and that no earlier claim took there."""
        n = len(nodes)
        positions: list[np.ndarray] = []
        indices: list[np.ndarray] = []
        for j, pv in enumerate(others, start=first):
            pos = position[self.masks.node_rows(pv.node_affinity, nodes.table)]
            pos = pos[pos >= 0]
            positions.append(pos)
            indices.append(np.full(len(pos), j, dtype=np.int64))
            if pv.node_affinity is None and not any((taken == cand_ids[j]).any() for taken in earlier):
                break  # every node matches it and it is free everywhere: no later PV is reached
        pos, js = np.concatenate(positions), np.concatenate(indices)
        keep = undecided[pos]
        for taken in earlier:
            keep &= taken[pos] != cand_ids[js]
        pos, js = pos[keep], js[keep]
        if not len(pos):
            return
        best = np.full(n, len(cand_ids), dtype=np.int64)
        np.minimum.at(best, pos, js)
        hit = best < len(cand_ids)
        chosen[hit] = best[hit]

    def _provision(self, provisions: list[tuple[PersistentVolumeClaim, np.ndarray]], nodes: NodeBatch,
                   errors: list[tuple[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """kube's ``checkVolumeProvisions``: per node, its claims to provision in order, stopping at
        the first that cannot be provisioned there (unbound) or lacks capacity there (short)."""
        n = len(nodes)
        unprovisionable = np.zeros(n, dtype=bool)
        short = np.zeros(n, dtype=bool)
        alive = np.ones(n, dtype=bool)
        for pvc, needs in provisions:
            here = alive & needs
            if not here.any():
                continue
            try:
                possible, enough = self._provision_masks(pvc, nodes)
            except BinderError as exc:
                errors.append((str(exc), here))
                alive &= ~here
                continue
            unprovisionable |= here & ~possible
            short |= here & possible & ~enough
            alive &= ~(here & ~(possible & enough))
        return unprovisionable, short

    def _provision_masks(self, pvc: PersistentVolumeClaim, nodes: NodeBatch) -> tuple[np.ndarray, np.ndarray]:
        """(nodes where the class can provision the claim, nodes with enough capacity)."""
        n = len(nodes)
        if not pvc.storage_class:
            raise BinderError(f'no class for claim "{pvc.key}"')
        storage_class = self.volumes.classes.get(pvc.storage_class)
        if storage_class is None:
            raise BinderError(f'failed to find storage class "{pvc.storage_class}"')
        provisioner = storage_class.provisioner
        if not provisioner or provisioner == NO_PROVISIONER:
            return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        possible = _topology_mask(storage_class.allowed_topologies, nodes)
        return possible, self._capacity_mask(pvc, storage_class.name, provisioner, nodes)

    def _capacity_mask(self, pvc: PersistentVolumeClaim, class_name: str, provisioner: str,
                       nodes: NodeBatch) -> np.ndarray:
        """kube's ``hasEnoughCapacity``: only for a claim with a storage request whose provisioner
        is a CSIDriver with ``storageCapacity: true``; then some CSIStorageCapacity of the class
        with a node topology matching the node and room for the request."""
        n = len(nodes)
        driver = self.volumes.csi_drivers.get(provisioner)
        if pvc.request is None or driver is None or driver.storage_capacity is not True:
            return np.ones(n, dtype=bool)
        enough = np.zeros(n, dtype=bool)
        for capacity in self.volumes.capacities.values():
            if capacity.storage_class_name != class_name or capacity.node_topology is None:
                continue
            if _capacity_sufficient(capacity, pvc.request):
                enough |= self.masks.label_selector(capacity.node_topology, nodes)
        return enough


# -- Reserve / Unreserve ------------------------------------------------------------------------


def assume_pod_volumes(pod: Pod, node_name: str, pod_volumes: PodVolumes,
                       volumes: VolumeObjects) -> tuple[bool, PodVolumes]:
    """kube's ``AssumePodVolumes``: ``(all bound, the PodVolumes as assumed)``. Each static
    binding's PV gets its claimRef (assumed when that changes it), each claim to provision the
    selected-node annotation (assumed). On failure what was assumed is restored and AssumeError
    raised."""
    if all_bound(pod, volumes):
        return True, pod_volumes
    bindings: list[StaticBinding] = []
    try:
        for binding in pod_volumes.static_bindings:
            pv, changed = bind_volume_to_claim(binding.pv, binding.pvc)
            if changed:
                volumes.assume_pv(pv)
            bindings.append(StaticBinding(binding.pvc, pv))
    except AssumeError:
        for done in bindings:
            volumes.restore_pv(done.pv.name)
        raise
    provisions: list[PersistentVolumeClaim] = []
    try:
        for pvc in pod_volumes.dynamic_provisions:
            clone = attrs.evolve(pvc, annotations={**pvc.annotations, ANN_SELECTED_NODE: node_name})
            volumes.assume_pvc(clone)
            provisions.append(clone)
    except AssumeError:
        for done in bindings:
            volumes.restore_pv(done.pv.name)
        for claim in provisions:
            volumes.restore_pvc(claim.key)
        raise
    return False, PodVolumes(tuple(bindings), tuple(provisions))


def revert_pod_volumes(pod_volumes: PodVolumes, volumes: VolumeObjects) -> None:
    """kube's ``RevertAssumedPodVolumes`` (idempotent)."""
    for binding in pod_volumes.static_bindings:
        volumes.restore_pv(binding.pv.name)
    for pvc in pod_volumes.dynamic_provisions:
        volumes.restore_pvc(pvc.key)


# -- PreBind's check ----------------------------------------------------------------------------


def _older(written: str, delivered: str) -> bool:
    """The delivered object is older than what the write returned: wait for it."""
    return resource_version_number(written) > resource_version_number(delivered)


def check_bindings(pod: Pod, node_name: str, pod_volumes: PodVolumes, volumes: VolumeObjects,
                   node: Node | None, pod_exists: bool) -> bool:
    """kube's ``checkBindings``: True once every claim the pod's binding wrote is fully bound,
    False to keep waiting; raises BinderError when binding cannot succeed any more. Reads the
    delivered objects (``api_pv``/``api_pvc``), not the assumed copies."""
    if node is None:
        raise BinderError(f'failed to get node "{node_name}": node "{node_name}" not found')
    if not pod_exists:
        raise BinderError(f'pod does not exist any more: pod "{pod.name}" not found')
    for binding in pod_volumes.static_bindings:
        pv = volumes.api_pv(binding.pv.name)
        if pv is None:
            raise BinderError(f'failed to check binding: could not find v1.PersistentVolume "{binding.pv.name}"')
        pvc = volumes.api_pvc(binding.pvc.key)
        if pvc is None:
            raise BinderError(f'failed to check binding: could not find v1.PersistentVolumeClaim "{binding.pvc.key}"')
        if _older(binding.pv.resource_version, pv.resource_version):
            return False
        _check_affinity(pv, volumes, node, "failed to translate pv to csi: ")
        if pv.claim_ref is None or not pv.claim_ref.uid:
            raise BinderError(f'ClaimRef got reset for pv "{pv.name}"')
        if not pvc.fully_bound:
            return False
    for claim in pod_volumes.dynamic_provisions:
        pvc = volumes.api_pvc(claim.key)
        if pvc is None:
            raise BinderError("failed to check provisioning pvc: "
                              f'could not find v1.PersistentVolumeClaim "{claim.key}"')
        if _older(claim.resource_version, pvc.resource_version):
            return False
        if not pvc.annotations:
            raise BinderError(f'selectedNode annotation reset for PVC "{pvc.name}"')
        if pvc.annotations.get(ANN_SELECTED_NODE, "") != node_name:
            raise BinderError(f'provisioning failed for PVC "{pvc.name}"')
        if pvc.volume_name:
            pv = volumes.api_pv(pvc.volume_name)
            if pv is None:
                return False  # (not delivered yet, or deleted: the claim will be unbound then)
            _check_affinity(pv, volumes, node, "")
        if not pvc.fully_bound:
            return False
    return True


def _check_affinity(pv: PersistentVolume, volumes: VolumeObjects, node: Node, translate_prefix: str) -> None:
    try:
        affinity = effective_affinity(pv, volumes, node.name)
    except BinderError as exc:
        raise BinderError(f"{translate_prefix}{exc}") from None
    if not affinity_matches(affinity, node):
        raise BinderError(f'pv "{pv.name}" node affinity doesn\'t match node "{node.name}": '
                          "no matching NodeSelectorTerms")
