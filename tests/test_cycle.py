"""The scheduling algorithm and cycle (scorer.cycle): sampling, FitError text, selection,
plugin failures (a raising plugin is an Error naming it), skipped pods, metrics."""

from __future__ import annotations

import asyncio

import attrs
import numpy as np
import pytest
from schedkit import RaisingFilter, build, config_with, schedule_all

from scorer.cycle import ERROR, SKIPPED, UNSCHEDULABLE, _Sampling, num_feasible_nodes_to_find
from scorer.framework import Code, CycleState, FilterVerdict, Status
from scorer.testing import make_node, make_pod


@pytest.mark.parametrize(
    ("pct", "nodes", "expected"),
    [
        (None, 50, 50),  # under 100 nodes: all
        (0, 99, 99),
        (0, 100, 100),  # 50 - 0 = 50% -> 50 -> floor 100
        (0, 500, 230),  # 50 - 4 = 46%
        (0, 1000, 420),
        (0, 3000, 780),
        (0, 5000, 500),  # 50 - 40 = 10%
        (0, 6000, 300),  # 50 - 48 = 2% -> floor 5%
        (0, 15000, 750),
        (10, 500, 100),  # 50 -> floor 100
        (50, 1000, 500),
        (100, 1000, 1000),
    ],
)
def test_num_feasible_nodes_to_find(pct, nodes, expected):
    assert num_feasible_nodes_to_find(pct, nodes) == expected


class RaisingScore:
    name = "RaisingScore"

    def score_batch(self, state, pod, nodes):
        raise ValueError("bad metric")


class OutOfRange:
    name = "OutOfRange"

    def score(self, state, pod, node):
        return 101


class PerNodeScore:
    name = "PerNodeScore"

    def score(self, state, pod, node):
        return int(node.name[-1]) * 10


class RejectOdd:
    name = "RejectOdd"

    def filter_batch(self, state, pod, nodes):
        verdict = FilterVerdict(len(nodes))
        verdict.reject(np.array([int(n[-1]) % 2 == 1 for n in nodes.names]), "odd node")
        return verdict


def test_raising_score_plugin_is_an_error():
    nodes = [make_node("n1"), make_node("n2")]
    asm, _ = build(config_with("RaisingScore"), nodes, [], RaisingScore)
    result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"))
    assert result.selected is None
    assert result.status.code == Code.ERROR
    assert result.status.plugin == "RaisingScore"
    assert "ValueError: bad metric" in result.message


def test_score_out_of_range_is_an_error():
    nodes = [make_node("n1"), make_node("n2")]
    asm, _ = build(config_with("OutOfRange"), nodes, [], OutOfRange)
    result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"))
    assert result.status.code == Code.ERROR
    assert "invalid score 101" in result.message and "OutOfRange" in result.message


class NegativeScore:
    name = "NegativeScore"

    def score_batch(self, state, pod, nodes):
        return np.array([50, -1][: len(nodes)], dtype=np.int64)


class ShortNormalize:
    name = "ShortNormalize"

    def score_batch(self, state, pod, nodes):
        return np.full(len(nodes), 10, dtype=np.int64)

    def normalize_score(self, state, pod, scores):
        return scores[:1]


def test_the_first_plugin_out_of_range_is_the_error_even_if_a_later_one_fails():
    # The range is checked once after the plugins ran: the error still names the first plugin out of
    # range (a later plugin's failure does not hide it), with the node and value, and no later plugin's
    # scores are in the outcome.
    nodes = [make_node("n1"), make_node("n2")]
    asm, _ = build(config_with("PerNodeScore", "NegativeScore", "RaisingScore"), nodes, [], PerNodeScore,
                   NegativeScore, RaisingScore)
    result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"),
                                        evaluate_all=True)
    assert result.status.code == Code.ERROR and result.status.plugin == "NegativeScore"
    assert 'invalid score -1 for node "n2"' in result.message
    assert [p.plugin for p in result.scores.plugins][-1] == "PerNodeScore"


