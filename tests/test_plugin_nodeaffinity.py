"""NodeAffinity: nodeSelector, required terms (every operator, OR of terms, AND
of requirements), matchFields narrowing in PreFilter, addedAffinity, Skip
cases, and preferred-term scores normalized by DefaultNormalizeScore."""

from __future__ import annotations

import random

import pytest
from pluginkit import requeues

from scorer.config.convert import structure
from scorer.errors import ConfigError
from scorer.framework import Code, CycleState, NodeBatch, PreFilterResult, Status
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.model import NodeAffinity as NodeAffinitySpec
from scorer.model import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from scorer.plugins import nodeaffinity
from scorer.plugins.nodeaffinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
    NodeAffinityArgs,
)
from scorer.testing import make_cache, make_node, make_pod, run_plugin

NODE_LABELS = {
    "n1": {"zone": "a", "gen": "3", "disk": "ssd"},
    "n2": {"zone": "b", "gen": "5"},
    "n3": {"zone": "c", "disk": "ssd"},
    "n4": {},
    "n5": {"zone": "a", "gen": "abc"},  # not an integer: Gt/Lt never match
}
ALL = list(NODE_LABELS)


def nodes():
    return [make_node(name, labels=labels) for name, labels in NODE_LABELS.items()]


def expr(key, operator, *values):
    out = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def field(operator, name):
    return {"key": "metadata.name", "operator": operator, "values": [name]}


def required(*terms):
    selector = {"nodeSelectorTerms": list(terms)}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": selector}}


def preferred(*weighted):
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "preference": term} for weight, term in weighted
    ]}}


def plugin(added=None):
    return NodeAffinity(NodeAffinityArgs(added_affinity=added))


def batch_of(node_list):
    cache = make_cache(node_list)
    return NodeBatch(cache.table, cache.table.rows())


# -- filter ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requirement", "matching"),
    [
        (expr("zone", "In", "a", "b"), ["n1", "n2", "n5"]),
        (expr("zone", "NotIn", "a"), ["n2", "n3", "n4"]),  # a missing label is "not in"
        (expr("gen", "Exists"), ["n1", "n2", "n5"]),
        (expr("gen", "DoesNotExist"), ["n3", "n4"]),
        (expr("gen", "Gt", "4"), ["n2"]),
        (expr("gen", "Lt", "4"), ["n1"]),
    ],
)
def test_required_operators(requirement, matching):
    pod = make_pod("p", affinity=required({"matchExpressions": [requirement]}))
    run = run_plugin(plugin(), pod, nodes())
    assert run.feasible == matching
    for name in set(ALL) - set(matching):
        assert run.filter[name].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert run.filter[name].reasons == (ERR_REASON_POD,)


def test_terms_are_ored_requirements_anded():
    # term 1: zone in (a, b) AND gen > 4 -> n2 (n5's gen is not an integer);
    # term 2: no zone label -> n4; term 3 is empty and matches nothing.
    affinity = required(
        {"matchExpressions": [expr("zone", "In", "a", "b"), expr("gen", "Gt", "4")]},
        {"matchExpressions": [expr("zone", "DoesNotExist")]},
        {},
    )
    assert run_plugin(plugin(), make_pod("p", affinity=affinity), nodes()).feasible == ["n2", "n4"]


def test_node_selector_and_required_affinity_both_apply():
    pod = make_pod("p", node_selector={"disk": "ssd"})
    assert run_plugin(plugin(), pod, nodes()).feasible == ["n1", "n3"]
    pod = make_pod("p", node_selector={"disk": "ssd", "zone": "c"})
    assert run_plugin(plugin(), pod, nodes()).feasible == ["n3"]
    pod = make_pod("p", node_selector={"disk": "ssd"},
                   affinity=required({"matchExpressions": [expr("gen", "Exists")]}))
    run = run_plugin(plugin(), pod, nodes())
    assert run.feasible == ["n1"]
    assert run.filter["n2"].reasons == (ERR_REASON_POD,)


def test_empty_label_value_selector():
    labelled = [make_node("empty", labels={"role": ""}), make_node("none")]
    run = run_plugin(plugin(), make_pod("p", node_selector={"role": ""}), labelled)
    assert run.feasible == ["empty"]


