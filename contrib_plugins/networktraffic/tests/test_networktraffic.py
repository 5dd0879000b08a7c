"""NetworkTraffic: seed normalization, data policies (missing, stale, warm-up, fail open, failed
fetches), in-flight placements, a burst of identical pods, args and PromQL, source sharing, README.

Every expected number below is worked out by hand from the seed formula
``100 - floor(traffic * 100 / max)`` (comments show the arithmetic).
"""

from __future__ import annotations

import asyncio
import collections
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import requests
import scorer_networktraffic
import yaml
from scorer_networktraffic import NAME, NetworkTraffic, NetworkTrafficArgs
from scorer_networktraffic.plugin import MAX_RAW_SCORE, METRICS, factory, normalize

from scorer import testing
from scorer.plugin import ClusterEvent, Code, CycleState, NodeBatch, SourceHub
from scorer.testing import make_cache, make_handle, make_node, make_pod, make_source_hub, run_plugin

README = Path(__file__).resolve().parents[1] / "README.md"
METRIC = "network_receive_bytes_per_second"
NOW = 1_000_000.0  # make_source_hub's fixed clock
NODES = [make_node(n) for n in ("a", "b", "c", "d")]
ABC = NODES[:3]
STALE_REASON = "node(s) had stale network_receive_bytes_per_second metrics (older than 90s)"
MISSING_REASON = "node(s) had no network_receive_bytes_per_second metrics"
AUTO_BY = "node, kubernetes_node, nodename, instance"


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def args_from(data: dict | None) -> NetworkTrafficArgs:
    """Args as the configuration converts them (camelCase keys, validated)."""
    return testing.structure(NetworkTrafficArgs, data, "args", kind="NetworkTrafficArgs")


def build(values: dict, args: dict | None = None, clock=None) -> tuple[NetworkTraffic, SourceHub]:
    hub = make_source_hub({METRIC: values}, clock=clock)
    return NetworkTraffic(args_from(args), make_handle(hub)), hub


def registry():
    return testing.build_registry(autoload=False, modules=[scorer_networktraffic])


def config(*profiles: dict, api: str = "v1") -> dict:
    return {"apiVersion": f"kubescheduler.config.k8s.io/{api}", "kind": "KubeSchedulerConfiguration",
            "profiles": list(profiles)}


def profile(args: dict | None = None, name: str = "default-scheduler") -> dict:
    """NetworkTraffic as the only score plugin (the default filters stay)."""
    out: dict = {"schedulerName": name,
                 "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": NAME}]}}}
    if args is not None:
        out["pluginConfig"] = [{"name": NAME, "args": args}]
    return out


# -- normalization and data policies ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "args", "raw", "scores"),
    [
        pytest.param(  # max 1000: 100-10, 100-25, 100-100, 100-floor(33.3)
            {"a": 100, "b": 250, "c": 1000, "d": 333}, None,
            {"a": 100, "b": 250, "c": 1000, "d": 333}, {"a": 90, "b": 75, "c": 0, "d": 67}, id="seed-formula"),
        pytest.param(  # raw rounded; max 2469: floor(49.996)=49 -> 51, floor(50.004)=50 -> 50, floor(0.016)=0
            {"a": 1234.4, "b": 1234.6, "c": 0.4, "d": 2469.0}, None,
            {"a": 1234, "b": 1235, "c": 0, "d": 2469}, {"a": 51, "b": 50, "c": 100, "d": 0}, id="raw-rounded"),
        pytest.param(
            {"a": 0, "b": 0, "c": 0, "d": 0}, None,
            {"a": 0, "b": 0, "c": 0, "d": 0}, {"a": 100, "b": 100, "c": 100, "d": 100}, id="all-zero"),
        pytest.param(  # zero traffic is a value; no value is not zero
            {"a": 0, "b": 0, "c": None}, None,
            {"a": 0, "b": 0, "c": -1, "d": -1}, {"a": 100, "b": 100, "c": 50, "d": 50}, id="all-zero-and-missing"),
        pytest.param(  # max 400: 100-25, 0; c null, d not listed
            {"a": 100, "b": 400, "c": None}, None,
            {"a": 100, "b": 400, "c": -1, "d": -1}, {"a": 75, "b": 0, "c": 50, "d": 50}, id="missing-neutral"),
        pytest.param(
            {"a": 100, "b": 400, "c": None}, {"policy": {"onMissing": "min"}},
            {"a": 100, "b": 400, "c": -1, "d": -1}, {"a": 75, "b": 0, "c": 0, "d": 0}, id="missing-min"),
        pytest.param(
            {"a": 100, "b": 400, "c": None}, {"policy": {"onMissing": "max"}},
            {"a": 100, "b": 400, "c": -1, "d": -1}, {"a": 75, "b": 0, "c": 100, "d": 100}, id="missing-max"),
        pytest.param(  # default maxAge 3 x 30s = 90s: age 91 is stale, age 90 is not (300 -> 100-75)
            {"a": 100, "b": 400, "c": (300, 91), "d": (300, 90)}, None,
            {"a": 100, "b": 400, "c": -1, "d": 300}, {"a": 75, "b": 0, "c": 50, "d": 25}, id="stale-default-maxAge"),
        pytest.param(
            {"a": 100, "b": 400, "c": (300, 91), "d": (300, 90)}, {"policy": {"onMissing": "min"}},
            {"a": 100, "b": 400, "c": -1, "d": 300}, {"a": 75, "b": 0, "c": 0, "d": 25}, id="stale-min"),
        pytest.param(
            {"a": 100, "b": 400, "c": (300, 91), "d": (300, 90)}, {"policy": {"onMissing": "max"}},
            {"a": 100, "b": 400, "c": -1, "d": 300}, {"a": 75, "b": 0, "c": 100, "d": 25}, id="stale-max"),
        pytest.param(  # a stale value does not set the max: max 400 among fresh a, c, d
            {"a": 100, "b": (10_000, 91), "c": 300, "d": 400}, None,
            {"a": 100, "b": -1, "c": 300, "d": 400}, {"a": 75, "b": 50, "c": 25, "d": 0}, id="stale-not-in-max"),
        pytest.param(  # refreshInterval 10s -> maxAge 30s
            {"a": 100, "b": 400, "c": (300, 31), "d": (300, 30)}, {"source": {"refreshInterval": "10s"}},
            {"a": 100, "b": 400, "c": -1, "d": 300}, {"a": 75, "b": 0, "c": 50, "d": 25}, id="maxAge-from-refresh"),
        pytest.param(
            {"a": 100, "b": 400, "c": (300, 91), "d": (300, 301)}, {"policy": {"maxAge": "5m"}},
            {"a": 100, "b": 400, "c": 300, "d": -1}, {"a": 75, "b": 0, "c": 25, "d": 50}, id="explicit-maxAge"),
        pytest.param(  # no node has fresh data: fail open to neutral whatever onMissing says
            {"a": (100, 91), "b": (400, 120), "c": None}, {"policy": {"onMissing": "min"}},
            {"a": -1, "b": -1, "c": -1, "d": -1}, {"a": 50, "b": 50, "c": 50, "d": 50}, id="all-stale-fail-open"),
        pytest.param(
            {}, {"policy": {"onMissing": "max"}},
            {"a": -1, "b": -1, "c": -1, "d": -1}, {"a": 50, "b": 50, "c": 50, "d": 50}, id="no-data-fail-open"),
    ],
)
def test_normalization_and_policy(values, args, raw, scores):
    plugin, _ = build(values, args)
    result = run_plugin(plugin, make_pod("p"), NODES)
    assert result.error is None
    assert result.feasible == ["a", "b", "c", "d"]
    assert result.raw_scores == raw
    assert result.scores == scores


