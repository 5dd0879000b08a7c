"""The real-Prometheus test kit (tests/promkit.py) against a real Prometheus server."""

from __future__ import annotations

import pytest
import requests
from prometheus_api_client import PrometheusConnect
from promkit import DelayProxy, Exporter, PrometheusServer, free_port

pytestmark = pytest.mark.prometheus


def _by_node(result):
    return {r["metric"]["node"]: r for r in result}


def test_gauges_appear_with_their_labels_and_values(exporter, prometheus):
    exporter.set_gauge("scorer_test_cpu", {"node": "n1", "instance": "n1:9100"}, 0.25)
    exporter.set_gauge("scorer_test_cpu", {"node": "n2", "instance": "n2:9100"}, 0.75)
    exporter.set_gauge("scorer_test_mem", {"node": "n1"}, 1024)

    prometheus.wait_for_scrape()
    assert exporter.scrapes >= 1
    result = prometheus.wait_for_series("scorer_test_cpu", 2)
    got = _by_node(result)
    assert set(got) == {"n1", "n2"}
    # honor_labels: the exporter's instance label is kept as published.
    assert got["n1"]["metric"] == {
        "__name__": "scorer_test_cpu",
        "instance": "n1:9100",
        "job": "exporter",
        "node": "n1",
    }
    assert float(got["n1"]["value"][1]) == 0.25
    assert float(got["n2"]["value"][1]) == 0.75
    (mem,) = prometheus.wait_for_series("scorer_test_mem", 1)
    assert float(mem["value"][1]) == 1024
    # Without an instance label of its own, a series gets the target's.
    assert mem["metric"]["instance"] == exporter.target

    # A changed value shows up after the next scrape.
    exporter.set_gauge("scorer_test_cpu", {"node": "n1", "instance": "n1:9100"}, 0.5)
    prometheus.wait_for_series('scorer_test_cpu{node="n1"} == 0.5', 1, timeout=10)


def test_counter_rate(exporter, prometheus):
    for node in ("n1", "n2"):
        exporter.set_counter_rate("scorer_test_requests", {"node": node}, 1000)
    prometheus.wait_for_series("scorer_test_requests_total", 2)
    # rate() extrapolates only up to ~half a scrape interval past the first/last sample, so it reads
    # low (4 samples in [5s]: ~800) until the window is full: wait for 5 samples.
    prometheus.wait_for_series("count_over_time(scorer_test_requests_total[5s]) >= 5", 2, timeout=15)
    result = prometheus.query("rate(scorer_test_requests_total[5s])")
    rates = {r["metric"]["node"]: float(r["value"][1]) for r in result}
    assert set(rates) == {"n1", "n2"}
    for node, rate in rates.items():
        assert rate == pytest.approx(1000, rel=0.2), node


def test_counter_keeps_its_value_across_rate_changes():
    with Exporter() as exp:
        exp.set_counter_rate("c", {"node": "a"}, 0)
        exp.set_counter_rate("c_total", {"node": "a"}, 1_000_000)
        text = requests.get(exp.url, timeout=5).text
        first = _sample(text, 'c_total{node="a"}')
        exp.set_counter_rate("c", {"node": "a"}, 0)  # frozen at its current value, not reset
        frozen = _sample(requests.get(exp.url, timeout=5).text, 'c_total{node="a"}')
        assert frozen >= first > 0
        assert _sample(requests.get(exp.url, timeout=5).text, 'c_total{node="a"}') == frozen
        assert "# TYPE c_total counter" in text  # prometheus_client's text format names it so
        exp.remove("c_total", {"node": "a"})
        assert 'c_total{node="a"}' not in requests.get(exp.url, timeout=5).text
        exp.set_counter_rate("g", {}, 1)
        with pytest.raises(ValueError):
            exp.set_gauge("g", {}, 1)
        exp.set_gauge("h", {}, 1)
        with pytest.raises(ValueError):
            exp.set_counter_rate("h", {}, 1)


def _sample(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    raise AssertionError(f"{series} not in:\n{text}")


def test_stop_and_restart_on_same_port_and_data(exporter, prometheus):
    exporter.set_gauge("scorer_test_up", {"node": "n1"}, 1)
    prometheus.wait_for_series("scorer_test_up", 1)
    url, port = prometheus.url, prometheus.port

    prometheus.stop()
    assert not prometheus.running
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/api/v1/query", params={"query": "scorer_test_up"}, timeout=2)

    exporter.set_gauge("scorer_test_up", {"node": "n1"}, 2)
    prometheus.start()
    assert prometheus.running
    assert (prometheus.url, prometheus.port) == (url, port)
    # The old sample survived the restart (same data dir); the new value comes from a new scrape.
    assert prometheus.wait_for_series("scorer_test_up", 1)
    (series,) = prometheus.wait_for_series("scorer_test_up == 2", 1)
    assert series["metric"]["node"] == "n1"


def test_delay_proxy(exporter, prometheus):
    exporter.set_gauge("scorer_test_g", {"node": "n1"}, 3)
    prometheus.wait_for_series("scorer_test_g", 1)
    with DelayProxy(prometheus.url, delay_seconds=1.0) as proxy:
        with pytest.raises(requests.Timeout):
            requests.get(f"{proxy.url}/api/v1/query", params={"query": "scorer_test_g"}, timeout=0.3)
        proxy.delay = 0
        resp = requests.get(f"{proxy.url}/api/v1/query", params={"query": "scorer_test_g"}, timeout=5)
        assert resp.status_code == 200
        (series,) = resp.json()["data"]["result"]
        assert float(series["value"][1]) == 3
        # POST with a form body is forwarded too, and errors keep their status.
        resp = requests.post(f"{proxy.url}/api/v1/query", data={"query": "scorer_test_g * 2"}, timeout=5)
        assert float(resp.json()["data"]["result"][0]["value"][1]) == 6
        resp = requests.get(f"{proxy.url}/api/v1/query", params={"query": "sum("}, timeout=5)
        assert resp.status_code == 400
        assert resp.json()["errorType"] == "bad_data"
        assert proxy.requests == 4


def test_delay_proxy_to_a_dead_upstream_answers_502():
    with DelayProxy(f"http://127.0.0.1:{free_port()}") as proxy:
        assert requests.get(f"{proxy.url}/x", timeout=5).status_code == 502


def test_query_api_calls_counts_exactly(exporter, prometheus):
    exporter.set_gauge("scorer_test_g", {"node": "n1"}, 1)
    prometheus.wait_for_series("scorer_test_g", 1)
    before = prometheus.query_api_calls()
    assert prometheus.query_api_calls() == before  # reading /metrics is not a query
    client = PrometheusConnect(url=prometheus.url, disable_ssl=True)
    n = 7
    for _ in range(n):
        assert client.custom_query("scorer_test_g")
    assert prometheus.query_api_calls() == before + n


def test_wait_for_series_times_out_clearly(exporter, prometheus):
    with pytest.raises(TimeoutError, match="nope_not_there"):
        prometheus.wait_for_series("nope_not_there", 1, timeout=0.5)


def test_binary_from_env_missing(monkeypatch):
    from promkit import prometheus_binary

    monkeypatch.setenv("SCORER_PROMETHEUS_BIN", "/nonexistent/prometheus")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="SCORER_PROMETHEUS_BIN"):
        prometheus_binary()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="Prometheus not installed"):
        prometheus_binary()


def test_server_fails_fast_with_log_when_port_taken(prometheus_bin, prometheus, tmp_path):
    with pytest.raises(Exception, match="address already in use"):
        PrometheusServer(prometheus_bin, [], data_dir=tmp_path / "other", port=prometheus.port)
