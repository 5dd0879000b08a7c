"""Tests for scorer.model: Kubernetes objects, request math, selectors, loading."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorer.errors import InputError, ModelError
from scorer.model import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    Affinity,
    Container,
    ContainerImage,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    LoadedObjects,
    Namespace,
    Node,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    PodDisruptionBudget,
    PreferredSchedulingTerm,
    SelectorOwner,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    aggregate_container_requests,
    load_file,
    load_objects,
    namespace_from_dict,
    node_from_dict,
    object_from_dict,
    parse_int64,
    pod_from_dict,
    untolerated_taints,
    workload_from_dict,
)

KI, MI, GI = 1 << 10, 1 << 20, 1 << 30
NZ_CPU = DEFAULT_MILLI_CPU_REQUEST  # 100 millicores
NZ_MEM = DEFAULT_MEMORY_REQUEST  # 200Mi


# --------------------------------------------------------------------------
# Builders for API dicts


def container(
    name: str = "c",
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    restart_policy: str | None = None,
    ports: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {"name": name, "image": "registry.example/app:1"}
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    if resources:
        result["resources"] = resources
    if restart_policy is not None:
        result["restartPolicy"] = restart_policy
    if ports is not None:
        result["ports"] = ports
    return result


def sidecar(name: str, requests: dict[str, Any] | None = None) -> dict[str, Any]:
    return container(name, requests, restart_policy="Always")


def pod_dict(
    name: str = "web",
    namespace: str | None = "default",
    containers: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": containers if containers is not None else [container()], **spec},
    }


def node_dict(name: str = "n1", **fields: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": fields.pop("labels", {})},
        "spec": fields.pop("spec", {}),
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }
    result["status"].update(fields)
    return result


def node(name: str = "n1", labels: dict[str, str] | None = None) -> Node:
    return Node(name=name, labels=labels or {})


# --------------------------------------------------------------------------
# Pod request math (kube's PodRequests and the non-zero variant)

REQUEST_CASES = [
    pytest.param(
        [container("a", {"cpu": "250m", "memory": "64Mi"})],
        [],
        None,
        {"cpu": 250, "memory": 64 * MI},
        250,
        64 * MI,
        id="single-container",
    ),
    pytest.param(
        [
            container("a", {"cpu": "100m", "memory": "1Gi"}),
            container("b", {"cpu": "200m", "memory": "1Gi"}),
        ],
        [],
        None,
        {"cpu": 300, "memory": 2 * GI},
        300,
        2 * GI,
        id="containers-sum",
    ),
    pytest.param(
        # regular cpu 100 < init cpu 500 -> 500. Non-zero memory: the regular
        # container and the init container both default to 200Mi -> max 200Mi.
        [container("a", {"cpu": "100m"})],
        [container("init", {"cpu": "500m"})],
        None,
        {"cpu": 500},
        500,
        NZ_MEM,
        id="init-larger-than-containers",
    ),
    pytest.param(
        # sum = regular 100 + sidecar 50 = 150. Candidates: sidecar -> running
        # sidecar total 50; normal init 120 + sidecars 50 = 170. max(150, 170) = 170.
        [container("a", {"cpu": "100m", "memory": "0"})],
        [
            sidecar("s", {"cpu": "50m", "memory": "0"}),
            container("i", {"cpu": "120m", "memory": "0"}),
        ],
        None,
        {"cpu": 170, "memory": 0},
        170,
        0,
        id="init-after-sidecar-counts-sidecar",
    ),
    pytest.param(
        # Normal init first: candidate 120 + 0 = 120; sidecar candidate 50;
        # sum = 100 + 50 = 150 wins.
        [container("a", {"cpu": "100m", "memory": "0"})],
        [
            container("i", {"cpu": "120m", "memory": "0"}),
            sidecar("s", {"cpu": "50m", "memory": "0"}),
        ],
        None,
        {"cpu": 150, "memory": 0},
        150,
        0,
        id="init-before-sidecar",
    ),
    pytest.param(
        # Actual: sum cpu 300+100+200 = 600, memory 300+100 = 400Mi.
        #   candidates s1 {100, 100Mi}, s2 running {300, 100Mi},
        #   i {1000+300 = 1300, 50+100 = 150Mi} -> cpu 1300, memory 400Mi.
        # Non-zero: s2 has no memory -> 200Mi. sum memory 300+100+200 = 600Mi;
        #   s2 running {300, 300Mi}; i {1300, 50+300 = 350Mi} -> cpu 1300, memory 600Mi.
        [container("c", {"cpu": "300m", "memory": "300Mi"})],
        [
            sidecar("s1", {"cpu": "100m", "memory": "100Mi"}),
            sidecar("s2", {"cpu": "200m"}),
            container("i", {"cpu": "1", "memory": "50Mi"}),
        ],
        None,
        {"cpu": 1300, "memory": 400 * MI},
        1300,
        600 * MI,
        id="two-sidecars-and-init",
    ),
    pytest.param(
        # Each non-restartable init runs alone (plus earlier sidecars): max, not sum.
        [container("c", {"cpu": "100m", "memory": "10Mi"})],
        [
            container("i1", {"cpu": "400m", "memory": "1Mi"}),
            container("i2", {"cpu": "300m", "memory": "2Gi"}),
        ],
        None,
        {"cpu": 400, "memory": 2 * GI},
        400,
        2 * GI,
        id="init-containers-max-per-resource",
    ),
    pytest.param(
        [container("a", {"cpu": "100m", "memory": "100Mi"})],
        [],
        {"cpu": "250m", "memory": "120Mi"},
        {"cpu": 350, "memory": 220 * MI},
        350,
        220 * MI,
        id="overhead-added",
    ),
    pytest.param(
        [container("a"), container("b")],
        [],
        None,
        {},
        2 * NZ_CPU,
        2 * NZ_MEM,
        id="best-effort-non-zero-defaults-per-container",
    ),
    pytest.param(
        # Overhead is added on top of the defaults: 100 + 100, 200Mi + 0.
        [container("a")],
        [],
        {"cpu": "100m"},
        {"cpu": 100},
        NZ_CPU + 100,
        NZ_MEM,
        id="best-effort-with-overhead",
    ),
    pytest.param(
        [container("a", {"cpu": "0", "memory": "0"})],
        [],
        None,
        {"cpu": 0, "memory": 0},
        0,
        0,
        id="explicit-zero-stays-zero",
    ),
    pytest.param(
        # One container asks cpu only: its memory defaults to 200Mi, the
        # other's cpu to 100m; 250 + 100, 200Mi + 10Mi.
        [container("a", {"cpu": "250m"}), container("b", {"memory": "10Mi"})],
        [],
        None,
        {"cpu": 250, "memory": 10 * MI},
        350,
        NZ_MEM + 10 * MI,
        id="defaults-per-container-not-per-pod",
    ),
    pytest.param(
        # Limits default missing requests (API server defaulting).
        [container("a", {"cpu": "500m"}, {"cpu": "1", "memory": "1Gi"})],
        [],
        None,
        {"cpu": 500, "memory": GI},
        500,
        GI,
        id="limits-default-requests",
    ),
    pytest.param(
        [container("a", {"cpu": "1", "nvidia.com/gpu": "1"})],
        [container("i", {"nvidia.com/gpu": "2", "ephemeral-storage": "1Gi"})],
        None,
        {"cpu": 1000, "nvidia.com/gpu": 2, "ephemeral-storage": GI},
        1000,
        NZ_MEM,
        id="extended-resources-and-init-only-resources",
    ),
    pytest.param(
        # Init container without requests: counts 100m / 200Mi in non-zero only.
        [container("a", {"cpu": "50m", "memory": "100Mi"})],
        [container("i")],
        None,
        {"cpu": 50, "memory": 100 * MI},
        NZ_CPU,
        NZ_MEM,
        id="init-without-requests-non-zero",
    ),
    pytest.param(
        # Sidecar without requests: adds 100m / 200Mi to the non-zero sum.
        [container("a", {"cpu": "50m", "memory": "100Mi"})],
        [sidecar("s")],
        None,
        {"cpu": 50, "memory": 100 * MI},
        50 + NZ_CPU,
        100 * MI + NZ_MEM,
        id="sidecar-without-requests-non-zero",
    ),
]


@pytest.mark.parametrize(
    ("containers", "init_containers", "overhead", "requests", "non_zero_cpu", "non_zero_memory"),
    REQUEST_CASES,
)
def test_pod_requests(
    containers: list[dict[str, Any]],
    init_containers: list[dict[str, Any]],
    overhead: dict[str, str] | None,
    requests: dict[str, int],
    non_zero_cpu: int,
    non_zero_memory: int,
) -> None:
    spec: dict[str, Any] = {"initContainers": init_containers}
    if overhead is not None:
        spec["overhead"] = overhead
    pod = pod_from_dict(pod_dict(containers=containers, **spec))
    assert pod.requests == requests
    assert pod.non_zero_cpu == non_zero_cpu
    assert pod.non_zero_memory == non_zero_memory


def test_pod_without_containers_requests_only_overhead() -> None:
    pod = pod_from_dict(pod_dict(containers=[], overhead={"cpu": "10m"}))
    assert pod.requests == {"cpu": 10}
    assert (pod.non_zero_cpu, pod.non_zero_memory) == (10, 0)


def test_pod_built_directly_computes_derived_fields() -> None:
    pod = Pod(
        name="p",
        containers=(Container(name="a", requests={"cpu": 100}),),
        init_containers=(Container(name="s", requests={"cpu": 30}, restart_policy="Always"),),
        overhead={"memory": 5},
    )
    assert pod.requests == {"cpu": 130, "memory": 5}
    assert pod.non_zero_cpu == 130
    assert pod.non_zero_memory == 2 * NZ_MEM + 5
    assert pod.key == "default/p"


resource_maps = st.dictionaries(
    st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]),
    st.integers(min_value=0, max_value=10**12),
    max_size=4,
)


@given(requests=resource_maps, overhead=resource_maps)
def test_single_container_fast_path_matches_general_rule(
    requests: dict[str, int], overhead: dict[str, int]
) -> None:
    only = Container(name="c", requests=requests)
    pod = Pod(name="p", containers=(only,), overhead=overhead)

    def with_overhead(values: dict[str, int]) -> dict[str, int]:
        return {k: values.get(k, 0) + overhead.get(k, 0) for k in {*values, *overhead}}

    non_zero = with_overhead(
        aggregate_container_requests((only,), (), {"cpu": NZ_CPU, "memory": NZ_MEM})
    )
    assert pod.requests == with_overhead(aggregate_container_requests((only,), ()))
    assert pod.non_zero_cpu == non_zero["cpu"]
    assert pod.non_zero_memory == non_zero["memory"]


@given(
    regular=st.lists(resource_maps, max_size=3),
    init=st.lists(st.tuples(resource_maps, st.booleans()), max_size=4),
)
def test_requests_bounds(
    regular: list[dict[str, int]], init: list[tuple[dict[str, int], bool]]
) -> None:
    """The pod request is at least the sum of long-running containers and at
    least each init container's own request."""
    containers = tuple(Container(name=f"c{i}", requests=r) for i, r in enumerate(regular))
    inits = tuple(
        Container(name=f"i{i}", requests=r, restart_policy="Always" if restartable else None)
        for i, (r, restartable) in enumerate(init)
    )
    pod = Pod(name="p", containers=containers, init_containers=inits)
    long_running = [*regular, *(r for r, restartable in init if restartable)]
    for name in {k for r in long_running for k in r}:
        assert pod.requests[name] >= sum(r.get(name, 0) for r in long_running)
    for requests, _ in init:
        for name, value in requests.items():
            assert pod.requests[name] >= value
    assert pod.non_zero_cpu >= pod.requests.get("cpu", 0)
    assert pod.non_zero_memory >= pod.requests.get("memory", 0)


