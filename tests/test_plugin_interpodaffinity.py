"""InterPodAffinity: table-driven from kube's filtering_test.go / scoring_test.go and reference §3.11."""

from __future__ import annotations

import attrs
import pytest
from pluginkit import requeues

from scorer.config.convert import structure
from scorer.framework import Code, CycleState, NodeBatch
from scorer.framework.events import (
    ADD,
    ASSIGNED_POD,
    DELETE,
    NODE,
    UPDATE_NODE_LABEL,
    UPDATE_NODE_TAINT,
    ClusterEvent,
)
from scorer.model import (
    Affinity,
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
)
from scorer.plugins.interpodaffinity import (
    ERR_REASON_AFFINITY,
    ERR_REASON_ANTI_AFFINITY,
    ERR_REASON_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
    InterPodAffinityArgs,
    factory,
)
from scorer.plugins.interpodaffinity.index import ExistingTerms
from scorer.testing import make_cache, make_handle, make_node, make_pod, run_plugin

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


# -- builders -------------------------------------------------------------------------------------
def term(key="region", labels=None, exprs=(), **extra):
    """A PodAffinityTerm; ``labels=None`` and no ``exprs`` -> a null labelSelector."""
    t = {"topologyKey": key, **extra}
    if labels is not None or exprs:
        t["labelSelector"] = {"matchLabels": dict(labels or {}),
                              "matchExpressions": [{"key": k, "operator": op, "values": list(v)}
                                                   for k, op, v in exprs]}
    return t


def affinity(aff=(), anti=(), pref_aff=(), pref_anti=()):
    out = {}
    if aff or pref_aff:
        out["podAffinity"] = {REQUIRED: list(aff),
                              PREFERRED: [{"weight": w, "podAffinityTerm": t} for w, t in pref_aff]}
    if anti or pref_anti:
        out["podAntiAffinity"] = {REQUIRED: list(anti),
                                  PREFERRED: [{"weight": w, "podAffinityTerm": t} for w, t in pref_anti]}
    return out


def pod(name="p", labels=None, node="", ns="default", aff=None):
    return make_pod(name, namespace=ns, labels=labels or {}, node_name=node, affinity=aff)


def node(name, **labels):
    return make_node(name, labels=labels)


def run(incoming, nodes, pods=(), namespaces=(), **args):
    """Run the plugin built the way the framework builds it: on a cache holding ``pods``."""
    cache = make_cache(nodes, pods, namespaces)
    plugin = factory(InterPodAffinityArgs(**args), make_handle(cache=cache))
    return run_plugin(plugin, incoming, nodes, pods=pods, namespaces=namespaces)


def outcome(result):
    """node -> reason (None when it passes)."""
    return {n: (s.reasons[0] if s.reasons else None) for n, s in result.filter.items()}


S1 = {"security": "S1"}
S2 = {"security": "S2"}
SEC_IN_S1 = term("region", exprs=[("security", "In", ["S1"])])
MACHINE1 = node("machine1", region="r1", zone="z11", hostname="machine1")


