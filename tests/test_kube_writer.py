"""scorer.kube.client and scorer.kube.writer against the real API server (tests/kubekit.py)."""

from __future__ import annotations

import json

import pytest

from scorer.cluster.interface import BindConflict, ClusterWriter
from scorer.kube.client import ApiClient, ApiResponse, ApiUnavailable
from scorer.kube.config import load_kubeconfig
from scorer.kube.writer import ApiWriter
from scorer.model import pod_from_dict

kube = pytest.mark.kube


def create(control_plane, kind: str, path: str, body: dict) -> dict:
    status, raw = control_plane.request("POST", path, json.dumps(body).encode())
    assert status == 201, raw
    return json.loads(raw)


def new_pod(control_plane, name: str):
    created = create(control_plane, "Pod", "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    return pod_from_dict(created)


@pytest.fixture
def node_name(control_plane, request) -> str:
    name = f"w-{request.node.name[-40:].lower().replace('_', '-')}"
    create(control_plane, "Node", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                                    "status": {"allocatable": {"cpu": "4", "pods": "110"}}})
    return name


@kube
async def test_bind_succeeds_once_and_conflicts_are_final(control_plane, node_name) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client)
        assert isinstance(writer, ClusterWriter)
        pod = new_pod(control_plane, "w-bind")
        await writer.bind(pod, node_name)
        status, raw = control_plane.request("GET", "/api/v1/namespaces/default/pods/w-bind")
        assert json.loads(raw)["spec"]["nodeName"] == node_name
        with pytest.raises(BindConflict, match="409"):
            await writer.bind(pod, node_name)  # already bound
        # (kube-apiserver 1.20 does not check the binding's UID yet; newer servers answer 409 to a stale one.)
        with pytest.raises(BindConflict, match="404"):
            await writer.bind(pod.__class__(namespace="default", name="w-gone", uid="x"), node_name)


@kube
async def test_events_and_the_condition_are_written_once(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client, controller="my-scheduler")
        pod = new_pod(control_plane, "w-events")
        message = "0/1 nodes are available: 1 Insufficient cpu."
        await writer.write_event(pod, "Warning", "FailedScheduling", "Scheduling", message)
        status, raw = control_plane.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events")
        events = [e for e in json.loads(raw)["items"] if e["regarding"]["name"] == "w-events"]
        assert [(e["reason"], e["note"], e["type"], e["reportingController"]) for e in events] == [
            ("FailedScheduling", message, "Warning", "my-scheduler")]
        await writer.write_pod_condition(pod, "False", "Unschedulable", message)
        sent = client.requests
        await writer.write_pod_condition(pod, "False", "Unschedulable", message)  # unchanged: not sent again
        assert client.requests == sent
        status, raw = control_plane.request("GET", "/api/v1/namespaces/default/pods/w-events")
        conditions = json.loads(raw)["status"]["conditions"]
        assert [(c["type"], c["status"], c["reason"], c["message"]) for c in conditions] == [
            ("PodScheduled", "False", "Unschedulable", message)]


@kube
async def test_a_condition_for_a_deleted_pod_is_dropped_quietly(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        pod = new_pod(control_plane, "w-deleted")
        control_plane.request("DELETE", "/api/v1/namespaces/default/pods/w-deleted")
        await ApiWriter(client).write_pod_condition(pod, "False", "Unschedulable", "x")  # no error


@kube
async def test_an_unreachable_server_is_api_unavailable(control_plane, tmp_path) -> None:
    text = control_plane.kubeconfig.read_text().replace(control_plane.url, "https://127.0.0.1:9")
    (tmp_path / "kubeconfig").write_text(text)
    async with ApiClient(load_kubeconfig(tmp_path / "kubeconfig"), timeout=5) as client:
        with pytest.raises(ApiUnavailable, match="127.0.0.1:9"):
            await client.request("GET", "/api/v1/nodes")


class _NoEventsGroup:
    """A client whose server does not serve events.k8s.io (as before 1.19): 404 there, 201 elsewhere."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **kwargs: object) -> ApiResponse:
        self.paths.append(path)
        return ApiResponse(404 if path.startswith("/apis/events.k8s.io/") else 201, b"{}")


async def test_events_fall_back_to_core_v1_when_the_events_group_is_not_served() -> None:
    client = _NoEventsGroup()
    writer = ApiWriter(client)  # type: ignore[arg-type]
    pod = pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    await writer.write_event(pod, "Normal", "Scheduled", "Binding", "Successfully assigned ns/p to n")
    await writer.write_event(pod, "Normal", "Scheduled", "Binding", "again")
    assert client.paths == ["/apis/events.k8s.io/v1/namespaces/ns/events", "/api/v1/namespaces/ns/events",
                            "/api/v1/namespaces/ns/events"]  # the group is asked once, then core v1 only