# Pod-level resources (spec.resources)


@pytest.mark.parametrize(
    ("containers", "resources", "pod_level", "requests", "non_zero_cpu", "non_zero_memory"),
    [
        pytest.param(
            # Pod-level requests replace the containers' sum for cpu and memory.
            [container("a", {"cpu": "100m"}), container("b", {"cpu": "200m"})],
            {"requests": {"cpu": "1", "memory": "1Gi"}},
            {"cpu": 1000, "memory": GI},
            {"cpu": 1000, "memory": GI},
            1000,
            GI,
            id="pod-level-overrides",
        ),
        pytest.param(
            # Memory is requested by nothing: both containers default to 200Mi.
            [container("a"), container("b")],
            {"requests": {"cpu": "1"}},
            {"cpu": 1000},
            {"cpu": 1000},
            1000,
            2 * NZ_MEM,
            id="pod-level-defaults-only-missing-resources",
        ),
        pytest.param(
            # Container a requests memory, so no container gets the 200Mi default.
            [container("a", {"memory": "10Mi"}), container("b")],
            {"requests": {"cpu": "1"}},
            {"cpu": 1000},
            {"cpu": 1000, "memory": 10 * MI},
            1000,
            10 * MI,
            id="pod-level-no-default-when-any-container-requests",
        ),
        pytest.param(
            # Pod-level limits only: the request defaults to the containers' request...
            [container("a", {"cpu": "500m"})],
            {"limits": {"cpu": "2", "memory": "1Gi"}},
            {"cpu": 500, "memory": GI},
            {"cpu": 500, "memory": GI},
            500,
            GI,
            id="pod-level-limits-default-from-containers",
        ),
        pytest.param(
            # ... or to the limit when no container requests it.
            [container("a")],
            {"limits": {"cpu": "2"}},
            {"cpu": 2000},
            {"cpu": 2000},
            2000,
            NZ_MEM,
            id="pod-level-limits-default-requests",
        ),
        pytest.param(
            [container("a", {"cpu": "100m", "hugepages-2Mi": "4Mi"})],
            {"requests": {"hugepages-2Mi": "8Mi"}},
            {"hugepages-2Mi": 8 * MI},
            {"cpu": 100, "hugepages-2Mi": 8 * MI},
            100,
            NZ_MEM,
            id="pod-level-hugepages",
        ),
    ],
)
def test_pod_level_resources(
    containers: list[dict[str, Any]],
    resources: dict[str, Any],
    pod_level: dict[str, int],
    requests: dict[str, int],
    non_zero_cpu: int,
    non_zero_memory: int,
) -> None:
    pod = pod_from_dict(pod_dict(containers=containers, resources=resources))
    assert pod.pod_level_requests == pod_level
    assert pod.requests == requests
    assert (pod.non_zero_cpu, pod.non_zero_memory) == (non_zero_cpu, non_zero_memory)


# --------------------------------------------------------------------------
# Host ports


def test_host_ports_from_containers_and_init_containers() -> None:
    pod = pod_from_dict(
        pod_dict(
            containers=[
                container(
                    "a", ports=[{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9090}]
                ),
            ],
            initContainers=[
                container(
                    "i",
                    ports=[
                        {
                            "containerPort": 53,
                            "hostPort": 53,
                            "protocol": "UDP",
                            "hostIP": "10.0.0.1",
                        }
                    ],
                ),
            ],
        )
    )
    assert pod.host_ports == (
        ContainerPort(container_port=80, host_port=8080),
        ContainerPort(container_port=53, host_port=53, protocol="UDP", host_ip="10.0.0.1"),
    )
    assert pod.containers[0].ports[1] == ContainerPort(container_port=9090, host_port=0)


def test_host_network_defaults_host_port_to_container_port() -> None:
    pod = pod_from_dict(
        pod_dict(containers=[container("a", ports=[{"containerPort": 80}])], hostNetwork=True)
    )
    assert pod.host_ports == (ContainerPort(container_port=80, host_port=80),)


# --------------------------------------------------------------------------
# Full pod parsing


def test_pod_from_dict_reads_every_field() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0",
            "namespace": "shop",
            "uid": "1234",
            "labels": {"app": "web"},
            "annotations": {"note": "x", "empty": None},
            "resourceVersion": "42",
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "deletionTimestamp": "2024-01-03T00:00:00Z",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "web",
                    "uid": "9",
                    "controller": True,
                }
            ],
            "managedFields": [{"whatever": 1}],  # unknown fields are ignored
        },
        "spec": {
            "schedulerName": "scorer",
            "nodeName": "n7",
            "nodeSelector": {"disk": "ssd"},
            "priority": 1000,
            "priorityClassName": "high",
            "containers": [container("app", {"cpu": "1"}, {"cpu": "2"})],
            "initContainers": [sidecar("proxy", {"memory": "32Mi"})],
            "overhead": {"cpu": "10m"},
            "schedulingGates": [{"name": "wait-for-quota"}],
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "minDomains": 3,
                    "nodeAffinityPolicy": "Honor",
                    "nodeTaintsPolicy": "Ignore",
                    "matchLabelKeys": ["pod-template-hash"],
                }
            ],
        },
        "status": {"phase": "Pending", "nominatedNodeName": "n3"},
    }
    pod = pod_from_dict(obj)
    assert pod.key == "shop/web-0"
    assert pod.uid == "1234"
    assert pod.labels == {"app": "web"}
    assert pod.annotations == {"note": "x", "empty": ""}
    assert pod.resource_version == "42"
    assert pod.creation_timestamp == "2024-01-02T03:04:05Z"
    assert pod.deleting is True
    assert pod.owner_references == (
        OwnerReference(
            api_version="apps/v1", kind="StatefulSet", name="web", uid="9", controller=True
        ),
    )
    assert pod.scheduler_name == "scorer"
    assert pod.node_name == "n7"
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.priority == 1000
    assert pod.containers == (
        Container(
            name="app", image="registry.example/app:1", requests={"cpu": 1000}, limits={"cpu": 2000}
        ),
    )
    assert pod.init_containers[0].is_restartable_init
    assert not pod.containers[0].is_restartable_init
    assert pod.overhead == {"cpu": 10}
    assert pod.requests == {"cpu": 1010, "memory": 32 * MI}
    assert pod.scheduling_gates == ("wait-for-quota",)
    assert pod.tolerations == (
        Toleration(key="dedicated", operator="Equal", value="shop", effect="NoSchedule"),
        Toleration(operator="Exists"),
        Toleration(
            key="node.kubernetes.io/not-ready",
            operator="Exists",
            effect="NoExecute",
            toleration_seconds=300,
        ),
    )
    assert pod.topology_spread_constraints == (
        TopologySpreadConstraint(
            max_skew=1,
            topology_key="topology.kubernetes.io/zone",
            when_unsatisfiable="DoNotSchedule",
            label_selector=LabelSelector(match_labels={"app": "web"}),
            min_domains=3,
            node_affinity_policy="Honor",
            node_taints_policy="Ignore",
            match_label_keys=("pod-template-hash",),
        ),
    )
    assert pod.phase == "Pending"
    assert pod.nominated_node_name == "n3"
    assert pod.affinity is None


def test_pod_defaults() -> None:
    pod = pod_from_dict({"metadata": {"name": "p"}})
    assert pod.namespace == "default"
    assert pod.key == "default/p"
    assert pod.scheduler_name == "default-scheduler"
    assert pod.priority == 0
    assert pod.containers == ()
    assert pod.requests == {}
    assert (pod.non_zero_cpu, pod.non_zero_memory) == (0, 0)
    assert pod.deleting is False
    assert pod.affinity is None
    assert pod.tolerations == ()
    assert pod.pvc_claims == ()
    assert pod.node_name == pod.phase == pod.nominated_node_name == ""


def test_pod_null_fields_count_as_missing() -> None:
    obj = pod_dict(tolerations=None, affinity=None, nodeSelector=None, priority=None)
    obj["metadata"]["labels"] = None
    obj["status"] = None
    pod = pod_from_dict(obj)
    assert pod.tolerations == ()
    assert pod.affinity is None
    assert pod.labels == {}
    assert pod.priority == 0


def test_toleration_operator_defaults_to_equal() -> None:
    pod = pod_from_dict(pod_dict(tolerations=[{"key": "k", "value": "v"}]))
    assert pod.tolerations == (Toleration(key="k", operator="Equal", value="v"),)


def test_affinity_parsing() -> None:
    term = {
        "labelSelector": {
            "matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "cache"]}]
        },
        "namespaces": ["data"],
        "topologyKey": "kubernetes.io/hostname",
        "namespaceSelector": {},
        "matchLabelKeys": ["version"],
        "mismatchLabelKeys": ["tenant"],
    }
    obj = pod_dict(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["a"]},
                                {"key": "cores", "operator": "Gt", "values": ["4"]},
                            ],
                            "matchFields": [
                                {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
                            ],
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
                    }
                ],
            },
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": {"topologyKey": "zone"}}
                ]
            },
        }
    )
    expected_term = PodAffinityTerm(
        label_selector=LabelSelector(
            match_expressions=(
                LabelSelectorRequirement(key="app", operator="In", values=("db", "cache")),
            )
        ),
        namespaces=("data",),
        topology_key="kubernetes.io/hostname",
        namespace_selector=LabelSelector(),
        match_label_keys=("version",),
        mismatch_label_keys=("tenant",),
    )
    assert pod_from_dict(obj).affinity == Affinity(
        node_affinity=NodeAffinity(
            required=NodeSelector(
                terms=(
                    NodeSelectorTerm(
                        match_expressions=(
                            NodeSelectorRequirement(key="zone", operator="In", values=("a",)),
                            NodeSelectorRequirement(key="cores", operator="Gt", values=("4",)),
                        ),
                        match_fields=(
                            NodeSelectorRequirement(
                                key="metadata.name", operator="NotIn", values=("n9",)
                            ),
                        ),
                    ),
                )
            ),
            preferred=(
                PreferredSchedulingTerm(
                    weight=10,
                    preference=NodeSelectorTerm(
                        match_expressions=(NodeSelectorRequirement(key="gpu", operator="Exists"),)
                    ),
                ),
            ),
        ),
        pod_affinity=PodAffinity(required=(expected_term,)),
        pod_anti_affinity=PodAntiAffinity(
            preferred=(
                WeightedPodAffinityTerm(weight=100, term=PodAffinityTerm(topology_key="zone")),
            )
        ),
    )


def test_affinity_term_without_selector_keeps_none() -> None:
    obj = pod_dict(
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "z"}]
            }
        }
    )
    affinity = pod_from_dict(obj).affinity
    assert affinity is not None and affinity.pod_affinity is not None
    assert affinity.pod_affinity.required[0].label_selector is None
    assert affinity.node_affinity is None and affinity.pod_anti_affinity is None