# -- filter: one node (kube's TestRequiredAffinitySingleNode) ---------------------------------------
SINGLE = [
    ("no affinity, no pods", pod(labels=S1), [], None),
    ("affinity In matches the existing pod", pod(labels=S1, aff=affinity([SEC_IN_S1])),
     [pod("e", S1, "machine1")], None),
    ("affinity NotIn matches the existing pod",
     pod(labels=S1, aff=affinity([term("region", exprs=[("security", "NotIn", ["securityscan3", "value3"])])])),
     [pod("e", S1, "machine1")], None),
    ("affinity fails because of the namespace",
     pod(labels=S1, aff=affinity([term("region", exprs=[("security", "In", ["S1"])], namespaces=["other"])])),
     [pod("e", S1, "machine1")], ERR_REASON_AFFINITY),
    ("affinity fails on an unmatching selector",
     pod(labels=S1, aff=affinity([term("region", exprs=[("security", "In", ["S2"])])])),
     [pod("e", S1, "machine1")], ERR_REASON_AFFINITY),
    ("requirements are ANDed: one fails",
     pod(labels=S1, aff=affinity([term("region", exprs=[("security", "Exists", []), ("wrongkey", "In", ["x"])])])),
     [pod("e", S1, "machine1")], ERR_REASON_AFFINITY),
    ("affinity and anti-affinity both satisfied",
     pod(labels=S1, aff=affinity([SEC_IN_S1], [term("node", exprs=[("service", "In", ["antivirus"])])])),
     [pod("e", S1, "machine1")], None),
    ("anti-affinity violated",
     pod(labels=S1, aff=affinity([SEC_IN_S1], [term("zone", exprs=[("security", "In", ["S1"])])])),
     [pod("e", S1, "machine1")], ERR_REASON_ANTI_AFFINITY),
    ("an existing pod's anti-affinity (symmetry) violated",
     pod(labels=S1, aff=affinity([SEC_IN_S1])),
     [pod("e", S1, "machine1", aff=affinity(anti=[term("zone", exprs=[("security", "In", ["S1"])])]))],
     ERR_REASON_EXISTING_ANTI_AFFINITY),
    ("symmetry respected when the incoming pod has no anti-affinity: other labels",
     pod(labels=S2),
     [pod("e", S1, "machine1", aff=affinity(anti=[term("zone", exprs=[("security", "In", ["S1"])])]))], None),
    ("first pod of a group: matches its own term, no pod anywhere matches",
     pod(labels=S1, aff=affinity([SEC_IN_S1])), [pod("e", S2, "machine1")], None),
    ("first pod of a group: it does not match its own term",
     pod(labels=S2, aff=affinity([SEC_IN_S1])), [], ERR_REASON_AFFINITY),
    ("a null labelSelector matches no pod, not even the pod itself",
     pod(labels=S1, aff=affinity([term("region")])), [pod("e", S1, "machine1")], ERR_REASON_AFFINITY),
    ("an empty labelSelector matches every pod of the namespace",
     pod(labels=S1, aff=affinity(anti=[term("zone", labels={})])), [pod("e", S2, "machine1")],
     ERR_REASON_ANTI_AFFINITY),
    ("an existing pod's anti-affinity term with a key the node lacks is ignored",
     pod(labels=S1),
     [pod("e", S2, "machine1", aff=affinity(anti=[term("invalid-node-label", exprs=[("security", "In", ["S1"])])]))],
     None),
    ("terminating pods count",
     pod(labels=S1, aff=affinity(anti=[term("zone", labels=S2)])),
     [attrs.evolve(pod("e", S2, "machine1"), deleting=True)], ERR_REASON_ANTI_AFFINITY),
    ("an existing pod whose anti-affinity term is invalid has its anti-affinity ignored",
     pod(labels=S1),
     [pod("e", S2, "machine1", aff=affinity(anti=[term("zone", exprs=[("security", "In", ["{{.bad-value.}}"])])]))],
     None),
]


@pytest.mark.parametrize(("incoming", "pods", "reason"), [c[1:] for c in SINGLE], ids=[c[0] for c in SINGLE])
def test_filter_single_node(incoming, pods, reason):
    result = run(incoming, [MACHINE1], pods)
    assert outcome(result) == {"machine1": reason}
    status = result.filter["machine1"]
    if reason == ERR_REASON_AFFINITY:
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    elif reason is not None:
        assert status.code == Code.UNSCHEDULABLE


def test_pre_filter_skips_pods_without_required_terms_and_no_matching_existing_anti_affinity():
    holder = pod("h", S2, "machine1", aff=affinity(anti=[term("zone", labels=S2)]))
    cache = make_cache([MACHINE1], [pod("e", S1, "machine1"), holder])
    plugin = factory(None, make_handle(cache=cache))
    batch = NodeBatch(cache.table, cache.table.rows())
    assert plugin.pre_filter(CycleState(), pod(labels=S1, aff=affinity(pref_aff=[(5, SEC_IN_S1)])), batch).is_skip()
    assert plugin.pre_filter(CycleState(), pod(labels=S2), batch) is None  # the holder's anti-affinity matches


@pytest.mark.parametrize("kind", ["aff", "anti", "pref_aff", "pref_anti"])
def test_an_invalid_label_value_fails_pre_filter_naming_it(kind):
    bad = term("region", exprs=[("security", "In", ["{{.bad-value.}}"])])
    terms = {"aff": {"aff": [bad]}, "anti": {"anti": [bad]}, "pref_aff": {"pref_aff": [(1, bad)]},
             "pref_anti": {"pref_anti": [(1, bad)]}}[kind]
    result = run(pod(labels=S1, aff=affinity(**terms)), [MACHINE1])
    assert result.pre_filter.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    [message] = result.pre_filter.reasons
    assert message.startswith("parsing pod: ")
    assert 'invalid label value: "{{.bad-value.}}": at key: "security"' in message


@pytest.mark.parametrize(("selector", "expected"), [
    (LabelSelector(match_labels={"bad key!": "x"}), 'invalid label key "bad key!"'),
    (LabelSelector(match_labels={"app": "a b"}), 'invalid label value: "a b": at key: "app"'),
    (LabelSelector(match_expressions=(LabelSelectorRequirement(key="s", operator="Exists", values=("x",)),)),
     "values set must be empty for exists and does not exist"),
    (LabelSelector(match_expressions=(LabelSelectorRequirement(key="s", operator="In"),)),
     "for 'in', 'notin' operators, values set can't be empty"),
    (LabelSelector(match_expressions=(LabelSelectorRequirement(key="s", operator="Gt", values=("1",)),)),
     '"Gt" is not a valid pod selector operator'),
    (LabelSelector(match_expressions=(LabelSelectorRequirement(key="s", operator="In", values=("a" * 64,)),)),
     "must be no more than 63 characters"),
])
def test_other_invalid_selectors_fail_pre_filter(selector, expected):
    """Built as objects: scorer.model.decode already refuses some of these in manifests."""
    bad = PodAffinityTerm(label_selector=selector, topology_key="region")
    incoming = attrs.evolve(pod(labels=S1), affinity=Affinity(pod_anti_affinity=PodAntiAffinity(required=(bad,))))
    result = run(incoming, [MACHINE1])
    assert result.pre_filter.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert result.pre_filter.reasons[0].startswith("parsing pod: requiredAntiAffinityTerms: ")
    assert expected in result.pre_filter.reasons[0]


