"""VolumeBindingArgs: how long PreBind waits for the volumes to be bound.

``bindTimeoutSeconds`` (default 600): PreBind's wait for the PV controller
to finish the bindings and provisioning that the scheduler started; 0 is
valid (then only volumes bound at the first check pass). ``shape`` belongs
to Score, which exists only with the feature gate StorageCapacityScoring;
the gate is off in scorer (its default in kube 1.33-1.36), so a ``shape``
is refused as kube refuses it with the gate off (reference §10.6.9).
"""

from __future__ import annotations

import attrs

from scorer.plugins.noderesources.fit import UtilizationShapePoint

DEFAULT_BIND_TIMEOUT_SECONDS = 600
ERR_NEGATIVE_TIMEOUT = "invalid BindTimeoutSeconds, should not be a negative value"
ERR_SHAPE_GATED = "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"


@attrs.frozen(slots=True)
class VolumeBindingArgs:
    """Args of VolumeBinding (kubescheduler.config.k8s.io/v1).

    ``shape`` is kept only to be refused (None: not given).
    """

    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: tuple[UtilizationShapePoint, ...] | None = None

    def validate(self) -> list[tuple[str, str]]:
        """kube's ``ValidateVolumeBindingArgs`` with StorageCapacityScoring off."""
        errors: list[tuple[str, str]] = []
        if self.bind_timeout_seconds < 0:
            errors.append(("bindTimeoutSeconds", f"Invalid value: {self.bind_timeout_seconds}: {ERR_NEGATIVE_TIMEOUT}"))
        if self.shape is not None:
            points = ", ".join(f"{{utilization: {p.utilization}, score: {p.score}}}" for p in self.shape)
            errors.append(("shape", f"Invalid value: [{points}]: {ERR_SHAPE_GATED}"))
        return errors
