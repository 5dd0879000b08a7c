"""The test kit's real control plane: objects, binding and its conflict, as the scheduler will use them."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.kube


def node(name: str) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                       "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                  "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}).encode()


def pod(name: str) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "pause"}]}}).encode()


def test_a_pending_pod_is_bound_once_through_the_binding_subresource(control_plane) -> None:
    status, _ = control_plane.request("POST", "/api/v1/nodes", node("kit-n1"))
    assert status == 201
    status, body = control_plane.request("POST", "/api/v1/namespaces/default/pods", pod("kit-p1"))
    assert status == 201
    created = json.loads(body)
    assert "nodeName" not in created["spec"]  # no scheduler in the control plane: it stays pending
    binding = json.dumps({"apiVersion": "v1", "kind": "Binding",
                          "metadata": {"name": "kit-p1", "namespace": "default", "uid": created["metadata"]["uid"]},
                          "target": {"kind": "Node", "name": "kit-n1"}}).encode()
    status, _ = control_plane.request("POST", "/api/v1/namespaces/default/pods/kit-p1/binding", binding)
    assert status == 201
    status, body = control_plane.request("GET", "/api/v1/namespaces/default/pods/kit-p1")
    assert status == 200 and json.loads(body)["spec"]["nodeName"] == "kit-n1"
    status, body = control_plane.request("POST", "/api/v1/namespaces/default/pods/kit-p1/binding", binding)
    assert status == 409, body  # already bound: the conflict the binder must treat as final


def test_the_kubeconfig_names_the_server_and_the_token(control_plane) -> None:
    text = control_plane.kubeconfig.read_text()
    assert control_plane.url in text and "token:" in text
