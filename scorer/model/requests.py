"""Request arithmetic: what a pod asks of a node, as kube-scheduler counts it.

``pod_requests`` gives a pod's effective requests (kube's ``PodRequests``)
and its non-zero cpu and memory (``GetNonzeroRequests``, the defaults of
``pkg/scheduler/util/pod_resources.go`` for containers that request none).
``Pod`` computes them once at construction.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scorer.model.objects import Container

# kube-scheduler's defaults for containers that request no cpu / memory
# (pkg/scheduler/util/pod_resources.go), used for non-zero requests.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
NON_ZERO_DEFAULTS: Mapping[str, int] = types.MappingProxyType(
    {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}
)


def pod_requests(
    containers: Sequence[Container],
    init_containers: Sequence[Container],
    pod_level_requests: Mapping[str, int],
    overhead: Mapping[str, int],
) -> tuple[dict[str, int], int, int]:
    """``(requests, non_zero_cpu, non_zero_memory)`` of a pod (see ``Pod``)."""
    if len(containers) == 1 and not init_containers and not pod_level_requests:
        # The common pod: one container, no init containers.
        container_requests = containers[0].requests
        requests = dict(container_requests)
        for name, value in overhead.items():
            requests[name] = requests.get(name, 0) + value
        cpu = container_requests.get("cpu", DEFAULT_MILLI_CPU_REQUEST)
        memory = container_requests.get("memory", DEFAULT_MEMORY_REQUEST)
        return requests, cpu + overhead.get("cpu", 0), memory + overhead.get("memory", 0)
    requests = _with_pod_level(containers, init_containers, pod_level_requests, overhead, None)
    if not pod_level_requests:
        fill: Mapping[str, int] = NON_ZERO_DEFAULTS
    else:
        # Kubernetes then defaults only what nothing in the pod requests.
        fill = {k: v for k, v in NON_ZERO_DEFAULTS.items() if k not in requests}
    non_zero = (
        _with_pod_level(containers, init_containers, pod_level_requests, overhead, fill)
        if fill
        else requests
    )
    return requests, non_zero.get("cpu", 0), non_zero.get("memory", 0)


def _with_pod_level(
    containers: Sequence[Container],
    init_containers: Sequence[Container],
    pod_level_requests: Mapping[str, int],
    overhead: Mapping[str, int],
    fill: Mapping[str, int] | None,
) -> dict[str, int]:
    requests = aggregate_container_requests(containers, init_containers, fill)
    for name, value in pod_level_requests.items():
        if is_pod_level_resource(name):
            requests[name] = value
    for name, value in overhead.items():
        requests[name] = requests.get(name, 0) + value
    return requests


def aggregate_container_requests(
    containers: Sequence[Container],
    init_containers: Sequence[Container],
    fill: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Kubernetes ``AggregateContainerRequests``: container requests without overhead.

    ``fill`` (``NonMissingContainerRequests``) gives a value for each resource
    a container has no entry for.
    """
    total: dict[str, int] = {}
    for container in containers:
        for name, value in _filled(container.requests, fill).items():
            total[name] = total.get(name, 0) + value
    if not init_containers:
        return total
    # While init container i runs, the sidecars before it are running too.
    sidecars: dict[str, int] = {}
    highest: dict[str, int] = {}
    for container in init_containers:
        requests = _filled(container.requests, fill)
        if container.is_restartable_init:
            for name, value in requests.items():
                total[name] = total.get(name, 0) + value
                sidecars[name] = sidecars.get(name, 0) + value
            candidate = sidecars
        else:
            candidate = dict(requests)
            for name, value in sidecars.items():
                candidate[name] = candidate.get(name, 0) + value
        _max_into(highest, candidate)
    _max_into(total, highest)
    return total


def _filled(requests: dict[str, int], fill: Mapping[str, int] | None) -> dict[str, int]:
    if not fill or all(name in requests for name in fill):
        return requests
    result = dict(requests)
    for name, value in fill.items():
        result.setdefault(name, value)
    return result


def _max_into(target: dict[str, int], source: Mapping[str, int]) -> None:
    for name, value in source.items():
        if name not in target or value > target[name]:
            target[name] = value


def is_pod_level_resource(name: str) -> bool:
    """Resources allowed in pod-level ``spec.resources`` (PodLevelResources)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")