def test_metric_absent_from_snapshot_warns_and_fails_open():
    # direction transmit reads network_transmit_bytes_per_second; the snapshot only has receive
    plugin, hub = build({"a": 100, "b": 400}, {"direction": "transmit", "policy": {"onMissing": "min"}})
    assert hub.warnings == [f"{NAME}: the metrics snapshot (test snapshot) has no metric "
                            "'network_transmit_bytes_per_second'; every node has no data for it"]
    result = run_plugin(plugin, make_pod("p"), NODES)
    assert result.raw_scores == {"a": -1, "b": -1, "c": -1, "d": -1}
    assert result.scores == {"a": 50, "b": 50, "c": 50, "d": 50}


@pytest.mark.parametrize(
    ("values", "args", "feasible", "rejected", "scores"),
    [
        pytest.param(  # only a is fresh: it is the max, so it scores 0 (the seed formula)
            {"a": 100, "b": (400, 91), "c": None}, {"policy": {"onMissing": "filter"}},
            ["a"], {"b": STALE_REASON, "c": MISSING_REASON, "d": MISSING_REASON}, {"a": 0}, id="filter"),
        pytest.param(
            {"a": 100, "b": 400, "c": (300, 90), "d": (50, 91)}, {"policy": {"onMissing": "filter"}},
            ["a", "b", "c"], {"d": STALE_REASON}, {"a": 75, "b": 0, "c": 25}, id="filter-boundary"),
        pytest.param(
            {"a": 100, "b": (400, 31)},
            {"policy": {"onMissing": "filter"}, "source": {"refreshInterval": "10s"}},
            ["a"], {"b": "node(s) had stale network_receive_bytes_per_second metrics (older than 30s)",
                    "c": MISSING_REASON, "d": MISSING_REASON}, {"a": 0}, id="filter-reason-names-maxAge"),
        pytest.param(  # all stale: fail open, nothing rejected, neutral scores
            {"a": (100, 91), "b": (400, 120), "c": None}, {"policy": {"onMissing": "filter"}},
            ["a", "b", "c", "d"], {}, {"a": 50, "b": 50, "c": 50, "d": 50}, id="filter-all-stale-fails-open"),
        pytest.param(
            {}, {"policy": {"onMissing": "filter"}},
            ["a", "b", "c", "d"], {}, {"a": 50, "b": 50, "c": 50, "d": 50}, id="filter-no-data-fails-open"),
        pytest.param(
            {"a": 100, "b": (400, 91), "c": None}, None,
            ["a", "b", "c", "d"], {}, {"a": 0, "b": 50, "c": 50, "d": 50}, id="neutral-does-not-filter"),
    ],
)
def test_filter(values, args, feasible, rejected, scores):
    plugin, _ = build(values, args)
    result = run_plugin(plugin, make_pod("p"), NODES)
    assert result.error is None
    assert result.feasible == feasible
    got = {n: s for n, s in result.filter.items() if not s.is_success()}
    assert {n: s.reasons for n, s in got.items()} == {n: (r,) for n, r in rejected.items()}
    assert all(s.code == Code.UNSCHEDULABLE and s.plugin == NAME for s in got.values())
    assert result.scores == scores