def test_an_invalid_namespace_selector_fails_pre_filter():
    bad = PodAffinityTerm(label_selector=LabelSelector(), topology_key="region",
                          namespace_selector=LabelSelector(match_labels={"team": "a/b"}))
    incoming = attrs.evolve(pod(labels=S1), affinity=Affinity(pod_affinity=PodAffinity(required=(bad,))))
    result = run(incoming, [MACHINE1])
    assert result.pre_filter.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert 'invalid label value: "a/b": at key: "team"' in result.pre_filter.reasons[0]


# -- filter: several nodes (kube's TestRequiredAffinityMultipleNodes) -------------------------------
NODE_A = node("nodeA", region="r1", zone="z1", hostname="nodeA")
NODE_B = node("nodeB", region="r1", zone="z2", hostname="nodeB")
NODE_C = node("nodeC", region="r2", zone="z3", hostname="nodeC")
BAR = {"foo": "bar"}
MULTI = [
    ("nodes sharing the topology value with a matching pod pass",
     pod(labels=BAR, aff=affinity([term("region", labels=BAR)])), [pod("e", BAR, "nodeA")],
     {"nodeA": None, "nodeB": None, "nodeC": ERR_REASON_AFFINITY}),
    ("the first pod of a group may go anywhere with the key",
     pod(labels=BAR, aff=affinity([term("zone", labels=BAR)])), [],
     {"nodeA": None, "nodeB": None, "nodeC": None}),
    ("the first pod of a group needs every topology key on the node",
     pod(labels=BAR, aff=affinity([term("zone", labels=BAR), term("rack", labels=BAR)])), [],
     {"nodeA": ERR_REASON_AFFINITY, "nodeB": ERR_REASON_AFFINITY, "nodeC": ERR_REASON_AFFINITY}),
    ("anti-affinity by region excludes both nodes of the region",
     pod(labels={}, aff=affinity(anti=[term("region", labels=BAR)])), [pod("e", BAR, "nodeA")],
     {"nodeA": ERR_REASON_ANTI_AFFINITY, "nodeB": ERR_REASON_ANTI_AFFINITY, "nodeC": None}),
    ("anti-affinity ignores pods of other namespaces",
     pod(labels={}, aff=affinity(anti=[term("region", labels=BAR)])), [pod("e", BAR, "nodeA", ns="other")],
     {"nodeA": None, "nodeB": None, "nodeC": None}),
    ("existing pods' anti-affinity terms are ORed",
     pod(labels={"a": "1"}),
     [pod("e", {}, "nodeA", aff=affinity(anti=[term("zone", labels={"a": "2"}), term("region", labels={"a": "1"})]))],
     {"nodeA": ERR_REASON_EXISTING_ANTI_AFFINITY, "nodeB": ERR_REASON_EXISTING_ANTI_AFFINITY, "nodeC": None}),
    ("affinity terms must all match the same pod",
     pod(labels={}, aff=affinity([term("zone", labels={"a": "1"}), term("zone", labels={"b": "1"})])),
     [pod("e1", {"a": "1"}, "nodeA"), pod("e2", {"b": "1"}, "nodeA")],
     {"nodeA": ERR_REASON_AFFINITY, "nodeB": ERR_REASON_AFFINITY, "nodeC": ERR_REASON_AFFINITY}),
    ("affinity terms all matching one pod count at each term's key",
     pod(labels={}, aff=affinity([term("zone", labels={"a": "1"}), term("region", labels={"b": "1"})])),
     [pod("e", {"a": "1", "b": "1"}, "nodeA")],
     {"nodeA": None, "nodeB": ERR_REASON_AFFINITY, "nodeC": ERR_REASON_AFFINITY}),
    ("first-of-group does not apply once some pod matches elsewhere",
     pod(labels=BAR, aff=affinity([term("zone", labels=BAR)])), [pod("e", BAR, "nodeA")],
     {"nodeA": None, "nodeB": ERR_REASON_AFFINITY, "nodeC": ERR_REASON_AFFINITY}),
    ("the incoming pod's affinity fails before its anti-affinity is looked at",
     pod(labels={}, aff=affinity([term("zone", labels=BAR)], [term("region", labels=BAR)])),
     [pod("e", BAR, "nodeA")],
     {"nodeA": ERR_REASON_ANTI_AFFINITY, "nodeB": ERR_REASON_AFFINITY, "nodeC": ERR_REASON_AFFINITY}),
]


