"""The scheduling algorithm and cycles: sampling, FitError text, selection,
plugin failures (a raising plugin is an Error naming it; the scheduler goes on)."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest

from scorer.assembly import assemble
from scorer.framework import Code, CycleState, FilterVerdict, Status
from scorer.hookspecs import hookimpl
from scorer.memory import InMemoryCluster
from scorer.registry import build_registry
from scorer.scheduler import num_feasible_nodes_to_find
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


class Plugins:
    """A plugin module registered through the hook, as a distribution would."""

    def __init__(self, *plugin_classes):
        self.plugin_classes = plugin_classes

    @hookimpl
    def scorer_register_plugins(self, registry):
        for cls in self.plugin_classes:
            registry.register(cls.name, lambda args, handle, cls=cls: cls(), plugin_type=cls)


class RaisingFilter:
    name = "RaisingFilter"

    def filter(self, state, pod, node):
        raise RuntimeError("boom")


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


def config_with(*names, weight=1, extra=None):
    profile = {"schedulerName": "default-scheduler",
               "plugins": {"multiPoint": {"enabled": [{"name": n, "weight": weight} for n in names]}}}
    profile.update(extra or {})
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


def build(config, nodes, pods, *plugin_classes, seed=0):
    registry = build_registry(autoload=False, modules=[Plugins(*plugin_classes)])
    cluster = InMemoryCluster(nodes, pods, [])
    asm = assemble(config, cluster, registry=registry, seed=seed)
    asm.cache.load(nodes, cluster.bound_pods(), [])
    return asm, cluster


def schedule_all(asm):
    async def run():
        while (qpi := asm.queue.pop()) is not None:
            attempt = asm.scheduler.scheduling_cycle(qpi)
            if attempt is not None:
                await asm.scheduler.binding_cycle(attempt)

    asyncio.run(run())


def test_raising_filter_is_an_error_naming_the_plugin_and_the_pod_is_retried():
    nodes = [make_node("n1"), make_node("n2")]
    pod = make_pod("p")
    asm, cluster = build(config_with("RaisingFilter"), nodes, [pod], RaisingFilter)
    asm.queue.add(pod)
    schedule_all(asm)
    event = cluster.events[-1]
    assert event.reason == "FailedScheduling"
    assert 'RaisingFilter' in event.note and "boom" in event.note
    assert cluster.conditions[pod.key].reason == "SchedulerError"
    # Nothing is lost: the pod waits in backoff for its retry.
    assert asm.queue.pending_counts()["backoff"] == 1
    assert cluster.pods[pod.key].node_name == ""


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
    # n4 is rejected by NodeUnschedulable first; n1, n2 lack cpu and memory; n3 lacks memory.
    assert result.message == (
        "0/4 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu, 3 Insufficient memory."
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


def test_simulated_burst_places_every_pod_and_respects_capacity():
    nodes = [make_node(f"n{i}", cpu="2", memory="4Gi", pods=10) for i in range(3)]
    pods = [make_pod(f"p{i}", cpu="500m", memory="512Mi") for i in range(14)]
    asm, cluster = build(None, nodes, pods)
    for pod in pods:
        asm.queue.add(pod)
    schedule_all(asm)
    placed = [p for p in cluster.pods.values() if p.node_name]
    assert len(placed) == 12  # 4 per node by cpu
    per_node = {n.name: sum(1 for p in placed if p.node_name == n.name) for n in nodes}
    assert per_node == {"n0": 4, "n1": 4, "n2": 4}
    failures = [e for e in cluster.events if e.reason == "FailedScheduling"]
    assert len(failures) == 2
    assert failures[0].note == "0/3 nodes are available: 3 Insufficient cpu."
    assert asm.queue.pending_counts()["unschedulable"] == 2
    assert {e.reason for e in cluster.events} == {"Scheduled", "FailedScheduling"}


def test_bind_failure_forgets_the_pod_and_requeues():
    nodes = [make_node("n1")]
    pod = make_pod("p", cpu="1")
    asm, cluster = build(None, nodes, [pod])
    asm.queue.add(pod)
    del cluster.pods[pod.key]  # the pod disappears before binding: the API answers 404
    schedule_all(asm)
    assert asm.cache.sizes()["assumed_pods"] == 0
    assert asm.cache.table.requested[0].sum() == 0
    note = cluster.events[-1].note
    assert note.startswith("binding rejected: ") and "not found" in note


def test_status_helpers():
    assert Status().is_success()
    assert Status.unschedulable("x", resolvable=False).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert Status(Code.UNSCHEDULABLE, ("a", "b")).message() == "a, b"
    assert Code.UNSCHEDULABLE_AND_UNRESOLVABLE.label == "UnschedulableAndUnresolvable"
    assert random.Random(0).random() == random.Random(0).random()


class Gate:
    """A Permit plugin that holds every pod; tests allow or reject it through the handle."""

    name = "Gate"

    def permit(self, state, pod, node):
        return Status(Code.WAIT), 30.0


@pytest.mark.parametrize("decision", ["allow", "reject", "timeout"])
def test_permit_wait_allow_reject_and_timeout(decision):
    nodes = [make_node("n1")]
    pod = make_pod("p", cpu="1")
    asm, cluster = build(config_with("Gate"), nodes, [pod], Gate)
    asm.queue.add(pod)
    fwk = asm.frameworks["default-scheduler"]

    async def run():
        attempt = asm.scheduler.scheduling_cycle(asm.queue.pop())
        assert attempt is not None and attempt.permit_wait == 30.0
        # The pod is assumed while it waits: its resources already count.
        assert asm.cache.is_assumed(pod.key)
        waiting = fwk.handle.waiting_pods[pod.key]
        if decision == "allow":
            waiting.allow("Gate")
        elif decision == "reject":
            waiting.reject("Gate", "quota exceeded")
        else:
            attempt.permit_wait = 0.01
        return await asm.scheduler.binding_cycle(attempt)

    bound = asyncio.run(run())
    assert fwk.handle.waiting_pods == {}
    if decision == "allow":
        assert bound and cluster.pods[pod.key].node_name == "n1"
        return
    assert not bound and cluster.pods[pod.key].node_name == ""
    assert not asm.cache.is_assumed(pod.key)
    expected = "quota exceeded" if decision == "reject" else "rejected due to timeout after waiting at permit"
    assert cluster.events[-1].note == f"0/1 nodes are available: {expected}."
    assert cluster.conditions[pod.key].reason == "Unschedulable"