# -- extreme values --------------------------------------------------------------------------------

BIG = 1.7e308  # near the float maximum (1.797e308): a broken exporter, or a query gone wrong


@pytest.mark.parametrize(
    ("values", "args", "placements", "raw", "scores"),
    [
        pytest.param(  # 1e308 / 1.7e308 = 0.588 -> 100 - 58; the small values keep their 100
            {"a": 1e308, "b": BIG, "c": 100, "d": 0}, None, [],
            {"a": MAX_RAW_SCORE, "b": MAX_RAW_SCORE, "c": 100, "d": 0}, {"a": 42, "b": 0, "c": 100, "d": 100},
            id="near-float-max"),
        # auto estimate (1e308 + 1.7e308 + 100) / (0 pods + 4 nodes) = 6.75e307 per pod: a 3.025e308 would
        # overflow unscaled; b 1.7 / 3.025 = 0.562 -> 44, c 0.675 / 3.025 = 0.223 -> 78
        pytest.param(
            {"a": 1e308, "b": BIG, "c": 100, "d": 0}, None, [("a", 0), ("a", 0), ("a", 0), ("c", 0)],
            {"a": MAX_RAW_SCORE, "b": MAX_RAW_SCORE, "c": MAX_RAW_SCORE, "d": 0},
            {"a": 0, "b": 44, "c": 78, "d": 100}, id="near-float-max-in-flight"),
        pytest.param(
            {"a": 1e300, "b": 1e300, "c": 1e-300, "d": 5e-324}, {"podTrafficEstimate": 1e12}, [("d", 0)],
            {"a": MAX_RAW_SCORE, "b": MAX_RAW_SCORE, "c": 0, "d": 1_000_000_000_000},
            {"a": 0, "b": 0, "c": 100, "d": 100}, id="tiny-and-huge"),
        pytest.param(  # a negative rate (a custom query) scores as no traffic
            {"a": -BIG, "b": 400, "c": 100, "d": 0}, None, [],
            {"a": -MAX_RAW_SCORE, "b": 400, "c": 100, "d": 0}, {"a": 100, "b": 0, "c": 75, "d": 100},
            id="negative"),
    ],
)
def test_extreme_values_never_overflow(values, args, placements, raw, scores):
    plugin, hub = build(values, args)
    for i, (node, age) in enumerate(placements):
        hub.in_flight.placed(make_pod(f"placed-{i}"), node, at=hub.clock() - age)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        result = run_plugin(plugin, make_pod("p"), NODES)
    assert result.error is None
    assert result.raw_scores == raw
    assert result.scores == scores


def test_normalize_takes_infinite_and_nan_traffic():
    traffic = np.array([np.inf, 1e308, 1.0, np.nan, -np.inf])
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        scores = normalize(traffic, np.array([True, True, True, True, True]))
    assert scores.tolist() == [0, 45, 100, 100, 100]  # inf counts as 1.797e308: 1e308 / 1.797e308 = 0.556


# -- a real PrometheusSource: warm-up, failed fetches, empty results --------------------------------


class FakePrometheus:
    """Stands in for prometheus-api-client: answers (or raises) in order, records the PromQL."""

    def __init__(self) -> None:
        self.answers: list = []
        self.queries: list[str] = []

    def custom_query(self, query: str):
        self.queries.append(query)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def series(node: str, value: float, ts: float) -> dict:
    return {"metric": {"node": node}, "value": [ts, str(value)]}


def test_prometheus_source_warm_up_failures_and_stale(monkeypatch):
    clock = Clock()
    hub = SourceHub(lambda: ABC, clock=clock)
    plugin = NetworkTraffic(args_from({"address": "http://prom.test:9090", "policy": {"onMissing": "filter"}}),
                            make_handle(hub))
    fake = FakePrometheus()
    monkeypatch.setattr(plugin.source, "_connect", lambda: fake)

    def step(answer=None):
        if answer is not None:
            fake.answers.append(answer)
            asyncio.run(hub.refresh_all())
        result = run_plugin(plugin, make_pod("p"), ABC)
        assert result.error is None
        rejected = {n: s.reasons[0] for n, s in result.filter.items() if not s.is_success()}
        return result.feasible, rejected, result.raw_scores, result.scores

    everyone = ["a", "b", "c"]
    neutral = {"a": 50, "b": 50, "c": 50}
    no_data = {"a": -1, "b": -1, "c": -1}
    # Warming up (no fetch yet): fail open, nothing rejected.
    assert step() == (everyone, {}, no_data, neutral)
    assert hub.readiness()[0] is False

    assert step([series("a", 100, NOW), series("b", 400, NOW)]) == (
        ["a", "b"], {"c": MISSING_REASON}, {"a": 100, "b": 400}, {"a": 75, "b": 0})
    assert fake.queries == [f'sum by ({AUTO_BY}) (rate(node_network_receive_bytes_total{{device=~"eth0"}}[60s]))']

    # A failed fetch keeps the values with their sample time: still fresh at age 30.
    clock.now = NOW + 30
    assert step(requests.exceptions.ConnectionError("refused")) == (
        ["a", "b"], {"c": MISSING_REASON}, {"a": 100, "b": 400}, {"a": 75, "b": 0})
    assert plugin.source.data.last_error_kind == "connection"
    # An empty result is a failure too, not zero traffic.
    clock.now = NOW + 60
    assert step([]) == (["a", "b"], {"c": MISSING_REASON}, {"a": 100, "b": 400}, {"a": 75, "b": 0})
    assert plugin.source.data.last_error_kind == "empty_result"
    assert plugin.source.data.values == {"a": 100.0, "b": 400.0}

    # Past maxAge (90s) every value is stale: fail open rather than reject the whole cluster.
    clock.now = NOW + 91
    assert step(requests.exceptions.Timeout("slow")) == (everyone, {}, no_data, neutral)
    assert plugin.source.data.last_error_kind == "timeout"

    # A success that returns only a: a fresh, b keeps its old sample (stale), c never had one.
    clock.now = NOW + 100
    assert step([series("a", 200, NOW + 100)]) == (
        ["a"], {"b": STALE_REASON, "c": MISSING_REASON}, {"a": 200}, {"a": 0})
    assert plugin.source.data.sample_times == {"a": NOW + 100, "b": NOW}


