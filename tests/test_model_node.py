"""Tests for scorer.model's nodes and namespaces."""

from __future__ import annotations

from typing import Any

import pytest
from modelkit import (
    GI,
    node_dict,
    pod_dict,
)

from scorer.errors import ModelError
from scorer.model import (
    ContainerImage,
    Namespace,
    Node,
    Pod,
    Taint,
    namespace_from_dict,
    node_from_dict,
    object_from_dict,
)

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