@pytest.mark.parametrize(
    "requirement",
    [
        expr("zone", "NotIn", "invalid value: ___@#$%^"),  # kube's own test case
        expr("zone", "In", "a", "not valid"),  # one invalid value fails the whole requirement
        expr("gen", "Gt", "four"),  # Gt/Lt: kube's parse wants an integer
        expr("gen", "Lt", "-1"),  # an integer, but not a valid label value
        expr("bad key", "DoesNotExist"),
    ],
)
def test_a_term_kube_cannot_parse_matches_no_node(requirement):
    """The API server accepts these values; kube-scheduler's parse of the term fails it,
    where the requirement on its own (NotIn, DoesNotExist) would match some nodes."""
    pod = make_pod("p", affinity=required({"matchExpressions": [requirement]}))
    run = run_plugin(plugin(), pod, nodes())
    assert run.feasible == []
    assert {status.reasons for status in run.filter.values()} == {(ERR_REASON_POD,)}
    # Terms are OR-ed: another, valid term still places the pod.
    pod = make_pod("p", affinity=required({"matchExpressions": [requirement]}, ZONE_A))
    assert run_plugin(plugin(), pod, nodes()).feasible == ["n1", "n5"]


# -- pre-filter --------------------------------------------------------------------


def test_pre_filter_skips_when_there_is_nothing_to_filter():
    batch = batch_of(nodes())
    assert plugin().pre_filter(CycleState(), make_pod("p"), batch) == Status.skip()
    # Preferred-only affinity (pod's or added) does not filter either.
    pod = make_pod("p", affinity=preferred((5, {"matchExpressions": [expr("zone", "In", "a")]})))
    assert plugin().pre_filter(CycleState(), pod, batch) == Status.skip()
    added_preferred = NodeAffinitySpec(preferred=())
    assert plugin(added_preferred).pre_filter(CycleState(), make_pod("p"), batch) == Status.skip()
    # Skip means the Filter is not run: every node is feasible.
    assert run_plugin(plugin(), make_pod("p"), nodes()).feasible == ALL
    # A nodeSelector, required terms or added required terms each need the Filter.
    pod = make_pod("p", node_selector={"zone": "a"})
    assert plugin().pre_filter(CycleState(), pod, batch) is None
    zone_exists = NodeSelectorRequirement(key="zone", operator="Exists")
    added = NodeAffinitySpec(
        required=NodeSelector(terms=(NodeSelectorTerm(match_expressions=(zone_exists,)),))
    )
    assert plugin(added).pre_filter(CycleState(), make_pod("p"), batch) is None


def test_pre_filter_narrows_to_named_nodes():
    # Every term pins metadata.name: union over terms, intersection within a term.
    affinity = required(
        {"matchFields": [field("In", "n1")]},
        {"matchFields": [field("In", "n3")], "matchExpressions": [expr("zone", "In", "c")]},
        {"matchFields": [field("In", "gone")]},  # names need not exist
    )
    pod = make_pod("p", affinity=affinity)
    result = plugin().pre_filter(CycleState(), pod, batch_of(nodes()))
    assert result == PreFilterResult(node_names=frozenset({"n1", "n3", "gone"}))
    assert run_plugin(plugin(), pod, nodes()).feasible == ["n1", "n3"]
    # Filter still checks the expressions next to the name.
    affinity = required(
        {"matchFields": [field("In", "n1")], "matchExpressions": [expr("zone", "In", "b")]}
    )
    run = run_plugin(plugin(), make_pod("p", affinity=affinity), nodes())
    assert run.feasible == []
    assert run.filter["n1"].reasons == (ERR_REASON_POD,)


def test_pre_filter_does_not_narrow_when_a_term_has_no_name():
    affinity = required(
        {"matchFields": [field("In", "n1")]}, {"matchExpressions": [expr("zone", "In", "b")]}
    )
    pod = make_pod("p", affinity=affinity)
    assert plugin().pre_filter(CycleState(), pod, batch_of(nodes())) is None
    assert run_plugin(plugin(), pod, nodes()).feasible == ["n1", "n2"]
    # NotIn on the name filters but does not narrow.
    pod = make_pod("p", affinity=required({"matchFields": [field("NotIn", "n1")]}))
    assert plugin().pre_filter(CycleState(), pod, batch_of(nodes())) is None
    assert run_plugin(plugin(), pod, nodes()).feasible == ["n2", "n3", "n4", "n5"]


def test_pre_filter_conflicting_names_is_unresolvable():
    affinity = required({"matchFields": [field("In", "n1"), field("In", "n2")]})
    status = plugin().pre_filter(CycleState(), make_pod("p", affinity=affinity), batch_of(nodes()))
    assert status == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))
    run = run_plugin(plugin(), make_pod("p", affinity=affinity), nodes())
    assert run.pre_filter.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert run.pre_filter.plugin == "NodeAffinity"


# -- addedAffinity -------------------------------------------------------------------


def added_args(data):
    return structure(NodeAffinityArgs, {"addedAffinity": data})


