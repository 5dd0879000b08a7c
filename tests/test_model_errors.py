"""Tests for scorer.model's bad input: every error names the object and the field, any malformed value
gives ModelError; what the scheduler cannot parse (node selector terms kube fails, disabled toleration
operators).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelkit import (
    MI,
    container,
    node_dict,
    pod_dict,
    sidecar,
)

from scorer.errors import InputError, ModelError
from scorer.model import (
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
    load_objects,
    namespace_from_dict,
    node_from_dict,
    object_from_dict,
    pod_from_dict,
)

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
