"""Resource arithmetic shared by NodeResourcesFit and NodeResourcesBalancedAllocation.

What kube-scheduler's ``resource_allocation.go`` and ``schedutil`` define
for both plugins: the ``ResourceSpec`` of their args and its defaulting,
which resources are scalar (``IsScalarResourceName``), the pod's request of
a scored resource, which node columns a resource is scored on
(``calculateResourceAllocatableRequest``), and ratio arithmetic that cannot
overflow int64 (kube computes ``requested * 100 / allocatable`` with a
128-bit intermediate; here the rare rows that need it use Python integers).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.inputs.names import extended_resource_name_errors

if TYPE_CHECKING:
    from scorer.framework.types import NodeBatch
    from scorer.model import Pod

# Resources kube reads from NodeInfo's own fields; every other scored resource is a scalar one.
NATIVE_RESOURCES: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage")
INT64_MAX = int(np.iinfo(np.int64).max)


@attrs.frozen(slots=True)
class ResourceSpec:
    """A resource to score and its weight (kube's ``config.ResourceSpec``)."""

    name: str = ""
    weight: int = 0


DEFAULT_RESOURCES: tuple[ResourceSpec, ...] = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def default_resources(resources: Iterable[ResourceSpec] | None) -> tuple[ResourceSpec, ...]:
    """kube's defaulting of a resource list: empty -> cpu and memory weight 1; weight 0 -> 1."""
    if not resources:
        return DEFAULT_RESOURCES
    return tuple(r if r.weight != 0 else attrs.evolve(r, weight=1) for r in resources)


def is_extended_resource(name: str) -> bool:
    """kube's ``IsExtendedResourceName``: a valid name outside ``*kubernetes.io/`` (``example.com/gpu``)."""
    return not extended_resource_name_errors(name)


def is_scalar_resource(name: str) -> bool:
    """kube's ``IsScalarResourceName``: extended, hugepages, ``*kubernetes.io/*`` and
    attachable-volumes resources. ``pods`` and unknown unprefixed names are not."""
    return (
        name.startswith(("hugepages-", "attachable-volumes-"))
        or "kubernetes.io/" in name
        or is_extended_resource(name)
    )


def pod_requests(pod: Pod, resources: Sequence[str], *, non_zero: bool) -> tuple[int, ...]:
    """The pod's request of each resource; with ``non_zero``, cpu and memory use kube's
    non-zero defaults for containers that request none (the scoring requests of Fit)."""
    out = []
    for resource in resources:
        if non_zero and resource == "cpu":
            out.append(pod.non_zero_cpu)
        elif non_zero and resource == "memory":
            out.append(pod.non_zero_memory)
        else:
            out.append(pod.requests.get(resource, 0))
    return tuple(out)


def allocatable_and_requested(
    nodes: NodeBatch, resource: str, pod_request: int, *, non_zero: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """kube's ``calculateResourceAllocatableRequest`` for every node: the node's allocatable
    (a read-only view) and its requested amount with the pod placed; None if the resource
    is not scored.

    Scalar resources the pod does not request, and names that are neither native nor
    scalar, are not scored. ``non_zero`` takes cpu and memory from the nodes' non-zero
    requests (Fit), otherwise from their actual requests (BalancedAllocation). The sum
    saturates at the int64 maximum instead of wrapping.
    """
    if resource not in NATIVE_RESOURCES and (pod_request == 0 or not is_scalar_resource(resource)):
        return None
    if not nodes.has_resource(resource):
        return None
    # Read-only views of the batch's resource matrices (shared with the other plugins).
    col = nodes.table.resource_index[resource]
    if non_zero and resource in ("cpu", "memory"):
        used = nodes.resource_matrix("non_zero_requested")[:, 0 if resource == "cpu" else 1]
    else:
        used = nodes.resource_matrix("requested")[:, col]
    return nodes.resource_matrix("allocatable")[:, col], saturating_add(used, pod_request)


def saturating_add(values: np.ndarray, amount: int) -> np.ndarray:
    """``values + amount`` for an int64 array and ``amount >= 0``, capped at the int64 maximum."""
    amount = min(max(int(amount), 0), INT64_MAX)
    total: np.ndarray = np.minimum(values, INT64_MAX - amount) + amount
    return total


def scaled_ratio(part: np.ndarray, whole: np.ndarray, scale: int) -> np.ndarray:
    """``part * scale // whole`` per node, exact for any int64 values; 0 where ``whole <= 0``.

    Callers pass ``0 <= part <= max(whole, 0)``, so the result is in [0, scale]. The
    product is formed in int64 when it fits (the common case, one check per call) and
    with Python integers in the rows where it would overflow (amounts beyond about 9e16).
    """
    divisor = np.maximum(whole, 1)  # where whole <= 0, part is 0
    if len(part) == 0 or int(part.max()) <= INT64_MAX // scale:
        scaled: np.ndarray = part * scale // divisor
        return scaled
    fits = part <= INT64_MAX // scale
    out: np.ndarray = np.where(fits, part, 0) * scale // divisor
    for i in np.flatnonzero(~fits).tolist():
        out[i] = int(part[i]) * scale // int(divisor[i])
    return out