def test_added_required_terms_are_enforced_with_their_own_reason():
    args = added_args({"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "In", "a", "c")]}]}})
    pod = make_pod("p", node_selector={"disk": "ssd"})
    run = run_plugin(NodeAffinity(args), pod, nodes())
    assert run.feasible == ["n1", "n3"]
    # n2 fails both: only the enforced reason, as kube returns at the first failure.
    assert run.filter["n2"].reasons == (ERR_REASON_ENFORCED,)
    assert run.filter["n2"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert run.filter["n5"].reasons == (ERR_REASON_POD,)  # zone a, but no ssd
    # The pod alone would have no filter; the added terms still apply.
    assert run_plugin(NodeAffinity(args), make_pod("q"), nodes()).feasible == ["n1", "n3", "n5"]


def test_args_parse_added_affinity():
    args = added_args({
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "Exists")]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 7, "preference": {"matchExpressions": [expr("disk", "In", "ssd")]}}],
    })
    affinity = args.added_affinity
    assert isinstance(affinity, NodeAffinitySpec)
    term = affinity.required.terms[0]
    assert term.match_expressions == (NodeSelectorRequirement(key="zone", operator="Exists"),)
    assert affinity.preferred[0].weight == 7
    assert NodeAffinityArgs().added_affinity is None
    assert structure(NodeAffinityArgs, {}).validate() == []


def test_args_report_parse_errors_with_their_path():
    with pytest.raises(ConfigError) as info:
        bad = {"nodeSelectorTerms": [{"matchExpressions": [expr("zone", "Near", "a")]}]}
        data = {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": bad}}
        structure(NodeAffinityArgs, data, "args")
    [(path, message)] = info.value.errors
    assert path == (
        "args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].operator"
    )
    assert "Near" in message
    with pytest.raises(ConfigError) as info:
        structure(NodeAffinityArgs, {"addedAffinity": ["zone"]})
    assert info.value.errors == [("addedAffinity", "expected an object, got list")]


def test_args_reject_added_terms_kube_cannot_parse():
    """kube's New fails ("parsing addedAffinity...") on terms it cannot parse."""
    bad_term = {"matchExpressions": [expr("zone", "NotIn", "not valid")]}
    with pytest.raises(ConfigError) as info:
        structure(NodeAffinityArgs, {"addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [ZONE_A, bad_term]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": bad_term}],
        }}, "args")
    assert [path for path, _ in info.value.errors] == [
        "args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]",
        "args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference",
    ]
    assert all('invalid label value "not valid"' in message for _, message in info.value.errors)


# -- score ---------------------------------------------------------------------------

ZONE_A = {"matchExpressions": [expr("zone", "In", "a")]}
GEN_GT_2 = {"matchExpressions": [expr("gen", "Gt", "2")]}


def test_preferred_terms_score_and_normalize():
    # weight 5 for zone a, 3 for gen > 2. Raw: n1 5+3 = 8, n2 3, n3 0, n4 0, n5 5.
    # Normalized 100 * raw / 8: n2 37 (37.5), n5 62 (62.5).
    pod = make_pod("p", affinity=preferred((5, ZONE_A), (3, GEN_GT_2)))
    run = run_plugin(plugin(), pod, nodes())
    assert run.raw_scores == {"n1": 8, "n2": 3, "n3": 0, "n4": 0, "n5": 5}
    assert run.scores == {"n1": 100, "n2": 37, "n3": 0, "n4": 0, "n5": 62}


def test_preferred_term_kube_cannot_parse_scores_nothing():
    # The invalid term (NotIn would match n2, n3, n4) adds nothing; the valid one scores as usual.
    bad = {"matchExpressions": [expr("zone", "NotIn", "not valid")]}
    pod = make_pod("p", affinity=preferred((50, bad), (5, ZONE_A)))
    run = run_plugin(plugin(), pod, nodes())
    assert run.raw_scores == {"n1": 5, "n2": 0, "n3": 0, "n4": 0, "n5": 5}
    assert run.scores == {"n1": 100, "n2": 0, "n3": 0, "n4": 0, "n5": 100}


def test_added_preferred_terms_add_up_with_the_pods():
    args = added_args({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 2, "preference": {"matchExpressions": [expr("zone", "In", "c")]}},
        {"weight": 1, "preference": {"matchFields": [field("In", "n4")]}},
    ]})
    pod = make_pod("p", affinity=preferred((5, ZONE_A), (3, GEN_GT_2)))
    run = run_plugin(NodeAffinity(args), pod, nodes())
    # n3 gets 2, n4 gets 1 (matchFields work in preferred terms); max stays 8.
    assert run.raw_scores == {"n1": 8, "n2": 3, "n3": 2, "n4": 1, "n5": 5}
    assert run.scores == {"n1": 100, "n2": 37, "n3": 25, "n4": 12, "n5": 62}