# -- in-flight placements --------------------------------------------------------------------------


ABC_VALUES = {"a": 100, "b": 300, "c": 400}  # auto estimate, no pods: 800 / (0 pods + 3 nodes) = 266.67


@pytest.mark.parametrize(
    ("values", "args", "placements", "bound", "raw", "scores"),
    [
        pytest.param(ABC_VALUES, None, [], [],
                     {"a": 100, "b": 300, "c": 400}, {"a": 75, "b": 25, "c": 0}, id="none"),
        pytest.param(  # a = 100 + 266.67 = 366.67; floor(91.67) = 91 -> 9
            ABC_VALUES, None, [("a", 0)], [],
            {"a": 367, "b": 300, "c": 400}, {"a": 9, "b": 25, "c": 0}, id="auto-estimate"),
        pytest.param(  # assumed pods are also in the cache: 800 / (1 pod + 3 nodes) = 200 -> a = 300
            ABC_VALUES, None, [("a", 0)], ["a"],
            {"a": 300, "b": 300, "c": 400}, {"a": 25, "b": 25, "c": 0}, id="auto-estimate-counts-pods"),
        pytest.param(  # a = 633.33 is the max: b floor(47.37) -> 53, c floor(63.16) -> 37
            ABC_VALUES, None, [("a", 0), ("a", 0)], [],
            {"a": 633, "b": 300, "c": 400}, {"a": 0, "b": 53, "c": 37}, id="two-pods"),
        pytest.param(  # b = 1300: a floor(7.69) -> 93, c floor(30.77) -> 70
            ABC_VALUES, {"podTrafficEstimate": 1000}, [("b", 0)], [],
            {"a": 100, "b": 1300, "c": 400}, {"a": 93, "b": 0, "c": 70}, id="podTrafficEstimate"),
        pytest.param(ABC_VALUES, {"podTrafficEstimate": 0}, [("a", 0)], [],
                     {"a": 100, "b": 300, "c": 400}, {"a": 75, "b": 25, "c": 0}, id="podTrafficEstimate-zero"),
        pytest.param(ABC_VALUES, None, [("a", 59)], [],
                     {"a": 367, "b": 300, "c": 400}, {"a": 9, "b": 25, "c": 0}, id="placed-59s-before-sample"),
        pytest.param(  # the sample was taken settleTime (60s) after the placement: it shows the pod
            ABC_VALUES, None, [("a", 60)], [],
            {"a": 100, "b": 300, "c": 400}, {"a": 75, "b": 25, "c": 0}, id="settled-at-60s"),
        pytest.param(ABC_VALUES, None, [("a", 61)], [],
                     {"a": 100, "b": 300, "c": 400}, {"a": 75, "b": 25, "c": 0}, id="settled-at-61s"),
        pytest.param(  # sample 30s old: a placement 89s ago is not in it yet, one 90s ago is
            {"a": (100, 30), "b": 300, "c": 400}, None, [("a", 89)], [],
            {"a": 367, "b": 300, "c": 400}, {"a": 9, "b": 25, "c": 0}, id="old-sample-89s"),
        pytest.param({"a": (100, 30), "b": 300, "c": 400}, None, [("a", 90)], [],
                     {"a": 100, "b": 300, "c": 400}, {"a": 75, "b": 25, "c": 0}, id="old-sample-90s"),
        # ttl: the sample (60s old) is not settled, yet a placement older than ttl no longer counts
        pytest.param({**ABC_VALUES, "a": (100, 60)}, {"policy": {"inFlight": {"settleTime": "5m", "ttl": "5m"}}},
                     [("a", 299)], [], {"a": 367, "b": 300, "c": 400}, {"a": 9, "b": 25, "c": 0}, id="within-ttl"),
        pytest.param({**ABC_VALUES, "a": (100, 60)}, {"policy": {"inFlight": {"settleTime": "5m", "ttl": "5m"}}},
                     [("a", 301)], [], {"a": 100, "b": 300, "c": 400}, {"a": 75, "b": 25, "c": 0}, id="past-ttl"),
        pytest.param(ABC_VALUES, {"policy": {"inFlight": {"enabled": False}}}, [("a", 0), ("a", 0)], [],
                     {"a": 100, "b": 300, "c": 400}, {"a": 75, "b": 25, "c": 0}, id="disabled"),
        pytest.param(ABC_VALUES, None, [("zz", 0)], [],
                     {"a": 100, "b": 300, "c": 400}, {"a": 75, "b": 25, "c": 0}, id="other-node"),
        pytest.param(  # stale d is left out of the estimate (800 / 3) and scores neutral
            {**ABC_VALUES, "d": (5000, 91)}, None, [("a", 0), ("d", 0)], [],
            {"a": 367, "b": 300, "c": 400, "d": -1}, {"a": 9, "b": 25, "c": 0, "d": 50}, id="stale-node"),
    ],
)
def test_in_flight(values, args, placements, bound, raw, scores):
    plugin, hub = build(values, args)
    for i, (node, age) in enumerate(placements):
        hub.in_flight.placed(make_pod(f"placed-{i}"), node, at=hub.clock() - age)
    nodes = NODES if "d" in values else ABC
    pods = [make_pod(f"placed-{i}", node_name=n) for i, n in enumerate(bound)]
    result = run_plugin(plugin, make_pod("p"), nodes, pods=pods)
    assert result.error is None
    assert result.raw_scores == raw
    assert result.scores == scores


