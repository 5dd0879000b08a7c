"""VolumeObjects: the storage objects the scheduler knows (the cache's ``volumes``).

PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers
and CSIStorageCapacities, as the cluster source delivered them, plus
VolumeBinding's *assume cache* over PVs and PVCs (reference §10.6.6): an
assumed copy of a PV (claimRef set at Reserve) or a PVC (selected-node set)
shadows the delivered object for every reader (``pv``, ``pvc``,
``pvs_of_class``) until it is restored (Unreserve, a failed write) or the
source delivers a version at least as new. ``api_pv``/``api_pvc`` read the
delivered objects alone (what PreBind's wait checks).

``version`` grows with every change, for plugins that keep indexes;
``listeners`` are called (no arguments) after every change of a delivered
object, for waiters that want to look again at once (VolumeBinding's PreBind).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from scorer.model.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObject,
)

__all__ = ["AssumeError", "VolumeObjects", "resource_version_number"]


class AssumeError(Exception):
    """An assumed copy older than the object the cache holds (kube's assume cache refuses it)."""


def resource_version_number(version: str) -> int:
    """A resourceVersion as kube's assume cache compares them: an integer; "" (objects from
    files) counts as 0. A version that is not an integer counts as 0 too."""
    if not version:
        return 0
    try:
        return int(version)
    except ValueError:
        return 0


class VolumeObjects:
    """Storage objects by key, and the assumed PVs and PVCs over them."""

    def __init__(self) -> None:
        self.pvs: dict[str, PersistentVolume] = {}
        self.pvcs: dict[str, PersistentVolumeClaim] = {}  # by namespace/name
        self.classes: dict[str, StorageClass] = {}
        self.csi_nodes: dict[str, CSINode] = {}
        self.csi_drivers: dict[str, CSIDriver] = {}
        self.capacities: dict[str, CSIStorageCapacity] = {}  # by namespace/name
        self._assumed_pvs: dict[str, PersistentVolume] = {}
        self._assumed_pvcs: dict[str, PersistentVolumeClaim] = {}
        # PV names by storage class, for static binding's candidates; of those, the ones whose current
        # copy (assumed or delivered) has no claimRef, and by the claim (namespace/name) a claimRef names.
        self._class_pvs: dict[str, set[str]] = {}
        self._unclaimed: dict[str, set[str]] = {}
        self._by_claim: dict[str, set[str]] = {}
        self._indexed: dict[str, tuple[str, str | None]] = {}  # PV name -> (class, claim key or None)
        self.version = 0
        self.listeners: list[Callable[[], None]] = []

    def __len__(self) -> int:
        return (len(self.pvs) + len(self.pvcs) + len(self.classes) + len(self.csi_nodes)
                + len(self.csi_drivers) + len(self.capacities))

    # -- delivered objects -----------------------------------------------------------
    def add(self, obj: StorageObject) -> None:
        """Add or replace an object (a newer delivered PV or PVC drops its assumed copy)."""
        self.version += 1
        if isinstance(obj, PersistentVolume):
            old = self.pvs.get(obj.name)
            if old is not None and old.storage_class != obj.storage_class:
                self._class_pvs.get(old.storage_class, set()).discard(obj.name)
            self.pvs[obj.name] = obj
            self._class_pvs.setdefault(obj.storage_class, set()).add(obj.name)
            assumed = self._assumed_pvs.get(obj.name)
            if assumed is not None and _newer_or_same(obj.resource_version, assumed.resource_version):
                del self._assumed_pvs[obj.name]
            self._reindex(obj.name)
        elif isinstance(obj, PersistentVolumeClaim):
            self.pvcs[obj.key] = obj
            assumed_claim = self._assumed_pvcs.get(obj.key)
            if assumed_claim is not None and _newer_or_same(obj.resource_version, assumed_claim.resource_version):
                del self._assumed_pvcs[obj.key]
        elif isinstance(obj, StorageClass):
            self.classes[obj.name] = obj
        elif isinstance(obj, CSINode):
            self.csi_nodes[obj.name] = obj
        elif isinstance(obj, CSIDriver):
            self.csi_drivers[obj.name] = obj
        elif isinstance(obj, CSIStorageCapacity):
            self.capacities[obj.key] = obj
        else:  # pragma: no cover - the union is closed
            raise TypeError(f"not a storage object: {obj!r}")
        self._changed()

    def remove(self, obj: StorageObject) -> None:
        """Drop an object (and a PV's or PVC's assumed copy)."""
        self.version += 1
        if isinstance(obj, PersistentVolume):
            old = self.pvs.pop(obj.name, None)
            if old is not None:
                self._class_pvs.get(old.storage_class, set()).discard(obj.name)
            self._assumed_pvs.pop(obj.name, None)
            self._reindex(obj.name)
        elif isinstance(obj, PersistentVolumeClaim):
            self.pvcs.pop(obj.key, None)
            self._assumed_pvcs.pop(obj.key, None)
        elif isinstance(obj, StorageClass):
            self.classes.pop(obj.name, None)
        elif isinstance(obj, CSINode):
            self.csi_nodes.pop(obj.name, None)
        elif isinstance(obj, CSIDriver):
            self.csi_drivers.pop(obj.name, None)
        elif isinstance(obj, CSIStorageCapacity):
            self.capacities.pop(obj.key, None)
        self._changed()

    def _changed(self) -> None:
        for listener in self.listeners:
            listener()

    def api_pv(self, name: str) -> PersistentVolume | None:
        """The PV as delivered (no assumed copy)."""
        return self.pvs.get(name)

    def api_pvc(self, key: str) -> PersistentVolumeClaim | None:
        """The PVC ``namespace/name`` as delivered (no assumed copy)."""
        return self.pvcs.get(key)

    # -- reads through the assume cache -----------------------------------------------
    def pv(self, name: str) -> PersistentVolume | None:
        """The PV, its assumed copy if there is one."""
        assumed = self._assumed_pvs.get(name)
        return assumed if assumed is not None else self.pvs.get(name)

    def pvc(self, key: str) -> PersistentVolumeClaim | None:
        """The PVC ``namespace/name``, its assumed copy if there is one."""
        assumed = self._assumed_pvcs.get(key)
        return assumed if assumed is not None else self.pvcs.get(key)

    def pvs_of_class(self, storage_class: str) -> list[PersistentVolume]:
        """The PVs of ``storage_class`` (assumed copies where there are), in name order."""
        return [self.pv(name) for name in sorted(self._class_pvs.get(storage_class, ()))]  # type: ignore[misc]

    def candidate_pvs(self, storage_class: str, claims: Iterable[str]) -> list[PersistentVolume]:
        """The PVs of ``storage_class`` that a claim among ``claims`` (``namespace/name``) could be
        matched to: those without a claimRef and those whose claimRef names one of the claims (current
        copies, name order). Every other PV of the class is bound or pre-bound elsewhere, which static
        binding skips anyway; leaving them out keeps a cluster of many bound PVs cheap."""
        names = set(self._unclaimed.get(storage_class, ()))
        for claim in claims:
            names.update(name for name in self._by_claim.get(claim, ())
                         if self._indexed.get(name, ("", None))[0] == storage_class)
        return [self.pv(name) for name in sorted(names)]  # type: ignore[misc]

    def _reindex(self, name: str) -> None:
        """Move PV ``name`` to the index sets its current copy belongs in."""
        old = self._indexed.pop(name, None)
        if old is not None:
            storage_class, claim = old
            (self._by_claim.get(claim, set()) if claim is not None
             else self._unclaimed.get(storage_class, set())).discard(name)
        pv = self.pv(name)
        if pv is None:
            return
        claim = pv.claim_ref.key if pv.claim_ref is not None else None
        self._indexed[name] = (pv.storage_class, claim)
        if claim is None:
            self._unclaimed.setdefault(pv.storage_class, set()).add(name)
        else:
            self._by_claim.setdefault(claim, set()).add(name)

    def iter_pvs(self) -> Iterator[PersistentVolume]:
        for name in self.pvs:
            pv = self.pv(name)
            if pv is not None:
                yield pv

    # -- assume / restore -------------------------------------------------------------
    def assume_pv(self, pv: PersistentVolume) -> None:
        """Shadow the PV with ``pv`` until restored or superseded. Raises AssumeError if the
        PV is unknown or ``pv`` is older than the copy held."""
        _check_assumable("persistentvolume", pv.name, pv.resource_version, self.pv(pv.name))
        self._assumed_pvs[pv.name] = pv
        self.version += 1
        self._reindex(pv.name)

    def assume_pvc(self, pvc: PersistentVolumeClaim) -> None:
        """Shadow the PVC with ``pvc``; AssumeError as ``assume_pv``."""
        _check_assumable("persistentvolumeclaim", pvc.name, pvc.resource_version, self.pvc(pvc.key))
        self._assumed_pvcs[pvc.key] = pvc
        self.version += 1

    def restore_pv(self, name: str) -> None:
        """Drop the PV's assumed copy (idempotent)."""
        if self._assumed_pvs.pop(name, None) is not None:
            self.version += 1
            self._reindex(name)

    def restore_pvc(self, key: str) -> None:
        """Drop the PVC's assumed copy (idempotent)."""
        if self._assumed_pvcs.pop(key, None) is not None:
            self.version += 1

    def is_assumed_pv(self, name: str) -> bool:
        return name in self._assumed_pvs

    def is_assumed_pvc(self, key: str) -> bool:
        return key in self._assumed_pvcs


def _newer_or_same(new: str, old: str) -> bool:
    return resource_version_number(new) >= resource_version_number(old)


def _check_assumable(kind: str, name: str, version: str,
                     current: PersistentVolume | PersistentVolumeClaim | None) -> None:
    """AssumeError unless ``current`` exists and ``version`` is not older than its (kube's assume cache)."""
    if current is None:
        raise AssumeError(f'{kind} "{name}" not found')
    if not _newer_or_same(version, current.resource_version):
        raise AssumeError(f'{kind} "{name}" is out of sync with the cache (resourceVersion {version} is '
                          f'older than {current.resource_version})')