@pytest.mark.parametrize(("incoming", "pods", "expected"), [c[1:] for c in MULTI], ids=[c[0] for c in MULTI])
def test_filter_several_nodes(incoming, pods, expected):
    assert outcome(run(incoming, [NODE_A, NODE_B, NODE_C], pods)) == expected


# -- namespaces, namespaceSelector, matchLabelKeys ----------------------------------------------------
NAMESPACES = [Namespace(name="team-a", labels={"team": "a"}), Namespace(name="team-b", labels={"team": "b"}),
              Namespace(name="default", labels={})]
NS_CASES = [
    ("namespaces lists another namespace",
     pod(aff=affinity([term("zone", labels=BAR, namespaces=["team-a"])])), [pod("e", BAR, "nodeA", ns="team-a")],
     {"nodeA": None, "nodeB": ERR_REASON_AFFINITY}),
    ("namespaceSelector selects namespaces by label",
     pod(aff=affinity([term("zone", labels=BAR, namespaceSelector={"matchLabels": {"team": "a"}})])),
     [pod("e", BAR, "nodeA", ns="team-a"), pod("f", BAR, "nodeB", ns="team-b")],
     {"nodeA": None, "nodeB": ERR_REASON_AFFINITY}),
    ("an empty namespaceSelector selects every namespace",
     pod(aff=affinity(anti=[term("zone", labels=BAR, namespaceSelector={})])),
     [pod("e", BAR, "nodeA", ns="team-b")],
     {"nodeA": ERR_REASON_ANTI_AFFINITY, "nodeB": None}),
    ("a namespaceSelector replaces the pod's own namespace",
     pod(aff=affinity(anti=[term("zone", labels=BAR, namespaceSelector={"matchLabels": {"team": "a"}})])),
     [pod("e", BAR, "nodeA", ns="default")],
     {"nodeA": None, "nodeB": None}),
    ("namespaces and namespaceSelector add up",
     pod(aff=affinity(anti=[term("zone", labels=BAR, namespaces=["default"],
                                 namespaceSelector={"matchLabels": {"team": "a"}})])),
     [pod("e", BAR, "nodeA", ns="default"), pod("f", BAR, "nodeB", ns="team-a")],
     {"nodeA": ERR_REASON_ANTI_AFFINITY, "nodeB": ERR_REASON_ANTI_AFFINITY}),
    ("an existing pod's namespaceSelector reads the incoming pod's Namespace labels",
     pod(labels=BAR, ns="team-a"),
     [pod("e", {}, "nodeA", ns="team-b",
          aff=affinity(anti=[term("zone", labels=BAR, namespaceSelector={"matchLabels": {"team": "a"}})]))],
     {"nodeA": ERR_REASON_EXISTING_ANTI_AFFINITY, "nodeB": None}),
    ("an existing pod's namespaceSelector not matching the incoming pod's Namespace",
     pod(labels=BAR, ns="team-b"),
     [pod("e", {}, "nodeA", ns="team-b",
          aff=affinity(anti=[term("zone", labels=BAR, namespaceSelector={"matchLabels": {"team": "a"}})]))],
     {"nodeA": None, "nodeB": None}),
    ("matchLabelKeys adds key In (the pod's value)",
     pod(labels={"app": "web", "rev": "1"}, aff=affinity(anti=[term("zone", labels={"app": "web"},
                                                                   matchLabelKeys=["rev"])])),
     [pod("e", {"app": "web", "rev": "1"}, "nodeA"), pod("f", {"app": "web", "rev": "2"}, "nodeB")],
     {"nodeA": ERR_REASON_ANTI_AFFINITY, "nodeB": None}),
    ("mismatchLabelKeys adds key NotIn (the pod's value)",
     pod(labels={"app": "web", "tenant": "t1"}, aff=affinity(anti=[term("zone", labels={"app": "web"},
                                                                        mismatchLabelKeys=["tenant"])])),
     [pod("e", {"app": "web", "tenant": "t1"}, "nodeA"), pod("f", {"app": "web", "tenant": "t2"}, "nodeB")],
     {"nodeA": None, "nodeB": ERR_REASON_ANTI_AFFINITY}),
    ("matchLabelKeys of a key the pod lacks adds nothing",
     pod(labels={"app": "web"}, aff=affinity(anti=[term("zone", labels={"app": "web"}, matchLabelKeys=["rev"])])),
     [pod("e", {"app": "web", "rev": "1"}, "nodeA")],
     {"nodeA": ERR_REASON_ANTI_AFFINITY, "nodeB": None}),
    ("an existing pod's matchLabelKeys use the existing pod's value",
     pod(labels={"app": "web", "rev": "2"}),
     [pod("e", {"app": "web", "rev": "1"}, "nodeA",
          aff=affinity(anti=[term("zone", labels={"app": "web"}, matchLabelKeys=["rev"])])),
      pod("f", {"app": "web", "rev": "2"}, "nodeB",
          aff=affinity(anti=[term("zone", labels={"app": "web"}, matchLabelKeys=["rev"])]))],
     {"nodeA": None, "nodeB": ERR_REASON_EXISTING_ANTI_AFFINITY}),
]