def test_the_auto_estimate_is_over_every_fresh_node_and_kept_until_the_next_reading():
    # a 100, b 300, c 400, d 1200: the estimate is (100 + 300 + 400 + 1200) / (0 pods + 4 nodes) = 500,
    # from every fresh node of the cluster, also when only a and b are scored (c and d filtered out)
    plugin, hub = build({**ABC_VALUES, "d": 1200})
    cache = make_cache(NODES)
    table = cache.table
    scored = NodeBatch(table, np.array([table.index["a"], table.index["b"]]))
    hub.in_flight.placed(make_pod("placed-0"), "a", at=hub.clock())
    assert plugin.score_batch(CycleState(), make_pod("p"), scored).tolist() == [600, 300]
    # two pods bound on b since the reading was first read: still 500 (their traffic is not in it yet)
    for i in range(2):
        cache.add_pod(make_pod(f"bound-{i}", node_name="b"))
    assert plugin.score_batch(CycleState(), make_pod("p"), scored).tolist() == [600, 300]
    # a new node layout is read anew: (100 + 300 + 400 + 1200) / (2 pods + 4 nodes) = 333.33
    cache.add_node(make_node("e"))
    every = NodeBatch(cache.table, cache.table.rows())
    assert plugin.score_batch(CycleState(), make_pod("p"), every).tolist() == [433, 300, 400, 1200, -1]


def test_repeated_placements_spread():
    # estimate 266.67 per pod; each pick goes to the best node, which then carries the estimate:
    # 1: a 75, b 25, c 0 -> a (366.67)   2: a 9, b 25, c 0 -> b (566.67)
    # 3: a 36, b 0, c 30 -> a (633.33)   4: a 0, b 11, c 37 -> c (666.67)
    plugin, hub = build(ABC_VALUES)
    picks = []
    for i in range(4):
        scores = run_plugin(plugin, make_pod(f"p{i}"), ABC).scores
        best = max(scores, key=scores.get)
        assert list(scores.values()).count(scores[best]) == 1
        picks.append(best)
        hub.in_flight.placed(make_pod(f"p{i}"), best, at=hub.clock())
    assert picks == ["a", "b", "a", "c"]


# -- a burst through the whole scheduler -----------------------------------------------------------


def burst(values: list[float], args: dict | None = None, cfg: dict | None = None, in_file: bool = False,
          scheduler: str | None = None):
    nodes = [make_node(f"n{i}") for i in range(len(values))]
    pods = [make_pod(f"p{i:03d}", scheduler_name=scheduler) for i in range(100)]
    metrics = {METRIC: {n.name: v for n, v in zip(nodes, values, strict=True)}}
    if in_file:  # a MetricsSnapshot document in the cluster file
        doc = {"apiVersion": "scorer.dev/v1alpha1", "kind": "MetricsSnapshot", "metrics": metrics}
        report = testing.simulate(testing.LoadedObjects(pods=pods, nodes=nodes, others=[doc]),
                                  cfg or config(profile(args)), registry=registry(), autoload=False)
    else:
        snapshot = testing.MetricsSnapshot({METRIC: {n: (v, 0.0) for n, v in metrics[METRIC].items()}})
        report = testing.simulate(testing.LoadedObjects(pods=pods, nodes=nodes), cfg or config(profile(args)),
                                  registry=registry(), autoload=False, metrics_snapshot=snapshot)
    assert report.errors == 0 and report.unschedulable == 0 and report.placed == 100
    counts = collections.Counter(p.node for p in report.placements)
    return [counts.get(f"n{i}", 0) for i in range(len(values))]


def test_burst_spreads_over_equal_nodes():
    # Equal traffic: every placement raises the chosen node, so the nodes take turns.
    assert burst([5e6] * 10) == [10] * 10


