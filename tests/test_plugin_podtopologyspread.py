"""PodTopologySpread through the framework: Filter cases from kube's filtering_test.go
(TestSingleConstraint, TestMultipleConstraints), Score cases from scoring_test.go
(TestPodTopologySpreadScore, with the rounding of kube >= 1.21), and the features
added after 1.20 (minDomains, node inclusion policies, matchLabelKeys), the
default constraints (System / List) with owners from the cache's workloads,
add_pod / remove_pod on a cloned state, a scratch table, the incremental index,
the args' validation and the events.

Each case runs the plugin built by its factory with a Handle on a ClusterCache,
through ``ScheduleAlgorithm.schedule_pod`` (every node evaluated, every feasible
node scored). ``failed`` nodes get a NoSchedule taint that TaintToleration,
enabled before the plugin, rejects: they are "all nodes" but not "filtered nodes".
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from pluginkit import requeues

from scorer.assembly import assemble
from scorer.cluster.memory import InMemoryCluster
from scorer.config.convert import structure
from scorer.cycle import ScheduleAlgorithm
from scorer.errors import ConfigError
from scorer.framework import Code, CycleState, NodeBatch, Status
from scorer.framework.catalog import PluginInfo
from scorer.framework.events import (
    ASSIGNED_POD,
    DELETE,
    NODE,
    UPDATE_NODE_ALLOCATABLE,
    UPDATE_NODE_LABEL,
    UPDATE_NODE_TAINT,
    UPDATE_POD_LABEL,
    UPDATE_POD_SCALE_DOWN,
    ClusterEvent,
)
from scorer.framework.runtime import Framework, Handle
from scorer.model import LabelSelector, SelectorOwner, TopologySpreadConstraint
from scorer.plugins import podtopologyspread, tainttoleration
from scorer.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    NAME,
    PodTopologySpread,
    PodTopologySpreadArgs,
)
from scorer.registry import build_registry
from scorer.state.nodetable import NodeTable
from scorer.testing import make_cache, make_node, make_pod, schedule_pending

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
OK, U, UU = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
FAILED_TAINT = {"key": "failed", "value": "true", "effect": "NoSchedule"}


# -- builders ------------------------------------------------------------------------


def exists(key: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


def spread(max_skew: int, key: str, when: str = "DoNotSchedule", selector: Any = "foo", **extra: Any) -> dict:
    """A topologySpreadConstraint; ``selector`` a label key (Exists), a selector mapping, or None."""
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if selector is not None:
        c["labelSelector"] = exists(selector) if isinstance(selector, str) else selector
    return c


def incoming(*constraints: dict, labels: Iterable[str] | Mapping[str, str] = ("foo",), **kw: Any):
    spec = dict(kw.pop("spec", {}))
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    return make_pod("p", labels=_labels(labels), spec=spec, **kw)


def _labels(labels: Iterable[str] | Mapping[str, str]) -> dict[str, str]:
    return dict(labels) if isinstance(labels, Mapping) else dict.fromkeys(labels, "")


def pod_on(name: str, node: str, labels: Iterable[str] | Mapping[str, str] = ("foo",), *,
           namespace: str = "default", terminating: bool = False):
    pod = make_pod(name, node_name=node, labels=_labels(labels), namespace=namespace)
    return attrs.evolve(pod, deleting=True) if terminating else pod


def spread_pods(layout: Mapping[str, int], labels: Iterable[str] | Mapping[str, str] = ("foo",), prefix: str = "p"):
    """``{"node-a": 2, ...}`` -> that many matching pods on each node."""
    return [pod_on(f"{prefix}-{node}-{i}", node, labels) for node, n in layout.items() for i in range(n)]


def nodes_of(spec: Mapping[str, Mapping[str, str]], failed: Sequence[str] = (), taints=None):
    taints = taints or {}
    return [make_node(name, labels=labels,
                      taints=[FAILED_TAINT] if name in failed else taints.get(name, ()))
            for name, labels in spec.items()]


# kube's usual four nodes: zone1 = node-a, node-b; zone2 = node-x, node-y; "node" = the name.
FOUR = {n: {"zone": z, "node": n} for n, z in
        (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))}
FOUR_HOSTS = {n: {"zone": z, HOSTNAME: n} for n, z in
              (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))}


# -- harness -------------------------------------------------------------------------


@attrs.define
class Run:
    codes: dict[str, Code]  # every node's Filter code (TaintToleration's for failed nodes)
    reasons: dict[str, tuple[str, ...]]
    filter_skipped: bool
    score_skipped: bool
    raw: dict[str, int]
    scores: dict[str, int]
    state: CycleState
    cache: Any
    plugin: PodTopologySpread


def framework_for(cache, args: PodTopologySpreadArgs | None = None) -> Framework:
    points = {"preFilter": (NAME,), "filter": (tainttoleration.NAME, NAME), "preScore": (NAME,), "score": (NAME,)}
    catalog = {
        NAME: PluginInfo(NAME, podtopologyspread.factory, frozenset(points)),
        tainttoleration.NAME: PluginInfo(tainttoleration.NAME, tainttoleration.factory, frozenset({"filter"})),
    }
    profile = SimpleNamespace(scheduler_name="test-scheduler", percentage_of_nodes_to_score=100, points=points,
                              weights={NAME: 1}, args={NAME: args})  # a FrameworkProfile
    return Framework(profile, catalog, Handle(cache, "test-scheduler", None))


def run(pod, nodes, pods=(), *, owners=(), args=None, cache=None) -> Run:
    if cache is None:
        cache = make_cache(nodes, pods)
        for owner in owners:
            cache.add_workload(owner)
    fwk = framework_for(cache, args)
    state = CycleState()
    result = ScheduleAlgorithm(cache).schedule_pod(fwk, state, pod, evaluate_all=True, score_all=True)
    assert result.failed_at == "", result.status
    statuses = result.node_statuses(cache.table)
    names = cache.table.names
    out = Run({n: statuses.get(n, Status()).code for n in names},
              {n: statuses.get(n, Status()).reasons for n in names},
              NAME in state.skip_filter_plugins, NAME in state.skip_score_plugins, {}, {}, state, cache,
              fwk.plugins[NAME])
    if result.scores is not None and result.scores.plugins:
        feasible = [names[int(r)] for r in result.feasible_rows]
        ps = result.scores.plugins[0]
        out.raw = dict(zip(feasible, ps.raw.tolist(), strict=True))
        out.scores = dict(zip(feasible, ps.normalized.tolist(), strict=True))
    return out


def codes(*values: Code, names: Sequence[str] = tuple(FOUR)) -> dict[str, Code]:
    return dict(zip(names, values, strict=True))


# -- Filter: one constraint (kube's TestSingleConstraint) --------------------------------

SINGLE = [
    ("no existing pods", incoming(spread(1, "zone")), FOUR, [], codes(OK, OK, OK, OK)),
    ("no existing pods, incoming pod doesn't match itself", incoming(spread(1, "zone", selector="bar")), FOUR, [],
     codes(OK, OK, OK, OK)),
    ("existing pods in a different namespace do not count", incoming(spread(1, "zone")), FOUR,
     [pod_on("p-a1", "node-a", namespace="ns1"), pod_on("p-b1", "node-a", namespace="ns2"),
      pod_on("p-x1", "node-x"), pod_on("p-y1", "node-y")],
     codes(OK, OK, U, U)),
    ("pods spread across zones as 3/3, all nodes fit", incoming(spread(1, "zone")), FOUR,
     spread_pods({"node-a": 2, "node-b": 1, "node-y": 3}), codes(OK, OK, OK, OK)),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b", incoming(spread(1, "zone")),
     {**FOUR, "node-b": {"zon": "zone1", "node": "node-b"}},
     spread_pods({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}), codes(OK, UU, U, U)),
    ("pod cannot be scheduled as all nodes don't have label 'rack'", incoming(spread(1, "rack")),
     {"node-a": FOUR["node-a"], "node-x": FOUR["node-x"]}, [], codes(UU, UU, names=("node-a", "node-x"))),
    ("pods spread across nodes as 2/1/0/3, only node-x fits", incoming(spread(1, "node")), FOUR,
     spread_pods({"node-a": 2, "node-b": 1, "node-y": 3}), codes(U, U, OK, U)),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit", incoming(spread(2, "node")), FOUR,
     spread_pods({"node-a": 2, "node-b": 1, "node-y": 3}), codes(U, OK, OK, U)),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
     incoming(spread(1, "node"), labels=("bar",)), FOUR,
     spread_pods({"node-a": 2, "node-b": 1, "node-y": 3}), codes(U, OK, OK, U)),
    # Only node-a and node-y count (nodeAffinityPolicy Honor): 2/~1~/~0~/3. NodeAffinity does not
    # run here, so node-b and node-x pass this plugin's Filter.
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
     incoming(spread(1, "node"), affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
         "nodeSelectorTerms": [{"matchExpressions": [
             {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}]}}}), FOUR,
     spread_pods({"node-a": 2, "node-b": 1, "node-y": 3}), codes(OK, OK, OK, U)),
    ("terminating Pods should be excluded", incoming(spread(1, "node")),
     {"node-a": {"node": "node-a"}, "node-b": {"node": "node-b"}},
     [pod_on("p-a", "node-a", terminating=True), pod_on("p-b", "node-b")],
     codes(OK, U, names=("node-a", "node-b"))),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "want"), [c[1:] for c in SINGLE], ids=[c[0] for c in SINGLE])
def test_filter_single_constraint(pod, nodes, pods, want):
    assert run(pod, nodes_of(nodes), pods).codes == want


# -- Filter: several constraints (kube's TestMultipleConstraints) -------------------------

ZONE_NODE = (spread(1, "zone"), spread(1, "node"))
ZONE_FOO_NODE_BAR = (spread(1, "zone", selector="foo"), spread(1, "node", selector="bar"))

MULTIPLE = [
    ("two Constraints on zone and node, spreads = [3/3, 2/1/0/3]", incoming(*ZONE_NODE), FOUR,
     spread_pods({"node-a": 2, "node-b": 1, "node-y": 3}), codes(U, U, OK, U)),
    ("two Constraints on zone and node, spreads = [3/4, 2/1/0/4]", incoming(*ZONE_NODE), FOUR,
     spread_pods({"node-a": 2, "node-b": 1, "node-y": 4}), codes(U, U, U, U)),
    ("Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
     incoming(*ZONE_FOO_NODE_BAR, labels=("foo", "bar")), FOUR,
     [pod_on("p-a1", "node-a", ("foo",)), pod_on("p-y1", "node-y", ("bar",))], codes(U, U, OK, U)),
    ("Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
     incoming(*ZONE_FOO_NODE_BAR, labels=("foo", "bar")), FOUR,
     [pod_on("p-a1", "node-a", ("foo",)), pod_on("p-x1", "node-x", ("bar",)), pod_on("p-y1", "node-y", ("bar",))],
     codes(U, U, U, U)),
    ("Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
     incoming(*ZONE_FOO_NODE_BAR, labels=("foo", "bar")), FOUR,
     [pod_on("p-a1", "node-a", ("foo",)), pod_on("p-a2", "node-a", ("foo", "bar")),
      pod_on("p-y1", "node-y", ("foo",)), pod_on("p-y2", "node-y", ("foo", "bar")), pod_on("p-y3", "node-y", ("foo",))],
     codes(U, OK, U, U)),
    ("Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
     incoming(*ZONE_FOO_NODE_BAR, labels=("bar",)), FOUR,
     [pod_on("p-a1", "node-a", ("foo",)), pod_on("p-x1", "node-x", ("bar",)), pod_on("p-y1", "node-y", ("bar",))],
     codes(OK, OK, U, U)),
    ("two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
     incoming(*ZONE_NODE), {**FOUR, "node-x": {"zone": "zone2"}},
     [pod_on("p-a1", "node-a"), pod_on("p-y3", "node-y")], codes(U, OK, UU, U)),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "want"), [c[1:] for c in MULTIPLE],
                         ids=[c[0] for c in MULTIPLE])
def test_filter_multiple_constraints(pod, nodes, pods, want):
    assert run(pod, nodes_of(nodes), pods).codes == want


def test_filter_reasons_and_first_failing_constraint_wins():
    # node-x lacks "node" (2nd constraint) but fails the zone skew (zone2 3, zone1 1) first:
    # kube returns the first failure.
    nodes = {**FOUR, "node-x": {"zone": "zone2"}}
    pods = spread_pods({"node-y": 3, "node-a": 1})
    result = run(incoming(*ZONE_NODE), nodes_of(nodes), pods)
    assert result.codes["node-x"] == U
    assert result.reasons["node-x"] == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)
    # A node without the first key: the missing-label reason, UnschedulableAndUnresolvable.
    result = run(incoming(spread(1, "rack")), nodes_of(FOUR), [])
    assert set(result.reasons.values()) == {(ERR_REASON_NODE_LABEL_NOT_MATCH,)}
    assert ERR_REASON_NODE_LABEL_NOT_MATCH == (
        "node(s) didn't match pod topology spread constraints (missing required label)")


# -- Filter: features after 1.20 ------------------------------------------------------------

TWO_ZONES = {"node-a": {"zone": "zone1"}, "node-b": {"zone": "zone2"}}


@pytest.mark.parametrize(("min_domains", "want"), [
    (None, codes(OK, OK, names=TWO_ZONES)),
    (2, codes(OK, OK, names=TWO_ZONES)),   # 2 domains: the global minimum is 1
    (3, codes(U, U, names=TWO_ZONES)),     # fewer domains than minDomains: the global minimum is 0
])
def test_min_domains(min_domains, want):
    extra = {} if min_domains is None else {"minDomains": min_domains}
    pod = incoming(spread(1, "zone", **extra))
    assert run(pod, nodes_of(TWO_ZONES), spread_pods({"node-a": 1, "node-b": 1})).codes == want


def test_min_domains_counts_empty_domains():
    # Three zones with 1/1/0 pods and minDomains 3: all three are domains, the minimum is 0 anyway.
    nodes = {**TWO_ZONES, "node-c": {"zone": "zone3"}}
    pod = incoming(spread(1, "zone", minDomains=3))
    assert run(pod, nodes_of(nodes), spread_pods({"node-a": 1, "node-b": 1})).codes == codes(
        U, U, OK, names=nodes)


AFFINITY_A_Y = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}]}}}


@pytest.mark.parametrize(("policy", "want"), [
    ({}, codes(OK, OK, OK, U)),                                  # Honor (default): 2/~1~/~0~/3
    ({"nodeAffinityPolicy": "Honor"}, codes(OK, OK, OK, U)),
    ({"nodeAffinityPolicy": "Ignore"}, codes(U, U, OK, U)),      # every node counts: 2/1/0/3
])
def test_node_affinity_policy(policy, want):
    pod = incoming(spread(1, "node", **policy), affinity=AFFINITY_A_Y)
    assert run(pod, nodes_of(FOUR), spread_pods({"node-a": 2, "node-b": 1, "node-y": 3})).codes == want


def test_node_affinity_policy_honors_node_selector():
    pod = incoming(spread(1, "zone"), node_selector={"zone": "zone1"})
    # Only zone1 counts (one domain, minimum 1): zone2 nodes pass this plugin with 0 pods.
    result = run(pod, nodes_of(FOUR), spread_pods({"node-a": 1, "node-x": 5}))
    assert result.codes == codes(OK, OK, OK, OK)
    ignore = incoming(spread(1, "zone", nodeAffinityPolicy="Ignore"), node_selector={"zone": "zone1"})
    assert run(ignore, nodes_of(FOUR), spread_pods({"node-a": 1, "node-x": 5})).codes == codes(OK, OK, U, U)


@pytest.mark.parametrize(("policy", "tolerations", "want"), [
    # node-x is tainted; TaintToleration rejects it (UU) when the pod does not tolerate the taint.
    ({}, (), codes(U, U, UU, U)),                                     # Ignore: x counts, min 0
    ({"nodeTaintsPolicy": "Ignore"}, (), codes(U, U, UU, U)),
    ({"nodeTaintsPolicy": "Honor"}, (), codes(U, OK, UU, U)),         # x does not count: min 1
    ({"nodeTaintsPolicy": "Honor"}, ({"key": "failed", "operator": "Exists"},), codes(U, U, OK, U)),
])
def test_node_taints_policy(policy, tolerations, want):
    pod = incoming(spread(1, "node", **policy), tolerations=tolerations)
    result = run(pod, nodes_of(FOUR, failed=["node-x"]), spread_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    assert result.codes == want


def test_node_taints_policy_honor_ignores_prefer_no_schedule():
    taints = {"node-x": [{"key": "soft", "value": "", "effect": "PreferNoSchedule"}]}
    pod = incoming(spread(1, "node", nodeTaintsPolicy="Honor"))
    result = run(pod, nodes_of(FOUR, taints=taints), spread_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    assert result.codes == codes(U, U, OK, U)  # node-x still counts (0 pods)


@pytest.mark.parametrize(("keys", "want"), [
    ((), codes(U, U, OK, OK)),             # app=web everywhere: 2/1/0/0
    (("version",), codes(OK, U, OK, OK)),  # + version=v2: only node-b's pod counts: 0/1/0/0
    (("absent",), codes(U, U, OK, OK)),    # a key the pod lacks adds nothing
])
def test_match_label_keys(keys, want):
    web = {"app": "web"}
    pods = [pod_on("v1-a1", "node-a", {**web, "version": "v1"}), pod_on("v1-a2", "node-a", {**web, "version": "v1"}),
            pod_on("v2-b1", "node-b", {**web, "version": "v2"})]
    constraint = spread(1, "node", selector={"matchLabels": web}, matchLabelKeys=list(keys))
    pod = incoming(constraint, labels={**web, "version": "v2"})
    assert run(pod, nodes_of(FOUR), pods).codes == want


def test_constraint_without_selector_matches_no_pod():
    pod = incoming(spread(1, "node", selector=None))
    assert run(pod, nodes_of(FOUR), spread_pods({"node-a": 5})).codes == codes(OK, OK, OK, OK)


def test_pre_filter_skips_without_hard_constraints():
    nodes = nodes_of(FOUR)
    assert run(incoming(), nodes).filter_skipped
    assert run(incoming(spread(1, "zone", "ScheduleAnyway")), nodes).filter_skipped
    assert not run(incoming(spread(1, "zone")), nodes).filter_skipped


# -- default constraints ------------------------------------------------------------------

WEB = {"app": "web"}
RS_WEB = SelectorOwner(kind="ReplicaSet", name="web", selector=LabelSelector(match_labels=WEB))
LIST_ZONE_HARD = PodTopologySpreadArgs(
    default_constraints=(structure(TopologySpreadConstraint,
                                   {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}),),
    defaulting_type="List")


def test_list_defaults_apply_to_pods_an_owner_selects():
    pods = spread_pods({"node-a": 1, "node-b": 1}, WEB) + spread_pods({"node-x": 5}, {"app": "db"})
    pod = incoming(labels=WEB)
    result = run(pod, nodes_of(FOUR), pods, owners=[RS_WEB], args=LIST_ZONE_HARD)
    assert result.codes == codes(U, U, OK, OK)  # zone1 has 2 web pods, zone2 none (db pods do not count)


def test_defaults_need_an_owner_and_yield_to_the_pods_own_constraints():
    pods = spread_pods({"node-a": 1, "node-b": 1}, WEB)
    nothing_selects = run(incoming(labels=WEB), nodes_of(FOUR), pods, args=LIST_ZONE_HARD)
    assert nothing_selects.filter_skipped and nothing_selects.score_skipped
    other_namespace = attrs.evolve(RS_WEB, namespace="other")
    assert run(incoming(labels=WEB), nodes_of(FOUR), pods, owners=[other_namespace],
               args=LIST_ZONE_HARD).filter_skipped
    own = run(incoming(spread(1, "node", "ScheduleAnyway"), labels=WEB), nodes_of(FOUR), pods, owners=[RS_WEB],
              args=LIST_ZONE_HARD)
    assert own.filter_skipped  # the pod's own (soft) constraints replace the hard defaults
    assert not own.score_skipped


def test_default_selector_ands_every_owner():
    service = SelectorOwner(kind="Service", name="web", selector=LabelSelector(match_labels=WEB))
    rs = SelectorOwner(kind="ReplicaSet", name="web-fe", selector=LabelSelector(match_labels={"tier": "fe"}))
    fe = {**WEB, "tier": "fe"}
    # node-a's pods match the Service only: not counted by the merged selector.
    pods = spread_pods({"node-a": 3}, WEB) + spread_pods({"node-x": 1}, fe, prefix="fe")
    result = run(incoming(labels=fe), nodes_of(FOUR), pods, owners=[service, rs], args=LIST_ZONE_HARD)
    assert result.codes == codes(OK, OK, U, U)


@pytest.mark.parametrize("kind", ["ReplicaSet", "Service", "ReplicationController", "StatefulSet"])
def test_system_defaults_are_soft_and_spread_by_host_and_zone(kind):
    # Hostname maxSkew 3 and zone maxSkew 5, ScheduleAnyway; n4 has no zone label and is still
    # scored (by hostname) because System defaulting does not require every key.
    nodes = {"n1": {HOSTNAME: "n1", ZONE: "a"}, "n2": {HOSTNAME: "n2", ZONE: "a"}, "n3": {HOSTNAME: "n3", ZONE: "b"},
             "n4": {HOSTNAME: "n4"}}
    pods = spread_pods({"n1": 2, "n2": 1, "n4": 1}, WEB) + spread_pods({"n3": 4}, {"app": "db"}, prefix="db")
    owner = SelectorOwner(kind=kind, name="web", selector=LabelSelector(match_labels=WEB))
    result = run(incoming(labels=WEB), nodes_of(nodes), pods, owners=[owner])
    assert result.filter_skipped
    # w_host = ln(4+2), w_zone = ln(2+2); zone a has 3 web pods:
    # n1 = round(2·w_h + 2 + 3·w_z + 4) = 14, n2 = 12, n3 = round(0 + 2 + 0 + 4) = 6, n4 = round(w_h + 2) = 4.
    assert result.raw == {"n1": 14, "n2": 12, "n3": 6, "n4": 4}
    assert result.scores == {"n1": 28, "n2": 42, "n3": 85, "n4": 100}


def test_list_defaults_require_every_key():
    nodes = {"n1": {HOSTNAME: "n1", ZONE: "a"}, "n2": {HOSTNAME: "n2", ZONE: "a"}, "n3": {HOSTNAME: "n3", ZONE: "b"},
             "n4": {HOSTNAME: "n4"}}
    pods = spread_pods({"n1": 2, "n2": 1, "n4": 1}, WEB)
    args = PodTopologySpreadArgs(default_constraints=podtopologyspread.SYSTEM_DEFAULT_CONSTRAINTS,
                                 defaulting_type="List")
    result = run(incoming(labels=WEB), nodes_of(nodes), pods, owners=[RS_WEB], args=args)
    # n4 lacks the zone: ignored (0). w_host = ln(3+2), w_zone = ln(2+2).
    assert result.raw == {"n1": 13, "n2": 12, "n3": 6, "n4": 0}
    assert result.scores == {"n1": 46, "n2": 53, "n3": 100, "n4": 0}


def test_list_defaulting_without_constraints_spreads_nothing():
    args = PodTopologySpreadArgs(defaulting_type="List")
    result = run(incoming(labels=WEB), nodes_of(FOUR_HOSTS), [], owners=[RS_WEB], args=args)
    assert result.filter_skipped and result.score_skipped


# -- Score (kube's TestPodTopologySpreadScore; raw scores rounded as kube >= 1.21) -----------

HOSTS4 = {f"node-{c}": {HOSTNAME: f"node-{c}"} for c in "abcd"}
HOSTS_AXY = {f"node-{c}": {HOSTNAME: f"node-{c}"} for c in "abxy"}


def soft(max_skew: int, key: str, selector: str = "foo") -> dict:
    return spread(max_skew, key, "ScheduleAnyway", selector)


SCORE = [
    ("one constraint on node, no existing pods", incoming(soft(1, HOSTNAME)),
     {k: HOSTS4[k] for k in ("node-a", "node-b")}, (), [], {"node-a": 100, "node-b": 100}),
    ("one constraint on node, only one node is candidate", incoming(soft(1, HOSTNAME)),
     {k: HOSTS4[k] for k in ("node-a", "node-b")}, ("node-b",), spread_pods({"node-a": 2, "node-b": 1}),
     {"node-a": 100}),
    ("one constraint on node, all nodes have the same number of matching pods", incoming(soft(1, HOSTNAME)),
     {k: HOSTS4[k] for k in ("node-a", "node-b")}, (), spread_pods({"node-a": 1, "node-b": 1}),
     {"node-a": 100, "node-b": 100}),
    # 2/1/0/3, w = ln 6: raw 4/2/0/5.
    ("one constraint on node, all 4 nodes are candidates", incoming(soft(1, HOSTNAME)), HOSTS4, (),
     spread_pods({"node-a": 2, "node-b": 1, "node-d": 3}), {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=2", incoming(soft(2, HOSTNAME)), HOSTS4, (),
     spread_pods({"node-a": 2, "node-b": 1, "node-d": 3}), {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=3", incoming(soft(3, HOSTNAME)), HOSTS4, (),
     spread_pods({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}),
     {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}),
    ("one constraint on node, 3 out of 4 nodes are candidates", incoming(soft(1, HOSTNAME)), HOSTS_AXY, ("node-y",),
     spread_pods({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}), {"node-a": 33, "node-b": 83, "node-x": 100}),
    ("one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
     incoming(soft(1, HOSTNAME)), {**HOSTS_AXY, "node-b": {"n": "node-b"}}, ("node-y",),
     spread_pods({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}), {"node-a": 16, "node-b": 0, "node-x": 100}),
    ("one constraint on zone, 3 out of 4 nodes are candidates", incoming(soft(1, "zone")), FOUR_HOSTS, ("node-y",),
     spread_pods({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}), {"node-a": 75, "node-b": 75, "node-x": 100}),
    ("two Constraints on zone and node, 2 out of 4 nodes are candidates",
     incoming(soft(1, "zone"), soft(1, HOSTNAME)), FOUR_HOSTS, ("node-b", "node-y"),
     spread_pods({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}), {"node-a": 100, "node-x": 63}),
    ("two Constraints on zone and node, with different labelSelectors",
     incoming(soft(1, "zone", "foo"), soft(1, HOSTNAME, "bar"), labels=("foo", "bar")), FOUR_HOSTS, (),
     [pod_on("p-a1", "node-a", ("foo",)), pod_on("p-b1", "node-b", ("foo", "bar")),
      pod_on("p-y1", "node-y", ("foo",)), pod_on("p-y2", "node-y", ("bar",))],
     {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}),
    ("two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
     incoming(soft(1, "zone", "foo"), soft(1, HOSTNAME, "bar"), labels=("foo", "bar")), FOUR_HOSTS, (),
     [pod_on("p-b1", "node-b", ("bar",)), pod_on("p-x1", "node-x", ("foo",)), pod_on("p-y1", "node-y", ("foo", "bar"))],
     {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}),
    ("two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
     incoming(soft(1, "zone", "foo"), soft(1, HOSTNAME, "bar"), labels=("foo", "bar")), FOUR_HOSTS, ("node-y",),
     [pod_on("p-a1", "node-a", ("foo",)), pod_on("p-b1", "node-b", ("foo", "bar")),
      pod_on("p-y1", "node-y", ("foo",)), pod_on("p-y2", "node-y", ("bar",))],
     {"node-a": 50, "node-b": 25, "node-x": 100}),
    ("existing pods in a different namespace do not count", incoming(soft(1, HOSTNAME)),
     {k: HOSTS4[k] for k in ("node-a", "node-b")}, (),
     [pod_on("p-a1", "node-a", namespace="ns1"), pod_on("p-a2", "node-a"), pod_on("p-b1", "node-b"),
      pod_on("p-b2", "node-b")], {"node-a": 100, "node-b": 33}),
    ("no feasible node has the topology key: every node is ignored", incoming(soft(1, "rack")),
     {k: HOSTS4[k] for k in ("node-a", "node-b")}, (), spread_pods({"node-a": 1}), {"node-a": 0, "node-b": 0}),
    ("terminating Pods should be excluded", incoming(soft(1, HOSTNAME)),
     {k: HOSTS4[k] for k in ("node-a", "node-b")}, (),
     [pod_on("p-a", "node-a", terminating=True), pod_on("p-b", "node-b")], {"node-a": 100, "node-b": 0}),
]


@pytest.mark.parametrize(("pod", "nodes", "failed", "pods", "want"), [c[1:] for c in SCORE],
                         ids=[c[0] for c in SCORE])
def test_score(pod, nodes, failed, pods, want):
    result = run(pod, nodes_of(nodes, failed), pods)
    assert not result.score_skipped
    assert result.scores == want


def test_raw_scores_are_rounded():
    # 2/1/0/3 with w = ln 6: 3.58 -> 4, 1.79 -> 2, 0, 5.38 -> 5 (kube <= 1.20 truncated to 3/1/0/5).
    result = run(incoming(soft(1, HOSTNAME)), nodes_of(HOSTS4), spread_pods({"node-a": 2, "node-b": 1, "node-d": 3}))
    assert result.raw == {"node-a": 4, "node-b": 2, "node-c": 0, "node-d": 5}


def test_score_skips_without_soft_constraints():
    assert run(incoming(), nodes_of(FOUR)).score_skipped
    assert run(incoming(spread(3, "zone")), nodes_of(FOUR)).score_skipped


def test_score_node_affinity_policy():
    # zone3 is outside the pod's required affinity: with Honor its pods do not count.
    nodes = {**FOUR_HOSTS, "node-z": {"zone": "zone3", HOSTNAME: "node-z"}}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["zone1", "zone2"]}]}]}}}
    pods = spread_pods({"node-a": 1, "node-x": 1, "node-z": 5})
    honor = run(incoming(soft(1, "zone"), affinity=affinity), nodes_of(nodes), pods)
    assert honor.raw["node-z"] == 0 and honor.scores["node-z"] == 100
    ignore = run(incoming(spread(1, "zone", "ScheduleAnyway", nodeAffinityPolicy="Ignore"), affinity=affinity),
                 nodes_of(nodes), pods)
    # w = ln(3+2): zone1, zone2 raw round(w) = 2, zone3 round(5w) = 8 -> 100·(8+2-raw)/8.
    assert ignore.raw["node-z"] == 8
    assert ignore.scores == {"node-a": 100, "node-b": 100, "node-x": 100, "node-y": 100, "node-z": 25}


def test_score_node_taints_policy():
    taints = {"node-z": [{"key": "t", "value": "", "effect": "NoExecute"}]}
    nodes = {**FOUR_HOSTS, "node-z": {"zone": "zone3", HOSTNAME: "node-z"}}
    pods = spread_pods({"node-a": 1, "node-x": 1, "node-z": 5})
    tolerate = ({"key": "t", "operator": "Exists"},)
    # node-z passes TaintToleration (tolerated) but still counts only under the policy Ignore.
    honor = run(incoming(spread(1, "zone", "ScheduleAnyway", nodeTaintsPolicy="Honor"), tolerations=()),
                nodes_of(nodes, taints=taints), pods)
    assert "node-z" not in honor.scores  # rejected by TaintToleration
    assert honor.scores == {n: 100 for n in FOUR_HOSTS}  # zone1 = zone2 = 1; zone3's pods not counted
    ignore = run(incoming(soft(1, "zone"), tolerations=tolerate), nodes_of(nodes, taints=taints), pods)
    assert ignore.scores == {"node-a": 100, "node-b": 100, "node-x": 100, "node-y": 100, "node-z": 25}
    honor_tolerated = run(incoming(spread(1, "zone", "ScheduleAnyway", nodeTaintsPolicy="Honor"),
                                   tolerations=tolerate), nodes_of(nodes, taints=taints), pods)
    assert honor_tolerated.scores["node-z"] == 25  # tolerated: the node counts under Honor too


# -- PreFilterExtensions, scratch tables, the index -----------------------------------------


def pre_filtered(pod, nodes, pods):
    """(plugin, cache, state after PreFilter) for ``pod``."""
    cache = make_cache(nodes, pods)
    fwk = framework_for(cache)
    plugin = fwk.plugins[NAME]
    state = CycleState()
    assert plugin.pre_filter(state, pod, NodeBatch(cache.table, cache.table.rows())) is None
    return plugin, cache, state


def verdict_codes(plugin, state, pod, batch) -> list[Code]:
    verdict = plugin.filter_batch(state, pod, batch)
    return [verdict.status_at(i).code for i in range(len(batch))]


def test_add_and_remove_pod_change_only_the_clone():
    pod = incoming(spread(1, "node"))
    plugin, cache, state = pre_filtered(pod, nodes_of(FOUR), spread_pods({"node-a": 1, "node-b": 1, "node-y": 1}))
    batch = NodeBatch(cache.table, cache.table.rows())
    assert verdict_codes(plugin, state, pod, batch) == [U, U, OK, U]  # 1/1/0/1
    added = state.clone()
    node_x = cache.table.node_info(cache.table.index["node-x"])
    plugin.add_pod(added, pod, pod_on("new", "node-x"), node_x)
    assert verdict_codes(plugin, added, pod, batch) == [OK, OK, OK, OK]  # 1/1/1/1
    assert verdict_codes(plugin, state, pod, batch) == [U, U, OK, U]  # the original is untouched
    removed = added.clone()
    node_a = cache.table.node_info(cache.table.index["node-a"])
    plugin.remove_pod(removed, pod, pod_on("p-node-a-0", "node-a"), node_a)
    assert verdict_codes(plugin, removed, pod, batch) == [OK, U, U, U]  # 0/1/1/1
    assert verdict_codes(plugin, added, pod, batch) == [OK, OK, OK, OK]


@pytest.mark.parametrize("other", [
    pod_on("other-ns", "node-x", namespace="ns1"),   # another namespace
    pod_on("no-match", "node-x", ("bar",)),          # the selector does not match
])
def test_add_pod_ignores_pods_that_do_not_count(other):
    pod = incoming(spread(1, "node"))
    plugin, cache, state = pre_filtered(pod, nodes_of(FOUR), spread_pods({"node-a": 1, "node-b": 1, "node-y": 1}))
    clone = state.clone()
    plugin.add_pod(clone, pod, other, cache.table.node_info(cache.table.index["node-x"]))
    assert verdict_codes(plugin, clone, pod, NodeBatch(cache.table, cache.table.rows())) == [U, U, OK, U]


def test_add_pod_respects_the_node_inclusion_policies():
    pod = incoming(spread(1, "node"), affinity=AFFINITY_A_Y)  # Honor: only node-a and node-y count
    plugin, cache, state = pre_filtered(pod, nodes_of(FOUR), spread_pods({"node-a": 1}))
    batch = NodeBatch(cache.table, cache.table.rows())
    assert verdict_codes(plugin, state, pod, batch) == [U, OK, OK, OK]  # a=1, y=0
    clone = state.clone()
    plugin.add_pod(clone, pod, pod_on("on-b", "node-b"), cache.table.node_info(cache.table.index["node-b"]))
    assert verdict_codes(plugin, clone, pod, batch) == [U, OK, OK, OK]  # node-b does not count
    plugin.add_pod(clone, pod, pod_on("on-y", "node-y"), cache.table.node_info(cache.table.index["node-y"]))
    assert verdict_codes(plugin, clone, pod, batch) == [OK, OK, OK, OK]  # a=1, y=1


def test_filter_on_a_scratch_table():
    # Preemption's view: node-a alone, in a table of its own, after removing one of its pods.
    pod = incoming(spread(1, "zone"))
    pods = spread_pods({"node-a": 2, "node-x": 1})
    plugin, cache, state = pre_filtered(pod, nodes_of(FOUR), pods)
    scratch = NodeTable()
    scratch.add_node(make_node("node-a", labels=FOUR["node-a"]))
    scratch.add_pod(pods[1], "node-a")
    batch = NodeBatch(scratch, scratch.rows())
    assert verdict_codes(plugin, state, pod, batch) == [U]  # zone1 2, zone2 1: 2+1-1 > 1
    clone = state.clone()
    plugin.remove_pod(clone, pod, pods[0], scratch.node_info(0))
    assert verdict_codes(plugin, clone, pod, batch) == [OK]  # 1+1-1


def test_add_pod_on_a_new_domain():
    # A node value PreFilter never saw (a scratch node in a new zone) becomes a domain.
    pod = incoming(spread(1, "zone"))
    plugin, cache, state = pre_filtered(pod, nodes_of(FOUR), spread_pods({"node-a": 1, "node-x": 1}))
    scratch = NodeTable()
    scratch.add_node(make_node("node-z", labels={"zone": "zone3", "node": "node-z"}))
    batch = NodeBatch(scratch, scratch.rows())
    assert verdict_codes(plugin, state, pod, batch) == [OK]  # not a domain: 0 + 1 - 1
    clone = state.clone()
    plugin.add_pod(clone, pod, pod_on("z1", "node-z"), scratch.node_info(0))
    plugin.add_pod(clone, pod, pod_on("z2", "node-z"), scratch.node_info(0))
    assert verdict_codes(plugin, clone, pod, batch) == [U]  # 2 + 1 - 1 > 1


def test_counts_follow_the_cache_and_cycles_do_not_walk_pods(monkeypatch):
    pod = incoming(spread(1, "node"))
    cache = make_cache(nodes_of(FOUR), spread_pods({"node-a": 1, "node-b": 1, "node-y": 1}))
    assert run(pod, (), cache=cache).codes == codes(U, U, OK, U)
    cache.assume(pod_on("assumed", ""), "node-x")
    assert run(pod, (), cache=cache).codes == codes(OK, OK, OK, OK)
    cache.remove_pod(pod_on("p-node-y-0", "node-y"))
    assert run(pod, (), cache=cache).codes == codes(U, U, U, OK)
    cache.add_pod(pod_on("leaving", "node-y", terminating=True))
    assert run(pod, (), cache=cache).codes == codes(U, U, U, OK)  # terminating: not counted

    class NoScan(list):
        def __getitem__(self, item):
            raise AssertionError("a cycle read the pods of a node")

        def __iter__(self):
            raise AssertionError("a cycle walked the pods")

    monkeypatch.setattr(cache.table, "pods", NoScan(cache.table.pods))
    monkeypatch.setattr(cache.pod_index, "pods", lambda: (_ for _ in ()).throw(AssertionError("walked pods")))
    both = incoming(spread(1, "node"), soft(1, "zone"))
    result = run(both, (), cache=cache)
    assert result.codes == codes(U, U, U, OK)
    assert result.scores == {"node-y": 100}


# -- args -------------------------------------------------------------------------------


def test_args_defaults():
    args = structure(PodTopologySpreadArgs, {})
    assert args.defaulting_type == "System" and args.default_constraints == ()
    assert args.effective_default_constraints == podtopologyspread.SYSTEM_DEFAULT_CONSTRAINTS
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in args.effective_default_constraints] == [
        (HOSTNAME, 3, "ScheduleAnyway"), (ZONE, 5, "ScheduleAnyway")]


def test_args_list_constraints_are_parsed():
    args = structure(PodTopologySpreadArgs, {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3},
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]})
    assert [(c.max_skew, c.when_unsatisfiable, c.min_domains) for c in args.effective_default_constraints] == [
        (2, "DoNotSchedule", 3), (1, "ScheduleAnyway", None)]


def hard(**fields: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", **fields}


@pytest.mark.parametrize(("data", "path", "words"), [
    ({"defaultConstraints": [hard()]}, "defaultingType", "when .defaultConstraints are not empty"),
    ({"defaultingType": "Sometimes"}, "defaultingType", 'Unsupported value: "Sometimes"'),
    ({"defaultingType": "List", "defaultConstraints": [hard(maxSkew=0)]}, "defaultConstraints[0].maxSkew",
     "not in valid range"),
    ({"defaultingType": "List", "defaultConstraints": [hard(topologyKey="")]}, "defaultConstraints[0].topologyKey",
     "can not be empty"),
    ({"defaultingType": "List", "defaultConstraints": [hard(topologyKey="bad key!")]},
     "defaultConstraints[0].topologyKey", '"bad key!"'),
    ({"defaultingType": "List", "defaultConstraints": [hard(whenUnsatisfiable="Never")]},
     "defaultConstraints[0].whenUnsatisfiable", 'Unsupported value: "Never"'),
    ({"defaultingType": "List", "defaultConstraints": [hard(labelSelector={"matchLabels": {"a": "b"}})]},
     "defaultConstraints[0].labelSelector", "must not define a selector"),
    ({"defaultingType": "List", "defaultConstraints": [hard(), hard(maxSkew=2)]}, "defaultConstraints[1]",
     "Duplicate value"),
])
def test_args_validation_names_the_field(data, path, words):
    with pytest.raises(ConfigError) as info:
        structure(PodTopologySpreadArgs, data, "args", kind="PodTopologySpreadArgs")
    [(got_path, message)] = info.value.errors
    assert got_path == "args." + path
    assert words in message


def test_args_same_key_with_both_actions_is_valid():
    data = {"defaultingType": "List",
            "defaultConstraints": [hard(), hard(whenUnsatisfiable="ScheduleAnyway")]}
    assert structure(PodTopologySpreadArgs, data).validate() == []


# -- registration and events ------------------------------------------------------------------


def test_registered_as_a_built_in_with_its_args():
    info = build_registry(autoload=False).plugins[NAME]
    assert info.args_type is PodTopologySpreadArgs
    assert {"preFilter", "filter", "preScore", "score"} <= info.extension_points


@pytest.mark.parametrize(("event", "moves"), [
    (ClusterEvent(ASSIGNED_POD, "Add"), True),
    (ClusterEvent(ASSIGNED_POD, DELETE), True),
    (ClusterEvent(ASSIGNED_POD, UPDATE_POD_LABEL), True),
    (ClusterEvent(ASSIGNED_POD, UPDATE_POD_SCALE_DOWN), False),
    (ClusterEvent(NODE, "Add"), True),
    (ClusterEvent(NODE, DELETE), True),
    (ClusterEvent(NODE, UPDATE_NODE_LABEL), True),
    (ClusterEvent(NODE, UPDATE_NODE_TAINT), True),
    (ClusterEvent(NODE, UPDATE_NODE_ALLOCATABLE), False),
])
def test_events_to_register(event, moves):
    plugin = podtopologyspread.factory(None, Handle(make_cache([]), "test-scheduler", None))
    assert requeues(plugin, event) is moves



# -- in the default profile ---------------------------------------------------------------------


@pytest.mark.parametrize("config", [None, {"apiVersion": "kubescheduler.config.k8s.io/v1",
                                           "kind": "KubeSchedulerConfiguration"}])
def test_default_profile_spreads_over_zones(config):
    # zone1 has two nodes: resource spreading alone would put 3 or 4 of the 6 pods there.
    zones = {"n1": "zone1", "n4": "zone1", "n2": "zone2", "n3": "zone3"}
    nodes = [make_node(n, labels={ZONE: z, HOSTNAME: n}) for n, z in zones.items()]
    pods = [incoming(spread(1, ZONE, selector={"matchLabels": WEB}), labels=WEB) for _ in range(6)]
    pods = [attrs.evolve(p, name=f"web-{i}", uid=f"uid-web-{i}") for i, p in enumerate(pods)]
    cluster = InMemoryCluster(nodes, pods, [])
    asm = assemble(config, cluster, registry=build_registry(autoload=False), seed=0)
    cluster.start(asm.handlers)
    asyncio.run(schedule_pending(asm.scheduler))
    placed = [cluster.pods[p.key].node_name for p in pods]
    assert all(placed)
    assert Counter(zones[n] for n in placed) == {"zone1": 2, "zone2": 2, "zone3": 2}