# --------------------------------------------------------------------------
# Taints and tolerations

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, TAINT, True),
        ({"key": "dedicated", "value": "cpu", "effect": "NoSchedule"}, TAINT, False),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, TAINT, True),
        ({"key": "dedicated", "operator": "Exists"}, TAINT, True),  # empty effect: all effects
        ({"key": "dedicated", "value": "gpu"}, TAINT, True),
        ({"operator": "Exists"}, TAINT, True),  # empty key + Exists: every taint
        ({"operator": "Exists", "effect": "NoExecute"}, TAINT, False),
        ({"key": "dedicated", "value": "gpu", "effect": "NoExecute"}, TAINT, False),
        ({"key": "other", "operator": "Exists"}, TAINT, False),
        ({"key": "k", "value": ""}, {"key": "k", "effect": "PreferNoSchedule"}, True),
        ({"key": "k"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
        (
            {"key": "k", "operator": "", "value": "v"},
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            True,
        ),
        (
            {"key": "k", "operator": "Gt", "value": "1"},
            {"key": "k", "value": "2", "effect": "NoSchedule"},
            False,
        ),
        # Empty key with Equal (the API rejects it) compares values on any key, as Go does.
        ({"operator": "Equal", "value": "gpu"}, TAINT, True),
    ],
)
def test_toleration_tolerates(
    toleration: dict[str, Any], taint: dict[str, Any], expected: bool
) -> None:
    assert Toleration(**toleration).tolerates(Taint(**taint)) is expected


def test_untolerated_taints() -> None:
    a = Taint(key="a", effect="NoSchedule")
    b = Taint(key="b", effect="PreferNoSchedule")
    c = Taint(key="c", value="x", effect="NoExecute")
    d = Taint(key="d", effect="NoSchedule")
    tolerations = [Toleration(key="a", operator="Exists"), Toleration(key="d", value="other")]
    assert untolerated_taints([a, b, c, d], tolerations, {"NoSchedule", "NoExecute"}) == [c, d]
    assert untolerated_taints([a, b, c, d], tolerations, ["PreferNoSchedule"]) == [b]
    assert untolerated_taints([a, b, c, d], [Toleration(operator="Exists")], {"NoSchedule"}) == []
    assert untolerated_taints([], tolerations, {"NoSchedule"}) == []


# --------------------------------------------------------------------------
# Label selectors

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (LabelSelector(), True),
        (LabelSelector(match_labels={"app": "web"}), True),
        (LabelSelector(match_labels={"app": "web", "tier": "front"}), True),
        (LabelSelector(match_labels={"app": "db"}), False),
        (LabelSelector(match_labels={"missing": ""}), False),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="app", operator="In", values=("web", "db")),
                )
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="app", operator="In", values=("db",)),
                )
            ),
            False,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="nope", operator="In", values=("",)),
                )
            ),
            False,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="app", operator="NotIn", values=("db",)),
                )
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="app", operator="NotIn", values=("web",)),
                )
            ),
            False,
        ),
        (
            LabelSelector(
                match_expressions=(
                    LabelSelectorRequirement(key="nope", operator="NotIn", values=("x",)),
                )
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(LabelSelectorRequirement(key="env", operator="Exists"),)
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(LabelSelectorRequirement(key="nope", operator="Exists"),)
            ),
            False,
        ),
        (
            LabelSelector(
                match_expressions=(LabelSelectorRequirement(key="nope", operator="DoesNotExist"),)
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=(LabelSelectorRequirement(key="env", operator="DoesNotExist"),)
            ),
            False,
        ),
        # everything AND-ed
        (
            LabelSelector(
                match_labels={"app": "web"},
                match_expressions=(
                    LabelSelectorRequirement(key="env", operator="Exists"),
                    LabelSelectorRequirement(key="tier", operator="In", values=("back",)),
                ),
            ),
            False,
        ),
    ],
)
def test_label_selector_matches(selector: LabelSelector, expected: bool) -> None:
    assert selector.matches(LABELS) is expected


def test_parsed_label_selector() -> None:
    obj = pod_dict(
        topologySpreadConstraints=[
            {
                "maxSkew": 2,
                "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [
                        {"key": "env", "operator": "NotIn", "values": ["dev"]},
                        {"key": "tier", "operator": "Exists"},
                    ],
                },
            }
        ]
    )
    selector = pod_from_dict(obj).topology_spread_constraints[0].label_selector
    assert selector is not None
    assert selector.matches(LABELS)
    assert not selector.matches({"app": "web", "env": "dev", "tier": "x"})
    assert not selector.matches({"app": "web"})


# --------------------------------------------------------------------------
# Node selectors


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        ("In", ("a", "b"), {"zone": "a"}, True),
        ("In", ("a", "b"), {"zone": "c"}, False),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {"zone": "b"}, True),
        ("NotIn", ("a",), {"zone": "a"}, False),
        ("NotIn", ("a",), {}, True),
        ("Exists", (), {"zone": ""}, True),
        ("Exists", (), {}, False),
        ("DoesNotExist", (), {}, True),
        ("DoesNotExist", (), {"zone": "a"}, False),
        ("Gt", ("5",), {"zone": "10"}, True),
        ("Gt", ("5",), {"zone": "5"}, False),
        ("Gt", ("-3",), {"zone": "-2"}, True),
        ("Gt", ("5",), {"zone": "+7"}, True),  # Go ParseInt accepts a sign
        ("Gt", ("5",), {"zone": "abc"}, False),  # not an integer: no match
        ("Gt", ("5",), {"zone": "7.5"}, False),
        ("Gt", ("5",), {"zone": " 7"}, False),
        ("Gt", ("5",), {"zone": "1_0"}, False),
        ("Gt", ("5",), {"zone": "99999999999999999999"}, False),  # beyond int64
        ("Gt", ("5",), {}, False),
        ("Lt", ("5",), {"zone": "4"}, True),
        ("Lt", ("5",), {"zone": "5"}, False),
        ("Lt", ("5",), {"zone": "x"}, False),
        ("Lt", ("x",), {"zone": "1"}, False),  # a bad value (built directly) matches nothing
        ("Bogus", ("a",), {"zone": "a"}, False),
    ],
)
def test_node_selector_requirement(
    operator: str, values: tuple[str, ...], labels: dict[str, str], expected: bool
) -> None:
    requirement = NodeSelectorRequirement(key="zone", operator=operator, values=values)
    assert requirement.matches(labels) is expected


def test_node_selector_term_and_selector() -> None:
    zone_a = NodeSelectorRequirement(key="zone", operator="In", values=("a",))
    ssd = NodeSelectorRequirement(key="disk", operator="Exists")
    named = NodeSelectorRequirement(key="metadata.name", operator="In", values=("n1",))
    n1 = node("n1", {"zone": "a"})
    n2 = node("n2", {"zone": "a", "disk": "ssd"})
    n3 = node("n3", {"zone": "b", "disk": "ssd"})

    assert not NodeSelectorTerm().matches(n1)  # no requirements: matches nothing
    assert NodeSelectorTerm(match_expressions=(zone_a,)).matches(n1)
    assert not NodeSelectorTerm(match_expressions=(zone_a, ssd)).matches(n1)  # AND
    assert NodeSelectorTerm(match_expressions=(zone_a, ssd)).matches(n2)
    assert NodeSelectorTerm(match_fields=(named,)).matches(n1)
    assert not NodeSelectorTerm(match_fields=(named,)).matches(n2)
    assert not NodeSelectorTerm(match_expressions=(ssd,), match_fields=(named,)).matches(n1)

    either = NodeSelector(
        terms=(NodeSelectorTerm(match_fields=(named,)), NodeSelectorTerm(match_expressions=(ssd,)))
    )
    assert [either.matches(n) for n in (n1, n2, n3)] == [True, True, True]
    assert not either.matches(node("n4"))
    assert not NodeSelector().matches(n1)


def test_parsed_node_affinity_matches() -> None:
    obj = pod_dict(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]},
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["big"]}
                            ]
                        },
                    ]
                }
            }
        }
    )
    affinity = pod_from_dict(obj).affinity
    assert affinity is not None and affinity.node_affinity is not None
    required = affinity.node_affinity.required
    assert required is not None
    assert required.matches(node("small", {"cores": "4"}))
    assert not required.matches(node("mid", {"cores": "16"}))
    assert required.matches(node("big", {"cores": "64"}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("42", 42),
        ("-42", -42),
        ("+42", 42),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775808", None),
        ("", None),
        ("-", None),
        ("1.0", None),
        ("1e3", None),
        (" 1", None),
        ("١", None),
    ],
)
def test_parse_int64(text: str, expected: int | None) -> None:
    assert parse_int64(text) == expected


# --------------------------------------------------------------------------
# Nodes and namespaces


def test_node_from_dict() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "uid": "u1",
            "labels": {"kubernetes.io/hostname": "n1"},
            "annotations": {"a": "b"},
            "resourceVersion": "7",
        },
        "spec": {
            "unschedulable": True,
            "taints": [
                {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                {"key": "spot", "effect": "PreferNoSchedule", "timeAdded": None},
            ],
        },
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "4"},
            "allocatable": {"cpu": "7500m", "memory": "30Gi", "pods": "110", "nvidia.com/gpu": "4"},
            "images": [
                {"names": ["nginx@sha256:abc", "nginx:1.25"], "sizeBytes": 70000000},
                {"names": None, "sizeBytes": 5},
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "n1"},
            ],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    assert node_from_dict(obj) == Node(
        name="n1",
        uid="u1",
        labels={"kubernetes.io/hostname": "n1"},
        annotations={"a": "b"},
        allocatable={"cpu": 7500, "memory": 30 * GI, "pods": 110, "nvidia.com/gpu": 4},
        capacity={"cpu": 8000, "memory": 32 * GI, "pods": 110, "nvidia.com/gpu": 4},
        taints=(
            Taint(key="gpu", value="true", effect="NoSchedule"),
            Taint(key="spot", effect="PreferNoSchedule"),
        ),
        unschedulable=True,
        images=(
            ContainerImage(names=("nginx@sha256:abc", "nginx:1.25"), size_bytes=70000000),
            ContainerImage(names=(), size_bytes=5),
        ),
        addresses=(("InternalIP", "10.0.0.1"), ("Hostname", "n1")),
        resource_version="7",
    )


def test_node_allocatable_defaults_to_capacity() -> None:
    result = node_from_dict(node_dict())
    assert result.allocatable == result.capacity == {"cpu": 4000, "memory": 16 * GI, "pods": 110}
    assert result.allocatable is not result.capacity
    assert node_from_dict(node_dict(allocatable=None)).allocatable == result.capacity
    assert node_from_dict(node_dict(allocatable={})).allocatable == {}


def test_node_minimal() -> None:
    result = node_from_dict({"metadata": {"name": "bare"}})
    assert result == Node(name="bare")
    assert not result.unschedulable


def test_namespace_from_dict() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "shop", "labels": {"team": "a"}},
    }
    assert namespace_from_dict(obj) == Namespace(name="shop", labels={"team": "a"})
    assert namespace_from_dict({"metadata": {"name": "x"}}) == Namespace(name="x")


