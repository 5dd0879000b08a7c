"""VolumeBinding: place pods whose PersistentVolumeClaims need binding, and bind them
(kube's ``volumebinding``, reference §10.6; the binder is ``binder``).

PreFilter (§10.6.1): a pod without PersistentVolumeClaim or generic ephemeral volumes is
skipped (no lookup). Otherwise its claims must exist (delivered objects), not be Lost or being
deleted, and an ephemeral one must be controlled by the pod
(UnschedulableAndUnresolvable with kube's texts); then they are classified from the assume
cache: bound, unbound WaitForFirstConsumer ("delay"), unbound immediate. Any unbound immediate
claim -> UnschedulableAndUnresolvable ``pod has unbound immediate PersistentVolumeClaims`` (the
PV controller binds those). The PVs of each delay claim's class are snapshotted.

Filter (§10.6.2-10.6.4, vectorized in ``binder.VolumeFinder``): per node the reasons
``node(s) had volume node affinity conflict`` (a bound claim's PV does not allow the node),
``node(s) didn't find available persistent volumes to bind`` (a delay claim can be neither
matched to an existing PV nor provisioned there), ``node(s) did not have enough free storage``
(CSIStorageCapacity), ``node(s) unavailable due to one or more pvc(s) bound to non-existent
pv(s)``, all UnschedulableAndUnresolvable; binder errors are Error. The passing nodes'
``PodVolumes`` (PVs to bind, claims to provision) are kept in the cycle state.

No Score: scoring needs the feature gate StorageCapacityScoring, off in kube 1.33-1.36.

Reserve (§10.6.6): the chosen PVs (claimRef) and claims (selected-node) are assumed in the
cache's assume cache, so later cycles see them taken; Unreserve restores them.

PreBind (§10.6.7): the assumed PVs, then the assumed claims, are written through the cluster
writer (``handle.binder``, a ``VolumeWriter``: ``update_persistent_volume`` /
``update_persistent_volume_claim``); a failed write restores the claims and PVs not written
yet and returns Error with the writer's message. Then the delivered objects are checked at
once and every second until every claim is fully bound, a check fails, or
``bindTimeoutSeconds`` pass: Error ``binding volumes: <cause>`` (``context deadline
exceeded`` on timeout). The binding cycle runs Unreserve after an Error. (kube's first check
comes after one second, then one each second; scorer checks at once, then again as soon as the
cluster source delivers a change of a storage object, and at least each second: the in-memory
cluster binds synchronously, and a real cluster's binding ends when the PersistentVolume
controller's write arrives, not at the next whole second.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from scorer.errors import ScorerError
from scorer.framework.events import (
    ADD,
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    UPDATE,
    UPDATE_NODE_LABEL,
    ClusterEvent,
)
from scorer.framework.seams import VolumeWriter
from scorer.framework.status import Code, Status
from scorer.framework.types import FilterVerdict, NodeBatch
from scorer.plugins.volumebinding.args import VolumeBindingArgs
from scorer.plugins.volumebinding.binder import (
    ERR_UNBOUND_IMMEDIATE,
    BinderError,
    FindResult,
    PodClaims,
    PodVolumes,
    SelectorMasks,
    StaticBinding,
    VolumeFinder,
    assume_pod_volumes,
    check_bindings,
    check_claims,
    classify_claims,
    pod_claims,
    revert_pod_volumes,
)
from scorer.state.volumes import AssumeError

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod
    from scorer.model.storage import PersistentVolumeClaim

NAME = "VolumeBinding"
POLL_INTERVAL_SECONDS = 1.0
ERR_TIMEOUT = "context deadline exceeded"
ERR_NO_WRITER = "no cluster to write PersistentVolumes and PersistentVolumeClaims to"

_STATE_KEY = "PreFilter" + NAME
ERR_NO_STATE = f'reading "{_STATE_KEY}" from cycleState: not found'


@attrs.define(slots=True, eq=False)
class _State:
    """PreFilter's classification, then Filter's PodVolumes per passing node (kube's
    ``stateData``). ``claims`` None: the pod has no claims (PreFilter skipped it).

    Shared by the clones of the cycle state, as kube's (Filter on scratch nodes during
    preemption records PodVolumes too; only the chosen node's are used)."""

    claims: PodClaims | None
    pod_volumes: _PodVolumesByNode = attrs.Factory(lambda: _PodVolumesByNode())
    all_bound: bool = False
    memo: dict[Any, Any] = attrs.Factory(dict)  # the VolumeFinder's, for this cycle's Filter calls

    def clone(self) -> _State:
        return self