def test_burst_spreads_inversely_to_traffic():
    counts = burst([(i + 1) * 1e6 for i in range(10)])  # 1 MB/s .. 10 MB/s
    assert sum(counts) == 100
    assert min(counts) >= 1 and max(counts) <= 20
    assert counts == sorted(counts, reverse=True)  # quieter nodes take more pods


def test_burst_without_in_flight_piles_onto_the_quietest_node():
    # What the seed did: the metric does not move within the burst, so one node takes all.
    assert burst([(i + 1) * 1e6 for i in range(10)], {"policy": {"inFlight": {"enabled": False}}}) == [100] + [0] * 9


def test_seed_v1beta1_config_and_snapshot_in_cluster_file():
    # The seed article's configuration, unchanged; the snapshot replaces its Prometheus.
    seed = {
        "schedulerName": "custom-scheduler",
        "plugins": {"score": {"enabled": [{"name": NAME}], "disabled": [{"name": "*"}]}},
        "pluginConfig": [{"name": NAME, "args": {"ip": "http://10.0.0.4:9090", "deviceName": "eth0",
                                                 "timeRange": 60}}],
    }
    assert burst([5e6] * 10, cfg=config(seed, api="v1beta1"), in_file=True, scheduler="custom-scheduler") == [10] * 10


# -- args, PromQL, errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "url", "device", "window"),
    [
        ({"ip": "http://10.0.0.4:9090", "deviceName": "eth0", "timeRange": 60}, "http://10.0.0.4:9090", "eth0", 60),
        ({"prometheusAddress": "http://prometheus.monitoring:9090", "networkInterface": "ens192",
          "timeRangeInMinutes": 3}, "http://prometheus.monitoring:9090", "ens192", 180),
        ({"address": "https://prom.example/prometheus/", "timeRange": "90s"}, "https://prom.example/prometheus/",
         "eth0", 90),
        ({"timeRange": "2m"}, "", "eth0", 120),
        ({}, "", "eth0", 60),
    ],
)
def test_args_aliases(args, url, device, window):
    parsed = args_from(args)
    assert (parsed.prometheus_url, parsed.device, parsed.window.total_seconds()) == (url, device, window)


RX = 'rate(node_network_receive_bytes_total{device=~"eth0"}[60s])'
TX = 'rate(node_network_transmit_bytes_total{device=~"eth0"}[60s])'
UNAME = " * on(instance) group_left(nodename) max by (instance, nodename) (node_uname_info)"


@pytest.mark.parametrize(
    ("args", "metric", "promql"),
    [
        ({}, METRIC, f"sum by ({AUTO_BY}) ({RX})"),
        ({"direction": "transmit"}, "network_transmit_bytes_per_second", f"sum by ({AUTO_BY}) ({TX})"),
        ({"direction": "both"}, "network_bytes_per_second", f"sum by ({AUTO_BY}) ({RX} + {TX})"),
        ({"source": {"nodeMapping": {"by": "label"}}}, METRIC, f"sum by (node) ({RX})"),
        ({"source": {"nodeMapping": {"by": "label", "label": "kubernetes_node"}}}, METRIC,
         f"sum by (kubernetes_node) ({RX})"),
        ({"source": {"nodeMapping": {"by": "instance"}}}, METRIC, f"sum by (instance) ({RX})"),
        ({"source": {"nodeMapping": {"by": "uname"}}}, METRIC, f"(sum by (instance) ({RX})){UNAME}"),
        ({"direction": "both", "source": {"nodeMapping": {"by": "uname"}}}, "network_bytes_per_second",
         f"(sum by (instance) ({RX} + {TX})){UNAME}"),
        ({"networkInterface": "ens.*", "timeRangeInMinutes": 3}, METRIC,
         f'sum by ({AUTO_BY}) (rate(node_network_receive_bytes_total{{device=~"ens.*"}}[180s]))'),
        ({"timeRange": "1500ms"}, METRIC,
         f'sum by ({AUTO_BY}) (rate(node_network_receive_bytes_total{{device=~"eth0"}}[1500ms]))'),
        ({"query": 'sum by ({by}) (rate(container_network_receive_bytes_total{interface=~"{device}"}[{range}]))',
          "networkInterface": "eth1", "timeRange": "5m"}, METRIC,
         f'sum by ({AUTO_BY}) (rate(container_network_receive_bytes_total{{interface=~"eth1"}}[300s]))'),
    ],
)
def test_promql(args, metric, promql):
    parsed = args_from({"address": "http://prom.test:9090", **args})
    plugin = NetworkTraffic(parsed, make_handle(SourceHub()))
    assert plugin.source.spec.promql == promql
    assert plugin.source.spec.url == "http://prom.test:9090"
    assert plugin.reader.metric == metric == parsed.metric
    if parsed.source.node_mapping.by != "uname":
        assert parsed.promql() == promql