def test_object_from_dict_dispatches_on_kind() -> None:
    assert isinstance(object_from_dict(pod_dict()), Pod)
    assert isinstance(object_from_dict(node_dict()), Node)
    assert isinstance(object_from_dict({"kind": "Namespace", "metadata": {"name": "a"}}), Namespace)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}},
            'Deployment shop/web: kind: unsupported kind "Deployment", expected one of Pod, Node, '
            "Namespace, Service, ReplicationController, ReplicaSet, StatefulSet, PodDisruptionBudget, "
            "StorageClass, CSIDriver, CSINode, CSIStorageCapacity, PersistentVolume, PersistentVolumeClaim",
        ),
        (
            {"kind": "ClusterRole", "metadata": {"name": "admin"}},
            'ClusterRole admin: kind: unsupported kind "ClusterRole", expected one of Pod, Node, '
            "Namespace, Service, ReplicationController, ReplicaSet, StatefulSet, PodDisruptionBudget, "
            "StorageClass, CSIDriver, CSINode, CSIStorageCapacity, PersistentVolume, PersistentVolumeClaim",
        ),
        (
            {"metadata": {"name": "web"}},
            "object web: kind: required (a Kubernetes object such as Pod, Node or Namespace)",
        ),
        (
            {"kind": 3},
            "object: kind: required (a Kubernetes object such as Pod, Node or Namespace), "
            "got integer 3",
        ),
        ([pod_dict()], "object: expected a Kubernetes object, got list"),
    ],
)
def test_object_from_dict_errors(obj: Any, message: str) -> None:
    with pytest.raises(ModelError) as info:
        object_from_dict(obj)
    assert str(info.value) == message


# --------------------------------------------------------------------------
# Bad input: every error names the object and the field

Path_ = tuple[str | int, ...]