@pytest.mark.parametrize(("incoming", "pods", "expected"), [c[1:] for c in NS_CASES], ids=[c[0] for c in NS_CASES])
def test_filter_namespaces_and_label_keys(incoming, pods, expected):
    assert outcome(run(incoming, [NODE_A, NODE_B], pods, NAMESPACES)) == expected


# -- score (kube's TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight) ----
CHINA, INDIA, AZ1, AZ2 = {"region": "China"}, {"region": "India"}, {"az": "az1"}, {"az": "az2"}
STAY_S1_REGION = affinity(pref_aff=[(5, term("region", exprs=[("security", "In", ["S1"])]))])
STAY_S2_REGION = affinity(pref_aff=[(6, term("region", exprs=[("security", "In", ["S2"])]))])
AFFINITY3 = affinity(pref_aff=[
    (8, term("region", exprs=[("security", "NotIn", ["S1"]), ("security", "In", ["S2"])])),
    (2, term("region", exprs=[("security", "Exists", []), ("wrongkey", "DoesNotExist", [])]))])
HARD = affinity([term("region", exprs=[("security", "In", ["S1", "value2"])]),
                 term("region", exprs=[("security", "Exists", []), ("wrongkey", "DoesNotExist", [])])])
AWAY_S1_AZ = affinity(pref_anti=[(5, term("az", exprs=[("security", "In", ["S1"])]))])
AWAY_S2_AZ = affinity(pref_anti=[(5, term("az", exprs=[("security", "In", ["S2"])]))])
STAY_S1_AWAY_S2 = affinity(pref_aff=[(8, term("region", exprs=[("security", "In", ["S1"])]))],
                           pref_anti=[(5, term("az", exprs=[("security", "In", ["S2"])]))])
THREE = [("m1", CHINA), ("m2", INDIA), ("m3", AZ1)]
FIVE = [("m1", {**CHINA, **AZ1}), ("m2", INDIA), ("m3", CHINA), ("m4", CHINA), ("m5", INDIA)]

SCORES = [
    ("affinity nil: skipped", pod(labels=S1), [], THREE, None),
    ("matching pods in one region", pod(labels=S1, aff=STAY_S1_REGION),
     [("m1", S1, None), ("m2", S2, None), ("m3", {}, None)], THREE, {"m1": 100, "m2": 0, "m3": 0}),
    ("every node of the region scores", pod(labels=S1, aff=STAY_S1_REGION),
     [("m1", S1, None)], [("m1", CHINA), ("m2", {**CHINA, **AZ1}), ("m3", INDIA)], {"m1": 100, "m2": 100, "m3": 0}),
    ("the region with more matches scores higher", pod(labels=S1, aff=STAY_S2_REGION),
     [("m1", S2, None), ("m1", S2, None), ("m2", S2, None), ("m3", S2, None), ("m4", S2, None), ("m5", S2, None)],
     [("m1", CHINA), ("m2", INDIA), ("m3", CHINA), ("m4", CHINA), ("m5", INDIA)],
     {"m1": 100, "m2": 0, "m3": 100, "m4": 100, "m5": 0}),
    ("operators and partial matches", pod(labels=S1, aff=AFFINITY3),
     [("m1", S1, None), ("m2", S2, None), ("m3", S1, None)], THREE, {"m1": 20, "m2": 100, "m3": 0}),
    ("symmetry of existing pods' preferred affinity", pod(labels=S2),
     [("m1", S1, STAY_S1_REGION), ("m2", S2, STAY_S2_REGION)], THREE, {"m1": 0, "m2": 100, "m3": 0}),
    ("symmetry of existing pods' required affinity (hardPodAffinityWeight 1)", pod(labels=S1),
     [("m1", S1, HARD), ("m2", S2, HARD)], THREE, {"m1": 100, "m2": 100, "m3": 0}),
    ("anti-affinity: the node without matches scores high", pod(labels=S1, aff=AWAY_S1_AZ),
     [("m1", S1, None)], [("m1", AZ1), ("m2", CHINA)], {"m1": 0, "m2": 100}),
    ("anti-affinity: more matches score lower", pod(labels=S1, aff=AWAY_S1_AZ),
     [("m1", S1, None), ("m1", S1, None), ("m2", S1, None)], [("m1", AZ1), ("m2", INDIA)], {"m1": 0, "m2": 100}),
    ("anti-affinity symmetry", pod(labels=S1),
     [("m1", S1, AWAY_S1_AZ), ("m2", S2, AWAY_S2_AZ)], [("m1", AZ1), ("m2", AZ2)], {"m1": 0, "m2": 100}),
    ("affinity and anti-affinity together", pod(labels=S1, aff=STAY_S1_AWAY_S2),
     [("m1", S1, None), ("m2", S2, None)], [("m1", CHINA), ("m2", AZ1)], {"m1": 100, "m2": 0}),
    ("affinity and anti-affinity, the same labels everywhere", pod(labels=S1, aff=STAY_S1_AWAY_S2),
     [("m1", S1, None), ("m1", S1, None), ("m2", S1, None), ("m3", S1, None), ("m3", S1, None), ("m4", S1, None),
      ("m5", S1, None)], FIVE, {"m1": 100, "m2": 0, "m3": 100, "m4": 100, "m5": 0}),
    ("affinity, anti-affinity and symmetry", pod(labels=S1, aff=STAY_S1_AWAY_S2),
     [("m1", S1, None), ("m2", S2, None), ("m3", {}, STAY_S1_AWAY_S2), ("m4", {}, AWAY_S1_AZ)],
     [("m1", CHINA), ("m2", AZ1), ("m3", INDIA), ("m4", AZ2)], {"m1": 100, "m2": 0, "m3": 100, "m4": 0}),
    ("partial nodes of a topology have pods with affinity", pod(labels=S1),
     [("m1", S1, None), ("m2", {}, STAY_S1_AWAY_S2)], [("m1", CHINA), ("m2", CHINA)], {"m1": 0, "m2": 0}),
    ("a matching pod on a node without the key contributes nothing: skipped", pod(labels=S1, aff=STAY_S1_REGION),
     [("m3", S1, None)], THREE, None),
    ("only negative scores: the unmatched nodes (raw 0, the highest) score 100", pod(labels=S1, aff=AWAY_S1_AZ),
     [("m1", S1, None)], [("m1", AZ1), ("m2", AZ2), ("m3", CHINA)], {"m1": 0, "m2": 100, "m3": 100}),
    ("only positive scores: the lowest maps to 0, not 0 itself (§3.11)", pod(labels=S1, aff=STAY_S1_REGION),
     [("m1", S1, None), ("m1", S1, None), ("m2", S1, None)], [("m1", CHINA), ("m2", INDIA)], {"m1": 100, "m2": 0}),
    ("ties: +w and -w cancel out to 0 everywhere",
     pod(labels=S1, aff=affinity(pref_aff=[(5, SEC_IN_S1)], pref_anti=[(5, SEC_IN_S1)])),
     [("m1", S1, None)], THREE, {"m1": 0, "m2": 0, "m3": 0}),
]


