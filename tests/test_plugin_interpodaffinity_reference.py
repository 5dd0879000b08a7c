"""InterPodAffinity against a literal transcription of kube's algorithm, on random small clusters.

The reference below walks every existing pod as kube's filtering.go / scoring.go
do (no indexes, no numpy); the plugin must agree on every node's Filter reason
and every feasible node's raw and normalized score. Seeds are fixed.
"""

from __future__ import annotations

import random

import pytest

from scorer.model import Namespace
from scorer.plugins.interpodaffinity import (
    ERR_REASON_AFFINITY,
    ERR_REASON_ANTI_AFFINITY,
    ERR_REASON_EXISTING_ANTI_AFFINITY,
    InterPodAffinityArgs,
    factory,
)
from scorer.testing import make_cache, make_handle, make_node, make_pod, run_plugin

KEYS = ("region", "zone", "kubernetes.io/hostname")
NAMESPACES = [Namespace(name="ns-a", labels={"team": "a"}), Namespace(name="ns-b", labels={"team": "b"}),
              Namespace(name="ns-c", labels={})]


# -- random objects ---------------------------------------------------------------------------------
def random_labels(rng):
    labels = {}
    if rng.random() < 0.8:
        labels["app"] = rng.choice("ab")
    if rng.random() < 0.5:
        labels["tier"] = rng.choice("xy")
    return labels


