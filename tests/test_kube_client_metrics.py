"""client-go's request metrics in ``ApiClient``: ``rest_client_requests_total{code,method,host}`` and
``rest_client_request_duration_seconds{verb,url}``, with the URL templates kube-scheduler 1.20.2 prints
(its own scrape's ``url`` values) and what a request costs to count."""

from __future__ import annotations

import time

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from scorer.kube.client import ApiClient, ApiUnavailable, RestClientMetrics, url_template
from scorer.kube.config import ClusterAccess
from scorer.metrics import exponential_buckets


@pytest.mark.parametrize(("path", "params", "template"), [
    ("/api/v1/namespaces/shop/pods/web-0/binding", None,
     "/api/v1/namespaces/%7Bnamespace%7D/pods/%7Bname%7D/binding"),
    ("/api/v1/namespaces/shop/events", None, "/api/v1/namespaces/%7Bnamespace%7D/events"),
    ("/apis/events.k8s.io/v1/namespaces/shop/events", None, "/apis/events.k8s.io/v1/namespaces/%7Bnamespace%7D/events"),
    ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/scorer", None,
     "/apis/coordination.k8s.io/v1/namespaces/%7Bnamespace%7D/leases/%7Bname%7D"),
    ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", None,
     "/apis/coordination.k8s.io/v1/namespaces/%7Bnamespace%7D/leases"),
    ("/api/v1/pods", {"limit": "500", "fieldSelector": "status.phase!=Succeeded", "resourceVersion": "0"},
     "/api/v1/pods?fieldSelector=%7Bvalue%7D&limit=%7Bvalue%7D&resourceVersion=%7Bvalue%7D"),
    ("/apis/storage.k8s.io/v1/csinodes", {"limit": "500"}, "/apis/storage.k8s.io/v1/csinodes?limit=%7Bvalue%7D"),
    ("/api/v1/namespaces/shop/pods/web-0/status", None, "/api/v1/namespaces/%7Bnamespace%7D/pods/%7Bname%7D/status"),
    ("/api/v1/namespaces/shop/pods/web-0", None, "/api/v1/namespaces/%7Bnamespace%7D/pods/%7Bname%7D"),
    ("/api/v1/nodes/n1", None, "/api/v1/nodes/%7Bname%7D"),
    ("/api/v1/namespaces/shop/status", None, "/api/v1/namespaces/%7Bname%7D/status"),
    ("/apis/events.k8s.io/v1", None, "/apis/events.k8s.io/v1"),
    ("/healthz", None, "/%7Bprefix%7D"),
])
def test_url_templates_are_client_gos(path, params, template) -> None:
    assert url_template(path, params) == template


def test_the_duration_buckets_are_client_gos() -> None:
    assert exponential_buckets(0.001, 2, 10) == (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256,
                                                  0.512)


async def test_requests_are_counted_by_code_method_and_host_and_timed_by_verb_and_url(aiohttp_server) -> None:
    async def binding(request: web.Request) -> web.Response:
        return web.json_response({}, status=201 if request.match_info["name"] != "gone" else 404)

    async def watch(request: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{namespace}/pods/{name}/binding", binding)
    app.router.add_get("/api/v1/pods", watch)
    server = await aiohttp_server(app)
    registry = CollectorRegistry()
    metrics = RestClientMetrics(registry)
    host = f"127.0.0.1:{server.port}"
    async with ApiClient(ClusterAccess(server=f"http://{host}", source="test"), metrics=metrics) as client:
        for name in ("a", "b", "gone"):
            await client.request("POST", f"/api/v1/namespaces/ns/pods/{name}/binding", body={})
        async with client.stream("GET", "/api/v1/pods", params={"watch": "1"}) as stream:
            await stream.read()
    count = registry.get_sample_value
    assert count("rest_client_requests_total", {"code": "201", "method": "POST", "host": host}) == 2
    assert count("rest_client_requests_total", {"code": "404", "method": "POST", "host": host}) == 1
    assert count("rest_client_requests_total", {"code": "200", "method": "GET", "host": host}) == 1  # the watch
    url = f"http://{host}/api/v1/namespaces/%7Bnamespace%7D/pods/%7Bname%7D/binding"
    assert count("rest_client_request_duration_seconds_count", {"verb": "POST", "url": url}) == 3
    assert count("rest_client_request_duration_seconds_bucket", {"verb": "POST", "url": url, "le": "0.512"}) == 3
    # A watch is counted, not timed (client-go's Watch records no latency).
    watches = [s for m in registry.collect() for s in m.samples
               if s.name == "rest_client_request_duration_seconds_count" and "watch" in s.labels["url"]]
    assert watches == []


async def test_a_request_without_an_answer_is_counted_as_error() -> None:
    registry = CollectorRegistry()
    async with ApiClient(ClusterAccess(server="http://127.0.0.1:9", source="test"),
                         metrics=RestClientMetrics(registry)) as client:
        with pytest.raises(ApiUnavailable):
            await client.request("GET", "/api/v1/nodes")
    assert registry.get_sample_value("rest_client_requests_total",
                                     {"code": "<error>", "method": "GET", "host": "127.0.0.1:9"}) == 1
    assert registry.get_sample_value("rest_client_request_duration_seconds_count",
                                     {"verb": "GET", "url": "http://127.0.0.1:9/api/v1/nodes"}) == 1


def test_counting_a_request_costs_a_few_microseconds() -> None:
    """What ApiClient.request adds per request: the template, a counter and a histogram (the per-pod
    path sends a binding and an Event per pod)."""
    metrics = RestClientMetrics(CollectorRegistry())
    server, host = "https://10.0.0.1:6443", "10.0.0.1:6443"
    rounds = 20000
    start = time.perf_counter()
    for i in range(rounds):
        path = f"/api/v1/namespaces/ns/pods/pod-{i}/binding"
        metrics.count("201", "POST", host)
        metrics.observe("POST", server + url_template(path), 0.003)
    per_request = (time.perf_counter() - start) / rounds
    assert per_request < 50e-6, f"{per_request * 1e6:.1f} µs per request"