@pytest.mark.parametrize(("incoming", "existing", "nodes", "expected"), [c[1:] for c in SCORES],
                         ids=[c[0] for c in SCORES])
def test_score(incoming, existing, nodes, expected):
    nodes = [node(n, **labels) for n, labels in nodes]
    pods = [pod(f"e{i}", labels, n, aff=aff) for i, (n, labels, aff) in enumerate(existing)]
    result = run(incoming, nodes, pods)
    if expected is None:
        assert result.score_skipped and result.scores == {}
    else:
        assert result.scores == expected


def test_hard_pod_affinity_weight_zero_ignores_existing_pods_required_affinity():
    nodes = [node(n, **labels) for n, labels in THREE]
    pods = [pod("e1", {}, "m1", aff=HARD), pod("e2", {}, "m2", aff=HARD)]
    # HARD has two required terms, each matched: the weight counts once per term.
    assert run(pod(labels=S1), nodes, pods).raw_scores == {"m1": 2, "m2": 2, "m3": 0}
    assert run(pod(labels=S1), nodes, pods, hard_pod_affinity_weight=7).raw_scores == {"m1": 14, "m2": 14, "m3": 0}
    assert run(pod(labels=S1), nodes, pods, hard_pod_affinity_weight=0).score_skipped


def test_ignore_preferred_terms_of_existing_pods_skips_pods_without_preferred_terms():
    nodes = [node(n, **labels) for n, labels in THREE]
    pods = [pod("e1", S1, "m1", aff=STAY_S1_REGION), pod("e2", {}, "m2", aff=HARD)]
    assert run(pod(labels=S1), nodes, pods).raw_scores == {"m1": 5, "m2": 2, "m3": 0}
    # kube >= 1.26: the whole score is skipped, existing pods' required affinity included.
    assert run(pod(labels=S1), nodes, pods, ignore_preferred_terms_of_existing_pods=True).score_skipped
    # An incoming pod with preferred terms of its own is scored as usual, existing pods' terms too.
    own = pod(labels=S1, aff=AWAY_S2_AZ)
    result = run(own, nodes, pods, ignore_preferred_terms_of_existing_pods=True)
    assert result.raw_scores == {"m1": 5, "m2": 2, "m3": 0}


