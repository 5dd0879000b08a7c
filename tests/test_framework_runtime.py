"""Framework runtime: one error format for every plugin call, Unreserve that logs and goes
on, and the extension point / plugin durations recorded into SchedulerMetrics."""

from __future__ import annotations

import asyncio
import logging
import random

import attrs
import numpy as np
import pytest

from scorer.framework import Code, CycleState, NodeBatch, Status
from scorer.framework.catalog import EXTENSION_POINTS, PluginInfo, extension_points_of
from scorer.framework.runtime import Framework, Handle
from scorer.metrics import SchedulerMetrics
from scorer.testing import make_cache, make_node, make_pod

POD = make_pod("p")
NODES = [make_node("n1"), make_node("n2")]


@attrs.frozen
class Profile:
    points: dict
    weights: dict
    scheduler_name: str = "test-scheduler"
    percentage_of_nodes_to_score: int | None = None
    args: dict = attrs.Factory(dict)


def framework(*plugins, metrics=None, source="scorer", version=""):
    """A framework running ``plugins`` at every point they implement, in the given order; they come
    from the distribution ``source`` (scorer's own by default)."""
    catalog = {
        p.name: PluginInfo(p.name, lambda args, handle, p=p: p, extension_points_of(p), source=source,
                           version=version)
        for p in plugins
    }
    points = {point: tuple(p.name for p in plugins if point in extension_points_of(p)) for point in EXTENSION_POINTS}
    weights = {p.name: 1 for p in plugins if "score" in extension_points_of(p)}
    handle = Handle(make_cache(NODES), "test-scheduler", metrics=metrics)
    return Framework(Profile(points, weights), catalog, handle)


def batch(fwk):
    table = fwk.handle.cache.table
    return NodeBatch(table, table.rows())


class Boom:
    """Raises at every extension point."""

    name = "Boom"

    def pre_enqueue(self, pod):
        raise RuntimeError("boom")

    def pre_filter(self, state, pod, nodes):
        raise RuntimeError("boom")

    def filter_batch(self, state, pod, nodes):
        raise RuntimeError("boom")

    def post_filter(self, state, pod, statuses):
        raise RuntimeError("boom")

    def pre_score(self, state, pod, nodes):
        raise RuntimeError("boom")

    def score_batch(self, state, pod, nodes):
        raise RuntimeError("boom")

    def reserve(self, state, pod, node):
        raise RuntimeError("boom")

    def unreserve(self, state, pod, node):
        raise RuntimeError("boom")

    def permit(self, state, pod, node):
        raise RuntimeError("boom")

    async def pre_bind(self, state, pod, node):
        raise RuntimeError("boom")

    async def bind(self, state, pod, node):
        raise RuntimeError("boom")

    async def post_bind(self, state, pod, node):
        raise RuntimeError("boom")


def run_point(fwk, point):
    """The status of one extension point run for POD."""
    state = CycleState()
    runs = {
        "PreEnqueue": lambda: fwk.run_pre_enqueue(POD),
        "PreFilter": lambda: fwk.run_pre_filter(state, POD, batch(fwk))[1],
        "Filter": lambda: fwk.run_filters(state, POD, fwk.handle.cache.table, fwk.handle.cache.table.rows()).error,
        "PostFilter": lambda: fwk.run_post_filter(state, POD, {})[1],
        "PreScore": lambda: fwk.run_pre_score(state, POD, batch(fwk)),
        "Score": lambda: fwk.run_score(state, POD, batch(fwk)).error,
        "Reserve": lambda: fwk.run_reserve(state, POD, "n1"),
        "Permit": lambda: fwk.run_permit(state, POD, "n1")[0],
        "PreBind": lambda: asyncio.run(fwk.run_pre_bind(state, POD, "n1")),
        "Bind": lambda: asyncio.run(fwk.run_bind(state, POD, "n1")),
    }
    return runs[point]()


@pytest.mark.parametrize(
    "point", ["PreEnqueue", "PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "Permit",
              "PreBind", "Bind"]
)
def test_a_raising_plugin_is_an_error_in_one_format(point):
    status = run_point(framework(Boom()), point)
    assert status.code == Code.ERROR
    assert status.plugin == "Boom"
    assert status.reasons == (f'running {point} plugin "Boom": RuntimeError: boom',)


