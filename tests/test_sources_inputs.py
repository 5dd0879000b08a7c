"""Inputs of the metric sources: query templates, TLS files, policy timings, snapshot node names that
match no node, extreme values in the reader, and the telemetry's place in the app's collector registry."""

from __future__ import annotations

import asyncio
import os
import re
import warnings
from datetime import timedelta
from pathlib import Path

import attrs
import numpy as np
import pytest

from scorer.config.convert import structure
from scorer.errors import ConfigError
from scorer.framework import NodeBatch
from scorer.metrics import SchedulerMetrics
from scorer.plugins.helper.metricreader import FLOAT_MAX, MetricReader
from scorer.sources import DataPolicyArgs, MetricsSnapshot, SourceArgs, SourceHub
from scorer.sources.args import InFlightArgs, policy_timing_errors
from scorer.sources.query import fill_template, promql_duration, template_errors
from scorer.sources.source import FetchError
from scorer.sources.telemetry import POLICIES, STATES
from scorer.testing import make_cache, make_node, make_pod

SCORER = Path(__file__).resolve().parents[1] / "scorer"
CONTRIB = Path(__file__).resolve().parents[1] / "contrib_plugins"


# -- query templates -----------------------------------------------------------------------------------

ALL = ("by", "device", "range")


@pytest.mark.parametrize("template", [
    "",
    'sum by ({by}) (rate(node_network_receive_bytes_total{device=~"{device}"}[{range}]))',
    '1 - avg by ({by}) (rate(node_cpu_seconds_total{mode="idle"}[{range}]))',
    'sum by ({by}) (rate(x{device=~"eth{0,1}"}[{range}]))',  # regex braces inside a string
    'sum by ({by}) (x{name=~"\\\\p{L}+"})',  # a regex Unicode class, not a placeholder
    "sum by ({by}) (x{a=~`{[`})",  # raw strings have no escapes and may hold anything
    "up{}",
    'x{a="it\\"s {"}',  # an escaped quote does not end the string
])
def test_valid_templates(template):
    assert template_errors(template, ALL) == []


@pytest.mark.parametrize(("template", "placeholders", "errors"), [
    ("sum by ({by}) (x[{rnage}])", ALL,
     ["unknown placeholder '{rnage}' (supported: {by}, {device}, {range})"]),
    ('x{device=~"{devce}"} + y[{range}] + z[{range}] + w{devce}', ALL,
     ["unknown placeholder '{devce}' (supported: {by}, {device}, {range})"]),  # reported once
    ("avg by ({ by }) (x)", ALL, ["unknown placeholder '{ by }' (supported: {by}, {device}, {range})"]),
    ('x{device=~"{device}"}', ("by", "range"), ["unknown placeholder '{device}' (supported: {by}, {range})"]),
    ("sum by ({by}) (x{a=\"b\")", ALL, ['unbalanced "{" at character 17']),
    ("sum by ({by}) (x})", ALL, ['unbalanced "}" at character 17']),
    ("{by", ALL, ['unbalanced "{" at character 1']),
    ('x{a="b}', ALL, ["unterminated string literal: \" at character 5 is never closed"]),
    ("x{a=\"b\"}}[{rnage}]", ALL,
     ["unknown placeholder '{rnage}' (supported: {by}, {device}, {range})", 'unbalanced "}" at character 9']),
])
def test_template_errors(template, placeholders, errors):
    assert template_errors(template, placeholders) == errors


def test_fill_template_is_one_pass():
    # A value holding another placeholder is not filled again.
    assert fill_template("{by}|{device}|{range}|\\p{L}", {"by": "node", "device": "{range}", "range": "60s"}) == (
        "node|{range}|60s|\\p{L}")
    assert fill_template("x", {}) == "x"


@pytest.mark.parametrize(("window", "text"), [
    (timedelta(minutes=1), "60s"), (timedelta(milliseconds=1500), "1500ms"), (timedelta(seconds=1), "1s")])
def test_promql_duration(window, text):
    assert promql_duration(window) == text


# -- TLS files and policy timings, as the configuration reports them -------------------------------------


@attrs.frozen(slots=True, kw_only=True)
class Holder:
    """What a metric-driven plugin's args hold (``source`` and ``policy``), with their joint checks."""

    source: SourceArgs = SourceArgs()
    policy: DataPolicyArgs = DataPolicyArgs()

    def validate(self) -> list[tuple[str, str]]:
        return policy_timing_errors(self.source, self.policy)