def test_preferred_terms_with_namespace_selector_and_other_namespaces():
    nodes = [node("m1", **CHINA), node("m2", **INDIA)]
    pods = [pod("e1", S1, "m1", ns="team-a"), pod("e2", S1, "m2", ns="team-b")]
    selected = affinity(pref_aff=[(3, term("region", exprs=[("security", "In", ["S1"])],
                                           namespaceSelector={"matchLabels": {"team": "a"}}))])
    assert run(pod(labels=S1, aff=selected), nodes, pods, NAMESPACES).raw_scores == {"m1": 3, "m2": 0}
    everywhere = affinity(pref_aff=[(3, term("region", exprs=[("security", "In", ["S1"])], namespaceSelector={}))])
    assert run(pod(labels=S1, aff=everywhere), nodes, pods, NAMESPACES).raw_scores == {"m1": 3, "m2": 3}
    own_namespace = affinity(pref_aff=[(3, SEC_IN_S1)])
    assert run(pod(labels=S1, aff=own_namespace), nodes, pods, NAMESPACES).score_skipped


# -- args -------------------------------------------------------------------------------------------
def test_args_defaults_and_validation():
    args = structure(InterPodAffinityArgs, {}, "args", kind="InterPodAffinityArgs")
    assert args == InterPodAffinityArgs(hard_pod_affinity_weight=1, ignore_preferred_terms_of_existing_pods=False)
    zero = structure(InterPodAffinityArgs, {"hardPodAffinityWeight": 0}, "args", kind="InterPodAffinityArgs")
    assert zero.hard_pod_affinity_weight == 0 and zero.validate() == []
    assert InterPodAffinityArgs(hard_pod_affinity_weight=100).validate() == []
    for weight in (-1, 101):
        assert InterPodAffinityArgs(hard_pod_affinity_weight=weight).validate() == [
            ("hardPodAffinityWeight", f"Invalid value: {weight}: not in valid range [0, 100]")]


def test_events_to_register():
    plugin = factory(None, make_handle())
    assert requeues(plugin, ClusterEvent(ASSIGNED_POD, DELETE))
    assert requeues(plugin, ClusterEvent(ASSIGNED_POD, ADD))
    assert requeues(plugin, ClusterEvent(NODE, ADD))
    assert requeues(plugin, ClusterEvent(NODE, UPDATE_NODE_LABEL))
    assert not requeues(plugin, ClusterEvent(NODE, UPDATE_NODE_TAINT))


# -- add_pod / remove_pod on a cloned state -------------------------------------------------------------
def _pre_filtered(plugin: InterPodAffinity, cache, incoming):
    state = CycleState()
    table = cache.table
    assert plugin.pre_filter(state, incoming, NodeBatch(table, table.rows())) is None
    return state


def _reasons(plugin, state, incoming, cache):
    table = cache.table
    verdict = plugin.filter_batch(state, incoming, NodeBatch(table, table.rows()))
    return {name: (verdict.status_at(i).reasons or (None,))[0] for i, name in enumerate(table.names)}


def test_add_pod_and_remove_pod_update_a_clone_only():
    nodes = [NODE_A, NODE_B, NODE_C]
    anti_holder = pod("holder", {}, "nodeA", aff=affinity(anti=[term("zone", labels=BAR)]))
    cache = make_cache(nodes, [anti_holder, pod("match", BAR, "nodeC")])
    plugin = factory(None, make_handle(cache=cache))
    incoming = pod(labels=BAR, aff=affinity([term("region", labels=BAR)], [term("zone", labels={"x": "1"})]))
    state = _pre_filtered(plugin, cache, incoming)
    before = _reasons(plugin, state, incoming, cache)
    assert before == {"nodeA": ERR_REASON_AFFINITY, "nodeB": ERR_REASON_AFFINITY, "nodeC": None}

    info = {name: cache.table.node_info(row) for name, row in cache.table.index.items()}
    what_if = state.clone()
    assert plugin.remove_pod(what_if, incoming, anti_holder, info["nodeA"]) is None  # symmetry lifted
    assert plugin.add_pod(what_if, incoming, pod("m2", BAR, "nodeB"), info["nodeB"]) is None  # affinity in r1
    assert plugin.add_pod(what_if, incoming, pod("x", {"x": "1"}, "nodeC"), info["nodeC"]) is None  # anti in z3
    assert _reasons(plugin, what_if, incoming, cache) == {
        "nodeA": None, "nodeB": None, "nodeC": ERR_REASON_ANTI_AFFINITY}
    assert _reasons(plugin, state, incoming, cache) == before  # the original is untouched

    undo = what_if.clone()
    plugin.add_pod(undo, incoming, anti_holder, info["nodeA"])
    plugin.remove_pod(undo, incoming, pod("m2", BAR, "nodeB"), info["nodeB"])
    plugin.remove_pod(undo, incoming, pod("x", {"x": "1"}, "nodeC"), info["nodeC"])
    assert _reasons(plugin, undo, incoming, cache) == before


def test_remove_pod_makes_the_first_pod_rule_apply_again():
    cache = make_cache([NODE_A, NODE_C], [pod("m", BAR, "nodeA")])
    plugin = factory(None, make_handle(cache=cache))
    incoming = pod(labels=BAR, aff=affinity([term("zone", labels=BAR)]))
    state = _pre_filtered(plugin, cache, incoming)
    assert _reasons(plugin, state, incoming, cache) == {"nodeA": None, "nodeC": ERR_REASON_AFFINITY}
    nodeinfo = cache.table.node_info(cache.table.index["nodeA"])
    plugin.remove_pod(state, incoming, pod("m", BAR, "nodeA"), nodeinfo)
    assert _reasons(plugin, state, incoming, cache) == {"nodeA": None, "nodeC": None}


