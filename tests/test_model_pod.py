"""Tests for scorer.model's pods: request math, pod-level resources, host ports, full pod parsing, preemption fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from modelkit import (
    GI,
    MI,
    NZ_CPU,
    NZ_MEM,
    container,
    pod_dict,
    sidecar,
)

from scorer.errors import ModelError
from scorer.model import (
    Affinity,
    Container,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerReference,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    PreferredSchedulingTerm,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
    aggregate_container_requests,
    load_objects,
    pod_from_dict,
    pod_update_from_dict,
)

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


def _bound(obj: dict[str, Any], node: str = "n1", version: str = "8") -> dict[str, Any]:
    """``obj`` as kube-apiserver returns it once bound: nodeName set in its place, a PodScheduled
    condition, a new resourceVersion."""
    spec = {**{k: v for k, v in obj["spec"].items() if k != "priority"}, "nodeName": node,
            "priority": obj["spec"]["priority"]}
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}, "spec": spec,
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}}


def _pending() -> dict[str, Any]:
    ports = [{"containerPort": 80, "hostPort": 8080}]
    obj = pod_dict(containers=[container(requests={"cpu": "250m", "memory": "64Mi"}, ports=ports)],
                   tolerations=[{"key": "k", "operator": "Exists"}], schedulerName="default-scheduler", priority=7)
    obj["metadata"].update(uid="u1", resourceVersion="5", labels={"app": "web"}, annotations={"a": "b"},
                           creationTimestamp="2026-01-02T03:04:05Z")
    obj["status"] = {"phase": "Pending"}
    return obj


def test_a_binding_is_applied_to_the_pending_pod_as_a_full_decode_would() -> None:
    pending = pod_from_dict(_pending())
    bound = _bound(_pending())
    updated = pod_update_from_dict(pending, bound)
    full = pod_from_dict(bound)
    assert updated is not None
    assert updated == full and updated.node_name == "n1" and updated.resource_version == "8"
    assert (updated.requests, updated.non_zero_cpu, updated.non_zero_memory, updated.host_ports) == (
        full.requests, full.non_zero_cpu, full.non_zero_memory, full.host_ports)
    assert pending.bind_digest and not updated.bind_digest and not full.bind_digest
    # A status change of a pending pod (its nominated node) keeps the digest for its binding.
    nominated = {**_pending(), "status": {"phase": "Pending", "nominatedNodeName": "n2"}}
    again = pod_update_from_dict(pending, nominated)
    assert again == pod_from_dict(nominated) and again is not None and again.bind_digest == pending.bind_digest


@pytest.mark.parametrize(
    "change",
    [
        lambda obj: obj["metadata"].update(labels={"app": "db"}),
        lambda obj: obj["metadata"].update(annotations={}),
        lambda obj: obj["metadata"].update(uid="u2"),
        lambda obj: obj["metadata"].update(deletionTimestamp="2026-01-02T03:04:06Z"),
        lambda obj: obj["spec"].update(tolerations=[]),
        lambda obj: obj["spec"]["containers"][0]["resources"]["requests"].update(cpu="1"),
        lambda obj: obj.update(status={"phase": 3}),  # malformed: the full decode names it
        lambda obj: obj.update(spec=None),
    ],
)
def test_any_other_change_is_left_to_the_full_decode(change: Callable[[dict[str, Any]], None]) -> None:
    pending = pod_from_dict(_pending())
    bound = _bound(_pending())
    change(bound)
    assert pod_update_from_dict(pending, bound) is None


def test_pods_built_or_decoded_bound_carry_no_digest() -> None:
    bound = pod_from_dict(_bound(_pending()))
    assert pod_update_from_dict(bound, _bound(_pending(), node="n2", version="9")) is None
    assert pod_update_from_dict(Pod(name="web", uid="u1"), _bound(_pending())) is None