def test_normalized_scores_of_the_wrong_length_are_an_error():
    nodes = [make_node("n1"), make_node("n2")]
    asm, _ = build(config_with("ShortNormalize", "PerNodeScore"), nodes, [], ShortNormalize, PerNodeScore)
    result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"),
                                        evaluate_all=True)
    assert result.status.code == Code.ERROR and result.status.plugin == "ShortNormalize"
    assert "1 scores for 2 nodes after normalizing" in result.message


def test_per_node_score_plugin_is_adapted_and_weighted():
    nodes = [make_node(f"n{i}") for i in range(1, 4)]
    asm, _ = build(config_with("PerNodeScore", weight=5), nodes, [], PerNodeScore)
    fwk = asm.frameworks["default-scheduler"]
    result = asm.scheduler.schedule_pod(fwk, CycleState(), make_pod("p", cpu="100m"), evaluate_all=True)
    assert result.selected == "n3"
    ps = next(p for p in result.scores.plugins if p.plugin == "PerNodeScore")
    assert ps.raw.tolist() == [10, 20, 30]
    assert ps.weight == 5


def test_fit_error_message_histogram_is_sorted():
    nodes = [make_node("n1", cpu="1"), make_node("n2", cpu="1"), make_node("n3", cpu="8"),
             make_node("n4", unschedulable=True)]
    asm, _ = build(None, nodes, [])
    fwk = asm.frameworks["default-scheduler"]
    pod = make_pod("p", cpu="4", memory="64Gi")
    result = asm.scheduler.schedule_pod(fwk, CycleState(), pod)
    assert result.selected is None
    # n4 is rejected by NodeUnschedulable first; n1, n2 lack cpu and memory; n3 lacks memory. Every
    # node is unresolvable (the requests exceed the nodes' allocatable), so DefaultPreemption says so.
    assert result.message == (
        "0/4 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu, 3 Insufficient memory."
        " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )
    assert result.unschedulable_plugins == {"NodeUnschedulable", "NodeResourcesFit"}


def test_no_nodes_message():
    asm, _ = build(None, [], [])
    result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"))
    assert result.message == "no nodes available to schedule pods"


def test_single_feasible_node_is_chosen_without_scoring():
    nodes = [make_node("n1"), make_node("n2"), make_node("n3")]
    asm, _ = build(config_with("RejectOdd", "RaisingScore"), nodes, [], RejectOdd, RaisingScore)
    result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"))
    # Only n2 passes; RaisingScore would fail if it ran.
    assert result.selected == "n2"
    assert result.scores is None


def test_ties_are_broken_at_random_among_the_best():
    nodes = [make_node(f"n{i}") for i in range(4)]
    chosen = set()
    for seed in range(40):
        asm, _ = build(None, nodes, [], seed=seed)
        result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"))
        chosen.add(result.selected)
    assert chosen == {"n0", "n1", "n2", "n3"}


def test_sampling_rotates_the_start_index():
    # 200 nodes, percentageOfNodesToScore 10 -> 20 -> floor 100 nodes per cycle.
    nodes = [make_node(f"n{i:03d}") for i in range(200)]
    config = config_with(extra={"percentageOfNodesToScore": 10})
    asm, _ = build(config, nodes, [])
    fwk = asm.frameworks["default-scheduler"]
    first = asm.scheduler.schedule_pod(fwk, CycleState(), make_pod("a"))
    assert len(first.feasible_positions) == 100 and first.processed == 100
    assert asm.scheduler.next_start_node_index == 100
    second = asm.scheduler.schedule_pod(fwk, CycleState(), make_pod("b"))
    assert int(second.rows[0]) == 100
    assert asm.scheduler.next_start_node_index == 0


def test_sampling_counts_rejected_nodes_as_processed():
    nodes = [make_node(f"n{i:03d}", cpu="1" if i % 2 else "8") for i in range(300)]
    asm, _ = build(config_with(extra={"percentageOfNodesToScore": 20}), nodes, [])
    fwk = asm.frameworks["default-scheduler"]
    result = asm.scheduler.schedule_pod(fwk, CycleState(), make_pod("p", cpu="2"))
    # 20% of 300 = 60 -> floor 100 feasible; every other node fits, so 199 nodes were processed.
    assert len(result.feasible_positions) == 100
    assert result.processed == 199
    assert sum(len(r.positions) for r in result.records) == 99


def _doubling(passes: np.ndarray, to_find: int) -> tuple[int, list[int]]:
    """The reference: chunks of to_find, 2 x, 4 x... until to_find pass; cut at the to_find-th if more did."""
    pos, size, found = 0, to_find, 0
    while pos < len(passes) and found < to_find:
        found += int(passes[pos : pos + size].sum())
        pos = min(pos + size, len(passes))
        size *= 2
    feasible = np.flatnonzero(passes[:pos])
    if len(feasible) > to_find:
        return int(feasible[to_find - 1]) + 1, feasible[:to_find].tolist()
    return pos, feasible.tolist()


def test_chunks_sized_by_the_pass_rate_give_the_doubling_result():
    """Whatever the last cycle's pass rate, the nodes processed and found are those of doubling chunks,
    and a Filter that rejects a few nodes takes one pass when the rate is known."""
    rng = np.random.default_rng(3)
    for _ in range(3000):
        n = int(rng.integers(1, 300))
        to_find = int(rng.integers(1, n + 1))
        passes = rng.random(n) < rng.choice([0.0, 0.02, 0.5, 0.95, 1.0])
        sampling = _Sampling(to_find, n, float(rng.choice([0.0, 0.0002, 0.1, 0.6, 0.95, 1.0])),
                             trusted=bool(rng.integers(2)))
        alive = np.zeros(n, dtype=bool)
        pos = found = 0
        while pos < n:
            size = sampling.next_size(pos, found)
            assert size > 0
            alive[pos : pos + size] = passes[pos : pos + size]
            found, pos = int(alive.sum()), min(pos + size, n)
            if sampling.done(alive, pos, found):
                break
        feasible = np.flatnonzero(alive)
        processed = sampling.processed(feasible, pos)
        assert (processed, feasible[:to_find].tolist()) == _doubling(passes, to_find)
    passes = np.random.default_rng(4).random(5000) < 0.94
    sampling = _Sampling(500, 5000, 0.94)
    first = sampling.next_size(0, 0)
    assert sampling.done(passes[:first], first, int(passes[:first].sum()))


def test_a_rate_measured_on_pods_like_this_one_sizes_the_first_chunk_in_full():
    """A pod that passes 1 node in 5,000 (a claim pinned to one node): with the rate of pods that ran the
    same Filters, one chunk of every node; with another kind's rate, chunks of at most twice the last."""
    assert _Sampling(500, 5000, 1 / 5000, trusted=True).next_size(0, 0) == 5000
    untrusted = _Sampling(500, 5000, 1 / 5000)
    assert untrusted.next_size(0, 0) == 1000 and untrusted.next_size(1000, 0) == 2000


class OnlyFirstNode:
    """A Filter that passes the first node of the table and, unless the pod is labelled plain, runs."""

    name = "OnlyFirstNode"
    chunks: list[int] = []

    def pre_filter(self, state, pod, nodes):
        return Status(Code.SKIP) if pod.labels.get("plain") else None

    def filter_batch(self, state, pod, nodes):
        OnlyFirstNode.chunks.append(len(nodes))
        verdict = FilterVerdict(len(nodes))
        verdict.reject(nodes.rows != 0, "not the first node", Code.UNSCHEDULABLE)
        return verdict


def test_pass_rates_are_kept_per_set_of_skipped_filters():
    nodes = [make_node(f"n{i:03d}") for i in range(600)]
    pods = [make_pod("a"), make_pod("plain", labels={"plain": "1"}), make_pod("b")]
    OnlyFirstNode.chunks = []
    asm, _ = build(config_with("OnlyFirstNode"), nodes, pods, OnlyFirstNode)
    schedule_all(asm)
    cycle = asm.scheduler.algorithm
    ratios = {"OnlyFirstNode" in skipped: ratio for skipped, ratio in cycle.feasible_ratios.items()}
    assert len(cycle.feasible_ratios) == 2 and ratios == {False: 1 / 600, True: 1.0}
    # "a" learnt its rate in doubling chunks; "b" (after a plain pod) filters every node in one
    first, second = OnlyFirstNode.chunks[:-1], OnlyFirstNode.chunks[-1:]
    assert len(first) > 1 and sum(first) == 600 and second == [600]


def test_status_helpers():
    assert Status().is_success()
    assert Status.unschedulable("x", resolvable=False).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert Status(Code.UNSCHEDULABLE, ("a", "b")).message() == "a, b"
    assert Code.UNSCHEDULABLE_AND_UNRESOLVABLE.label == "UnschedulableAndUnresolvable"


def test_failed_at_names_the_extension_point_of_the_error():
    nodes = [make_node("n1"), make_node("n2")]
    asm, _ = build(config_with("RaisingFilter"), nodes, [], RaisingFilter)
    result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"))
    assert result.failed_at == "Filter" and result.status.plugin == "RaisingFilter"
    asm, _ = build(config_with("RaisingScore"), nodes, [], RaisingScore)
    result = asm.scheduler.schedule_pod(asm.frameworks["default-scheduler"], CycleState(), make_pod("p"))
    assert result.failed_at == "Score" and result.pre_score_status == Status()


def test_score_all_scores_a_single_feasible_node():
    nodes = [make_node("n1"), make_node("n2"), make_node("n3")]
    asm, _ = build(config_with("RejectOdd", "PerNodeScore"), nodes, [], RejectOdd, PerNodeScore)
    fwk = asm.frameworks["default-scheduler"]
    result = asm.scheduler.schedule_pod(fwk, CycleState(), make_pod("p"), evaluate_all=True, score_all=True)
    assert result.selected == "n2"
    ps = next(p for p in result.scores.plugins if p.plugin == "PerNodeScore")
    assert ps.raw.tolist() == [20]


def run_turn(asm):
    async def turn():
        result = asm.scheduler.schedule_one()
        if result is not None and result.binding is not None:
            await result.binding
        await asm.recorder.flush()
        return result

    return asyncio.run(turn())


def test_a_pod_being_deleted_is_skipped_with_an_event():
    pod = attrs.evolve(make_pod("p"), deleting=True)
    asm, cluster = build(None, [make_node("n1")], [pod])
    turn = run_turn(asm)
    assert turn.outcome == SKIPPED
    assert [e.note for e in cluster.events] == ["skip schedule deleting pod: default/p"]
    assert len(asm.queue) == 0 and not asm.queue.is_in_flight(pod.key)
    assert cluster.pods[pod.key].node_name == ""


def test_an_assumed_pod_queued_again_is_skipped():
    pod = make_pod("p", cpu="1")
    asm, cluster = build(None, [make_node("n1")], [])
    asm.cache.assume(pod, "n1")  # its binding is in flight when an update queues it again
    asm.queue.add(pod)
    assert run_turn(asm).outcome == SKIPPED
    assert asm.cache.is_assumed(pod.key)
    assert asm.cache.table.requested[0, asm.cache.table.resource_index["cpu"]] == 1000
    assert cluster.events == [] and len(asm.queue) == 0


def test_every_attempt_is_counted_in_the_scheduler_metrics():
    nodes = [make_node("n1", cpu="1")]
    pods = [make_pod("fits", cpu="1"), make_pod("too-big", cpu="2")]
    asm, _ = build(None, nodes, pods)
    schedule = asm.metrics.collector_registry.get_sample_value
    while run_turn(asm) is not None:
        pass
    for result, count in (("scheduled", 1.0), (UNSCHEDULABLE, 1.0), (ERROR, 0.0)):  # error: 0 from the start
        labels = {"result": result, "profile": "default-scheduler"}
        assert schedule("scheduler_schedule_attempts_total", labels) == count
    labels = {"result": "scheduled", "profile": "default-scheduler"}
    assert schedule("scheduler_scheduling_attempt_duration_seconds_count", labels) == 1.0


def test_an_assumed_pod_that_would_overflow_its_node_is_an_error_naming_it():
    # Without NodeResourcesFit nothing stops the pod; the cache refuses to wrap its int64 totals.
    config = config_with(extra={"plugins": {"multiPoint": {"disabled": [{"name": "NodeResourcesFit"}]}}})
    nodes = [make_node("n1")]
    running = make_pod("running", memory="5Ei", node_name="n1")
    pod = make_pod("p", memory="5Ei")
    asm, cluster = build(config, nodes, [running, pod])
    turn = run_turn(asm)
    assert turn.outcome == ERROR
    assert "pod default/p" in turn.message and "int64" in turn.message
    assert cluster.events[-1].reason == "FailedScheduling" and "pod default/p" in cluster.events[-1].note
    assert cluster.conditions[pod.key].reason == "SchedulerError"
    assert not asm.cache.is_assumed(pod.key)
    assert asm.queue.pending_counts()["backoff"] == 1
    memory = asm.cache.table.resource_index["memory"]
    assert asm.cache.table.requested[0, memory] == running.requests["memory"]



# -- the statuses PostFilter gets: a lazy mapping --------------------------------------------------

def _statuses_the_old_way(names, rows, records, excluded_status=None, excluded_rows=()):
    out = {}
    for record in records:
        for i, pos in enumerate(record.positions.tolist()):
            out[names[int(rows[pos])]] = record.status_at(i)
    if excluded_status is not None:
        for row in excluded_rows:
            out[names[row]] = excluded_status
    return out


def test_node_statuses_are_made_lazily_in_the_order_of_rejection():
    from scorer.framework.runtime import FilterRecord, NodeStatuses

    names = ["a", "b", "c", "d", "e", "f"]
    index = {name: i for i, name in enumerate(names)}
    rows = np.array([4, 3, 2, 1, 0], dtype=np.int64)  # "f" was not evaluated
    records = (
        FilterRecord("P1", np.array([2, 0]), np.array([2, 1], dtype=np.int8),
                     (("gone", np.array([True, False])), ("full", np.array([True, True])))),
        FilterRecord("P2", np.array([3]), np.array([1], dtype=np.int8), (("busy", np.array([True])),)),
    )
    excluded = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("left out",), "P3")
    view = NodeStatuses(names, index, rows, records, None, excluded, np.array([3, 5]))
    expected = _statuses_the_old_way(names, rows, records, excluded, [3, 5])
    assert list(view) == list(expected) == ["c", "e", "b", "d", "f"]
    assert dict(view) == expected and len(view) == 5
    assert view["c"] == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("gone", "full"), "P1")
    assert view["b"].reasons == ("busy",) and view["d"] is excluded
    assert "a" not in view and view.get("a") is None and "zz" not in view and 3 not in view
    with pytest.raises(KeyError):
        view["a"]
    assert view.unresolvable_mask().tolist() == [False, False, True, True, False, True]
    # A PreFilter rejection: every node has its status.
    refused = Status(Code.UNSCHEDULABLE, ("no",), "P0")
    view = NodeStatuses(names, index, rows, (), refused)
    assert dict(view) == dict.fromkeys(names, refused) and not view.unresolvable_mask().any()


def test_post_filter_gets_the_lazy_statuses_of_the_cycle():
    from scorer.framework.runtime import NodeStatuses

    nodes = [make_node("n1", cpu="1"), make_node("n2", unschedulable=True), make_node("n3", cpu="8")]
    asm, _ = build(None, nodes, [make_pod("low", cpu="8", node_name="n3", priority=0)])
    fwk = asm.frameworks["default-scheduler"]
    seen = []
    run_post_filter = fwk.run_post_filter

    def spy(state, pod, statuses):
        seen.append(statuses)
        return run_post_filter(state, pod, statuses)

    fwk.run_post_filter = spy
    result = asm.scheduler.schedule_pod(fwk, CycleState(), make_pod("p", cpu="2", priority=10))
    assert result.nominated == "n3" and [v.name for v in result.victims] == ["low"]
    (statuses,) = seen
    assert isinstance(statuses, NodeStatuses)
    assert dict(statuses) == result.node_statuses(asm.cache.table)
    assert statuses.unresolvable_mask().tolist() == [True, True, False]  # n1 too small, n2 unschedulable
