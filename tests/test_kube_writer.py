"""scorer.kube.client and scorer.kube.writer against the real API server (tests/kubekit.py)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from prometheus_client import CollectorRegistry

from scorer.cluster.interface import BindConflict, ClusterWriter, EventSink
from scorer.kube.client import ApiClient, ApiResponse, ApiUnavailable
from scorer.kube.config import load_kubeconfig
from scorer.kube.writer import ApiWriter, EventLimits
from scorer.model import Pod, pod_from_dict

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


# --- aggregation, rate limits, nominatedNodeName, bounded memory ----------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def events_of(control_plane, pod_name: str, group: str = "events.k8s.io") -> list[dict[str, Any]]:
    path = ("/apis/events.k8s.io/v1/namespaces/default/events" if group == "events.k8s.io"
            else "/api/v1/namespaces/default/events")
    status, raw = control_plane.request("GET", path)
    assert status == 200, raw
    key = "regarding" if group == "events.k8s.io" else "involvedObject"
    return [e for e in json.loads(raw)["items"] if e[key]["name"] == pod_name]


def counts(collector_registry: CollectorRegistry) -> dict[str, float | None]:
    return {result: collector_registry.get_sample_value("scorer_events_total", {"result": result})
            for result in ("written", "aggregated", "dropped", "failed")}


def unschedulable(writer: ApiWriter, pod: Pod, note: str = "0/3 nodes are available: 3 Insufficient cpu."):
    return writer.write_event(pod, "Warning", "FailedScheduling", "Scheduling", note)


@kube
async def test_identical_events_become_one_event_with_a_series(control_plane) -> None:
    clock, collector_registry = Clock(), CollectorRegistry()
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client, collector_registry=collector_registry, clock=clock)
        pod = Pod(namespace="default", name="w-series", uid="u-series")
        await unschedulable(writer, pod)
        clock.now += 1
        await unschedulable(writer, pod)  # first repeat: the series is written at once
        [event] = events_of(control_plane, "w-series")
        assert event["series"]["count"] == 2
        clock.now += 1
        sent = client.requests
        await unschedulable(writer, pod)  # within series_interval of the last patch: nothing sent
        assert client.requests == sent and events_of(control_plane, "w-series")[0]["series"]["count"] == 2
        clock.now += 61
        await unschedulable(writer, pod)  # a minute on: patched, with every repeat counted
        [event] = events_of(control_plane, "w-series")
        assert event["series"]["count"] == 4 and event["note"] == "0/3 nodes are available: 3 Insufficient cpu."
        await unschedulable(writer, pod)
        assert await writer.flush_series() == 1 and await writer.flush_series() == 0
        assert events_of(control_plane, "w-series")[0]["series"]["count"] == 5
        await unschedulable(writer, pod, "0/4 nodes are available: 4 Insufficient cpu.")  # another note: new Event
        clock.now += 601  # the window after the last occurrence passed: the next one is a new Event
        await unschedulable(writer, pod)
        notes = sorted(e["note"] for e in events_of(control_plane, "w-series"))
        assert notes == ["0/3 nodes are available: 3 Insufficient cpu.", "0/3 nodes are available: 3 Insufficient cpu.",
                         "0/4 nodes are available: 4 Insufficient cpu."]
        assert counts(collector_registry) == {"written": 3, "aggregated": 4, "dropped": 0, "failed": 0}


@kube
async def test_a_series_whose_event_is_gone_starts_a_new_event(control_plane) -> None:
    clock = Clock()
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client, clock=clock)
        pod = Pod(namespace="default", name="w-expired", uid="u")
        await unschedulable(writer, pod)
        [event] = events_of(control_plane, "w-expired")
        status, raw = control_plane.request(  # as the API server's event TTL would
            "DELETE", f"/apis/events.k8s.io/v1/namespaces/default/events/{event['metadata']['name']}")
        assert status == 200, raw
        await unschedulable(writer, pod)  # its series patch finds nothing: this one is a new Event
        [again] = events_of(control_plane, "w-expired")
        assert again["metadata"]["name"] != event["metadata"]["name"] and "series" not in again


@kube
async def test_the_core_v1_fallback_aggregates_with_count(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client, clock=Clock())
        writer._events_v1 = False  # as on a server without events.k8s.io (the fallback itself is tested above)
        pod = Pod(namespace="default", name="w-core-series", uid="u")
        for _ in range(3):
            await unschedulable(writer, pod)
        assert await writer.flush_series() == 1
        [event] = events_of(control_plane, "w-core-series", group="core")
        assert event["count"] == 3


@kube
async def test_new_events_beyond_the_global_and_per_pod_limits_are_dropped_and_counted(control_plane) -> None:
    clock, collector_registry = Clock(), CollectorRegistry()
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client, collector_registry=collector_registry, clock=clock,
                           limits=EventLimits(qps=1.0, burst=3, per_object_burst=2, per_object_refill_seconds=300))
        pods = [Pod(namespace="default", name=f"w-limit-{i}", uid=f"u{i}") for i in range(4)]
        for pod in pods:
            await unschedulable(writer, pod)  # 3 pass the global burst, the 4th is dropped
        assert [len(events_of(control_plane, p.name)) for p in pods] == [1, 1, 1, 0]
        clock.now += 1  # one more token a second
        await unschedulable(writer, pods[0], "another note")
        await unschedulable(writer, pods[1], "another note")
        assert [len(events_of(control_plane, p.name)) for p in pods] == [2, 1, 1, 0]
        clock.now += 10
        await unschedulable(writer, pods[0], "a third note")  # pod 0 spent its own burst of 2
        await unschedulable(writer, pods[3])
        assert [len(events_of(control_plane, p.name)) for p in pods] == [2, 1, 1, 1]
        clock.now += 300  # one token of its own back every 5 minutes
        await unschedulable(writer, pods[0], "a third note")
        assert len(events_of(control_plane, pods[0].name)) == 3
        assert counts(collector_registry) == {"written": 6, "aggregated": 0, "dropped": 3, "failed": 0}


@kube
async def test_a_failed_event_is_counted_and_raised(control_plane) -> None:
    collector_registry = CollectorRegistry()
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client, collector_registry=collector_registry)
        with pytest.raises(ApiUnavailable, match="Event FailedScheduling"):
            await unschedulable(writer, Pod(namespace="no-such-namespace", name="p", uid="u"))
        assert counts(collector_registry)["failed"] == 1


def pod_status(control_plane, name: str) -> dict[str, Any]:
    status, raw = control_plane.request("GET", f"/api/v1/namespaces/default/pods/{name}")
    assert status == 200, raw
    return dict(json.loads(raw)["status"])


@kube
async def test_nominated_node_name_is_set_and_cleared_with_the_condition(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client)
        assert isinstance(writer, EventSink)
        pod = new_pod(control_plane, "w-nominated")
        message = "0/1 nodes are available: 1 Insufficient cpu."
        await writer.write_pod_condition(pod, "False", "Unschedulable", message, nominated_node="n1")
        status = pod_status(control_plane, "w-nominated")
        assert status["nominatedNodeName"] == "n1"
        assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
            ("PodScheduled", "False", "Unschedulable")]
        sent = client.requests
        await writer.write_pod_condition(pod, "False", "Unschedulable", message, nominated_node="n1")
        assert client.requests == sent  # nothing changed: nothing sent
        await writer.write_pod_condition(pod, "False", "Unschedulable", message, nominated_node="n2")
        assert client.requests == sent + 1 and pod_status(control_plane, "w-nominated")["nominatedNodeName"] == "n2"
        # None leaves the nomination as it is (kube's updatePod with no nominated node).
        await writer.write_pod_condition(pod, "False", "Unschedulable", "other")
        assert pod_status(control_plane, "w-nominated")["nominatedNodeName"] == "n2"
        await writer.write_pod_condition(pod, "False", "Unschedulable", message, nominated_node="")  # cleared
        status = pod_status(control_plane, "w-nominated")
        assert "nominatedNodeName" not in status and status["conditions"][0]["message"] == message
        # A writer that did not set it (another replica, a restart) clears what the pod was read with.
        await ApiWriter(client).write_pod_condition(pod, "False", "Unschedulable", message, nominated_node="n3")
        read = pod_from_dict(json.loads(control_plane.request("GET", "/api/v1/namespaces/default/pods/w-nominated")[1]))
        assert read.nominated_node_name == "n3"
        await ApiWriter(client).write_pod_condition(read, "False", "Unschedulable", "changed", nominated_node="")
        assert "nominatedNodeName" not in pod_status(control_plane, "w-nominated")
        await ApiWriter(client).write_pod_condition(read, "False", "Unschedulable", message, nominated_node="n4")
        await ApiWriter(client).clear_nominated_node(attrs.evolve(read, nominated_node_name="n4"))
        assert "nominatedNodeName" not in pod_status(control_plane, "w-nominated")


@kube
async def test_what_the_writer_remembers_is_bounded_and_forgotten(control_plane, node_name) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client, max_pods=2, limits=EventLimits(max_series=2))
        pods = [new_pod(control_plane, f"w-bounded-{i}") for i in range(3)]
        for pod in pods:
            await writer.write_pod_condition(pod, "False", "Unschedulable", "x")
        sent = client.requests
        await writer.write_pod_condition(pods[2], "False", "Unschedulable", "x")  # remembered
        assert client.requests == sent
        await writer.write_pod_condition(pods[0], "False", "Unschedulable", "x")  # the least recent: evicted
        assert client.requests == sent + 1
        writer.forget(pods[0].key)
        await writer.write_pod_condition(pods[0], "False", "Unschedulable", "x")  # forgotten: written again
        assert client.requests == sent + 2
        # Series: the least recent is dropped beyond max_series, so its repeat is a new Event.
        for pod in pods:
            await unschedulable(writer, pod)
        await unschedulable(writer, pods[0])
        await unschedulable(writer, pods[2])
        assert [len(events_of(control_plane, p.name)) for p in pods] == [2, 1, 1]
        # A pod this writer bound keeps its condition; once forgotten (deleted, re-created) it does not.
        await writer.bind(pods[1], node_name)
        sent = client.requests
        await writer.write_pod_condition(pods[1], "False", "Unschedulable", "late")
        assert client.requests == sent
        writer.forget(pods[1].key)
        await writer.write_pod_condition(pods[1], "False", "Unschedulable", "late")
        assert client.requests == sent + 1


@kube
async def test_delete_pod_matches_the_uid_and_accepts_a_pod_already_gone(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client)
        assert isinstance(writer, ClusterWriter)
        pod = new_pod(control_plane, "w-victim")
        await writer.delete_pod(attrs.evolve(pod, uid="another-uid"))  # 409: a re-created pod is left alone
        status, _ = control_plane.request("GET", "/api/v1/namespaces/default/pods/w-victim")
        assert status == 200
        await writer.delete_pod(pod)  # unbound: no kubelet to wait for, it is gone at once
        status, _ = control_plane.request("GET", "/api/v1/namespaces/default/pods/w-victim")
        assert status == 404
        await writer.delete_pod(pod)  # 404: already gone, fine


# --- VolumeBinding's writes: PersistentVolumes and PersistentVolumeClaims ---------------------------------


def volume_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"team": "storage"}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "w-local",
                     "hostPath": {"path": "/tmp/" + name}}}


def claim_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "w-local",
                     "resources": {"requests": {"storage": "1Gi"}}}}


@kube
async def test_a_volume_gets_its_claim_ref_and_annotations_and_a_stale_write_conflicts(control_plane) -> None:
    from scorer.cluster.interface import UpdateConflict, VolumeWriter
    from scorer.model import ClaimRef, storage_from_dict

    pv = storage_from_dict(create(control_plane, "PV", "/api/v1/persistentvolumes", volume_manifest("w-pv")))
    pvc = storage_from_dict(create(control_plane, "PVC", "/api/v1/namespaces/default/persistentvolumeclaims",
                                   claim_manifest("w-claim")))
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        writer = ApiWriter(client)
        assert isinstance(writer, VolumeWriter)
        claimed = attrs.evolve(pv, claim_ref=ClaimRef(namespace="default", name="w-claim", uid=pvc.uid,
                                                      resource_version=pvc.resource_version),
                               annotations={**pv.annotations, "pv.kubernetes.io/bound-by-controller": "yes"})
        stored = await writer.update_persistent_volume(claimed)
        assert stored.claim_ref == claimed.claim_ref
        assert stored.annotations == {"team": "storage", "pv.kubernetes.io/bound-by-controller": "yes"}
        assert int(stored.resource_version) > int(pv.resource_version)
        status, raw = control_plane.request("GET", "/api/v1/persistentvolumes/w-pv")
        claim_ref = json.loads(raw)["spec"]["claimRef"]
        assert claim_ref == {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                             "name": "w-claim", "uid": pvc.uid, "resourceVersion": pvc.resource_version}
        # The same write again carries the old resourceVersion: the server refuses it, nothing changes.
        with pytest.raises(UpdateConflict, match="409"):
            await writer.update_persistent_volume(attrs.evolve(claimed, annotations={"other": "x"}))
        status, raw = control_plane.request("GET", "/api/v1/persistentvolumes/w-pv")
        assert "other" not in json.loads(raw)["metadata"]["annotations"]
        with pytest.raises(UpdateConflict, match="404"):
            await writer.update_persistent_volume(attrs.evolve(claimed, name="w-pv-gone"))

        selected = attrs.evolve(pvc, annotations={"volume.kubernetes.io/selected-node": "node-2"})
        stored_claim = await writer.update_persistent_volume_claim(selected)
        assert stored_claim.selected_node == "node-2" and stored_claim.key == "default/w-claim"
        with pytest.raises(UpdateConflict, match="409"):
            await writer.update_persistent_volume_claim(selected)  # stale now
    for path in ("/api/v1/persistentvolumes/w-pv", "/api/v1/namespaces/default/persistentvolumeclaims/w-claim"):
        control_plane.request("DELETE", path)  # then the protection finalizers, which no controller drops here
        control_plane.request("PATCH", path, b'{"metadata": {"finalizers": null}}', "application/merge-patch+json")


class _Scripted:
    """A client that answers every request with one response and records what it was sent."""

    def __init__(self, response: ApiResponse) -> None:
        self.response = response
        self.sent: list[tuple[str, str, Any, str]] = []

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = "application/json",
                      **kwargs: object) -> ApiResponse:
        self.sent.append((method, path, body, content_type))
        return self.response


async def test_volume_writes_are_merge_patches_with_the_resource_version_and_failures_are_retryable() -> None:
    from scorer.model import ClaimRef, PersistentVolume, PersistentVolumeClaim

    pv = PersistentVolume(name="pv", resource_version="7", annotations={"a": "b"},
                          claim_ref=ClaimRef(namespace="ns", name="c", uid="u", resource_version="3"))
    answer = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv", "resourceVersion": "8"},
              "spec": {}}
    client = _Scripted(ApiResponse(200, json.dumps(answer).encode()))
    stored = await ApiWriter(client).update_persistent_volume(pv)  # type: ignore[arg-type]
    assert stored.resource_version == "8"
    assert client.sent == [("PATCH", "/api/v1/persistentvolumes/pv", {
        "metadata": {"resourceVersion": "7", "annotations": {"a": "b"}},
        "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns", "name": "c",
                              "uid": "u", "resourceVersion": "3"}}}, "application/merge-patch+json")]
    pvc = PersistentVolumeClaim(namespace="ns", name="c", resource_version="3", annotations={"x": "y"})
    for status in (500, 429):
        client = _Scripted(ApiResponse(status, b'{"message": "busy"}'))
        with pytest.raises(ApiUnavailable, match=f"PersistentVolumeClaim ns/c: HTTP {status}: busy"):
            await ApiWriter(client).update_persistent_volume_claim(pvc)  # type: ignore[arg-type]
        assert client.sent == [("PATCH", "/api/v1/namespaces/ns/persistentvolumeclaims/c",
                                {"metadata": {"resourceVersion": "3", "annotations": {"x": "y"}}},
                                "application/merge-patch+json")]


# --- bounded per-pod memory under churn (no API server: a scripted client) -------------------------------


def churn_pod(i: int) -> Pod:
    return Pod(namespace="churn", name=f"p{i}", uid=f"u{i}")


async def test_event_series_and_buckets_are_capped_like_client_gos_lru() -> None:
    client = _Scripted(ApiResponse(201, b"{}"))
    writer = ApiWriter(client)  # type: ignore[arg-type]
    assert EventLimits().max_series == 4_096
    for i in range(5_000):
        await writer.write_event(churn_pod(i), "Normal", "Scheduled", "Binding", f"assigned churn/p{i} to n")
    assert writer.remembered() == {"conditions": 0, "bound": 0, "series": 4_096, "series_pods": 4_096,
                                   "buckets": 4_096}
    # The least recently seen went first: a repeat of pod 0's Event is a new Event, pod 4999's is aggregated.
    sent = len(client.sent)
    await writer.write_event(churn_pod(4_999), "Normal", "Scheduled", "Binding", "assigned churn/p4999 to n")
    await writer.write_event(churn_pod(0), "Normal", "Scheduled", "Binding", "assigned churn/p0 to n")
    assert [method for method, *_ in client.sent[sent:]] == ["PATCH", "POST"]


async def test_forget_drops_everything_of_a_deleted_pod_its_series_included() -> None:
    client = _Scripted(ApiResponse(201, b"{}"))
    writer = ApiWriter(client)  # type: ignore[arg-type]
    pods = [churn_pod(i) for i in range(3)]
    for pod in pods:
        await writer.write_pod_condition(pod, "False", "Unschedulable", "0/3 nodes are available")
        await unschedulable(writer, pod)
        await unschedulable(writer, pod, "another note")
    await writer.bind(pods[2], "n")  # bound: its condition is never written again, so not kept
    assert writer.remembered() == {"conditions": 2, "bound": 1, "series": 6, "series_pods": 3, "buckets": 3}
    for pod in pods:
        writer.forget(pod.key)
    assert writer.remembered() == {"conditions": 0, "bound": 0, "series": 0, "series_pods": 0, "buckets": 0}
    writer.forget("churn/unknown")  # a pod never written about: nothing to do
    # A series that expires or whose Event is gone leaves no index entry behind either.
    clock = Clock()
    writer = ApiWriter(_Scripted(ApiResponse(201, b"{}")), clock=clock)  # type: ignore[arg-type]
    await unschedulable(writer, pods[0])
    clock.now += EventLimits().window
    await unschedulable(writer, pods[1])
    assert writer.remembered()["series"] == 1 and writer.remembered()["series_pods"] == 1