class _PodVolumesByNode:
    """The PodVolumes of each node that passed Filter, by node name: set ones (Reserve's assumed
    copies, PreBind's written ones) and those of the Filter results, made when first asked."""

    __slots__ = ("_set", "_found")

    def __init__(self) -> None:
        self._set: dict[str, PodVolumes] = {}
        # Per Filter call: its batch (node name -> position through the table rows) and result.
        self._found: list[tuple[NodeBatch, FindResult]] = []

    def add(self, nodes: NodeBatch, result: FindResult) -> None:
        self._found.append((nodes, result))

    def get(self, node_name: str) -> PodVolumes | None:
        pod_volumes = self._set.get(node_name)
        if pod_volumes is not None:
            return pod_volumes
        for nodes, result in reversed(self._found):  # a later call (nominated pods, preemption) wins
            row = nodes.table.index.get(node_name)
            if row is None:
                continue
            hits = np.flatnonzero(nodes.rows == row)
            if len(hits) and result.passing[hits[0]]:
                pod_volumes = self._set[node_name] = result.pod_volumes_at(int(hits[0]))
                return pod_volumes
        return None

    def __setitem__(self, node_name: str, pod_volumes: PodVolumes) -> None:
        self._set[node_name] = pod_volumes


def _state(state: CycleState) -> _State | None:
    found: _State | None = state.get(_STATE_KEY)
    return found