class PerNode:
    name = "PerNode"

    def filter(self, state, pod, node):
        raise KeyError("labels")

    def score(self, state, pod, node):
        return 1


class BadNormalize:
    name = "BadNormalize"

    def score_batch(self, state, pod, nodes):
        return np.zeros(len(nodes), dtype=np.int64)

    def normalize_score(self, state, pod, scores):
        raise ZeroDivisionError("max is 0")


def test_per_node_plugins_and_normalize_use_the_same_format():
    assert run_point(framework(PerNode()), "Filter").reasons == (
        "running Filter plugin \"PerNode\": KeyError: 'labels'",
    )
    assert run_point(framework(BadNormalize()), "Score").reasons == (
        'running ScoreExtensionNormalize plugin "BadNormalize": ZeroDivisionError: max is 0',
    )


class WrongResults:
    """Returns what no extension point accepts."""

    name = "Wrong"

    def pre_filter(self, state, pod, nodes):
        return 42

    def filter_batch(self, state, pod, nodes):
        return [True]

    def pre_score(self, state, pod, nodes):
        return "ok"

    def score_batch(self, state, pod, nodes):
        return [1, 2, 3]

    def permit(self, state, pod, node):
        return "allow"


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ("PreFilter", 'running PreFilter plugin "Wrong": TypeError: returned int 42, expected a Status or None'),
        ("Filter", 'running Filter plugin "Wrong": TypeError: returned [True], expected a FilterVerdict of 2 nodes'),
        ("PreScore", "running PreScore plugin \"Wrong\": TypeError: returned str 'ok', expected a Status or None"),
        ("Score", 'running Score plugin "Wrong": ValueError: returned 3 scores for 2 nodes'),
        ("Permit", "running Permit plugin \"Wrong\": TypeError: returned str 'allow', expected a Status or None"),
    ],
)
def test_results_a_point_does_not_accept_are_errors_in_the_same_format(point, message):
    fwk = framework(WrongResults())
    if point == "Score":
        fwk.points["preScore"] = []  # reach Score
    status = run_point(fwk, point)
    assert status.code == Code.ERROR
    assert status.reasons == (message,)


class Recorder:
    def __init__(self, name, calls, fail=False):
        self.name = name
        self.calls = calls
        self.fail = fail

    def reserve(self, state, pod, node):
        return None

    def unreserve(self, state, pod, node):
        self.calls.append(self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} cannot undo")


def test_unreserve_logs_failures_and_runs_every_plugin_in_reverse(caplog):
    calls: list[str] = []
    fwk = framework(Recorder("First", calls), Recorder("Second", calls, fail=True), Recorder("Third", calls))
    with caplog.at_level(logging.ERROR, logger="scorer.framework.runtime"):
        fwk.run_unreserve(CycleState(), POD, "n1")
    assert calls == ["Third", "Second", "First"]
    [record] = caplog.records
    assert record.getMessage() == (
        'running Unreserve plugin "Second": RuntimeError: Second cannot undo (pod default/p, node n1)'
    )


# -- metrics -------------------------------------------------------------------------------


class Filters:
    name = "Filters"

    def pre_filter(self, state, pod, nodes):
        return None

    def filter_batch(self, state, pod, nodes):
        return None


class Scores:
    name = "Scores"

    def pre_score(self, state, pod, nodes):
        return Status.skip()

    def score_batch(self, state, pod, nodes):
        return np.zeros(len(nodes), dtype=np.int64)


class Rejects:
    name = "Rejects"

    def pre_filter(self, state, pod, nodes):
        return Status.unschedulable("no")


def sample(metrics, name, **labels):
    return metrics.collector_registry.get_sample_value(name, labels) or 0.0


def point_count(metrics, point, status="Success"):
    return sample(metrics, "scheduler_framework_extension_point_duration_seconds_count",
                  extension_point=point, status=status, profile="test-scheduler")


