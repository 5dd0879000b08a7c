"""Builders of API dicts for the tests of scorer.model (test_model_*.py)."""

from __future__ import annotations

from typing import Any

from scorer.model import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    Node,
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