def with_value(obj: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    """A deep copy of obj with the value at path replaced (or deleted if value is DELETE)."""
    result = copy.deepcopy(obj)
    target: Any = result
    for step in path[:-1]:
        if isinstance(target, dict) and step not in target:
            target[step] = {}
        target = target[step]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return result


DELETE = object()


def full_pod() -> dict[str, Any]:
    """A valid pod with every parsed field present, the base for bad-input cases."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web"},
            "annotations": {"a": "b"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-1",
                    "uid": "1",
                    "controller": True,
                }
            ],
            "creationTimestamp": "2024-01-01T00:00:00Z",
        },
        "spec": {
            "hostNetwork": False,
            "containers": [
                container(
                    "app",
                    {"cpu": "100m", "memory": "128Mi"},
                    {"cpu": "1"},
                    ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                )
            ],
            "initContainers": [sidecar("proxy", {"cpu": "10m"})],
            "overhead": {"cpu": "10m"},
            "resources": {"requests": {"cpu": "1"}},
            "nodeSelector": {"disk": "ssd"},
            "priority": 5,
            "schedulingGates": [{"name": "gate"}],
            "tolerations": [
                {
                    "key": "k",
                    "operator": "Equal",
                    "value": "v",
                    "effect": "NoSchedule",
                    "tolerationSeconds": 5,
                }
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ],
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                                ],
                            }
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 5,
                            "preference": {
                                "matchExpressions": [{"key": "gpu", "operator": "Exists"}]
                            },
                        }
                    ],
                },
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {
                                "matchLabels": {"app": "db"},
                                "matchExpressions": [
                                    {"key": "tier", "operator": "In", "values": ["x"]}
                                ],
                            },
                            "topologyKey": "zone",
                            "namespaces": ["data"],
                        }
                    ]
                },
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
                    ]
                },
            },
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "minDomains": 2,
                    "nodeAffinityPolicy": "Honor",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web", "readOnly": True}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "config", "configMap": {"name": "web"}},
            ],
        },
        "status": {"phase": "Pending", "nominatedNodeName": "n1"},
    }


def test_full_pod_is_valid() -> None:
    pod = pod_from_dict(full_pod())
    assert pod.key == "default/web"
    assert pod.requests == {"cpu": 1010, "memory": 128 * MI}  # pod-level cpu 1 + overhead


def test_pvc_claims_of_claim_and_ephemeral_volumes() -> None:
    # An ephemeral volume's claim is named <pod>-<volume>; other volume sources are not kept.
    assert pod_from_dict(full_pod()).pvc_claims == ("data-web", "web-scratch")
    volumes = [{"name": "tmp", "emptyDir": {}}, {"name": "t", "projected": {"sources": []}}]
    assert pod_from_dict(pod_dict(volumes=volumes)).pvc_claims == ()


SPEC = ("spec",)
C0 = ("spec", "containers", 0)
NA = ("spec", "affinity", "nodeAffinity")
NA_TERM = (*NA, "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", 0)
NA_EXPR = (*NA_TERM, "matchExpressions", 0)
NA_FIELD = (*NA_TERM, "matchFields", 0)
NA_PREF = (*NA, "preferredDuringSchedulingIgnoredDuringExecution", 0)
PA_TERM = ("spec", "affinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution", 0)
PA_EXPR = (*PA_TERM, "labelSelector", "matchExpressions", 0)
ANTI_PREF = (
    "spec",
    "affinity",
    "podAntiAffinity",
    "preferredDuringSchedulingIgnoredDuringExecution",
    0,
)
TSC = ("spec", "topologySpreadConstraints", 0)
VOL = ("spec", "volumes", 0)
EPH = ("spec", "volumes", 1, "ephemeral")
TOL = ("spec", "tolerations", 0)
NA_TERM_PATH = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
)

POD_ERRORS = [
    # (path to change, new value, field path in the message, reason in the message)
    (
        (*C0, "resources", "requests", "cpu"),
        "abc",
        "spec.containers[0].resources.requests.cpu",
        'invalid quantity "abc"',
    ),
    (
        (*C0, "resources", "requests", "memory"),
        "-1Gi",
        "spec.containers[0].resources.requests.memory",
        "must not be negative",
    ),
    (
        (*C0, "resources", "requests", "memory"),
        True,
        "spec.containers[0].resources.requests.memory",
        "invalid quantity boolean true",
    ),
    (
        (*C0, "resources", "limits", "cpu"),
        "1 core",
        "spec.containers[0].resources.limits.cpu",
        'invalid quantity "1 core"',
    ),
    (
        (*C0, "resources", "limits"),
        "1",
        "spec.containers[0].resources.limits",
        "expected a map of resource name",
    ),
    ((*C0, "resources"), [], "spec.containers[0].resources", "expected an object, got list"),
    ((*C0, "name"), DELETE, "spec.containers[0].name", "required"),
    (
        (*C0, "name"),
        7,
        "spec.containers[0].name",
        "expected a string, got integer 7 (quote it in YAML)",
    ),
    ((*C0, "image"), ["x"], "spec.containers[0].image", "expected a string, got list"),
    (
        (*C0, "restartPolicy"),
        {},
        "spec.containers[0].restartPolicy",
        "expected a string, got object",
    ),
    (
        (*C0, "ports", 0, "containerPort"),
        DELETE,
        "spec.containers[0].ports[0].containerPort",
        "required",
    ),
    (
        (*C0, "ports", 0, "containerPort"),
        70000,
        "spec.containers[0].ports[0].containerPort",
        "70000 out of range, expected 1-65535",
    ),
    (
        (*C0, "ports", 0, "containerPort"),
        "80",
        "spec.containers[0].ports[0].containerPort",
        "expected an integer, got string",
    ),
    ((*C0, "ports", 0, "hostPort"), -1, "spec.containers[0].ports[0].hostPort", "out of range"),
    (
        (*C0, "ports", 0, "protocol"),
        "HTTP",
        "spec.containers[0].ports[0].protocol",
        'unknown protocol "HTTP"',
    ),
    (
        (*C0, "ports"),
        {"containerPort": 80},
        "spec.containers[0].ports",
        "expected a list, got object",
    ),
    (("spec", "containers"), "nginx", "spec.containers", 'expected a list, got string "nginx"'),
    (("spec", "containers", 0), ["x"], "spec.containers[0]", "expected an object, got list"),
    (
        ("spec", "initContainers", 0, "resources", "requests", "cpu"),
        "x",
        "spec.initContainers[0].resources.requests.cpu",
        "invalid quantity",
    ),
    (("spec", "overhead", "cpu"), "lots", "spec.overhead.cpu", 'invalid quantity "lots"'),
    (
        ("spec", "resources", "requests", "nvidia.com/gpu"),
        "1",
        "spec.resources.requests.nvidia.com/gpu",
        "pod-level resources support only cpu, memory and hugepages-*",
    ),
    (("spec", "priority"), "5", "spec.priority", 'expected an integer, got string "5"'),
    (("spec", "priority"), True, "spec.priority", "expected an integer, got boolean true"),
    (("spec", "priority"), 1.5, "spec.priority", "expected an integer, got number 1.5"),
    (("spec", "hostNetwork"), "true", "spec.hostNetwork", "expected a boolean (true or false)"),
    (("spec", "schedulerName"), 1, "spec.schedulerName", "expected a string"),
    (("spec", "nodeName"), ["n1"], "spec.nodeName", "expected a string, got list"),
    (("spec", "nodeSelector"), "disk=ssd", "spec.nodeSelector", "expected a map of strings"),
    (
        ("spec", "nodeSelector", "disk"),
        1,
        "spec.nodeSelector.disk",
        "expected a string, got integer 1",
    ),
    (("spec", "schedulingGates", 0, "name"), DELETE, "spec.schedulingGates[0].name", "required"),
    (
        ("spec", "schedulingGates"),
        ["gate"],
        "spec.schedulingGates[0]",
        "expected an object, got string",
    ),
    (
        ("metadata", "labels"),
        ["app"],
        "metadata.labels",
        "expected a map of strings, got list",
    ),
    (
        ("metadata", "labels", "app"),
        True,
        "metadata.labels.app",
        "expected a string, got boolean true (quote it in YAML)",
    ),
    (("metadata", "annotations", "a"), 5, "metadata.annotations.a", "expected a string"),
    (("metadata", "uid"), 5, "metadata.uid", "expected a string"),
    (("metadata", "resourceVersion"), 5, "metadata.resourceVersion", "expected a string"),
    (("metadata", "creationTimestamp"), 5, "metadata.creationTimestamp", "expected a string"),
    (
        ("metadata", "ownerReferences", 0, "kind"),
        DELETE,
        "metadata.ownerReferences[0].kind",
        "required",
    ),
    (
        ("metadata", "ownerReferences", 0, "controller"),
        "yes",
        "metadata.ownerReferences[0].controller",
        "expected a boolean",
    ),
    (("status", "phase"), 3, "status.phase", "expected a string"),
    (("status",), "Running", "status", "expected an object"),
    (("spec",), [], "spec", "expected an object, got list"),
    # tolerations
    (
        (*TOL, "operator"),
        "Ge",
        "spec.tolerations[0].operator",
        'unknown operator "Ge", expected one of Equal, Exists',
    ),
    ((*TOL, "effect"), "NoExec", "spec.tolerations[0].effect", 'unknown effect "NoExec"'),
    (
        (*TOL, "operator"),
        "Exists",
        "spec.tolerations[0].value",
        "must be empty when operator is Exists",
    ),
    ((*TOL, "key"), DELETE, "spec.tolerations[0].operator", "must be Exists when key is empty"),
    (
        (*TOL, "tolerationSeconds"),
        "60",
        "spec.tolerations[0].tolerationSeconds",
        "expected an integer",
    ),
    (("spec", "tolerations"), {"key": "k"}, "spec.tolerations", "expected a list, got object"),
    # node affinity
    (NA, [], "spec.affinity.nodeAffinity", "expected an object, got list"),
    (
        (*NA, "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"),
        [],
        f"{NA_TERM_PATH[:-3]}",
        "must have at least one term",
    ),
    (
        (*NA_EXPR, "operator"),
        "Like",
        f"{NA_TERM_PATH}.matchExpressions[0].operator",
        'unknown operator "Like", expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt',
    ),
    (
        (*NA_EXPR, "operator"),
        DELETE,
        f"{NA_TERM_PATH}.matchExpressions[0].operator",
        "required, expected one of",
    ),
    (
        (*NA_EXPR, "values"),
        [],
        f"{NA_TERM_PATH}.matchExpressions[0].values",
        "must be non-empty when operator is In",
    ),
    ((*NA_EXPR, "values"), "a", f"{NA_TERM_PATH}.matchExpressions[0].values", "expected a list"),
    (
        (*NA_EXPR, "values"),
        [1],
        f"{NA_TERM_PATH}.matchExpressions[0].values[0]",
        "expected a string, got integer 1",
    ),
    ((*NA_EXPR, "key"), DELETE, f"{NA_TERM_PATH}.matchExpressions[0].key", "required"),
    (
        (*NA_FIELD, "key"),
        "metadata.labels",
        f"{NA_TERM_PATH}.matchFields[0].key",
        'unsupported field "metadata.labels", expected metadata.name',
    ),
    (
        (*NA_FIELD, "values"),
        ["n1", "n2"],
        f"{NA_TERM_PATH}.matchFields[0].values",
        "must have exactly one value",
    ),
    (
        (*NA_FIELD, "operator"),
        "Exists",
        f"{NA_TERM_PATH}.matchFields[0].operator",
        'unknown operator "Exists", expected one of In, NotIn',
    ),
    (
        (*NA_PREF, "weight"),
        0,
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        "0 out of range, expected 1-100",
    ),
    (
        (*NA_PREF, "weight"),
        DELETE,
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        "required",
    ),
    (
        (*NA_PREF, "weight"),
        "10",
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        "expected an integer",
    ),
    (
        (*NA_PREF, "preference"),
        DELETE,
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference",
        "required",
    ),
    # pod affinity
    (
        (*PA_TERM, "topologyKey"),
        DELETE,
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        "required",
    ),
    (
        (*PA_TERM, "namespaces"),
        "data",
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces",
        "expected a list",
    ),
    (
        (*PA_TERM, "labelSelector"),
        "app=db",
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector",
        "expected an object",
    ),
    (
        (*PA_TERM, "labelSelector", "matchLabels", "app"),
        1,
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app",
        "expected a string",
    ),
    (
        (*PA_EXPR, "operator"),
        "Gt",
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator",
        'unknown operator "Gt", expected one of In, NotIn, Exists, DoesNotExist',
    ),
    (
        (*PA_EXPR, "values"),
        DELETE,
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values",
        "must be non-empty when operator is In",
    ),
    (
        (*ANTI_PREF, "podAffinityTerm"),
        DELETE,
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm",
        "required",
    ),
    (
        (*ANTI_PREF, "weight"),
        101,
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        "101 out of range",
    ),
    # topology spread
    ((*TSC, "maxSkew"), 0, "spec.topologySpreadConstraints[0].maxSkew", "at least 1"),
    ((*TSC, "maxSkew"), DELETE, "spec.topologySpreadConstraints[0].maxSkew", "required"),
    ((*TSC, "topologyKey"), "", "spec.topologySpreadConstraints[0].topologyKey", "required"),
    (
        (*TSC, "whenUnsatisfiable"),
        "Maybe",
        "spec.topologySpreadConstraints[0].whenUnsatisfiable",
        'unknown value "Maybe", expected one of DoNotSchedule, ScheduleAnyway',
    ),
    ((*TSC, "minDomains"), 0, "spec.topologySpreadConstraints[0].minDomains", "must be at least 1"),
    (
        (*TSC, "nodeAffinityPolicy"),
        "Sometimes",
        "spec.topologySpreadConstraints[0].nodeAffinityPolicy",
        'unknown value "Sometimes", expected one of Honor, Ignore',
    ),
    (
        (*TSC, "matchLabelKeys"),
        [None],
        "spec.topologySpreadConstraints[0].matchLabelKeys[0]",
        "expected a string, got null",
    ),
    # volumes
    (("spec", "volumes"), {"name": "data"}, "spec.volumes", "expected a list, got object"),
    (VOL, "data", "spec.volumes[0]", 'expected an object, got string "data"'),
    ((*VOL, "name"), DELETE, "spec.volumes[0].name", "required"),
    ((*VOL, "persistentVolumeClaim"), "data-web", "spec.volumes[0].persistentVolumeClaim", "expected an object"),
    ((*VOL, "persistentVolumeClaim", "claimName"), DELETE, "spec.volumes[0].persistentVolumeClaim.claimName",
     "required"),
    ((*VOL, "persistentVolumeClaim", "claimName"), 7, "spec.volumes[0].persistentVolumeClaim.claimName",
     "expected a string, got integer 7"),
    ((*VOL, "ephemeral"), {"volumeClaimTemplate": {}}, "spec.volumes[0]",
     "persistentVolumeClaim and ephemeral: a volume has only one source"),
    (EPH, [], "spec.volumes[1].ephemeral", "expected an object, got list"),
    ((*EPH, "volumeClaimTemplate"), DELETE, "spec.volumes[1].ephemeral.volumeClaimTemplate", "required"),
    ((*EPH, "volumeClaimTemplate"), "x", "spec.volumes[1].ephemeral.volumeClaimTemplate", "expected an object"),
]


@pytest.mark.parametrize(("path", "value", "field", "reason"), POD_ERRORS)
def test_pod_errors_name_object_and_field(path: Path_, value: Any, field: str, reason: str) -> None:
    with pytest.raises(ModelError) as info:
        pod_from_dict(with_value(full_pod(), path, value))
    message = str(info.value)
    assert message.startswith(f"Pod default/web: {field}: "), message
    assert reason in message


def test_quantity_error_message_format() -> None:
    obj = with_value(full_pod(), (*C0, "resources", "requests", "cpu"), "abc")
    with pytest.raises(ModelError) as info:
        pod_from_dict(obj)
    assert str(info.value).startswith(
        "Pod default/web: spec.containers[0].resources.requests.cpu: "
        'invalid quantity "abc": expected'
    )


def test_min_domains_needs_do_not_schedule() -> None:
    obj = with_value(full_pod(), (*TSC, "whenUnsatisfiable"), "ScheduleAnyway")
    with pytest.raises(
        ModelError, match=r"minDomains: allowed only with whenUnsatisfiable DoNotSchedule"
    ):
        pod_from_dict(obj)


@pytest.mark.parametrize(
    ("operator", "values", "reason"),
    [
        ("Lt", ["1", "2"], "must have exactly one value when operator is Lt"),
        ("Gt", [], "must have exactly one value when operator is Gt"),
        ("Exists", ["a"], "must be empty when operator is Exists"),
        ("DoesNotExist", ["a"], "must be empty when operator is DoesNotExist"),
        ("NotIn", [], "must be non-empty when operator is NotIn"),
    ],
)
def test_node_selector_value_rules(operator: str, values: list[str], reason: str) -> None:
    obj = with_value(full_pod(), NA_EXPR, {"key": "zone", "operator": operator, "values": values})
    with pytest.raises(ModelError) as info:
        pod_from_dict(obj)
    assert (
        str(info.value) == f"Pod default/web: {NA_TERM_PATH}.matchExpressions[0].values: {reason}"
    )


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"metadata": {}}, "Pod: metadata.name: required"),
        ({}, "Pod: metadata.name: required"),
        ({"metadata": {"name": ""}}, "Pod: metadata.name: required"),
        ({"metadata": "web"}, 'Pod: metadata: expected an object, got string "web"'),
        ({"metadata": {"name": 5}}, "Pod: metadata.name: expected a string, got integer 5"),
        (
            {"metadata": {"name": "web", "namespace": 5}},
            "Pod web: metadata.namespace: expected a string",
        ),
        (
            {"kind": "Node", "metadata": {"name": "n"}},
            'Pod default/n: kind: expected Pod, got string "Node"',
        ),
        (["web"], "Pod: expected a Pod object, got list"),
        ("web", 'Pod: expected a Pod object, got string "web"'),
        (None, "Pod: expected a Pod object, got null"),
    ],
)
def test_pod_metadata_errors(obj: Any, message: str) -> None:
    with pytest.raises(ModelError) as info:
        pod_from_dict(obj)
    assert str(info.value).startswith(message), str(info.value)


def test_origin_is_named_in_errors() -> None:
    with pytest.raises(ModelError) as info:
        pod_from_dict({"metadata": {}}, origin="document 3 of cluster.yaml")
    assert str(info.value) == "Pod (document 3 of cluster.yaml): metadata.name: required"
    with pytest.raises(ModelError) as info:
        pod_from_dict(pod_dict(priority="x"), origin="document 1 of a.yaml")
    assert str(info.value).startswith("Pod default/web (document 1 of a.yaml): spec.priority: ")


NODE_ERRORS = [
    (("status", "capacity", "cpu"), "four", "status.capacity.cpu", 'invalid quantity "four"'),
    (("status", "allocatable"), [], "status.allocatable", "expected a map of resource name"),
    (
        ("status", "allocatable", "memory"),
        "-5",
        "status.allocatable.memory",
        "must not be negative",
    ),
    (
        ("status", "capacity", 1),
        "1",
        "status.capacity",
        "expected resource names as keys, got integer 1",
    ),
    (
        ("spec", "taints"),
        [{"key": "gpu", "effect": "NoExec"}],
        "spec.taints[0].effect",
        'unknown value "NoExec", expected one of NoSchedule, PreferNoSchedule, NoExecute',
    ),
    (
        ("spec", "taints"),
        [{"key": "gpu"}],
        "spec.taints[0].effect",
        "required, expected one of NoSchedule",
    ),
    (("spec", "taints"), [{"effect": "NoSchedule"}], "spec.taints[0].key", "required"),
    (
        ("spec", "taints"),
        [{"key": "k", "value": 1, "effect": "NoSchedule"}],
        "spec.taints[0].value",
        "expected a string",
    ),
    (("spec", "taints"), "gpu=true:NoSchedule", "spec.taints", "expected a list"),
    (("spec", "unschedulable"), "true", "spec.unschedulable", "expected a boolean"),
    (("status", "images"), [{"names": "nginx"}], "status.images[0].names", "expected a list"),
    (
        ("status", "images"),
        [{"names": [], "sizeBytes": "1"}],
        "status.images[0].sizeBytes",
        "expected an integer",
    ),
    (
        ("status", "addresses"),
        [{"type": "InternalIP", "address": 1}],
        "status.addresses[0].address",
        "expected a string",
    ),
    (("metadata", "labels"), ["zone"], "metadata.labels", "expected a map of strings"),
]


@pytest.mark.parametrize(("path", "value", "field", "reason"), NODE_ERRORS)
def test_node_errors_name_object_and_field(
    path: Path_, value: Any, field: str, reason: str
) -> None:
    with pytest.raises(ModelError) as info:
        node_from_dict(with_value(node_dict(), path, value))
    message = str(info.value)
    assert message.startswith(f"Node n1: {field}: "), message
    assert reason in message


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"metadata": {"name": "ns", "labels": {"a": 1}}},
            "Namespace ns: metadata.labels.a: expected a string",
        ),
        ({"metadata": {}}, "Namespace: metadata.name: required"),
        (
            {"kind": "Pod", "metadata": {"name": "x"}},
            'Namespace x: kind: expected Namespace, got string "Pod"',
        ),
    ],
)
def test_namespace_errors(obj: Any, message: str) -> None:
    with pytest.raises(ModelError) as info:
        namespace_from_dict(obj)
    assert str(info.value).startswith(message)


def test_model_error_is_an_input_error() -> None:
    assert issubclass(ModelError, InputError)


# --------------------------------------------------------------------------
# Robustness: any malformed value gives ModelError, never another exception

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["", "1", "100m", "In", "Exists", "NoSchedule", "Always", "x.y/z"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


def all_paths(obj: Any, prefix: Path_ = ()) -> list[Path_]:
    paths: list[Path_] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            paths.append((*prefix, key))
            paths.extend(all_paths(value, (*prefix, key)))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            paths.append((*prefix, index))
            paths.extend(all_paths(value, (*prefix, index)))
    return paths


POD_PATHS = all_paths(full_pod())


def fuzz_node() -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": {"a": "b"}, "annotations": {"c": "d"}},
        "spec": {
            "unschedulable": False,
            "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": {"cpu": "4", "memory": "1Gi"},
            "allocatable": {"cpu": "3", "memory": "1Gi"},
            "images": [{"names": ["a"], "sizeBytes": 1}],
            "addresses": [{"type": "Hostname", "address": "n1"}],
        },
    }


NODE_PATHS = all_paths(fuzz_node())


def only_model_errors(build: Callable[[Any], object], obj: Any) -> None:
    try:
        build(obj)
    except ModelError as error:
        assert ": " in str(error)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(POD_PATHS), value=json_values | st.just(DELETE))
def test_pod_fuzz_replaced_field(path: Path_, value: Any) -> None:
    only_model_errors(pod_from_dict, with_value(full_pod(), path, value))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(NODE_PATHS), value=json_values | st.just(DELETE))
def test_node_fuzz_replaced_field(path: Path_, value: Any) -> None:
    only_model_errors(node_from_dict, with_value(fuzz_node(), path, value))


@given(obj=json_values)
def test_fuzz_arbitrary_objects(obj: Any) -> None:
    for build in (pod_from_dict, node_from_dict, namespace_from_dict, object_from_dict):
        only_model_errors(build, obj)


@given(text=st.text(max_size=60))
def test_fuzz_load_objects_text(text: str) -> None:
    try:
        load_objects(text, "fuzz.yaml")
    except ModelError:
        pass


# --------------------------------------------------------------------------
# load_objects / load_file

CLUSTER_YAML = """\
# a comment
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {team: a}
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels:
    zone: a
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
---
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
  creationTimestamp: 2024-01-02T03:04:05Z
spec:
  containers:
  - name: app
    image: nginx
    resources:
      requests:
        cpu: 0.5
        memory: 1e3
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
"""


def test_load_multi_document_yaml() -> None:
    loaded = load_objects(CLUSTER_YAML, "cluster.yaml")
    assert isinstance(loaded, LoadedObjects)
    assert [n.name for n in loaded.namespaces] == ["shop"]
    assert loaded.namespaces[0].labels == {"team": "a"}
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert loaded.nodes[0].allocatable == {"cpu": 4000, "memory": 16 * GI, "pods": 110}
    (pod,) = loaded.pods
    assert pod.key == "shop/web"
    assert pod.requests == {"cpu": 500, "memory": 1000}
    assert pod.creation_timestamp == "2024-01-02T03:04:05Z"
    assert loaded.workloads == [SelectorOwner(kind="Service", namespace="shop", name="web")]
    assert loaded.skipped == ["Deployment api"]
    assert loaded.warnings == [
        "cluster.yaml: skipped 1 object of kinds scorer does not read: 1 Deployment"
    ]


def test_load_json_list() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                pod_dict("a"),
                node_dict("n1"),
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "x"},
                },
            ],
        },
        indent=2,
    )
    loaded = load_objects(text, "all.json")
    assert [p.name for p in loaded.pods] == ["a"]
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert loaded.skipped == ["ConfigMap x/cm"]


def test_load_typed_lists_whose_items_omit_kind() -> None:
    pods = {
        "kind": "PodList",
        "apiVersion": "v1",
        "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
    }
    nodes = {"kind": "NodeList", "apiVersion": "v1", "items": [{"metadata": {"name": "n1"}}]}
    loaded = load_objects(json.dumps(pods) + "\n---\n" + json.dumps(nodes))
    assert [p.key for p in loaded.pods] == ["default/a", "default/b"]
    assert [n.name for n in loaded.nodes] == ["n1"]
    assert load_objects(json.dumps({"kind": "PodList", "items": None})).pods == []


def test_load_single_json_object() -> None:
    loaded = load_objects(json.dumps(pod_dict("solo")), "pod.json")
    assert [p.name for p in loaded.pods] == ["solo"]


def test_load_empty_input() -> None:
    for text in ("", "\n", "---\n---\n", "# nothing\n"):
        assert load_objects(text) == LoadedObjects()


def test_load_flow_style_yaml_that_is_not_json() -> None:
    loaded = load_objects("{kind: Namespace, metadata: {name: a}}")
    assert [n.name for n in loaded.namespaces] == ["a"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Pod\nmetadata:\n  name: [a\n", "cluster.yaml: line 4, column 1: invalid YAML: "),
        (
            "a: b: c\n",
            "cluster.yaml: line 1, column 5: invalid YAML: mapping values are not allowed",
        ),
        (
            '{\n  "kind": "Pod"\n  "metadata": {}\n}\n',
            "cluster.yaml: line 3, column 3: invalid JSON: ",
        ),
        (
            "kind: Namespace\nmetadata: {name: a}\n---\n- a\n- b\n",
            "document 2 of cluster.yaml: expected a Kubernetes object (a mapping with apiVersion "
            "and kind), got list",
        ),
        (
            "just text\n",
            "document 1 of cluster.yaml: expected a Kubernetes object "
            '(a mapping with apiVersion and kind), got string "just text"',
        ),
        ("---\nmetadata: {name: x}\n", "object x (document 1 of cluster.yaml): kind: required"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {}\n",
            "Pod (document 1 of cluster.yaml): metadata.name: required",
        ),
        (
            "kind: List\nitems: {a: 1}\n",
            "List (document 1 of cluster.yaml): items: expected a list, got object",
        ),
        (
            "kind: List\nitems:\n- 5\n",
            "document 1 of cluster.yaml, items[0]: expected a Kubernetes object",
        ),
        (
            "kind: Namespace\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: n}\n---\n"
            "kind: Pod\nmetadata: {}\n",
            "Pod (document 3 of cluster.yaml): metadata.name: required",
        ),
        (
            "kind: Pod\nmetadata: {name: web, labels: {enabled: true}}\n",
            "Pod default/web (document 1 of cluster.yaml): metadata.labels.enabled: "
            "expected a string, "
            "got boolean true (quote it in YAML)",
        ),
        (
            "kind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n"
            "  - name: a\n    resources: {requests: {cpu: abc}}\n",
            "Pod default/web (document 1 of cluster.yaml): "
            "spec.containers[0].resources.requests.cpu: "
            'invalid quantity "abc"',
        ),
        (
            json.dumps({"kind": "List", "items": [pod_dict("a"), pod_dict("b", priority="high")]}),
            "Pod default/b (document 1 of cluster.yaml, items[1]): "
            "spec.priority: expected an integer",
        ),
    ],
)
def test_load_errors_name_source(text: str, message: str) -> None:
    with pytest.raises(ModelError) as info:
        load_objects(text, "cluster.yaml")
    assert str(info.value).startswith(message), str(info.value)


def test_load_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER_YAML, encoding="utf-8")
    loaded = load_file(path)
    assert [p.key for p in loaded.pods] == ["shop/web"]
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: {}\n", encoding="utf-8")
    with pytest.raises(
        ModelError, match=r"^Pod \(document 1 of .*broken\.yaml\): metadata\.name: required$"
    ):
        load_file(str(broken))


def test_load_file_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ModelError, match=r"nope\.yaml: no such file"):
        load_file(missing)
    with pytest.raises(ModelError, match=r": is a directory, not a file$"):
        load_file(tmp_path)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"kind: Pod\n\xff\xfe")
    with pytest.raises(ModelError, match=r"bin\.yaml: not UTF-8 text"):
        load_file(binary)


# --------------------------------------------------------------------------
# Whole cluster files: what is refused, what is reported (issue 7)


def documents(*objects: dict[str, Any]) -> str:
    return "\n---\n".join(json.dumps(obj) for obj in objects)


def memory_pod(name: str, memory: str, node_name: str = "n1", **spec: Any) -> dict[str, Any]:
    return pod_dict(name, containers=[container(requests={"memory": memory})], nodeName=node_name, **spec)


def test_per_node_totals_beyond_int64_are_refused_naming_the_pod() -> None:
    # Three 4Ei pods on one node wrapped to a negative total (an empty-looking node) before.
    text = documents(node_dict("n1"), memory_pod("a", "4Ei"), memory_pod("b", "4Ei"), memory_pod("c", "4Ei"))
    with pytest.raises(ModelError) as info:
        load_objects(text, "cluster.yaml")
    assert str(info.value) == (
        "Pod default/b (document 3 of cluster.yaml): spec.containers[*].resources.requests.memory: "
        f'with this pod, the pods bound to node "n1" request {1 << 63} in total, '
        "beyond the int64 limit of 9223372036854775807"
    )


def test_per_node_totals_count_only_pods_that_hold_resources() -> None:
    done = {"status": {"phase": "Succeeded"}}
    text = documents(
        node_dict("n1"),
        memory_pod("a", "4Ei"),
        {**memory_pod("b", "4Ei"), **done},
        memory_pod("c", "4Ei", node_name="n2"),  # on another node
        memory_pod("d", "4Ei", node_name=""),  # pending
    )
    loaded = load_objects(text, "cluster.yaml")
    assert len(loaded.pods) == 4


def test_a_pod_whose_own_requests_add_up_beyond_int64_is_refused() -> None:
    containers = [container("a", {"memory": "6Ei"}), container("b", {"memory": "6Ei"})]
    with pytest.raises(ModelError) as info:
        pod_from_dict(pod_dict("big", containers=containers))
    assert str(info.value) == (
        "Pod default/big: spec: the memory requests of the containers, init containers and overhead "
        f"add up to {12 * (1 << 60)}, beyond the int64 limit of 9223372036854775807"
    )


def test_a_single_quantity_beyond_int64_is_refused() -> None:
    with pytest.raises(ModelError, match=r"requests\.memory: quantity \"9Ei\" out of range"):
        pod_from_dict(pod_dict(containers=[container(requests={"memory": "9Ei"})]))


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (10**30, f"{10**30} out of range, expected an integer from 0 to 9007199254740992"),
        ((1 << 53) + 1, f"{(1 << 53) + 1} out of range, expected an integer from 0 to 9007199254740992"),
        (-1, "-1 out of range, expected an integer from 0 to 9007199254740992"),
    ],
)
def test_image_sizes_beyond_the_columns_are_refused_at_load(size: int, message: str) -> None:
    # Before, such a size failed every pod at Score time.
    obj = node_dict("n1", images=[{"names": ["a:1"], "sizeBytes": 5}, {"names": ["b:1"], "sizeBytes": size}])
    with pytest.raises(ModelError) as info:
        load_objects(documents(obj), "cluster.yaml")
    assert str(info.value).startswith(
        f"Node n1 (document 1 of cluster.yaml): status.images[1].sizeBytes: {message}"
    )
    assert node_from_dict(node_dict("n1", images=[{"names": ["a:1"], "sizeBytes": 1 << 53}])).images


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("priority", 1 << 31, f"spec.priority: {1 << 31} out of range, expected an integer from -2147483648"),
        ("priority", 10**40, "spec.priority: 10000000000000000000000000000000000000000 out of range"),
        (
            "tolerations",
            [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1 << 63}],
            "spec.tolerations[0].tolerationSeconds: 9223372036854775808 out of range",
        ),
    ],
)
def test_integers_must_fit_the_api_types(field: str, value: Any, message: str) -> None:
    with pytest.raises(ModelError) as info:
        pod_from_dict(pod_dict(**{field: value}))
    assert message in str(info.value)


def test_kinds_scorer_does_not_read_are_counted_in_one_warning() -> None:
    text = documents(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "x"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b"}},
        {"apiVersion": "scorer.dev/v1alpha1", "kind": "MetricsSnapshot", "metrics": {}},
        node_dict("n1"),
    )
    loaded = load_objects(text, "cluster.yaml")
    assert loaded.warnings == [
        "cluster.yaml: skipped 3 objects of kinds scorer does not read: 2 Deployment, 1 ConfigMap"
    ]
    assert loaded.skipped == ["Deployment a", "ConfigMap x/c", "Deployment b"]
    # The MetricsSnapshot is not "unknown": it waits in others for the snapshot reader.
    assert [(d.number, d.data["kind"]) for d in loaded.others] == [
        (1, "Deployment"), (2, "ConfigMap"), (3, "Deployment"), (4, "MetricsSnapshot")
    ]


def test_list_items_keep_their_document_and_index() -> None:
    text = json.dumps({"kind": "List", "items": [node_dict("n1"), {"kind": "Secret", "metadata": {}}]})
    (other,) = load_objects("---\n" + text, "all.json").others
    assert other.origin == "document 1 of all.json, items[1]"
    assert other.data == {"kind": "Secret", "metadata": {}}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "web"}},
            'Pod default/web (document 2 of cluster.yaml): apiVersion: expected "v1" '
            '(the only version of Pod), got string "v2"',
        ),
        (
            {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "Node", "metadata": {"name": "n2"}},
            'Node n2 (document 2 of cluster.yaml): apiVersion: expected "v1"',
        ),
        (
            {"apiVersion": "v1", "kind": "pod", "metadata": {"name": "web"}},
            'pod web (document 2 of cluster.yaml): kind: unknown kind "pod", did you mean "Pod"?',
        ),
        ({"kind": "Pods", "metadata": {"name": "w"}}, 'kind: unknown kind "Pods", did you mean "Pod"?'),
        (
            {"kind": "NAMESPACE"},
            '(document 2 of cluster.yaml): kind: unknown kind "NAMESPACE", did you mean "Namespace"?',
        ),
        ({"kind": "nodelist", "items": []}, 'did you mean "NodeList"?'),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
            "KubeSchedulerConfiguration (document 2 of cluster.yaml): a scheduler configuration is "
            "not a cluster object; give it with --config",
        ),
    ],
)
def test_objects_that_would_vanish_are_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError) as info:
        load_objects(documents(node_dict("n1"), obj), "cluster.yaml")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("first", "second", "label"),
    [
        (node_dict("n1"), node_dict("n1"), "Node n1"),
        (pod_dict("web", "shop"), pod_dict("web", "shop"), "Pod shop/web"),
        (pod_dict("web", None), pod_dict("web", "default"), "Pod default/web"),
        (
            {"kind": "Namespace", "metadata": {"name": "a"}},
            {"kind": "Namespace", "metadata": {"name": "a", "labels": {"x": "y"}}},
            "Namespace a",
        ),
    ],
)
def test_two_objects_with_one_name_are_an_error(first: dict[str, Any], second: dict[str, Any], label: str) -> None:
    text = documents(first, {"kind": "ConfigMap", "metadata": {"name": "x"}}, second)
    with pytest.raises(ModelError) as info:
        load_objects(text, "cluster.yaml")
    assert str(info.value) == (
        f"{label} (document 3 of cluster.yaml): defined twice, first in document 1 of cluster.yaml"
    )


def test_same_pod_name_in_two_namespaces_is_fine() -> None:
    loaded = load_objects(documents(pod_dict("web", "a"), pod_dict("web", "b")))
    assert [p.key for p in loaded.pods] == ["a/web", "b/web"]


def test_pods_bound_to_missing_nodes_are_warned_about() -> None:
    done = {"status": {"phase": "Failed"}}
    text = documents(
        node_dict("n1"),
        memory_pod("a", "1Gi", node_name="n1"),
        memory_pod("b", "1Gi", node_name="gone"),
        {**memory_pod("c", "1Gi", node_name="gone"), **done},  # terminal: holds nothing
    )
    loaded = load_objects(text, "cluster.yaml")
    assert [p.name for p in loaded.pods] == ["a", "b", "c"]  # kube keeps them
    assert loaded.warnings == [
        'Pod default/b (document 3 of cluster.yaml): spec.nodeName "gone" names no Node of '
        "cluster.yaml; the pod counts toward no node"
    ]


def test_many_pods_bound_to_missing_nodes_are_summarized() -> None:
    text = documents(*(memory_pod(f"p{i}", "1Gi", node_name=f"gone-{i}") for i in range(8)))
    warnings = load_objects(text, "pods.yaml").warnings
    assert len(warnings) == 6
    assert warnings[-1] == "pods.yaml: 3 more pods are bound to nodes that are not in it; they count toward no node"


def test_names_with_control_characters_are_escaped_in_messages() -> None:
    bad = {"kind": "Pod", "metadata": {"name": "web\n\x1b[2Jfake", "labels": {"a\nb": 1}}}
    with pytest.raises(ModelError) as info:
        load_objects(documents(bad), "c.yaml")
    assert str(info.value) == (
        "Pod default/web\\n\\x1b[2Jfake (document 1 of c.yaml): metadata.labels.a\\nb: "
        "expected a string, got integer 1 (quote it in YAML)"
    )


def test_cluster_files_are_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("kind: Node\nmetadata:\n  name: n1\n  labels: {a: x}\n  name: n2\n")
    with pytest.raises(ModelError) as info:
        load_file(path)
    assert str(info.value) == f'document 1 of {path}: metadata.name: duplicate field "name" (again at line 5)'
    path.write_text('{"kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {"cpu": NaN}}}')
    with pytest.raises(ModelError, match=r"status\.capacity\.cpu: expected a finite number, got number nan$"):
        load_file(path)


# --------------------------------------------------------------------------
# Preemption fields of pods


@pytest.mark.parametrize(
    ("spec", "status", "policy", "start_time"),
    [
        ({}, {}, "PreemptLowerPriority", ""),
        ({"preemptionPolicy": "Never"}, {"startTime": "2024-05-06T07:08:09Z"}, "Never",
         "2024-05-06T07:08:09Z"),
        ({"preemptionPolicy": "PreemptLowerPriority"}, {}, "PreemptLowerPriority", ""),
        ({"preemptionPolicy": None}, {"startTime": None}, "PreemptLowerPriority", ""),
    ],
)
def test_pod_preemption_policy_and_start_time(
    spec: dict[str, Any], status: dict[str, Any], policy: str, start_time: str
) -> None:
    pod = pod_from_dict({"metadata": {"name": "p"}, "spec": spec, "status": status})
    assert (pod.preemption_policy, pod.start_time) == (policy, start_time)


def test_pod_start_time_from_yaml_timestamp() -> None:
    loaded = load_objects(
        "kind: Pod\nmetadata: {name: p}\nstatus: {startTime: 2024-05-06T07:08:09Z}\n", "c.yaml"
    )
    assert loaded.pods[0].start_time == "2024-05-06T07:08:09Z"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("Sometimes", 'spec.preemptionPolicy: unknown value "Sometimes", expected one of '
                      "PreemptLowerPriority, Never"),
        (3, "spec.preemptionPolicy: expected a string, got integer 3 (quote it in YAML)"),
    ],
)
def test_pod_preemption_policy_errors(value: Any, message: str) -> None:
    with pytest.raises(ModelError) as info:
        pod_from_dict({"metadata": {"name": "p"}, "spec": {"preemptionPolicy": value}})
    assert str(info.value) == f"Pod default/p: {message}"


# --------------------------------------------------------------------------
# Workloads: Services, controllers, PodDisruptionBudgets


def workload(kind: str, api_version: str, spec: Any = None, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                           "metadata": {"name": "w", "namespace": "shop", "resourceVersion": "7"}}
    if spec is not None:
        obj["spec"] = spec
    obj.update(extra)
    return obj


APP = LabelSelector(match_labels={"app": "web"})
APP_EXPR = LabelSelector(
    match_labels={"app": "web"},
    match_expressions=(LabelSelectorRequirement(key="tier", operator="In", values=("a", "b")),),
)
SELECTOR_APP_EXPR = {"matchLabels": {"app": "web"},
                     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}


@pytest.mark.parametrize(
    ("obj", "selector"),
    [
        # Service: a map; no selector selects nothing, {} every pod of its namespace.
        (workload("Service", "v1", {"selector": {"app": "web"}}), APP),
        (workload("Service", "v1", {"selector": {}}), LabelSelector()),
        (workload("Service", "v1", {"ports": [{"port": 80}]}), None),
        (workload("Service", "v1"), None),
        # ReplicationController: a map; missing or empty selects nothing.
        (workload("ReplicationController", "v1", {"selector": {"app": "web"}}), APP),
        (workload("ReplicationController", "v1", {"selector": {}}), None),
        (workload("ReplicationController", "v1", {}), None),
        # ReplicaSet, StatefulSet: a LabelSelector; missing or empty selects nothing.
        (workload("ReplicaSet", "apps/v1", {"selector": SELECTOR_APP_EXPR}), APP_EXPR),
        (workload("ReplicaSet", "apps/v1", {"selector": {}}), None),
        (workload("ReplicaSet", "apps/v1", {"selector": {"matchLabels": {}}}), None),
        (workload("ReplicaSet", "apps/v1", {"replicas": 3}), None),
        (workload("StatefulSet", "apps/v1", {"selector": {"matchLabels": {"app": "web"}}}), APP),
        (workload("StatefulSet", "apps/v1", {"selector": {}}), None),
    ],
)
def test_selector_owner_from_dict(obj: dict[str, Any], selector: LabelSelector | None) -> None:
    owner = workload_from_dict(obj)
    assert owner == SelectorOwner(
        kind=obj["kind"], namespace="shop", name="w", selector=selector, resource_version="7"
    )
    assert object_from_dict(obj) == owner


@pytest.mark.parametrize("api_version", ["policy/v1", "policy/v1beta1"])
def test_pod_disruption_budget_from_dict(api_version: str) -> None:
    obj = workload(
        "PodDisruptionBudget",
        api_version,
        {"minAvailable": 2, "selector": SELECTOR_APP_EXPR},
        status={"disruptionsAllowed": 1, "currentHealthy": 3,
                "disruptedPods": {"web-1": "2024-01-02T03:04:05Z", "web-2": "2024-01-02T03:04:06Z"}},
    )
    assert workload_from_dict(obj) == PodDisruptionBudget(
        namespace="shop", name="w", selector=APP_EXPR, disruptions_allowed=1,
        disrupted_pods=frozenset({"web-1", "web-2"}), resource_version="7",
    )


@pytest.mark.parametrize(
    "spec", [None, {}, {"selector": None}, {"selector": {}}, {"selector": {"matchExpressions": []}}]
)
def test_pod_disruption_budget_without_selector_protects_nothing(spec: Any) -> None:
    budget = workload_from_dict(workload("PodDisruptionBudget", "policy/v1", spec))
    assert isinstance(budget, PodDisruptionBudget)
    assert budget.selector is None
    assert budget.disruptions_allowed == 0 and budget.disrupted_pods == frozenset()
    assert not budget.protects(Pod(namespace="shop", name="p"))


def test_workload_namespace_defaults() -> None:
    owner = workload_from_dict({"kind": "Service", "metadata": {"name": "s"}, "spec": {"selector": {"a": "b"}}})
    assert owner.namespace == "default"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (workload("Service", "apps/v1"),
         'Service shop/w: apiVersion: expected "v1" (the only version of Service), got string "apps/v1"'),
        (workload("ReplicaSet", "extensions/v1beta1"),
         'ReplicaSet shop/w: apiVersion: expected "apps/v1" (the only version of ReplicaSet), '
         'got string "extensions/v1beta1"'),
        (workload("PodDisruptionBudget", "v1"),
         'PodDisruptionBudget shop/w: apiVersion: expected "policy/v1" or "policy/v1beta1", got string "v1"'),
        (workload("Service", "v1", {"selector": ["app"]}),
         "Service shop/w: spec.selector: expected a map of strings, got list"),
        (workload("Service", "v1", {"selector": {"app": 1}}),
         "Service shop/w: spec.selector.app: expected a string, got integer 1 (quote it in YAML)"),
        (workload("ReplicationController", "v1", []),
         "ReplicationController shop/w: spec: expected an object, got list"),
        (workload("ReplicaSet", "apps/v1", {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt",
                                                                                "values": ["1"]}]}}),
         'ReplicaSet shop/w: spec.selector.matchExpressions[0].operator: unknown operator "Gt", '
         "expected one of In, NotIn, Exists, DoesNotExist"),
        (workload("StatefulSet", "apps/v1", {"selector": "app=web"}),
         'StatefulSet shop/w: spec.selector: expected an object, got string "app=web"'),
        (workload("PodDisruptionBudget", "policy/v1", {"selector": {"matchLabels": {"a": "b"}}},
                  status={"disruptionsAllowed": -1}),
         "PodDisruptionBudget shop/w: status.disruptionsAllowed: -1 out of range, "
         "expected an integer from 0 to 2147483647"),
        (workload("PodDisruptionBudget", "policy/v1", None, status={"disruptionsAllowed": "1"}),
         "PodDisruptionBudget shop/w: status.disruptionsAllowed: expected an integer, got string \"1\""),
        (workload("PodDisruptionBudget", "policy/v1", None, status={"disruptedPods": ["a"]}),
         "PodDisruptionBudget shop/w: status.disruptedPods: expected an object, got list"),
        ({"kind": "ReplicaSet", "apiVersion": "apps/v1", "metadata": {"namespace": "shop"}},
         "ReplicaSet: metadata.name: required"),
    ],
)
def test_workload_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError) as info:
        object_from_dict(obj, origin="")
    assert str(info.value) == message


def test_workload_from_dict_names_the_kinds_it_reads() -> None:
    with pytest.raises(ModelError) as info:
        workload_from_dict({"kind": "Pod", "metadata": {"name": "p"}})
    assert str(info.value) == (
        "object p: kind: expected one of Service, ReplicationController, ReplicaSet, StatefulSet, "
        'PodDisruptionBudget, got string "Pod"'
    )


WORKLOADS_YAML = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}}
---
apiVersion: apps/v1
kind: ReplicaSetList
items:
- metadata: {name: web-7d, namespace: shop}
  spec: {selector: {matchLabels: {app: web}}}
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {name: db, namespace: shop}
  spec: {selector: {matchLabels: {app: db}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec: {selector: {matchLabels: {app: web}}}
status: {disruptionsAllowed: 2}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec: {selector: {app: legacy}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
"""


def test_load_reads_workloads() -> None:
    loaded = load_objects(WORKLOADS_YAML, "cluster.yaml")
    assert [(type(w).__name__, getattr(w, "kind", ""), w.namespace, w.name) for w in loaded.workloads] == [
        ("SelectorOwner", "Service", "shop", "web"),
        ("SelectorOwner", "ReplicaSet", "shop", "web-7d"),
        ("SelectorOwner", "StatefulSet", "shop", "db"),
        ("PodDisruptionBudget", "", "shop", "web"),  # same name as the Service: another kind
        ("SelectorOwner", "ReplicationController", "default", "legacy"),
    ]
    assert loaded.skipped == ["Deployment shop/web"]
    assert loaded.warnings == ["cluster.yaml: skipped 1 object of kinds scorer does not read: 1 Deployment"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: Service\nmetadata: {name: a}\n---\nkind: Service\nmetadata: {name: a, namespace: default}\n",
            "Service default/a (document 2 of c.yaml): defined twice, first in document 1 of c.yaml",
        ),
        (
            "kind: PodDisruptionBudget\napiVersion: policy/v1beta1\nmetadata: {name: a}\n---\n"
            "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: a}\n",
            "PodDisruptionBudget default/a (document 2 of c.yaml): defined twice, first in document 1 of c.yaml",
        ),
        ("kind: services\nmetadata: {name: a}\n",
         'services a (document 1 of c.yaml): kind: unknown kind "services", did you mean "Service"?'),
        ("kind: replicaset\nmetadata: {name: a}\n",
         'replicaset a (document 1 of c.yaml): kind: unknown kind "replicaset", did you mean "ReplicaSet"?'),
    ],
)
def test_load_workload_errors(text: str, message: str) -> None:
    with pytest.raises(ModelError) as info:
        load_objects(text, "c.yaml")
    assert str(info.value) == message