class VolumeBinding:
    name = NAME

    def __init__(self, args: VolumeBindingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._masks = SelectorMasks()
        # PreBind's time (tests replace them): ``sleep(seconds)`` returns after ``seconds`` or as soon
        # as a storage object changes, whichever is first.
        self.clock: Callable[[], float] = time.monotonic
        self.sleep: Callable[[float], Awaitable[Any]] = self._until_changed
        self._changed: asyncio.Event | None = None
        handle.cache.volumes.listeners.append(self._on_change)

    def _on_change(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _until_changed(self, seconds: float) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        try:
            await asyncio.wait_for(self._changed.wait(), seconds)
        except TimeoutError:
            pass

    def events_to_register(self) -> list[ClusterEvent]:
        """kube 1.33-1.35 (§10.6.8): classes, claims, volumes, node labels, CSINodes,
        CSIDrivers and capacities appearing or changing."""
        return [
            ClusterEvent(STORAGE_CLASS, ADD), ClusterEvent(STORAGE_CLASS, UPDATE),
            ClusterEvent(PERSISTENT_VOLUME_CLAIM, ADD), ClusterEvent(PERSISTENT_VOLUME_CLAIM, UPDATE),
            ClusterEvent(PERSISTENT_VOLUME, ADD), ClusterEvent(PERSISTENT_VOLUME, UPDATE),
            ClusterEvent(NODE, ADD), ClusterEvent(NODE, UPDATE_NODE_LABEL),
            ClusterEvent(CSI_NODE, ADD), ClusterEvent(CSI_NODE, UPDATE),
            ClusterEvent(CSI_DRIVER, UPDATE),
            ClusterEvent(CSI_STORAGE_CAPACITY, ADD), ClusterEvent(CSI_STORAGE_CAPACITY, UPDATE),
        ]

    # -- PreFilter / Filter ------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        claims = pod_claims(pod)
        if not claims:
            state.write(_STATE_KEY, _State(None))
            return Status.skip()
        volumes = self.handle.cache.volumes
        problem = check_claims(pod, claims, volumes)
        if problem is not None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (problem,))
        try:
            classified = classify_claims(pod, claims, volumes)
        except BinderError as exc:
            return Status.error(str(exc))
        if classified.immediate:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_UNBOUND_IMMEDIATE,))
        state.write(_STATE_KEY, _State(classified))
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict:
        verdict = FilterVerdict(len(nodes))
        current = _state(state)
        if current is None:
            verdict.reject(np.ones(len(nodes), dtype=bool), ERR_NO_STATE, Code.ERROR)
            return verdict
        if current.claims is None:
            return verdict
        result = VolumeFinder(self.handle.cache.volumes, self._masks, current.memo).find(current.claims, nodes)
        for reason, mask in result.reasons():
            verdict.reject(mask, reason, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        for message, mask in result.errors:
            verdict.reject(mask, message, Code.ERROR)
        current.pod_volumes.add(nodes, result)
        return verdict

    # -- Reserve / Unreserve --------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        current = _state(state)
        if current is None:
            return Status.error(ERR_NO_STATE)
        pod_volumes = current.pod_volumes.get(node_name)
        if pod_volumes is None:  # the pod has no claims
            current.all_bound = True
            return None
        try:
            current.all_bound, current.pod_volumes[node_name] = assume_pod_volumes(
                pod, node_name, pod_volumes, self.handle.cache.volumes)
        except AssumeError as exc:
            return Status.error(str(exc))
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        current = _state(state)
        pod_volumes = current.pod_volumes.get(node_name) if current is not None else None
        if pod_volumes is not None:
            revert_pod_volumes(pod_volumes, self.handle.cache.volumes)

    # -- PreBind ------------------------------------------------------------------------------
    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        current = _state(state)
        if current is None:
            return Status.error(ERR_NO_STATE)
        if current.all_bound:
            return None
        pod_volumes = current.pod_volumes.get(node_name)
        if pod_volumes is None:
            return Status.error(f'no pod volumes found for node "{node_name}"')
        try:
            pod_volumes = current.pod_volumes[node_name] = await self._write(pod_volumes)
        except ScorerError as exc:  # the writer's conflict or failure, as kube returns the API error
            return Status.error(str(exc))
        try:
            await self._wait(pod, node_name, pod_volumes)
        except BinderError as exc:
            return Status.error(f"binding volumes: {exc}")
        return None

    async def _write(self, pod_volumes: PodVolumes) -> PodVolumes:
        """kube's ``bindAPIUpdate``: PUT each PV, then each claim, keeping what the cluster
        stored; on failure restore the assumed objects not written yet (written ones stay
        assumed until the cluster source delivers them) and raise."""
        bindings = list(pod_volumes.static_bindings)
        provisions: list[PersistentVolumeClaim] = list(pod_volumes.dynamic_provisions)
        if not bindings and not provisions:
            return pod_volumes
        writer = self.handle.binder
        written_pvs = written_pvcs = 0
        try:
            if not isinstance(writer, VolumeWriter):
                raise ScorerError(ERR_NO_WRITER)
            for i, binding in enumerate(bindings):
                bindings[i] = StaticBinding(binding.pvc, await writer.update_persistent_volume(binding.pv))
                written_pvs += 1
            for i, pvc in enumerate(provisions):
                provisions[i] = await writer.update_persistent_volume_claim(pvc)
                written_pvcs += 1
        except BaseException:
            revert_pod_volumes(PodVolumes(tuple(bindings[written_pvs:]), tuple(provisions[written_pvcs:])),
                               self.handle.cache.volumes)
            raise
        return PodVolumes(tuple(bindings), tuple(provisions))

    async def _wait(self, pod: Pod, node_name: str, pod_volumes: PodVolumes) -> None:
        """Check at once, then every second, until bound; BinderError on a failed check or when
        ``bindTimeoutSeconds`` pass."""
        cache = self.handle.cache
        deadline = self.clock() + self.args.bind_timeout_seconds
        while True:
            cached = cache.pods.get(pod.key)
            exists = cached is not None and (not pod.uid or cached.uid == pod.uid)
            if check_bindings(pod, node_name, pod_volumes, cache.volumes, cache.node(node_name), exists):
                return
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise BinderError(ERR_TIMEOUT)
            await self.sleep(min(POLL_INTERVAL_SECONDS, remaining))
            if self.clock() >= deadline:
                raise BinderError(ERR_TIMEOUT)


def volume_decisions(state: CycleState, node_name: str) -> dict[str, str]:
    """What this cycle's VolumeBinding decided for the pod's claims on ``node_name`` (for ``explain``):
    claim name -> ``bound to PersistentVolume <pv>`` (bound already), ``binds PersistentVolume <pv>``
    (a WaitForFirstConsumer claim matched to a free PV there), ``provisioned on <node>`` (left to its
    class's provisioner). Empty when the pod has no claims or VolumeBinding did not run."""
    current = _state(state)
    if current is None or current.claims is None:
        return {}
    out = {claim.name: f"bound to PersistentVolume {claim.volume_name}" for claim in current.claims.bound}
    pod_volumes = current.pod_volumes.get(node_name)
    if pod_volumes is not None:
        for binding in pod_volumes.static_bindings:
            out[binding.pvc.name] = f"binds PersistentVolume {binding.pv.name}"
        for claim in pod_volumes.dynamic_provisions:
            out[claim.name] = f"provisioned on {node_name}"
    return out


def factory(args: VolumeBindingArgs | None, handle: Handle) -> VolumeBinding:
    return VolumeBinding(args if args is not None else VolumeBindingArgs(), handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=VolumeBindingArgs, plugin_type=VolumeBinding)