def plugin_count(metrics, plugin, point, status="Success"):
    return sample(metrics, "scheduler_plugin_execution_duration_seconds_count",
                  plugin=plugin, extension_point=point, status=status)


def cycle(fwk):
    state = CycleState()
    fwk.run_pre_filter(state, POD, batch(fwk))
    fwk.run_filters(state, POD, fwk.handle.cache.table, fwk.handle.cache.table.rows())
    fwk.run_pre_score(state, POD, batch(fwk))
    fwk.run_score(state, POD, batch(fwk))
    fwk.run_reserve(state, POD, "n1")
    return state


def test_every_extension_point_is_timed_once_per_run():
    metrics = SchedulerMetrics(sample_percent=0)
    fwk = framework(Filters(), Scores(), metrics=metrics)
    cycle(fwk)
    cycle(fwk)
    for point in ("PreFilter", "Filter", "PreScore", "Score"):
        assert point_count(metrics, point) == 2, point
    assert point_count(metrics, "Reserve") == 2  # no Reserve plugin: timed all the same, as kube-scheduler does
    fwk.run_permit(CycleState(), POD, "n1")
    for run in (fwk.run_pre_bind, fwk.run_post_bind):
        asyncio.run(run(CycleState(), POD, "n1"))
    for point in ("Permit", "PreBind", "PostBind"):
        assert point_count(metrics, point) == 1, point
    assert sample(metrics, "scheduler_framework_extension_point_duration_seconds_sum",
                  extension_point="PreFilter", status="Success", profile="test-scheduler") > 0
    assert plugin_count(metrics, "Filters", "Filter") == 0  # not sampled


def test_statuses_are_kube_labels():
    metrics = SchedulerMetrics(sample_percent=100)
    fwk = framework(Rejects(), Boom(), metrics=metrics)
    fwk.run_pre_filter(CycleState(), POD, batch(fwk))
    assert point_count(metrics, "PreFilter", "Unschedulable") == 1
    assert plugin_count(metrics, "Rejects", "PreFilter", "Unschedulable") == 1
    fwk.run_score(CycleState(), POD, batch(fwk))
    assert point_count(metrics, "Score", "Error") == 1
    asyncio.run(fwk.run_bind(CycleState(), POD, "n1"))
    assert point_count(metrics, "Bind", "Error") == 1


def test_plugin_durations_are_recorded_in_sampled_cycles_only():
    metrics = SchedulerMetrics(sample_percent=100)
    fwk = framework(Filters(), Scores(), BadNormalize(), Recorder("Undo", [], fail=True), metrics=metrics)
    state = cycle(fwk)
    assert state.record_plugin_metrics
    assert plugin_count(metrics, "Filters", "PreFilter") == 1
    assert plugin_count(metrics, "Filters", "Filter") == 1
    assert plugin_count(metrics, "Scores", "PreScore", "Skip") == 1
    assert plugin_count(metrics, "BadNormalize", "Score") == 1
    assert plugin_count(metrics, "BadNormalize", "ScoreExtensionNormalize", "Error") == 1
    fwk.run_unreserve(state, POD, "n1")
    assert plugin_count(metrics, "Undo", "Unreserve", "Error") == 1
    assert point_count(metrics, "Unreserve") == 1

    unsampled = SchedulerMetrics(sample_percent=0)
    state = cycle(framework(Filters(), Scores(), metrics=unsampled))
    assert not state.record_plugin_metrics
    assert plugin_count(unsampled, "Filters", "Filter") == 0


def test_the_sample_is_drawn_once_per_cycle_at_pre_filter():
    metrics = SchedulerMetrics(rng=random.Random(7))
    draws = []
    original = metrics.sample_plugins
    metrics.sample_plugins = lambda: draws.append(1) or original()
    fwk = framework(Filters(), Scores(), metrics=metrics)
    cycle(fwk)
    assert draws == [1]


def test_nothing_is_recorded_without_metrics():
    fwk = framework(Filters(), Scores(), Boom())
    state = cycle(fwk)
    assert not state.record_plugin_metrics
    assert fwk.handle.metrics is None


