"""The kube-scheduler parity scenario (issue 9, "Done means"): ``scorer simulate`` on
scorer/data/parity-cluster.yaml places each pod where kube-scheduler would, and says why.

It needs PodTopologySpread, InterPodAffinity, DefaultPreemption and the owner/budget objects of the
cluster file: every assertion below is kube-scheduler's decision, reasoned from its plugins
(reference §3.10, §3.11, §9); none is resolved by a random tie break.

Nodes: 4 cpu each; a1, a2 in zone-a; b1, g1 in zone-b; g1 tainted dedicated=gpu:NoSchedule.
Running: a1 cache-0 (priority 2000, 1 cpu) and spread-0 (2000, 0.1); a2 batch-a (10, 3 cpu);
b1 batch-b (0, 3 cpu; PDB batch-b allows 0 disruptions) and front-0 (2000, 0.1, ReplicaSet front).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from importlib import resources

import pytest

from scorer.cli import main
from scorer.model import load_file
from scorer.simulate import simulate

# Each pending pod: (node kube-scheduler chooses, why).
EXPECTED = {
    # Priority 1000 goes first. 3.5 cpu fits nowhere (a1 has 2.8 free, a2 and b1 1; g1's taint is
    # UnschedulableAndUnresolvable, so g1 is no preemption candidate). Candidates: a1 has no pod of
    # lower priority (no victims -> not a candidate); a2: victims {batch-a (10)}, 0 PDB violations;
    # b1: victims {batch-b (0)}, 1 PDB violation. pickOneNodeForPreemption's first criterion (fewest
    # PDB violations) picks a2, although b1's victim has the lower priority (criterion 2). batch-a is
    # deleted, critical is nominated to a2 and placed there on a later attempt.
    "shop/critical": "a2",
    # Required pod affinity to app=cache per hostname: only a1 runs cache-0.
    "shop/web-1": "a1",
    # Required affinity to app=cache per zone (zone-a: a1, a2) and required anti-affinity to app=web
    # per hostname (web-1 is on a1): a2 only (critical's 3.5 cpu, nominated or bound, leaves 0.5).
    "shop/web-2": "a2",
    # DoNotSchedule over zones, maxSkew 1, spread-0 in zone-a: zone-a would make skew 2, so zone-b;
    # g1's taint leaves b1 (0.8 cpu free after batch-b and front-0).
    "shop/spread-1": "b1",
    # No constraints of its own: the system defaults apply (zone maxSkew 5, hostname maxSkew 3,
    # ScheduleAnyway), with the selector of its ReplicaSet and Service (app=front). front-0 is on b1
    # (zone-b), so PodTopologySpread scores a1 and a2 equal and b1 lowest. When front-1's turn comes
    # (priority 0, after the 2000s and critical), critical has preempted batch-a and is *nominated*
    # to a2, not bound yet (it waits for its backoff): a nominated pod counts in Filter for pods of
    # lower priority (front-1 still fits beside it: 3.5 + 0.1 of 4 cpu) but not in Score, as in
    # kube-scheduler. So a2 looks empty to NodeResourcesFit (LeastAllocated) and BalancedAllocation,
    # which prefer it over a1 (1 cpu of cache-0 and spread-0's request used).
    "shop/front-1": "a2",
    # Tolerates the taint and requires gpu=true: only g1.
    "shop/gpu-job": "g1",
}


@pytest.fixture(autouse=True)
def _no_autoload(monkeypatch):
    monkeypatch.setenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", "1")


def cluster_path() -> str:
    return str(resources.files("scorer.data").joinpath("parity-cluster.yaml"))


@pytest.fixture(scope="module")
def placements() -> dict[str, dict]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["simulate", "--no-plugin-autoload", "--cluster", cluster_path(), "--output", "json"])
    assert code == 0, err.getvalue()
    assert "of kinds scorer does not read" not in err.getvalue(), err.getvalue()  # ReplicaSet, Service, PDB read
    for plugin in ("PodTopologySpread", "InterPodAffinity", "DefaultPreemption"):
        assert plugin not in err.getvalue(), err.getvalue()  # not in the startup note of missing plugins
    data = json.loads(out.getvalue())
    return {p["pod"]: p for p in data["placements"]}


def test_every_pending_pod_is_placed(placements):
    assert set(placements) == set(EXPECTED)
    assert {pod: p["node"] for pod, p in placements.items()} == EXPECTED


@pytest.mark.parametrize("pod", sorted(EXPECTED))
def test_each_decision_is_explained(placements, pod):
    placement = placements[pod]
    assert placement["node"] == EXPECTED[pod], placement
    assert placement["decidedBy"], placement


def test_front_is_spread_away_from_the_replica_set_pod(placements):
    # The decision against b1 is the system default spreading's; the output names the plugins that
    # made a2 win over the runner-up a1 (they tie on spreading, so resources separate them).
    assert placements["shop/front-1"]["decidedBy"].endswith("vs a1")
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["explain", "--no-plugin-autoload", "--cluster", cluster_path(), "--pod", "shop/front-1",
                     "--output", "json"])
    assert code == 0
    nodes = json.loads(out.getvalue())["nodes"]
    spread = {name: node["scores"]["PodTopologySpread"]["normalized"] for name, node in nodes.items()
              if node["feasible"]}
    assert spread["a1"] == spread["a2"] > spread["b1"], spread


def test_preemption_evicts_the_budget_free_victim_only():
    report = simulate(load_file(cluster_path()), autoload=False)
    remaining = set(report.cluster.pods)
    assert "shop/batch-a" not in remaining  # the victim on a2
    assert {"shop/batch-b", "shop/cache-0", "shop/spread-0", "shop/front-0"} <= remaining  # PDB kept batch-b
    bound = {key: pod.node_name for key, pod in report.cluster.pods.items()}
    assert bound["shop/critical"] == "a2"
    preempted = [e for e in report.cluster.events if e.reason == "Preempted"]
    assert [e.pod for e in preempted] == ["shop/batch-a"]
