"""tests/faultproxy.py against the real API server: it forwards, streams, records, and injects its faults."""

from __future__ import annotations

import asyncio
import json
import time

import orjson
import pytest
from faultproxy import status_body, watch_error_line

from scorer.kube.client import ApiClient, ApiUnavailable
from scorer.kube.config import load_kubeconfig

kube = pytest.mark.kube
pytest_plugins = ("faultproxy",)


@pytest.fixture
async def proxied_client(fault_proxy, tmp_path):
    """The proxy's own tests use ConfigMaps, which scorer never touches: their client does not call itself
    scorer, so the RBAC audit (tests/test_k8s_rbac.py: user agents starting with "scorer") leaves it out."""
    kubeconfig = load_kubeconfig(fault_proxy.write_kubeconfig(tmp_path / "kubeconfig"))
    async with ApiClient(kubeconfig, user_agent="faultproxy-test") as client:
        yield client


def make_namespace(control_plane, name: str) -> None:
    status, raw = control_plane.request("POST", "/api/v1/namespaces", json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).encode())
    assert status in (201, 409), raw


def make_configmap(control_plane, namespace: str, name: str) -> dict:
    status, raw = control_plane.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}).encode())
    assert status == 201, raw
    return json.loads(raw)


@kube
async def test_requests_are_forwarded_with_the_token_and_recorded(control_plane, fault_proxy, proxied_client) -> None:
    make_namespace(control_plane, "fp-forward")
    created = await proxied_client.request("POST", "/api/v1/namespaces/fp-forward/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}})
    assert created.status == 201, created.body
    listed = await proxied_client.request("GET", "/api/v1/namespaces/fp-forward/configmaps", params={"limit": "5"})
    assert listed.status == 200
    assert [item["metadata"]["name"] for item in listed.json()["items"]] == ["one"]
    assert [(r.method, r.path, dict(r.query)) for r in fault_proxy.requests] == [
        ("POST", "/api/v1/namespaces/fp-forward/configmaps", {}),
        ("GET", "/api/v1/namespaces/fp-forward/configmaps", {"limit": "5"})]


@kube
async def test_status_faults_answer_instead_of_the_server_for_count_requests(fault_proxy, proxied_client) -> None:
    fault_proxy.add(method="GET", path="^/api/v1/namespaces$", status=500,
                    body=status_body(500, "InternalError", "boom"))
    fault_proxy.add(path="/api/v1/namespaces$", status=429, headers={"Retry-After": "3"}, count=1)
    first = await proxied_client.request("GET", "/api/v1/namespaces")
    second = await proxied_client.request("GET", "/api/v1/namespaces")
    third = await proxied_client.request("GET", "/api/v1/namespaces")
    assert (first.status, first.reason()) == (500, "boom")
    assert (second.status, second.headers["Retry-After"]) == (429, "3")
    assert third.status == 200 and third.json()["kind"] == "NamespaceList"
    assert [f.hits for f in fault_proxy.faults] == [1, 1]


@kube
async def test_reset_delay_and_query_matching(fault_proxy, proxied_client) -> None:
    fault_proxy.add(path="/api/v1/nodes", query="limit=7", reset=True, count=None)
    fault_proxy.add(path="/api/v1/nodes", delay=0.5)
    with pytest.raises(ApiUnavailable, match="nodes"):
        await proxied_client.request("GET", "/api/v1/nodes", params={"limit": "7"})
    with pytest.raises(ApiUnavailable):
        await proxied_client.request("GET", "/api/v1/nodes", params={"limit": "7"})
    started = time.monotonic()
    delayed = await proxied_client.request("GET", "/api/v1/nodes", params={"limit": "8"})
    assert delayed.status == 200
    assert time.monotonic() - started >= 0.5  # the delay is a lower bound, whatever the machine's speed
    # aiohttp sends an idempotent request again once when a reused connection is reset: 2 to 4 resets.
    assert fault_proxy.faults[0].hits >= 2 and fault_proxy.faults[1].hits == 1


@kube
async def test_a_watch_is_streamed_then_dropped_after_k_lines(control_plane, fault_proxy, proxied_client) -> None:
    make_namespace(control_plane, "fp-watch")
    listed = await proxied_client.request("GET", "/api/v1/namespaces/fp-watch/configmaps")
    version = listed.json()["metadata"]["resourceVersion"]
    fault_proxy.add(watch=True, path="/configmaps", drop_after_lines=2)
    params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "20"}
    async with proxied_client.stream("GET", "/api/v1/namespaces/fp-watch/configmaps", params=params,
                             read_timeout=30) as stream:
        assert stream.status == 200
        make_configmap(control_plane, "fp-watch", "a")  # streamed as it happens, not at the end
        first = orjson.loads(await stream.readline())
        make_configmap(control_plane, "fp-watch", "b")
        second = orjson.loads(await stream.readline())
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in (first, second)] == [
            ("ADDED", "a"), ("ADDED", "b")]
        with pytest.raises(ApiUnavailable):
            await stream.readline()  # aborted after two lines: not a clean end of the body
    assert fault_proxy.watches("/configmaps")[0].query["resourceVersion"] == version


