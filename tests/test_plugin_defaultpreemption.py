"""DefaultPreemption (reference §9), table-driven after kube's default_preemption_test.go:
eligibility, candidates, victims with reprieve and PodDisruptionBudgets, the six criteria of
pickOneNodeForPreemption, the args, and what preparing the candidate writes."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import attrs
import numpy as np
import pytest
from schedkit import build

from scorer.config import load_and_resolve
from scorer.errors import ConfigError
from scorer.framework import CycleState, NodeBatch
from scorer.framework.catalog import PluginRegistry
from scorer.model import LabelSelector, PodDisruptionBudget
from scorer.plugins import defaultpreemption
from scorer.plugins.defaultpreemption import (
    Candidate,
    DefaultPreemption,
    DefaultPreemptionArgs,
    pick_one_node,
    split_by_pdb_violation,
)
from scorer.plugins.interpodaffinity import InterPodAffinity
from scorer.plugins.podtopologyspread import PodTopologySpread
from scorer.registry import build_registry
from scorer.testing import make_handle, make_node, make_pod, plugin_config


def pod(name, cpu="1", priority=0, node="", start="", labels=None, **kwargs):
    p = make_pod(name, cpu=cpu, priority=priority, node_name=node, labels=labels, **kwargs)
    return attrs.evolve(p, start_time=start) if start else p


def preempt(nodes, pods, preemptor, *, budgets=(), config=None, seed=0):
    """One scheduling attempt of ``preemptor`` with the default profile: (result, assembly, cluster)."""
    asm, cluster = build(config, nodes, pods, seed=seed)
    for budget in budgets:
        asm.cache.add_workload(budget)
    fwk = asm.frameworks["default-scheduler"]
    result = asm.scheduler.schedule_pod(fwk, CycleState(), preemptor)
    return result, asm, cluster


def victims(result):
    return sorted(v.name for v in result.victims)


# -- victims on a node: remove all lower-priority pods, then reprieve ------------------------------

@pytest.mark.parametrize(("case", "cpu", "pods", "want_node", "want_victims"), [
    # Reprieve the most important first: p3 (2 cpu) comes back, p2 and p1 do not fit with the preemptor.
    ("reprieve by priority", "2", [pod("p1", "1", 1, "n1"), pod("p2", "1", 2, "n1"), pod("p3", "2", 3, "n1"),
                                   pod("blocker", "4", 10, "n2")], "n1", ["p1", "p2"]),
    # Equal or higher priority pods are never victims: n1 cannot make room, n2 can.
    ("equal priority is no victim", "4", [pod("eq", "4", 10, "n1"), pod("low", "4", 1, "n2")], "n2", ["low"]),
    # Criterion 2: n2's highest victim has the lower priority.
    ("lowest highest victim", "4", [pod("a", "4", 5, "n1"), pod("b", "4", 3, "n2")], "n2", ["b"]),
    # Criterion 3: same highest victim, smaller sum of priorities on n1.
    ("smallest sum", "4", [pod("a", "2", 5, "n1"), pod("b", "2", 1, "n1"),
                           pod("c", "2", 5, "n2"), pod("d", "2", 4, "n2")], "n1", ["a", "b"]),
    # Criterion 5: same victims' priorities; the node whose highest victim started last.
    ("latest start", "4", [pod("old", "4", 1, "n1", start="2020-01-01T00:00:00Z"),
                           pod("new", "4", 1, "n2", start="2021-01-01T00:00:00Z")], "n2", ["new"]),
])
def test_victims_and_node_choice(case, cpu, pods, want_node, want_victims):
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    result, _, _ = preempt(nodes, pods, pod("high", cpu, 10))
    assert result.selected is None
    assert result.nominated == want_node, case
    assert victims(result) == want_victims, case
    assert result.message == "0/2 nodes are available: 2 Insufficient cpu.", case


def test_victims_are_sorted_by_importance():
    pods = [pod("a", "1", 1, "n1", start="2020-01-02T00:00:00Z"), pod("b", "1", 3, "n1"),
            pod("c", "1", 1, "n1", start="2020-01-01T00:00:00Z")]
    result, _, _ = preempt([make_node("n1", cpu="3")], pods, pod("high", "3", 10))
    assert [v.name for v in result.victims] == ["b", "c", "a"]


# -- PodDisruptionBudgets ----------------------------------------------------------------------------

def budget(name, app, allowed, disrupted=()):
    return PodDisruptionBudget(name=name, selector=LabelSelector(match_labels={"app": app}),
                               disruptions_allowed=allowed, disrupted_pods=frozenset(disrupted))


@pytest.mark.parametrize(("case", "budgets", "want_node"), [
    ("no budget: lowest victim priority wins", [], "n1"),
    ("a budget with no disruption left sends preemption to the other node", [budget("db", "db", 0)], "n2"),
    ("a budget that allows one disruption", [budget("db", "db", 1)], "n1"),
    ("a pod already in disruptedPods is not counted again", [budget("db", "db", 0, ["db-0"])], "n1"),
    ("a budget of another app", [budget("web", "web", 0)], "n1"),
])
def test_pdb_violations_are_avoided(case, budgets, want_node):
    pods = [pod("db-0", "4", 1, "n1", labels={"app": "db"}), pod("batch", "4", 5, "n2", labels={"app": "batch"})]
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    result, _, _ = preempt(nodes, pods, pod("high", "4", 10), budgets=budgets)
    assert result.nominated == want_node, case


def test_pdb_violating_victims_are_reprieved_first():
    # Removing both frees 4 cpu; one may come back. The protected one (lower priority) is tried first.
    pods = [pod("guarded", "2", 1, "n1", labels={"app": "db"}), pod("free", "2", 2, "n1")]
    result, _, _ = preempt([make_node("n1", cpu="4")], pods, pod("high", "2", 10), budgets=[budget("db", "db", 0)])
    assert victims(result) == ["free"]


def test_split_by_pdb_violation_counts_each_budget_down():
    pods = [pod(f"db-{i}", labels={"app": "db"}) for i in range(3)] + [pod("nolabels")]
    bad, good = split_by_pdb_violation(pods, lambda ns: [budget("db", "db", 2)])
    assert [p.name for p in bad] == ["db-2"] and [p.name for p in good] == ["db-0", "db-1", "nolabels"]
    other_ns = [budget("db", "db", 0)]
    bad, _ = split_by_pdb_violation([pod("x", labels={"app": "db"}, namespace="other")],
                                    lambda ns: other_ns if ns == "default" else [])
    assert bad == []


# -- pickOneNodeForPreemption ------------------------------------------------------------------------

def cand(node, *prios, violations=0, starts=()):
    pods = [pod(f"{node}-{i}", priority=p, start=starts[i] if i < len(starts) else "") for i, p in enumerate(prios)]
    return Candidate(node, tuple(pods), violations)


@pytest.mark.parametrize(("case", "candidates", "want"), [
    ("fewest PDB violations", [cand("a", 1, violations=2), cand("b", 9, violations=1)], "b"),
    ("lowest highest priority", [cand("a", 5, 1), cand("b", 4, 4, 4)], "b"),
    ("smallest sum of priorities", [cand("a", 5, 3), cand("b", 5, 2)], "b"),
    ("negative priorities are shifted: fewer pods win", [cand("a", -5, -5), cand("b", -5)], "b"),
    ("fewest victims (same sum impossible without shift): latest start breaks ties",
     [cand("a", 1, starts=("2020-01-01T00:00:00Z",)), cand("b", 1, starts=("2022-01-01T00:00:00Z",)),
      cand("c", 1, starts=("2021-01-01T00:00:00Z",))], "b"),
    ("earliest start among the highest-priority victims",
     [cand("a", 3, 3, starts=("2020-01-01T00:00:00Z", "2023-01-01T00:00:00Z")),
      cand("b", 3, 3, starts=("2021-01-01T00:00:00Z", "2021-06-01T00:00:00Z"))], "b"),
    ("all tied: the first", [cand("a", 1), cand("b", 1)], "a"),
])
def test_pick_one_node(case, candidates, want):
    assert pick_one_node(candidates).node == want, case


# -- eligibility and messages --------------------------------------------------------------------------

def test_preemption_policy_never():
    never = attrs.evolve(pod("high", "4", 10), preemption_policy="Never")
    result, _, cluster = preempt([make_node("n1", cpu="4")], [pod("low", "4", 1, "n1")], never)
    assert result.nominated is None
    assert result.message == ("0/1 nodes are available: 1 Insufficient cpu. "
                              "preemption: not eligible due to preemptionPolicy=Never.")


def test_a_terminating_victim_on_the_nominated_node_means_wait():
    terminating = attrs.evolve(pod("low", "4", 1, "n1"), deleting=True)
    other = pod("low2", "4", 1, "n2")
    preemptor = attrs.evolve(pod("high", "4", 10), nominated_node_name="n1")
    result, _, _ = preempt([make_node("n1", cpu="4"), make_node("n2", cpu="4")], [terminating, other], preemptor)
    assert result.nominated is None
    assert result.message.endswith("preemption: not eligible due to a terminating pod on the nominated node.")
    # A terminating pod of higher priority does not hold it back.
    result, _, _ = preempt([make_node("n1", cpu="4"), make_node("n2", cpu="4")],
                           [attrs.evolve(terminating, priority=20), other], preemptor)
    assert result.nominated == "n2"


def test_no_victims_and_not_helpful_messages():
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4"),
             make_node("tainted", cpu="4", taints=[{"key": "k", "effect": "NoSchedule"}])]
    pods = [pod("eq", "4", 10, "n1"), pod("eq2", "4", 10, "n2")]
    result, _, _ = preempt(nodes, pods, pod("high", "4", 10))
    assert result.nominated is None
    assert result.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. preemption: 0/3 nodes "
        "are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.")


def test_removing_victims_that_do_not_help_gives_the_filter_reason():
    # 8 cpu needed, the node has 4: removing its pod does not help (unresolvable already, here a memory case).
    nodes = [make_node("n1", cpu="4", memory="4Gi")]
    pods = [pod("low", "1", 1, "n1", memory="1Gi"), pod("eq", "1", 10, "n1", memory="3Gi")]
    result, _, _ = preempt(nodes, pods, pod("high", "1", 10, memory="2Gi"))
    assert result.message.endswith("preemption: 0/1 nodes are available: 1 Insufficient memory.")


# -- candidates: how many, from where -----------------------------------------------------------------

@pytest.mark.parametrize(("nodes", "pct", "absolute", "want"), [
    (50, 10, 100, 50), (1000, 10, 100, 100), (10000, 10, 100, 1000), (1000, 0, 10, 10), (1000, 50, 0, 500),
    (0, 10, 100, 0),
])
def test_num_candidates(nodes, pct, absolute, want):
    plugin = DefaultPreemption(DefaultPreemptionArgs(pct, absolute), make_handle())
    assert plugin.num_candidates(nodes) == want


def test_the_dry_run_stops_at_the_wanted_number_of_candidates():
    # 10 equal nodes, 1 candidate wanted: exactly one node is looked at (the random offset decides which).
    nodes = [make_node(f"n{i}", cpu="4") for i in range(10)]
    pods = [pod(f"low{i}", "4", 1, f"n{i}") for i in range(10)]
    config = plugin_config("DefaultPreemption", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1})
    chosen = {preempt(nodes, pods, pod("high", "4", 10), config=config, seed=seed)[0].nominated
              for seed in range(8)}
    assert len(chosen) > 1  # the offset moves with the random source
    asm, _ = build(config, nodes, pods)
    fwk = asm.frameworks["default-scheduler"]
    plugin = fwk.plugins["DefaultPreemption"]
    state = CycleState()
    fwk.run_pre_filter(state, pod("high", "4", 10), NodeBatch(asm.cache.table, asm.cache.table.rows()))
    candidates, looked_at = plugin.find_candidates(state, pod("high", "4", 10), {})
    assert len(candidates) == 1 and looked_at == {}


def test_args_validation():
    for args, message in [
        ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage: Invalid value: 101: not in valid range"),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute: Invalid value: -1: not in valid range"),
        ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
         "cannot be zero at the same time as minCandidateNodesAbsolute"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_and_resolve(plugin_config("DefaultPreemption", args), build_registry(autoload=False).catalog())
    assert DefaultPreemptionArgs().validate() == []
    assert DefaultPreemptionArgs(0, 5).validate() == [] and DefaultPreemptionArgs(5, 0).validate() == []


def test_registration():
    registry = PluginRegistry()
    defaultpreemption.register(registry)
    info = registry.plugins["DefaultPreemption"]
    assert info.extension_points == frozenset({"postFilter"}) and info.args_type is DefaultPreemptionArgs


# -- preparing the candidate ------------------------------------------------------------------------

def test_prepare_deletes_victims_with_events_and_clears_lower_nominations():
    # The nominated pod of higher priority counts on n1 (5 cpu): only one of the two low pods can stay.
    nodes = [make_node("n1", cpu="5")]
    pods = [pod("low", "2", 1, "n1"), pod("low2", "2", 1, "n1"),
            attrs.evolve(pod("nominated-low", "1", 5), nominated_node_name="n1"),
            attrs.evolve(pod("nominated-high", "1", 50), nominated_node_name="n1")]
    result, asm, cluster = preempt(nodes, pods, pod("high", "2", 10))
    assert result.nominated == "n1" and victims(result) == ["low2"]
    nominator = asm.queue.nominator
    assert [p.name for p in nominator.nominated_pods_for_node("n1")] == ["nominated-high"]
    assert asm.metrics.preemption_attempts._value.get() == 1
    asyncio.run(asm.recorder.flush())
    [victim] = result.victims
    assert cluster.preempted == [victim.key] and victim.key not in cluster.pods
    # The preemptor is the Event's related object, as kube-scheduler's Eventf(victim, preemptor, ...) has it.
    assert [(e.pod, e.type, e.reason, e.action, e.note, e.related) for e in cluster.events] == [
        (victim.key, "Normal", "Preempted", "Preempting", "Preempted by pod uid-default-high on node n1",
         "default/high")]
    assert cluster.pods["default/nominated-low"].nominated_node_name == ""
    assert cluster.pods["default/nominated-high"].nominated_node_name == "n1"


# -- the batched dry run decides as the pod-by-pod one -----------------------------------------------

def no_op_extension():
    """A PreFilter extension that keeps no state: forces the node-by-node (pod-by-pod) paths."""
    return SimpleNamespace(name="NoOpExtension", add_pod=lambda *args: None, remove_pod=lambda *args: None)


def random_cluster(rng, nodes=30):
    node_list = [make_node(f"n{i}", cpu=str(rng.choice([4, 6, 8]))) for i in range(nodes)]
    pods = []
    for i in range(nodes * 3):
        node = f"n{rng.randrange(nodes)}"
        start = f"2024-01-01T00:{rng.randrange(60):02d}:00Z" if rng.random() < 0.7 else ""
        pods.append(pod(f"p{i}", str(rng.choice([1, 2])), rng.randrange(6), node, start,
                        labels={"app": rng.choice(["a", "b"])}))
    for i in range(nodes // 3):  # nominated pods (they count for equal and lower priority preemptors)
        pods.append(attrs.evolve(pod(f"nom{i}", "1", rng.randrange(3, 9)),
                                 nominated_node_name=f"n{rng.randrange(nodes)}"))
    budgets = [budget("pdb-a", "a", rng.randrange(3))]
    return node_list, pods, budgets


def dry_run(nodes, pods, budgets, preemptor, config, *, per_node):
    asm, _ = build(config, nodes, pods)
    for budget in budgets:
        asm.cache.add_workload(budget)
    fwk = asm.frameworks["default-scheduler"]
    if per_node:
        fwk.pre_filter_extensions = [no_op_extension()]
    state = CycleState()
    fwk.run_pre_filter(state, preemptor, NodeBatch(asm.cache.table, asm.cache.table.rows()))
    return fwk.plugins["DefaultPreemption"].find_candidates(state, preemptor, {})


@pytest.mark.parametrize("seed", range(6))
def test_the_bulk_dry_run_finds_the_candidates_of_the_pod_by_pod_one(seed):
    rng = random.Random(seed)
    nodes, pods, budgets = random_cluster(rng)
    preemptor = pod("high", str(rng.choice([2, 3, 4])), 6)
    # Few candidates wanted: the windows after the first are sized from the rate seen so far.
    for absolute in (1, 4, 100):
        config = plugin_config("DefaultPreemption", {"minCandidateNodesPercentage": 0,
                                                     "minCandidateNodesAbsolute": absolute})
        bulk = dry_run(nodes, pods, budgets, preemptor, config, per_node=False)
        one_by_one = dry_run(nodes, pods, budgets, preemptor, config, per_node=True)
        assert bulk == one_by_one
        assert bulk[0]  # every case has candidates
    # And the windows do not matter: everything in one window gives the same candidates.
    config = plugin_config("DefaultPreemption", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 3})
    asm, _ = build(config, nodes, pods)
    for budget in budgets:
        asm.cache.add_workload(budget)
    fwk = asm.frameworks["default-scheduler"]
    state = CycleState()
    table = asm.cache.table
    fwk.run_pre_filter(state, preemptor, NodeBatch(table, table.rows()))
    plugin = fwk.plugins["DefaultPreemption"]
    candidates, _ = plugin.find_candidates(state, preemptor, {})
    offset = random.Random(0).randrange(len(table))  # build(seed=0): the same random source
    order = np.roll(table.rows(), -offset)
    whole = defaultpreemption.select_victims(fwk, state, preemptor, table, order, plugin._budgets)
    expected, good = [], 0
    for name, chosen, violations, status in whole:
        if status is None:
            expected.append(Candidate(name, chosen, violations))
            good += violations == 0
            if good and len(expected) >= 3:
                break
    assert sorted(candidates, key=lambda c: c.num_pdb_violations) == \
        sorted(expected, key=lambda c: c.num_pdb_violations)


@pytest.mark.parametrize("plugin", [PodTopologySpread, InterPodAffinity])
@pytest.mark.parametrize(("seed", "selected"), [(0, "a"), (1, "a"), (2, "z"), (3, "z")])
def test_nodes_whose_victims_no_extension_counts_are_dry_run_in_bulk_with_the_same_result(
        monkeypatch, plugin, seed, selected):
    """With PodTopologySpread's (a DoNotSchedule constraint) or InterPodAffinity's (required
    anti-affinity) PreFilter state active, only nodes holding lower-priority pods the pod's term
    selects need a state clone each; the others go through the bulk path. The candidates are those
    of the all-clones path (every pod treated as affecting the state)."""
    rng = random.Random(seed)
    nodes, pods, budgets = random_cluster(rng)
    nodes = [attrs.evolve(n, labels={**n.labels, "kubernetes.io/hostname": n.name}) for n in nodes]
    selector = {"matchLabels": {"app": selected}}
    spec = ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]}
            if plugin is PodTopologySpread else
            {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}}})
    preemptor = make_pod("high", cpu=str(rng.choice([2, 3, 4])), priority=6, labels={"app": "h"}, spec=spec)
    config = plugin_config("DefaultPreemption", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5})
    split = dry_run(nodes, pods, budgets, preemptor, config, per_node=False)
    calls = []
    original = defaultpreemption.select_victims

    def every_node_alone(*args, **kwargs):
        calls.append(kwargs.get("extensions"))
        return original(*args, **kwargs)

    monkeypatch.setattr(defaultpreemption, "select_victims", every_node_alone)
    split_again = dry_run(nodes, pods, budgets, preemptor, config, per_node=False)
    assert split_again == split
    if selected == "z":  # no pod has app=z: every node goes in bulk
        assert calls and all(extensions is False for extensions in calls)
    else:
        assert None in calls  # some nodes hold app=a pods: those get their own clone
    monkeypatch.setattr(plugin, "affected_by", lambda self, state, pod, other: True)
    alone = dry_run(nodes, pods, budgets, preemptor, config, per_node=False)
    assert alone == split
    assert split[0]  # there are candidates to compare