def test_filter_on_a_scratch_table_reads_its_labels_by_value():
    """Preemption filters one node on a scratch table: the state answers by topology value."""
    holder = pod("holder", {}, "nodeA", aff=affinity(anti=[term("zone", labels=BAR)]))
    cache = make_cache([NODE_A, NODE_B], [holder])
    plugin = factory(None, make_handle(cache=cache))
    incoming = pod(labels=BAR)
    state = _pre_filtered(plugin, cache, incoming)
    scratch = make_cache([node("copy", region="r1", zone="z1")])
    verdict = plugin.filter_batch(state, incoming, NodeBatch(scratch.table, scratch.table.rows()))
    assert verdict.status_at(0).reasons == (ERR_REASON_EXISTING_ANTI_AFFINITY,)
    scratch = make_cache([node("other", zone="z9")])
    verdict = plugin.filter_batch(state, incoming, NodeBatch(scratch.table, scratch.table.rows()))
    assert not verdict.failed.any()


# -- the index stays right ----------------------------------------------------------------------------
def _groups(cache):
    index = cache.pod_index.extension("InterPodAffinity", ExistingTerms)
    return [{(t.topology_key, w): dict(c.by_node) for (t, w), c in kind.items()} for kind in index.groups]


def test_the_index_follows_add_remove_assume_and_forget():
    anti = affinity(anti=[term("zone", labels=BAR)], pref_aff=[(4, term("region", labels=BAR))])
    cache = make_cache([NODE_A, NODE_B], [pod("a", BAR, "nodeA", aff=anti)])
    plugin = factory(None, make_handle(cache=cache))
    assert _groups(cache) == [{}, {("zone", 0): {"nodeA": 1}}, {("region", 4): {"nodeA": 1}}, {}]
    incoming = pod("new", labels=BAR)
    table = cache.table
    batch = NodeBatch(table, table.rows())
    assert plugin.pre_filter(CycleState(), incoming, batch) is None  # nodeA's pod rejects it by symmetry

    second = pod("b", BAR, "", aff=anti)
    cache.assume(second, "nodeB")
    assert _groups(cache)[1] == {("zone", 0): {"nodeA": 1, "nodeB": 1}}
    state = CycleState()
    plugin.pre_filter(state, incoming, batch)
    assert plugin.filter_batch(state, incoming, batch).failed.tolist() == [True, True]  # both zones now
    cache.forget(second)
    assert _groups(cache)[1] == {("zone", 0): {"nodeA": 1}}

    cache.remove_pod(pod("a", BAR, "nodeA", aff=anti))
    assert _groups(cache) == [{}, {}, {}, {}]
    assert plugin.pre_filter(CycleState(), incoming, batch).is_skip()
    cache.add_pod(pod("c", BAR, "nodeB", aff=anti))
    assert _groups(cache)[1] == {("zone", 0): {"nodeB": 1}}
    # An update that drops the affinity leaves the pod out of the index.
    cache.add_pod(pod("c", BAR, "nodeB"))
    assert _groups(cache) == [{}, {}, {}, {}]


def test_pods_sharing_terms_share_one_group():
    anti = affinity(anti=[term("hostname", labels={"app": "x"})])
    pods = [pod(f"x{i}", {"app": "x"}, f"n{i % 3}", aff=anti) for i in range(9)]
    cache = make_cache([node(f"n{i}", hostname=f"n{i}") for i in range(3)], pods)
    factory(None, make_handle(cache=cache))
    assert _groups(cache)[1] == {("hostname", 0): {"n0": 3, "n1": 3, "n2": 3}}


def test_scores_follow_the_index_after_pods_come_and_go():
    nodes = [node("m1", **CHINA), node("m2", **INDIA)]
    cache = make_cache(nodes, [pod("e1", {}, "m1", aff=STAY_S1_REGION)])
    plugin = factory(None, make_handle(cache=cache))
    table = cache.table
    batch = NodeBatch(table, table.rows())

    def raw():
        state = CycleState()
        status = plugin.pre_score(state, pod(labels=S1), batch)
        return None if status is not None and status.is_skip() else plugin.score_batch(state, pod(), batch).tolist()

    assert raw() == [5, 0]
    cache.add_pod(pod("e2", {}, "m2", aff=STAY_S1_REGION))
    cache.add_pod(pod("e3", {}, "m2", aff=STAY_S1_REGION))
    assert raw() == [5, 10]
    cache.remove_pod(pod("e1", {}, "m1", aff=STAY_S1_REGION))
    assert raw() == [0, 10]
    cache.remove_node("m2")
    assert raw() is None