def test_same_name_in_other_namespaces_or_kinds_is_not_a_duplicate() -> None:
    text = (
        "kind: Service\nmetadata: {name: a, namespace: x}\n---\n"
        "kind: Service\nmetadata: {name: a, namespace: y}\n---\n"
        "kind: ReplicaSet\napiVersion: apps/v1\nmetadata: {name: a, namespace: x}\n"
    )
    assert len(load_objects(text, "c.yaml").workloads) == 3


# --------------------------------------------------------------------------
# What the scheduler cannot parse: node selector terms kube fails, disabled toleration operators


def term_of(key: str, operator: str, *values: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=(NodeSelectorRequirement(key=key, operator=operator, values=values),)
    )


@pytest.mark.parametrize(
    ("term", "error"),
    [
        (term_of("foo", "NotIn", "invalid value: ___@#$%^"),
         'matchExpressions[0]: values: invalid label value "invalid value: ___@#$%^": a valid label must be '
         "an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end "
         "with an alphanumeric character"),
        (term_of("foo", "In", "x" * 64),
         f'matchExpressions[0]: values: invalid label value "{"x" * 64}": must be no more than 63 characters'),
        (term_of("foo", "Gt", "-3"),  # an integer, but not a valid label value
         'matchExpressions[0]: values: invalid label value "-3": a valid label must be an empty string or '
         "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
         "character"),
        (term_of("foo", "Lt", "ten"),
         "matchExpressions[0]: values: for 'Gt', 'Lt' operators, the value must be an integer, got \"ten\""),
        (term_of("foo", "Gt", "1", "2"),
         "matchExpressions[0]: values: for 'Gt', 'Lt' operators, exactly one value is required (operator Gt)"),
        (term_of("bad key!", "Exists"),
         'matchExpressions[0]: key: invalid label key "bad key!": name part must consist of alphanumeric '
         "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
         "(e.g. 'MyName', 'my.name' or '123-abc')"),
        (term_of("foo", "In"),
         "matchExpressions[0]: values: for 'in', 'notin' operators, values set can't be empty (operator In)"),
        (term_of("foo", "Like", "a"), 'matchExpressions[0]: operator: unknown operator "Like"'),
        (term_of("foo", "In", "a", ""), None),  # "" is a valid label value
        (term_of("foo", "Gt", "10"), None),
        (term_of("example.com/foo", "NotIn", "a.b_c-d"), None),
    ],
)
def test_node_selector_term_parse_error(term: NodeSelectorTerm, error: str | None) -> None:
    assert term.parse_error == error