@kube
async def test_drop_streams_aborts_the_watches_in_progress(control_plane, fault_proxy, proxied_client) -> None:
    params = {"watch": "1", "timeoutSeconds": "20"}
    async with proxied_client.stream("GET", "/api/v1/namespaces/fp-drop/configmaps", params=params,
                             read_timeout=30) as stream:
        assert stream.status == 200
        for _ in range(100):  # the handler registers its stream right after sending the headers
            if fault_proxy.drop_streams():
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("no stream to drop")
        with pytest.raises(ApiUnavailable):
            await stream.readline()


@kube
async def test_rewrite_changes_list_bodies_and_watch_events(control_plane, fault_proxy, proxied_client) -> None:
    make_namespace(control_plane, "fp-rewrite")
    created = make_configmap(control_plane, "fp-rewrite", "orig")

    def rename(doc: dict) -> dict:
        for obj in doc.get("items", []) + ([doc["object"]] if "object" in doc else []):
            obj["metadata"]["name"] = "renamed-" + obj["metadata"]["name"]
        return doc

    fault_proxy.add(path="/fp-rewrite/configmaps", rewrite=rename, count=2)
    listed = await proxied_client.request("GET", "/api/v1/namespaces/fp-rewrite/configmaps")
    assert [i["metadata"]["name"] for i in listed.json()["items"]] == ["renamed-orig"]
    params = {"watch": "1", "resourceVersion": created["metadata"]["resourceVersion"], "timeoutSeconds": "20"}
    async with proxied_client.stream("GET", "/api/v1/namespaces/fp-rewrite/configmaps", params=params,
                             read_timeout=30) as stream:
        make_configmap(control_plane, "fp-rewrite", "next")
        event = orjson.loads(await stream.readline())
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "renamed-next")


@kube
async def test_a_status_200_with_lines_is_a_watch_stream(fault_proxy, proxied_client) -> None:
    fault_proxy.add(watch=True, status=200, body=watch_error_line(410, "Expired", "too old resource version: 1 (9)"))
    async with proxied_client.stream("GET", "/api/v1/pods", params={"watch": "1", "resourceVersion": "1"}) as stream:
        event = orjson.loads(await stream.readline())
        assert await stream.readline() == b""
    assert (event["type"], event["object"]["code"], event["object"]["reason"]) == ("ERROR", 410, "Expired")


@kube
async def test_a_silent_stream_times_out(fault_proxy, proxied_client) -> None:
    params = {"watch": "1", "timeoutSeconds": "20"}
    async with proxied_client.stream("GET", "/api/v1/namespaces/fp-silent/configmaps", params=params,
                                     read_timeout=0.3) as stream:
        assert stream.status == 200
        with pytest.raises(ApiUnavailable, match="timed out|Timeout"):
            await stream.readline()  # no event: nothing to read within 0.3 s
