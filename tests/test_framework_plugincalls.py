"""What becomes of a plugin's mistakes at run time (``scorer.framework.plugincalls``): the Error
status names the point, the plugin, its distribution and the exception; results a point does not
accept say what was expected; ``SCORER_DEBUG=1`` logs the traceback; the points that have no pod
cycle to fail (QueueSort, PreEnqueue, PostBind) log instead."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest
from test_framework_runtime import NODES, POD, Boom, batch, framework, run_point

from scorer.framework import Code, CycleState, Status
from scorer.framework.plugincalls import plugin_failed, to_normalized, to_permit, to_post_filter, to_scores
from scorer.framework.types import QueuedPodInfo
from scorer.testing import make_pod

POINTS = ["PreEnqueue", "PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "Permit", "PreBind",
          "Bind"]
ARGS = (None, None, [0, 1])  # (state, pod, a batch of two nodes)


@pytest.mark.parametrize("point", POINTS)
def test_another_distributions_plugin_is_named_with_its_distribution(point):
    status = run_point(framework(Boom(), source="scorer-boom", version="1.2.0"), point)
    assert (status.code, status.plugin) == (Code.ERROR, "Boom")
    assert status.reasons == (f'running {point} plugin "Boom" (scorer-boom 1.2.0): RuntimeError: boom',)


@pytest.mark.parametrize("scores", [np.full(2, 50.7), [50.5, 3.0], np.array([True, False]), None, ["1", "2"]])
def test_scores_that_are_not_integers_are_refused_not_truncated(scores):
    with pytest.raises(TypeError, match="expected integer scores") as error:
        to_scores(scores, "Tier", ARGS)
    if isinstance(scores, np.ndarray) and scores.dtype == np.float64:
        assert str(error.value) == ("returned an array of float64, expected integer scores, one per node (an int64 "
                                    "array: round floats with np.rint(scores).astype(np.int64))")
    with pytest.raises(TypeError, match="expected integer scores"):
        to_normalized(scores if scores is not None else "x", "Tier", ARGS)


@pytest.mark.parametrize("scores", [np.array([1, 2], dtype=np.int32), [1, 2], np.array([1, 2], dtype=np.uint8)])
def test_integer_scores_of_any_width_are_taken(scores):
    result, status = to_scores(scores, "Tier", ARGS)
    assert result.dtype == np.int64 and result.tolist() == [1, 2] and status.is_success()


def test_a_score_beyond_int64_is_refused():
    with pytest.raises(ValueError, match="beyond int64"):
        to_scores(np.array([2**63, 1], dtype=np.uint64), "Tier", ARGS)


def test_tuples_of_the_wrong_shape_say_what_was_expected():
    with pytest.raises(TypeError, match=r"expected \(nominated node name or None, Status\)"):
        to_post_filter(("n1", Status(), "extra"), "P", ARGS)
    with pytest.raises(TypeError, match=r"expected a Status, or \(Status, timeout in seconds\)"):
        to_permit((Status(Code.WAIT), "10s"), "P", ARGS)
    assert to_permit((Status(Code.WAIT), 10), "P", ARGS) == (10.0, Status(Code.WAIT, (), "P"))


def test_a_bare_string_is_one_reason_never_characters():
    assert Status(Code.UNSCHEDULABLE, "no tier label").reasons == ("no tier label",)
    assert Status(Code.UNSCHEDULABLE, ["a", "b"]).message() == "a, b"
    with pytest.raises(TypeError, match="Status reasons must be strings, got int 3"):
        Status(Code.UNSCHEDULABLE, ("a", 3))
    with pytest.raises(TypeError, match="Status reasons must be a string or a tuple of strings, got int"):
        Status(Code.UNSCHEDULABLE, 3)


class StringStatus:
    name = "Tier"

    def filter(self, state, pod, node):
        return Status(Code.UNSCHEDULABLE, "no tier label")


def test_a_filter_with_a_bare_string_rejects_with_one_reason():
    fwk = framework(StringStatus())
    outcome = fwk.run_filters(CycleState(), POD, fwk.handle.cache.table, fwk.handle.cache.table.rows())
    assert not outcome.alive.any()
    assert outcome.records[0].status_at(0) == Status(Code.UNSCHEDULABLE, ("no tier label",), "Tier")


def test_scorer_debug_logs_the_traceback(monkeypatch, caplog):
    fwk = framework(Boom(), source="scorer-boom", version="1.2.0")
    with caplog.at_level(logging.ERROR, logger="scorer.framework.plugincalls"):
        monkeypatch.delenv("SCORER_DEBUG", raising=False)
        fwk.run_score(CycleState(), POD, batch(fwk))
        assert not caplog.records
        monkeypatch.setenv("SCORER_DEBUG", "1")
        fwk.run_score(CycleState(), POD, batch(fwk))
    [record] = caplog.records
    assert record.getMessage() == 'running Score plugin "Boom" (scorer-boom 1.2.0): RuntimeError: boom'
    assert record.exc_info is not None and "in score_batch" in caplog.text  # the plugin's own frame


def test_plugin_failed_leaves_scorers_own_plugins_unattributed():
    assert plugin_failed("Score", "NodeName", "", ValueError("x")).reasons == (
        'running Score plugin "NodeName": ValueError: x',)


class BadSort:
    name = "BadSort"

    def less(self, a, b):
        raise TypeError("'<' not supported between instances of 'NoneType' and 'int'")


def test_a_raising_queue_sort_is_logged_and_the_queue_keeps_working(caplog):
    fwk = framework(BadSort(), source="scorer-sort", version="0.1.0")
    assert fwk.sort_function() == fwk.less  # another distribution's: guarded
    a, b = QueuedPodInfo(make_pod("a"), 1.0), QueuedPodInfo(make_pod("b"), 2.0)
    with caplog.at_level(logging.ERROR, logger="scorer.framework.runtime"):
        assert fwk.less(a, b) is False
        assert fwk.less(b, a) is False  # within 30 s: counted, not logged again
    [record] = caplog.records
    assert record.getMessage() == ('running QueueSort plugin "BadSort" (scorer-sort 0.1.0): TypeError: \'<\' not '
                                   "supported between instances of 'NoneType' and 'int' (pods default/a and default/b "
                                   "taken as equal)")
    own = framework(BadSort())
    assert own.sort_function() == own.queue_sort.less  # scorer's own: called directly


class BadGate:
    name = "BadGate"

    def pre_enqueue(self, pod):
        raise KeyError("gate")


class BadPostBind:
    name = "BadPostBind"

    def bind(self, state, pod, node):
        return None

    def post_bind(self, state, pod, node):
        raise RuntimeError("audit log unavailable")


def test_points_without_a_cycle_to_fail_log_the_error(caplog):
    with caplog.at_level(logging.ERROR, logger="scorer.framework.runtime"):
        status = framework(BadGate(), source="scorer-gate").run_pre_enqueue(POD)
        fwk = framework(BadPostBind(), source="scorer-audit", version="2.0")
        asyncio.run(fwk.run_post_bind(CycleState(), POD, NODES[0].name))
    assert status.code == Code.ERROR
    assert [r.getMessage() for r in caplog.records] == [
        "running PreEnqueue plugin \"BadGate\" (scorer-gate): KeyError: 'gate' (pod default/p stays gated until it "
        "changes)",
        'running PostBind plugin "BadPostBind" (scorer-audit 2.0): RuntimeError: audit log unavailable '
        "(pod default/p, node n1)",
    ]