def test_node_selector_term_with_parse_error_matches_no_node() -> None:
    node = Node(name="n", labels={"foo": "bar", "gen": "5"})
    valid = NodeSelectorRequirement(key="gen", operator="Exists")
    assert NodeSelectorTerm(match_expressions=(valid,)).matches(node)
    for bad in (term_of("foo", "NotIn", "not valid"), term_of("gen", "Gt", "x"), term_of("foo", "DoesNotExist", "")):
        # The bad requirement alone would match (NotIn, Gt's label): the whole term fails.
        term = NodeSelectorTerm(match_expressions=(valid, *bad.match_expressions))
        assert term.parse_error is not None
        assert not term.matches(node)
    # Terms are OR-ed: a valid one still matches.
    assert NodeSelector(terms=(term_of("foo", "NotIn", "not valid"), term_of("foo", "In", "bar"))).matches(node)


def test_node_selector_term_parse_error_ignores_match_fields() -> None:
    """matchFields are a field selector: node names longer than a label value are fine."""
    name = "n" * 100
    term = NodeSelectorTerm(
        match_fields=(NodeSelectorRequirement(key="metadata.name", operator="In", values=(name,)),)
    )
    assert term.parse_error is None
    assert term.matches(Node(name=name))


def test_decoded_term_with_invalid_value_is_kept_and_fails() -> None:
    """The API server accepts invalid values and non-integer Gt/Lt values; the term matches nothing."""
    obj = with_value(full_pod(), NA_EXPR, {"key": "zone", "operator": "Gt", "values": ["a"]})
    pod = pod_from_dict(obj)
    assert pod.affinity is not None and pod.affinity.node_affinity is not None
    required = pod.affinity.node_affinity.required
    assert required is not None
    assert required.terms[0].match_expressions[0] == NodeSelectorRequirement(key="zone", operator="Gt", values=("a",))
    assert required.terms[0].parse_error is not None
    assert not required.matches(Node(name="n", labels={"zone": "5"}))


@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_comparison_toleration_operators_tolerate_nothing(operator: str) -> None:
    pod = pod_from_dict({
        "metadata": {"name": "p"},
        "spec": {"tolerations": [{"key": "k", "operator": operator, "value": "1", "effect": "NoSchedule"}]},
    })
    (toleration,) = pod.tolerations
    assert toleration == Toleration(key="k", operator=operator, value="1", effect="NoSchedule")
    for value in ("0", "1", "2", "x"):
        assert not toleration.tolerates(Taint(key="k", value=value, effect="NoSchedule"))


def test_comparison_toleration_operator_still_needs_a_key() -> None:
    with pytest.raises(ModelError, match=r"spec.tolerations\[0\].operator: must be Exists when key is empty"):
        pod_from_dict({"metadata": {"name": "p"}, "spec": {"tolerations": [{"operator": "Gt", "value": "1"}]}})