PATH = "profiles[0].pluginConfig[0].args"


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        ({"ip": "10.0.0.4:9090"},
         [("ip", "'10.0.0.4:9090' is not a URL; expected http://host:port or https://host:port")]),
        ({"address": "prometheus:9090"},
         [("address", "'prometheus:9090' is not a URL; expected http://host:port or https://host:port")]),
        ({"address": "http://a:9090", "ip": "http://b:9090"}, [("ip", "is an alias of address; give only one")]),
        ({"ip": "http://a:9090", "prometheusAddress": "http://a:9090"},
         [("prometheusAddress", "is an alias of ip; give only one")]),
        ({"networkInterface": "eth0", "deviceName": "eth0"},
         [("deviceName", "is an alias of networkInterface; give only one")]),
        ({"timeRange": 60, "timeRangeInMinutes": 1},
         [("timeRangeInMinutes", "is an alias of timeRange; give only one")]),
        ({"timeRange": "abc"}, [("timeRange", 'invalid duration "abc"; expected seconds or a duration such as 2m')]),
        ({"timeRange": 0}, [("timeRange", "must be at least 1s")]),
        ({"timeRange": -60}, [("timeRange", "must be at least 1s")]),
        ({"timeRange": "500ms"}, [("timeRange", "must be at least 1s")]),
        ({"timeRange": 1.5}, [("timeRange", "expected seconds (an integer) or a duration such as 2m")]),
        ({"timeRange": True}, [("timeRange", "expected seconds (an integer) or a duration such as 2m")]),
        ({"timeRange": 10**14}, [("timeRange", "is too large")]),
        ({"timeRangeInMinutes": 0}, [("timeRangeInMinutes", "must be at least 1s")]),
        ({"timeRangeInMinutes": 10**13}, [("timeRangeInMinutes", "is too large")]),
        ({"podTrafficEstimate": -1}, [("podTrafficEstimate", "must not be negative")]),
        ({"networkInterface": 'eth"0'}, [("networkInterface", "must not contain quotes or backslashes")]),
        ({"source": {"refreshInterval": "500ms"}}, [("source.refreshInterval", "must be at least 1s")]),
        ({"policy": {"maxAge": "0s"}}, [("policy.maxAge", "must be greater than 0")]),
        ({"policy": {"inFlight": {"settleTime": "-1s"}}}, [("policy.inFlight.settleTime", "must not be negative")]),
        ({"source": {"nodeMapping": {"by": "label", "label": ""}}},
         [("source.nodeMapping.label", "must name the label that holds the node name")]),
        ({"ip": "10.0.0.4:9090", "podTrafficEstimate": -5},
         [("ip", "'10.0.0.4:9090' is not a URL; expected http://host:port or https://host:port"),
          ("podTrafficEstimate", "must not be negative")]),
        ({"podTrafficEstimate": float("inf")}, [("podTrafficEstimate", "must be a finite number, got inf")]),
        ({"podTrafficEstimate": float("nan")}, [("podTrafficEstimate", "must be a finite number, got nan")]),
        ({"podTrafficEstimate": 1e308},
         [("podTrafficEstimate", "must be at most 1e+12 (bytes/s per pod), got 1e+308")]),
        ({"query": "sum by ({by}) (rate(x[{rnage}]))"},
         [("query", "unknown placeholder '{rnage}' (supported: {by}, {device}, {range})")]),
        ({"query": 'sum by ({by}) (rate(x{device=~"{device}"[{range}]))'},
         [("query", 'unbalanced "{" at character 22')]),
        ({"source": {"caFile": "/nonexistent/ca.pem"}},
         [("source.caFile", "file '/nonexistent/ca.pem' does not exist")]),
        ({"policy": {"inFlight": {"settleTime": "10m"}}},
         [("policy.inFlight.settleTime", "must not be longer than ttl (5m0s): a placement would be forgotten "
                                         "before its load is expected to show in the metric")]),
        ({"source": {"refreshInterval": "1m"}, "policy": {"maxAge": "30s"}},
         [("policy.maxAge", "must be at least source.refreshInterval (1m0s): every value would go stale "
                            "between two refreshes")]),
    ],
)
def test_invalid_args_name_the_field(args, errors):
    with pytest.raises(testing.ConfigError) as info:
        testing.load_config(config(profile(args)), registry().catalog())
    assert info.value.errors == [(f"{PATH}.{path}", message) for path, message in errors]


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"direction": "up"}, "direction"),
        ({"policy": {"onMissing": "drop"}}, "policy.onMissing"),
        ({"source": {"nodeMapping": {"by": "ip"}}}, "source.nodeMapping.by"),
        ({"timerange": 60}, "timerange"),
        ({"podTrafficEstimate": "1Mi"}, "podTrafficEstimate"),
    ],
)
def test_invalid_args_converter_errors(args, path):
    with pytest.raises(testing.ConfigError) as info:
        testing.load_config(config(profile(args)), registry().catalog())
    assert [p for p, _ in info.value.errors] == [f"{PATH}.{path}"]


def test_config_validate_reports_missing_tls_files(tmp_path):
    # The README promises it: a file that does not exist is an error of the configuration, with its path.
    token = tmp_path / "token"
    token.write_text("secret")
    source = {"caFile": str(tmp_path / "ca.pem"), "bearerTokenFile": str(token)}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config(profile({"address": "https://prom.test:9090", "source": source}))))
    with pytest.raises(testing.ConfigError) as info:
        testing.load_config(str(path), registry().catalog())
    assert info.value.errors == [(f"{PATH}.source.caFile", f"file {str(tmp_path / 'ca.pem')!r} does not exist")]


