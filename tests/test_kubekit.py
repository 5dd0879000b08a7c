"""The test kit's real control plane: objects, binding and its conflict, as the scheduler will use them."""

from __future__ import annotations

import json
import time

import orjson
import pytest
from kubekit import PV_BINDER_USER, SCORER_USER, ControllerManager, ControlPlane, parse_audit_log

from scorer.kube.client import ApiClient
from scorer.kube.config import load_kubeconfig

kube = pytest.mark.kube


def node(name: str) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                       "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                  "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}).encode()


def pod(name: str) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "pause"}]}}).encode()


@kube
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


@kube
def test_the_kubeconfig_names_the_server_and_the_token(control_plane) -> None:
    text = control_plane.kubeconfig.read_text()
    assert control_plane.url in text and "token:" in text


@kube
async def test_rbac_is_enforced_for_the_scorer_identity_and_not_for_the_admin(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig_for("scorer")), user_agent="kit-rbac") as client:
        assert (await client.request("GET", "/api/v1/namespaces/kube-system/secrets")).status == 403
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig_for("admin")), user_agent="kit-rbac") as client:
        assert (await client.request("GET", "/api/v1/namespaces/kube-system/secrets")).status == 200
    with pytest.raises(ValueError, match="unknown identity"):
        control_plane.kubeconfig_for("nobody")


@kube
async def test_the_audit_log_says_who_did_what_and_the_answer(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig_for("scorer")), user_agent="kit-audit") as client:
        await client.request("GET", "/api/v1/namespaces/default/configmaps")
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig), user_agent="kit-audit") as client:
        await client.request("PATCH", "/api/v1/namespaces/default/pods/kit-absent/status", body={},
                             content_type="application/merge-patch+json")
        await client.request("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kit-absent")
    mine = [r for r in control_plane.audited_requests() if r.user_agent == "kit-audit"]
    assert [(r.user, r.verb, r.api_group, r.resource, r.subresource, r.namespace, r.name, r.code, r.denied)
            for r in mine] == [
        (SCORER_USER, "list", "", "configmaps", "", "default", "", 403, True),
        ("scorer-test", "patch", "", "pods", "status", "default", "kit-absent", 404, False),
        ("scorer-test", "get", "coordination.k8s.io", "leases", "", "kube-system", "kit-absent", 404, False)]
    assert set(mine[0].groups) >= {"system:serviceaccounts", "system:serviceaccounts:scorer-system"}
    assert "system:masters" in mine[1].groups


def test_an_audited_watch_is_one_request_with_its_last_stage() -> None:
    def event(stage: str, code: int | None) -> bytes:
        return orjson.dumps({
            "auditID": "a1", "stage": stage, "verb": "watch", "userAgent": "scorer/0.1.0", "requestURI": "/api/v1/pods",
            "user": {"username": "u", "groups": ["g"]}, "objectRef": {"resource": "pods", "apiVersion": "v1"},
            **({"responseStatus": {"code": code}} if code else {}),
            "annotations": {"authorization.k8s.io/decision": "allow"}})

    log = b"\n".join([event("ResponseStarted", 200), event("ResponseComplete", 200)]).decode()
    [watch] = parse_audit_log(log + "\n")
    assert (watch.verb, watch.api_group, watch.resource, watch.code, watch.decision, watch.denied) == (
        "watch", "", "pods", 200, "allow", False)


@kube
def test_a_control_plane_can_run_without_the_audit_log(tmp_path) -> None:
    with_audit, without = ControlPlane(tmp_path), ControlPlane(tmp_path, audit=False)
    assert any(arg.startswith("--audit-log-path=") for arg in with_audit.apiserver_argv(1))
    assert not any(arg.startswith("--audit") for arg in without.apiserver_argv(1))
    with pytest.raises(RuntimeError, match="audit=False"):
        without.audited_requests()


@kube
def test_the_controller_manager_binds_a_claim_to_a_matching_volume_as_its_own_service_account(
        control_plane, tmp_path) -> None:
    """kube-controller-manager with the PersistentVolume controller alone: a claim and a volume that
    match are bound both ways within seconds (the controller resyncs every second), by the controller's
    service account, and the controller is gone after stop()."""
    volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "kit-pv"},
              "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                       "storageClassName": "kit-manual", "hostPath": {"path": "/tmp/kit-pv"}}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "kit-claim", "namespace": "default"},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "kit-manual",
                      "resources": {"requests": {"storage": "1Gi"}}}}
    manager = ControllerManager(control_plane, tmp_path)
    assert "--controllers=persistentvolume-binder" in manager.argv() and "--leader-elect=false" in manager.argv()
    with manager:
        assert control_plane.request("POST", "/api/v1/persistentvolumes", json.dumps(volume).encode())[0] == 201
        assert control_plane.request("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
                                     json.dumps(claim).encode())[0] == 201
        deadline = time.monotonic() + 30
        while True:
            _, body = control_plane.request("GET", "/api/v1/namespaces/default/persistentvolumeclaims/kit-claim")
            bound = json.loads(body)
            if bound["status"].get("phase") == "Bound" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (bound["status"].get("phase"), bound["spec"].get("volumeName")) == ("Bound", "kit-pv"), (
            manager.log_tail())
        process = manager.process
    assert manager.process is None and process is not None and process.poll() is not None
    writes = [r for r in control_plane.audited_requests() if r.user == PV_BINDER_USER and r.verb in ("update", "patch")]
    assert {(r.resource, r.name) for r in writes} >= {("persistentvolumes", "kit-pv"),
                                                      ("persistentvolumeclaims", "kit-claim")}
    assert not [r for r in writes if r.denied]
    for path in ("/api/v1/namespaces/default/persistentvolumeclaims/kit-claim", "/api/v1/persistentvolumes/kit-pv"):
        control_plane.request("DELETE", path)
        control_plane.request("PATCH", path, b'{"metadata": {"finalizers": null}}', "application/merge-patch+json")