def test_pre_score_skips_without_preferred_terms():
    run = run_plugin(plugin(), make_pod("p", node_selector={"zone": "a"}), nodes())
    assert run.feasible == ["n1", "n5"]
    assert run.score_skipped
    # With addedAffinity set (even without preferred terms) kube keeps scoring: all 0.
    args = added_args({"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "Exists")]}]}})
    run = run_plugin(NodeAffinity(args), make_pod("p"), nodes())
    assert not run.score_skipped
    assert run.scores == {"n1": 0, "n2": 0, "n3": 0, "n5": 0}


def test_vectorized_matching_agrees_with_the_model():
    # Random labels and selectors: the plugin's per-distinct-value evaluation must
    # agree with NodeSelector.matches / NodeSelectorTerm.matches node by node.
    rng = random.Random(7)
    values = ["1", "2", "10", "-3", "x", ""]
    node_list = [
        make_node(f"n{i}", labels={k: rng.choice(values) for k in "abc" if rng.random() < 0.7})
        for i in range(40)
    ]

    def requirement():
        op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
        req = {"key": rng.choice("abc"), "operator": op}
        if op in ("In", "NotIn"):
            req["values"] = rng.sample(values, rng.randint(1, 3))
        elif op in ("Gt", "Lt"):
            req["values"] = [rng.choice(["0", "1", "5"])]
        return req

    checked = 0
    for _ in range(30):
        terms = [{"matchExpressions": [requirement() for _ in range(rng.randint(1, 2))]}
                 for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            terms[0]["matchFields"] = [field(rng.choice(["In", "NotIn"]), f"n{rng.randint(0, 39)}")]
        weighted = [(rng.randint(1, 100), term) for term in terms]
        pod = make_pod("p", affinity={"nodeAffinity": {
            **required(*terms)["nodeAffinity"], **preferred(*weighted)["nodeAffinity"]}})
        selector = pod.affinity.node_affinity.required
        run = run_plugin(plugin(), pod, node_list)
        assert run.feasible == [n.name for n in node_list if selector.matches(n)]
        terms = pod.affinity.node_affinity.preferred
        expected = {
            n.name: sum(t.weight for t in terms if t.preference.matches(n))
            for n in node_list if n.name in run.feasible
        }
        assert run.raw_scores == expected
        checked += bool(run.feasible)
    assert checked > 10  # the random cases are not all infeasible


# -- caching -------------------------------------------------------------------------


def test_label_columns_follow_node_updates_not_pod_changes():
    cache = make_cache(nodes())
    table = cache.table
    pl = plugin()
    pod = make_pod("p", node_selector={"disk": "ssd"})

    def feasible():
        state = CycleState()
        batch = NodeBatch(table, table.rows())
        assert pl.pre_filter(state, pod, batch) is None
        verdict = pl.filter_batch(state, pod, batch)
        return [n for n, bad in zip(table.names, verdict.failed.tolist(), strict=True) if not bad]

    assert feasible() == ["n1", "n3"]
    column = table.label_column("disk")
    cache.assume(make_pod("x", cpu="1"), "n1")
    assert feasible() == ["n1", "n3"]
    assert table.label_column("disk") is column  # only pods changed: labels reused
    cache.update_node(make_node("n4", labels={"disk": "ssd"}))
    assert table.label_column("disk") is not column
    assert feasible() == ["n1", "n3", "n4"]
    cache.remove_node("n1")
    assert table.names == ["n5", "n2", "n3", "n4"]  # the last row moved into n1's place
    assert feasible() == ["n3", "n4"]


def test_registration():
    registry = PluginRegistry()
    nodeaffinity.register(registry)
    info = registry.plugins["NodeAffinity"]
    assert info.extension_points == frozenset({"preFilter", "filter", "preScore", "score"})
    assert info.args_type is NodeAffinityArgs
    assert info.factory(None, None).added_required is None


def test_events_to_register():
    plugin = NodeAffinity(NodeAffinityArgs())
    assert plugin.events_to_register() == [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeLabel")]
    assert requeues(plugin, ClusterEvent("Node", "UpdateNodeLabel"))
    assert requeues(plugin, ClusterEvent("Node", "Update"))
    assert not requeues(plugin, ClusterEvent("Node", "UpdateNodeTaint"))
    assert not requeues(plugin, ClusterEvent("AssignedPod", "Delete"))