def errors_of(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        structure(Holder, data, "args")
    return info.value.errors


def test_tls_files_must_be_readable_files(tmp_path):
    missing = str(tmp_path / "missing.pem")
    assert errors_of({"source": {"caFile": missing, "bearerTokenFile": str(tmp_path)}}) == [
        ("args.source.caFile", f"file {missing!r} does not exist"),
        ("args.source.bearerTokenFile", f"{str(tmp_path)!r} is not a file"),
    ]
    ca, token = tmp_path / "ca.pem", tmp_path / "token"
    ca.write_text("pem")
    token.write_text("secret")
    args = structure(Holder, {"source": {"caFile": str(ca), "bearerTokenFile": str(token)}}, "args")
    assert args.source.file_errors() == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_tls_file(tmp_path):
    token = tmp_path / "token"
    token.write_text("secret")
    token.chmod(0)
    assert errors_of({"source": {"bearerTokenFile": str(token)}}) == [
        ("args.source.bearerTokenFile", f"file {str(token)!r} is not readable (permission denied)")]


def test_unreadable_tls_file_through_os_access(tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("secret")
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert SourceArgs(bearer_token_file=str(token)).file_errors() == [
        ("bearerTokenFile", f"file {str(token)!r} is not readable (permission denied)")]


def test_prometheus_source_refuses_missing_files_built_without_validation(tmp_path):
    directory = str(tmp_path)
    with pytest.raises(ValueError, match=re.escape(f"args.source.bearerTokenFile: {directory!r} is not a file")):
        SourceHub().source(plugin="P", metric="m", address="http://127.0.0.1:9", query="q",
                           source_args=SourceArgs(bearer_token_file=directory))


@pytest.mark.parametrize(("data", "errors"), [
    ({"policy": {"inFlight": {"settleTime": "6m", "ttl": "5m"}}},
     [("args.policy.inFlight.settleTime", "must not be longer than ttl (5m0s): a placement would be forgotten "
                                          "before its load is expected to show in the metric")]),
    ({"policy": {"maxAge": "20s"}},
     [("args.policy.maxAge", "must be at least source.refreshInterval (30s): every value would go stale "
                             "between two refreshes")]),
    ({"source": {"refreshInterval": "2m"}, "policy": {"maxAge": "90s"}},
     [("args.policy.maxAge", "must be at least source.refreshInterval (2m0s): every value would go stale "
                             "between two refreshes")]),
])
def test_contradicting_timings(data, errors):
    assert errors_of(data) == errors


@pytest.mark.parametrize("data", [
    {"policy": {"inFlight": {"settleTime": "5m", "ttl": "5m"}}},
    {"policy": {"maxAge": "30s"}},
    {"source": {"refreshInterval": "10s"}},  # maxAge unset: 3 x refreshInterval
])
def test_consistent_timings(data):
    structure(Holder, data, "args")


def test_settle_time_checked_against_ttl_only_when_ttl_is_valid():
    assert InFlightArgs(settle_time=timedelta(minutes=1), ttl=timedelta(0)).validate() == [
        ("ttl", "must be greater than 0")]


# -- snapshot node names that match no node --------------------------------------------------------------


def snapshot_hub(nodes: list) -> SourceHub:
    values = {name: (1.0, 0.0) for name in ("n1", "ghost-1", "ghost-2", "ghost-3", "ghost-4", "ghost-5", "ghost-6")}
    return SourceHub(lambda: nodes, snapshot=MetricsSnapshot({"cpu": values, "mem": {"n1": (1.0, 0.0)}}, "snap.yaml"))


def test_unknown_snapshot_nodes_are_reported_once_the_nodes_are_loaded():
    nodes: list = []
    hub = snapshot_hub(nodes)  # as in the assembly: plugins are built before the nodes are loaded
    for metric in ("cpu", "mem"):
        hub.source(plugin="P", metric=metric, address="", query="q", source_args=SourceArgs())
    assert hub.source_warnings() == []
    nodes.append(make_node("n1"))
    asyncio.run(hub.refresh_all())
    assert hub.source_warnings() == [
        "snap.yaml: metric 'cpu': 6 of 7 node name(s) match no node of the cluster ('ghost-1', 'ghost-2', "
        "'ghost-3', 'ghost-4', 'ghost-5', ...); their values are unused"]
    assert hub.collector_registry.get_sample_value("scorer_metrics_source_unmatched_series", {"source": "cpu"}) == 6.0
    assert hub.sources["cpu"].data.values["n1"] == 1.0


def test_unknown_snapshot_nodes_are_reported_when_the_nodes_are_known_first():
    hub = snapshot_hub([make_node("n1"), make_node("ghost-1"), make_node("ghost-2"), make_node("ghost-3")])
    hub.source(plugin="P", metric="cpu", address="", query="q", source_args=SourceArgs())
    assert hub.source_warnings() == [
        "snap.yaml: metric 'cpu': 3 of 7 node name(s) match no node of the cluster ('ghost-4', 'ghost-5', "
        "'ghost-6'); their values are unused"]


# -- extreme values ----------------------------------------------------------------------------------


def test_in_flight_sum_saturates_without_warnings():
    nodes = [make_node("n1"), make_node("n2")]
    hub = SourceHub(lambda: nodes, snapshot=MetricsSnapshot({"cpu": {"n1": (1e308, 0.0)}}))
    source = hub.source(plugin="P", metric="cpu", address="", query="q", source_args=SourceArgs())
    reader = MetricReader(hub, "P", "cpu", source, DataPolicyArgs(), SourceArgs())
    for i in range(3):
        hub.in_flight.placed(make_pod(f"p{i}"), "n1" if i < 2 else "n2", hub.clock())
    table = make_cache(nodes).table
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        reading = reader.read(NodeBatch(table, table.rows()))
        sums = reading.in_flight_sum(np.array([1.5e308, 1.5e308, np.inf]))
        scores = reader.apply_policy(np.array([0, 100], dtype=np.int64), reading)
    assert sums.tolist() == [FLOAT_MAX, FLOAT_MAX]
    assert scores.tolist() == [0, 50]  # n2 has no value: neutral


# -- telemetry in the app's collector registry -----------------------------------------------------------


def test_one_hub_per_scheduler_metrics():
    metrics = SchedulerMetrics()
    first = SourceHub(metrics=metrics)
    with pytest.raises(ValueError, match="an app has one SourceHub per SchedulerMetrics"):
        SourceHub(metrics=metrics)
    first.close()
    second = SourceHub(metrics=metrics)
    second.source(plugin="P", metric="m", address="http://127.0.0.1:9", query="q", source_args=SourceArgs())
    assert metrics.collector_registry.get_sample_value("scorer_metrics_source_queries_total", {"source": "m"}) == 0.0
    # The scheduler's own families are untouched by the hubs coming and going.
    assert any(m.name == "scheduler_schedule_attempts" for m in metrics.collector_registry.collect())


def test_policy_label_values_are_bounded():
    nodes = [make_node("n1"), make_node("n2"), make_node("n3")]
    hub = SourceHub(lambda: nodes, snapshot=MetricsSnapshot({"cpu": {"n1": (1.0, 0.0), "n2": (1.0, 600.0)}}))
    source = hub.source(plugin="P", metric="cpu", address="", query="q", source_args=SourceArgs())
    reader = MetricReader(hub, "P", "cpu", source, DataPolicyArgs(on_missing="min"), SourceArgs())
    table = make_cache(nodes).table
    for _ in range(2):  # counted once per node per cycle
        reader.apply_policy(np.zeros(3, dtype=np.int64), reader.read(NodeBatch(table, table.rows())))
    samples = [s for m in hub.collector_registry.collect() if m.name == "scorer_metrics_policy_nodes" for s in m.samples
               if s.name.endswith("_total")]
    assert {(s.labels["state"], s.labels["policy"]): s.value for s in samples} == {
        ("stale", "min"): 2.0, ("missing", "min"): 2.0}
    assert all(s.labels["state"] in STATES and s.labels["policy"] in POLICIES for s in samples)
    with pytest.raises(ValueError, match="unbounded label value"):
        hub.telemetry.count_policy("P", "gone", "min", 1)
    with pytest.raises(ValueError, match="unknown fetch error kind"):
        FetchError("teapot", "418")


def test_only_scheduler_metrics_creates_a_collector_registry():
    offenders = [str(path) for root in (SCORER, CONTRIB) for path in root.rglob("*.py")
                 if "CollectorRegistry(" in path.read_text(encoding="utf-8") and path != SCORER / "metrics.py"]
    assert offenders == []