def test_no_address_and_no_snapshot_fails_to_build():
    with pytest.raises(ValueError, match=r"^args\.address: Required value"):
        NetworkTraffic(args_from(None), make_handle())
    with pytest.raises(testing.PluginError, match=r'plugin "NetworkTraffic" .*failed to initialize: args\.address: '):
        testing.assemble(config(profile()), testing.InMemoryCluster([], [], []), registry=registry())
    # With a snapshot the address is not needed.
    asm = testing.assemble(config(profile()), testing.InMemoryCluster([], [], []), registry=registry(),
                           metrics_snapshot=testing.MetricsSnapshot({METRIC: {}}))
    assert list(asm.sources.sources) == [METRIC]


# -- requeue events --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "interested"),
    [
        (ClusterEvent("Node", "Add"), True),  # a new node may come with fresh data
        (ClusterEvent("Node", "UpdateNodeLabel"), False),  # nothing the plugin reads
        (ClusterEvent("Node", "UpdateNodeAllocatable"), False),
        (ClusterEvent("AssignedPod", "Add"), False),
        (ClusterEvent("AssignedPod", "Delete"), False),  # traffic data does not depend on other pods' objects
    ],
)
def test_events_to_register(event, interested):
    plugin = factory(args_from({"policy": {"onMissing": "filter"}}), make_handle(make_source_hub({METRIC: {}})))
    assert any(testing.matches(r, event) for r in plugin.events_to_register()) is interested


def test_snapshot_nodes_that_match_no_node_are_reported():
    snapshot = testing.MetricsSnapshot({METRIC: {"a": (100.0, 0.0), "ghost": (5.0, 0.0)}}, "traffic.yaml")
    report = testing.simulate(testing.LoadedObjects(pods=[make_pod("p")], nodes=ABC), config(profile()),
                              registry=registry(), autoload=False, metrics_snapshot=snapshot)
    assert report.placed == 1
    assert f"traffic.yaml: metric {METRIC!r}: 1 of 2 node name(s) match no node of the cluster ('ghost'); " \
           "their values are unused" in report.warnings


# -- source sharing --------------------------------------------------------------------------------


def sources_for(*args: dict):
    cfg = config(*(profile(a, f"sched-{i}") for i, a in enumerate(args)))
    asm = testing.assemble(cfg, testing.InMemoryCluster([], [], []), registry=registry())
    plugins = [fwk.plugins[NAME] for fwk in asm.frameworks.values()]
    return asm.sources, plugins


def test_profiles_with_the_same_query_share_one_source():
    # The seed's names and the new ones give the same query: one source, one refresh task.
    hub, plugins = sources_for(
        {"address": "http://10.0.0.4:9090", "networkInterface": "eth0", "timeRange": "1m"},
        {"ip": "http://10.0.0.4:9090/", "deviceName": "eth0", "timeRange": 60},
        {"prometheusAddress": "http://10.0.0.4:9090", "timeRangeInMinutes": 1,
         "policy": {"onMissing": "min"}},  # the policy is per plugin, not part of the source
    )
    assert list(hub.sources) == [METRIC]
    assert len(hub.prometheus_sources) == 1
    assert plugins[0].source is plugins[1].source is plugins[2].source
    assert len(hub.bindings) == 3


def test_plugins_on_one_hub_share_a_source():
    hub = SourceHub()
    args = args_from({"address": "http://prom.test:9090"})
    first = NetworkTraffic(args, make_handle(hub))
    second = NetworkTraffic(args, make_handle(hub))
    assert first.source is second.source
    assert list(hub.sources) == [METRIC]


@pytest.mark.parametrize(
    ("second", "names"),
    [
        ({"source": {"refreshInterval": "10s"}}, [METRIC, f"{METRIC}#2"]),
        ({"timeRange": 120}, [METRIC, f"{METRIC}#2"]),
        ({"address": "http://other:9090"}, [METRIC, f"{METRIC}#2"]),
        ({"direction": "transmit"}, [METRIC, "network_transmit_bytes_per_second"]),
    ],
)
def test_different_queries_get_their_own_source(second, names):
    base = {"address": "http://10.0.0.4:9090"}
    hub, plugins = sources_for(base, {**base, **second})
    assert list(hub.sources) == names
    assert plugins[0].source is not plugins[1].source


# -- README ----------------------------------------------------------------------------------------


def readme_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_configurations_are_valid():
    catalog = registry().catalog()
    configs = [b for b in readme_blocks() if "kind: KubeSchedulerConfiguration" in b]
    assert len(configs) >= 2
    for text in configs:
        resolved = testing.resolve_config(testing.load_config_text(text, catalog, source=str(README)), catalog)
        assert any(NAME in p.points["score"] and isinstance(p.args[NAME], NetworkTrafficArgs) for p in resolved)


def test_readme_snapshot_parses():
    import yaml

    docs = [yaml.safe_load(b) for b in readme_blocks() if "kind: MetricsSnapshot" in b]
    snapshot = testing.snapshot_from_documents(docs, str(README))
    assert snapshot is not None and METRIC in snapshot.metrics


@pytest.mark.parametrize("direction", ["receive", "transmit", "both"])
@pytest.mark.parametrize("by", ["auto", "label", "instance", "uname"])
def test_readme_shows_the_promql(direction, by):
    args = args_from({"address": "http://prom.test:9090", "direction": direction,
                      "source": {"nodeMapping": {"by": by}}})
    promql = NetworkTraffic(args, make_handle(SourceHub())).source.spec.promql
    assert promql in README.read_text(encoding="utf-8")
    assert METRICS[direction] in README.read_text(encoding="utf-8")