def random_selector(rng):
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.1:
        return {}
    selector = {}
    if rng.random() < 0.7:
        selector["matchLabels"] = {"app": rng.choice("ab")}
    if rng.random() < 0.4:
        op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
        expr = {"key": "tier", "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = [rng.choice("xy")]
        selector["matchExpressions"] = [expr]
    return selector


def random_term(rng):
    term = {"topologyKey": rng.choice(KEYS)}
    selector = random_selector(rng)
    if selector is not None:
        term["labelSelector"] = selector
        if rng.random() < 0.15:
            term[rng.choice(["matchLabelKeys", "mismatchLabelKeys"])] = ["tier"]
    roll = rng.random()
    if roll < 0.15:
        term["namespaces"] = [rng.choice(["ns-a", "ns-b"])]
    elif roll < 0.25:
        term["namespaceSelector"] = rng.choice([{}, {"matchLabels": {"team": "a"}}])
    return term


def random_affinity(rng, p):
    if rng.random() > p:
        return None
    out = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        required = [random_term(rng) for _ in range(rng.choice([0, 0, 1, 2]))]
        preferred = [{"weight": rng.randint(1, 10), "podAffinityTerm": random_term(rng)}
                     for _ in range(rng.choice([0, 0, 1, 2]))]
        if required or preferred:
            out[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": required,
                         "preferredDuringSchedulingIgnoredDuringExecution": preferred}
    return out or None


class Raw:
    """A pod as the literal reference reads it: the affinity mapping it was built from."""

    def __init__(self, name, namespace, labels, node_name, affinity):
        self.name, self.namespace, self.labels, self.node_name = name, namespace, labels, node_name
        self.raw_affinity = affinity
        self.pod = make_pod(name, namespace=namespace, labels=labels, node_name=node_name, affinity=affinity)


def random_cluster(rng):
    nodes = []
    for i in range(rng.randint(1, 7)):
        labels = {"kubernetes.io/hostname": f"n{i}"}
        if rng.random() < 0.85:
            labels["region"] = rng.choice(["r1", "r2"])
        if rng.random() < 0.85:
            labels["zone"] = rng.choice(["z1", "z2", "z3"])
        nodes.append(make_node(f"n{i}", labels=labels))
    pods = [Raw(f"e{i}", rng.choice(["ns-a", "ns-b", "ns-c"]), random_labels(rng), rng.choice(nodes).name,
                random_affinity(rng, 0.4))
            for i in range(rng.randint(0, 12))]
    incoming = Raw("incoming", rng.choice(["ns-a", "ns-b"]), random_labels(rng), "", random_affinity(rng, 0.9))
    return nodes, pods, incoming


# -- kube, literally ---------------------------------------------------------------------------------
class Term:
    def __init__(self, owner, raw, cluster_namespaces=None):
        self.key = raw["topologyKey"]
        selector = raw.get("labelSelector")
        if selector is not None:
            selector = {"matchLabels": dict(selector.get("matchLabels", {})),
                        "matchExpressions": list(selector.get("matchExpressions", []))}
            for k in raw.get("matchLabelKeys", []):
                if k in owner.labels:
                    selector["matchExpressions"].append({"key": k, "operator": "In", "values": [owner.labels[k]]})
            for k in raw.get("mismatchLabelKeys", []):
                if k in owner.labels:
                    selector["matchExpressions"].append({"key": k, "operator": "NotIn", "values": [owner.labels[k]]})
        self.selector = selector
        ns_selector = raw.get("namespaceSelector")
        names = raw.get("namespaces", [])
        self.namespaces = set(names) if (names or ns_selector is not None) else {owner.namespace}
        self.ns_selector = ns_selector
        if cluster_namespaces is not None and ns_selector:  # the incoming pod's: merged, then Nothing
            self.namespaces |= {ns.name for ns in cluster_namespaces if matches(ns_selector, ns.labels)}
            self.ns_selector = None

    def matches(self, pod, ns_labels):
        if pod.namespace not in self.namespaces and not (self.ns_selector is not None
                                                         and matches(self.ns_selector, ns_labels)):
            return False
        return self.selector is not None and matches(self.selector, pod.labels)


def matches(selector, labels):
    for k, v in selector.get("matchLabels", {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions", []):
        k, op, values = e["key"], e["operator"], e.get("values", [])
        ok = {"In": k in labels and labels[k] in values, "NotIn": k not in labels or labels[k] not in values,
              "Exists": k in labels, "DoesNotExist": k not in labels}[op]
        if not ok:
            return False
    return True


def terms(pod, kind, required, cluster_namespaces=None):
    block = ((pod.raw_affinity or {}).get(kind) or {})
    if required:
        required_terms = block.get("requiredDuringSchedulingIgnoredDuringExecution", [])
        return [Term(pod, t, cluster_namespaces) for t in required_terms]
    return [(w["weight"], Term(pod, w["podAffinityTerm"], cluster_namespaces))
            for w in block.get("preferredDuringSchedulingIgnoredDuringExecution", [])]


def kube(nodes, pods, incoming, hard_weight=1, ignore_preferred=False):
    """(reason per node, raw score per node or None when PreScore skips)."""
    by_name = {n.name: n for n in nodes}
    ns_labels = next((ns.labels for ns in NAMESPACES if ns.name == incoming.namespace), {})
    aff = terms(incoming, "podAffinity", True, NAMESPACES)
    anti = terms(incoming, "podAntiAffinity", True, NAMESPACES)
    affinity_counts, anti_counts, existing_counts = {}, {}, {}

    def bump(counts, key, node):
        if key in node.labels:
            counts[(key, node.labels[key])] = counts.get((key, node.labels[key]), 0) + 1

    for p in pods:
        node = by_name[p.node_name]
        for t in terms(p, "podAntiAffinity", True):
            if t.matches(incoming, ns_labels):
                bump(existing_counts, t.key, node)
        if aff and all(t.matches(p, {}) for t in aff):
            for t in aff:
                bump(affinity_counts, t.key, node)
        for t in anti:
            if t.matches(p, {}):
                bump(anti_counts, t.key, node)
    reasons = {}
    for node in nodes:
        labels = node.labels
        reason = None
        exist = True
        for t in aff:
            if t.key not in labels:
                reason = ERR_REASON_AFFINITY
                break
            if affinity_counts.get((t.key, labels[t.key]), 0) <= 0:
                exist = False
        if reason is None and not exist and not (not affinity_counts and all(t.matches(incoming, {}) for t in aff)):
            reason = ERR_REASON_AFFINITY
        if reason is None and any(t.key in labels and anti_counts.get((t.key, labels[t.key]), 0) > 0 for t in anti):
            reason = ERR_REASON_ANTI_AFFINITY
        if reason is None and any(existing_counts.get((k, v), 0) > 0 for k, v in labels.items()):
            reason = ERR_REASON_EXISTING_ANTI_AFFINITY
        reasons[node.name] = reason

    pref_aff = terms(incoming, "podAffinity", False, NAMESPACES)
    pref_anti = terms(incoming, "podAntiAffinity", False, NAMESPACES)
    if ignore_preferred and not (pref_aff or pref_anti):
        return reasons, None
    score = {}

    def add(term, weight, pod, labels, node):
        if term.matches(pod, labels) and term.key in node.labels:
            key = (term.key, node.labels[term.key])
            score[key] = score.get(key, 0) + weight

    for p in pods:
        node = by_name[p.node_name]
        for w, t in pref_aff:
            add(t, w, p, {}, node)
        for w, t in pref_anti:
            add(t, -w, p, {}, node)
        if hard_weight > 0:
            for t in terms(p, "podAffinity", True):
                add(t, hard_weight, incoming, ns_labels, node)
        for w, t in terms(p, "podAffinity", False):
            add(t, w, incoming, ns_labels, node)
        for w, t in terms(p, "podAntiAffinity", False):
            add(t, -w, incoming, ns_labels, node)
    if not score:
        return reasons, None
    raw = {n.name: sum(v for (k, val), v in score.items() if n.labels.get(k) == val) for n in nodes}
    return reasons, raw


def normalize(raw):
    low, high = min(raw.values()), max(raw.values())  # over the scored nodes (reference §3.11)
    return {n: int(100.0 * ((v - low) / (high - low))) if high > low else 0 for n, v in raw.items()}


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_kube_on_random_clusters(seed):
    rng = random.Random(seed)
    for _ in range(60):
        nodes, pods, incoming = random_cluster(rng)
        args = {"hard_pod_affinity_weight": rng.choice([0, 1, 5]),
                "ignore_preferred_terms_of_existing_pods": rng.random() < 0.2}
        existing = [p.pod for p in pods]
        cache = make_cache(nodes, existing, NAMESPACES)
        plugin = factory(InterPodAffinityArgs(**args), make_handle(cache=cache))
        result = run_plugin(plugin, incoming.pod, nodes, pods=existing, namespaces=NAMESPACES)
        reasons, raw = kube(nodes, pods, incoming, args["hard_pod_affinity_weight"],
                            args["ignore_preferred_terms_of_existing_pods"])
        got = {n: (s.reasons[0] if s.reasons else None) for n, s in result.filter.items()}
        assert got == reasons, (incoming.raw_affinity, [(p.labels, p.raw_affinity) for p in pods])
        feasible = [n for n, r in reasons.items() if r is None]
        if raw is None or not feasible:
            assert result.scores == {}
            continue
        expected_raw = {n: raw[n] for n in feasible}
        assert result.raw_scores == expected_raw
        assert result.scores == normalize(expected_raw)
