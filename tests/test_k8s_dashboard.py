"""The Grafana dashboard (k8s/dashboard/scorer.json): its queries parse in a real Prometheus and name only
series scorer exports.

``promql_series`` reads the series names out of a PromQL expression (label names, functions, keywords,
strings and durations are not names), with the functions each name sits in, so the tests can also check
that counters are only read through ``rate``/``increase`` and gauges never are. Grafana's variables are
replaced by values a query can run with (``$__rate_interval`` by a duration, ``$job`` by ``scorer``,
``$profile`` by its "All" regex); a variable the dashboard does not define is an error.

``exported_metric_names`` maps every series name scorer's ``/metrics`` has to its family's type: it scrapes a
real ``scorer run`` against the session's control plane after it scheduled a few pods (so the labelled
histograms have samples too). Families are read with prometheus_client's parser, which lists every family
registered, also one without samples (a labelled counter nothing has incremented yet).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from kubekit import K8S_DIR
from prometheus_client.parser import text_string_to_metric_families
from promkit import PrometheusError
from servicekit import Cluster, ScorerProcess, node_manifest, pod_manifest, scheduler_config, wait_until

DASHBOARD = K8S_DIR / "dashboard/scorer.json"
GRAFANA_INTERVALS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
AGGREGATIONS = {"sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
                "count_values", "group"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = LABEL_LISTS | {"bool", "offset", "and", "or", "unless", "atan2", "inf", "nan"}
COUNTER_FUNCTIONS = {"rate", "irate", "increase", "resets"}
SCRAPED = "dashboard-check"  # namespace, node and schedulerName of the scraped service's pods
WAIT = 90.0  # seconds for each step of the scrape: the machine is shared and busy
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`|#[^\n]*|[A-Za-z_:][A-Za-z0-9_:]*|\d[\w.]*|\S')

def series_of_exposition(text: str) -> dict[str, str]:
    """Series name -> family type of a Prometheus text exposition (families without samples included)."""
    names: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        kind = "untyped" if family.type == "unknown" else family.type
        names.update(family_series(family.name, kind))
        for sample in family.samples:
            names.setdefault(sample.name, kind)
    return names


def family_series(family: str, kind: str) -> dict[str, str]:
    """The series a family of ``kind`` is queried by: a counter by its _total (the parser drops the suffix
    from the family's name), histograms by their _bucket, _sum and _count."""
    if kind == "counter":
        return {f"{family}_total": kind}
    if kind in ("histogram", "summary"):
        series = {f"{family}_sum": kind, f"{family}_count": kind}
        if kind == "histogram":
            series[f"{family}_bucket"] = kind
        if kind == "summary":
            series[family] = kind
        return series
    return {family: kind}


@pytest.fixture(scope="module")
def exported_metric_names(control_plane, tmp_path_factory) -> dict[str, str]:
    """The series of a running ``scorer run``'s /metrics, once it has scheduled a few pods."""
    workdir = tmp_path_factory.mktemp("dashboard")
    cluster = Cluster(control_plane)
    cluster.ensure_namespace(SCRAPED)
    cluster.create_all([node_manifest(SCRAPED)])
    # Leader election on, as the shipped Deployment runs it (its families exist only then).
    config = scheduler_config(workdir / "config.yaml", SCRAPED, leader_elect=True, lease=SCRAPED, namespace="default")
    proc = ScorerProcess(workdir, config, control_plane.kubeconfig, name="scorer-dashboard")
    try:
        proc.wait_ready(WAIT)
        cluster.create_all([pod_manifest(f"{SCRAPED}-{i}", namespace=SCRAPED, scheduler=SCRAPED,
                                         spec={"nodeSelector": {"kubernetes.io/hostname": SCRAPED}})
                            for i in range(2)])
        wait_until(lambda: len(cluster.bound(SCRAPED)) == 2, WAIT, "2 pods bound")
        wait_until(lambda: proc.metric("scheduler_schedule_attempts_total", {"result": "scheduled"}) == 2, WAIT,
                   "the attempts counted")
        status, text = proc.get("/metrics")
        assert status == 200
        return series_of_exposition(text)
    finally:
        proc.stop()
        cluster.delete_pods(SCRAPED)
        cluster.call("DELETE", f"/api/v1/nodes/{SCRAPED}", ok=(200, 404))
        cluster.call("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{SCRAPED}", ok=(200, 404))


def promql_series(expr: str) -> list[tuple[str, tuple[str, ...]]]:
    """The series names an expression selects, each with the functions it sits in (innermost last)."""
    tokens = [t for t in TOKEN.findall(expr) if not t.startswith("#")]
    found: list[tuple[str, tuple[str, ...]]] = []
    stack: list[str] = []  # per open parenthesis: the function it calls ("" for grouping, a label list, ...)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token == "{":  # label matchers: names are labels, except a __name__ matcher's value
            end = tokens.index("}", i)
            matchers = tokens[i + 1:end]
            for k, name in enumerate(matchers[:-2]):
                if name == "__name__" and matchers[k + 1] == "=":
                    found.append((matchers[k + 2][1:-1], tuple(stack)))
            i = end + 1
            continue
        if token == "[":  # a range or subquery: durations and resolutions
            i = tokens.index("]", i) + 1
            continue
        if token.lower() in LABEL_LISTS and following == "(":
            i = tokens.index(")", i) + 1  # a list of label names
            continue
        if token == "(":
            stack.append("")
        elif token == ")":
            stack.pop()
        elif re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", token) and token.lower() not in KEYWORDS:
            if following == "(":
                stack.append(token)  # a function or an aggregation called
                i += 2
                continue
            if token in AGGREGATIONS and following.lower() in ("by", "without"):
                end = tokens.index(")", i + 2)  # sum by (labels) (expr)
                if end + 1 < len(tokens) and tokens[end + 1] == "(":
                    stack.append(token)
                    i = end + 2
                    continue
            found.append((token, tuple(stack)))
        i += 1
    assert not stack, f"unbalanced parentheses in {expr!r}"
    return found


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Grafana's ``$name``, ``${name}`` and ``[[name]]`` replaced; an undefined variable is an error."""
    def value(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        if name not in variables:
            raise KeyError(f"{expr!r} uses ${name}, which the dashboard does not define")
        return variables[name]

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)", value, expr)


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_variables(dashboard: dict[str, Any]) -> dict[str, str]:
    """A value to run the queries with, per variable: the "All" regex, else the current value."""
    values = dict(GRAFANA_INTERVALS)
    for variable in dashboard["templating"]["list"]:
        current = (variable.get("current") or {}).get("value")
        if variable.get("includeAll") and variable.get("allValue"):
            values[variable["name"]] = variable["allValue"]
        else:
            values[variable["name"]] = current or variable["name"]
    return values


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL with the variables replaced) of every panel target and query variable."""
    dashboard = load_dashboard()
    variables = dashboard_variables(dashboard)
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            where = f"panel {panel['title']!r} target {target['refId']}"
            queries.append((where, substitute(target["expr"], variables)))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            text = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            selector = re.fullmatch(r"label_values\((.*),\s*\w+\)", text)
            assert selector, f"variable {variable['name']}: {text!r} is not label_values(selector, label)"
            queries.append((f"variable {variable['name']}", substitute(selector.group(1), variables)))
    return queries


# --- the name extraction itself ---


@pytest.mark.parametrize(("expr", "expected"), [
    ('histogram_quantile(0.99, sum by (le, profile) (rate(a_bucket{job="x", le!="sum"}[5m])))',
     [("a_bucket", ("histogram_quantile", "sum", "rate"))]),
    ("sum(rate(x_total[1m])) by (result) / on(instance) group_left(version) y",
     [("x_total", ("sum", "rate")), ("y", ())]),
    ('{__name__="z", job="j"} > bool 0', [("z", ())]),
    ('label_replace(up, "dst", "sum", "src", "(.*)")', [("up", ("label_replace",))]),
    ("time() - max by (resource) (t offset 5m) and ignoring(a, b) u unless v", [("t", ("max",)), ("u", ()),
                                                                                 ("v", ())]),
    ("max_over_time(d[1h:1m]) * -Inf + NaN", [("d", ("max_over_time",))]),
    ("count without (instance) (w) # a comment naming not_a_metric", [("w", ("count",))]),
])
def test_series_names_are_read_out_of_promql(expr, expected) -> None:
    assert promql_series(expr) == expected


def test_grafana_variables_are_replaced_and_unknown_ones_refused() -> None:
    variables = {"job": "scorer", "__rate_interval": "5m"}
    assert substitute('rate(a{job="$job"}[$__rate_interval]) + b{j="${job}", k="[[job]]"}', variables) == (
        'rate(a{job="scorer"}[5m]) + b{j="scorer", k="scorer"}')
    with pytest.raises(KeyError, match=r"\$jbo"):
        substitute('a{job="$jbo"}', variables)


def test_exposition_families_are_expanded_to_their_series() -> None:
    text = ("# TYPE h histogram\n# TYPE c_total counter\nc_total 1\n# HELP d_total no sample yet\n"
            "# TYPE d_total counter\n# TYPE g gauge\nuntyped_one 2\n")
    assert series_of_exposition(text) == {"h_bucket": "histogram", "h_sum": "histogram", "h_count": "histogram",
                                          "c_total": "counter", "d_total": "counter", "g": "gauge",
                                          "untyped_one": "untyped"}


# --- the dashboard ---


def test_the_dashboard_has_the_panels_of_the_service() -> None:
    dashboard = load_dashboard()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert dashboard["uid"] and dashboard["title"]
    for panel in panels:
        assert panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]) and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
    used = {name for _, expr in dashboard_queries() for name, _ in promql_series(expr)}
    assert used >= {
        "scheduler_schedule_attempts_total", "scheduler_scheduling_attempt_duration_seconds_bucket",
        "scheduler_scheduling_algorithm_duration_seconds_bucket",
        "scheduler_pod_scheduling_sli_duration_seconds_bucket", "scheduler_pending_pods",
        "scheduler_queue_incoming_pods_total", "scheduler_unschedulable_pods",
        "scorer_bind_results_total", "scorer_events_total", "scorer_reflector_relists_total",
        "scorer_reflector_watch_restarts_total", "scorer_reflector_handler_errors_total",
        "scorer_leader_election_is_leader", "scorer_metrics_source_up", "scorer_metrics_source_errors_total",
        "scorer_metrics_source_value_age_seconds"}
    quantiles = {expr for _, expr in dashboard_queries() if "histogram_quantile(0.5," in expr}
    assert {name for expr in quantiles for name, _ in promql_series(expr)} >= {
        "scheduler_scheduling_attempt_duration_seconds_bucket", "scheduler_pod_scheduling_sli_duration_seconds_bucket"}


@pytest.mark.kube
def test_the_scrape_has_the_families_of_the_service(exported_metric_names) -> None:
    """The fixture reads a real /metrics: kube-scheduler's families and scorer's own, typed."""
    assert {name: exported_metric_names.get(name) for name in (
        "scheduler_schedule_attempts_total", "scheduler_scheduling_attempt_duration_seconds_bucket",
        "scheduler_pending_pods", "scheduler_preemption_attempts_total", "scorer_bind_results_total",
        "scorer_events_total", "scorer_reflector_handler_errors_total", "scorer_leader_election_is_leader",
        "scorer_build_info", "scorer_metrics_source_up")} == {
        "scheduler_schedule_attempts_total": "counter", "scheduler_scheduling_attempt_duration_seconds_bucket":
        "histogram", "scheduler_pending_pods": "gauge", "scheduler_preemption_attempts_total": "counter",
        "scorer_bind_results_total": "counter", "scorer_events_total": "counter",
        "scorer_reflector_handler_errors_total": "counter", "scorer_leader_election_is_leader": "gauge",
        "scorer_build_info": "gauge", "scorer_metrics_source_up": "gauge"}


@pytest.mark.kube
def test_every_query_selects_only_series_scorer_exports(exported_metric_names) -> None:
    problems = []
    for where, expr in dashboard_queries():
        series = promql_series(expr)
        if not series:
            problems.append(f"{where}: selects no series")
        for name, functions in series:
            kind = exported_metric_names.get(name)
            if kind is None:
                problems.append(f"{where}: {name} is not exported")
            elif kind == "gauge" and COUNTER_FUNCTIONS & set(functions):
                problems.append(f"{where}: {name} is a gauge, read through {functions}")
            elif kind in ("counter", "histogram") and not COUNTER_FUNCTIONS & set(functions) \
                    and not where.startswith("variable"):
                problems.append(f"{where}: {name} is a {kind}: read its rate or increase, not its total")
    assert problems == []


def test_every_query_is_scoped_to_the_job() -> None:
    """kube-scheduler exports the same scheduler_* names: a query without job= would mix the two."""
    for where, expr in dashboard_queries():
        if where.startswith("panel"):
            for name, _ in promql_series(expr):
                assert re.search(re.escape(name) + r'\{[^}]*job="scorer"', expr), f"{where}: {name} without job"


@pytest.mark.prometheus
def test_every_query_parses_in_prometheus(prometheus) -> None:
    """Prometheus 2.42 has no parse endpoint: an instant query answers 400 bad_data when it does not parse
    (an empty result is fine: nothing is scraped here)."""
    errors = []
    for where, expr in dashboard_queries():
        try:
            prometheus.query(expr)
        except PrometheusError as error:  # carries Prometheus's parse error
            errors.append(f"{where}: {expr}: {error}")
    assert errors == []
    with pytest.raises(PrometheusError, match="bad_data"):
        prometheus.query('sum by (le (rate(x[5m]))')  # the check does see a parse error
