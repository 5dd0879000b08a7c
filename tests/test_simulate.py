"""simulate drives the Scheduler on a virtual clock: bounded attempts per pod, retries after
backoff without waiting, terminal pending pods reported, deterministic output."""

from __future__ import annotations

import attrs
from schedkit import Plugins, config_with

from scorer.model import LoadedObjects
from scorer.registry import build_registry
from scorer.simulate import simulate
from scorer.testing import make_node, make_pod


class AlwaysFails:
    name = "AlwaysFails"

    def filter(self, state, pod, node):
        raise RuntimeError("broken plugin")


def test_a_pod_that_keeps_failing_is_attempted_max_attempts_times_then_reported():
    objects = LoadedObjects(nodes=[make_node("n1")], pods=[make_pod("p")])
    registry = build_registry(autoload=False, modules=[Plugins(AlwaysFails)])
    report = simulate(objects, config_with("AlwaysFails"), registry=registry, max_attempts_per_pod=4)
    [placement] = report.placements
    assert placement.attempts == 4 and placement.node is None
    assert "broken plugin" in placement.message and report.errors == 1
    # Each retry came after its backoff on the virtual clock: four FailedScheduling events.
    assert [e.reason for e in report.cluster.events] == ["FailedScheduling"] * 4


def test_terminal_pending_pods_are_reported_not_scheduled():
    pods = [make_pod("web"), attrs.evolve(make_pod("crashed"), phase="Failed")]
    report = simulate(LoadedObjects(nodes=[make_node("n1")], pods=pods), autoload=False)
    assert [p.pod for p in report.placements] == ["default/web"]
    assert ("1 pending pod(s) in a terminal phase (Succeeded or Failed) are not scheduled: default/crashed"
            in report.warnings)


def test_the_output_is_deterministic():
    nodes = [make_node(f"n{i}", cpu="2") for i in range(5)]
    pods = [make_pod(f"p{i}", cpu="700m") for i in range(12)]
    objects = LoadedObjects(nodes=nodes, pods=pods)
    first, second = (simulate(objects, autoload=False, seed=3) for _ in range(2))
    assert [(p.pod, p.node, p.attempts, p.message) for p in first.placements] == [
        (p.pod, p.node, p.attempts, p.message) for p in second.placements]
    assert first.placed == 10 and first.unschedulable == 2
    assert first.cluster.events == second.cluster.events


def test_pods_with_required_anti_affinity_are_placed_apart_by_inter_pod_affinity():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    nodes = [make_node("n1", labels={"kubernetes.io/hostname": "n1"}),
             make_node("n2", labels={"kubernetes.io/hostname": "n2"})]
    pods = [make_pod(f"web-{i}", labels={"app": "web"}, affinity=anti) for i in range(3)]
    report = simulate(LoadedObjects(nodes=nodes, pods=pods), autoload=False)
    by_pod = {p.pod: p for p in report.placements}
    assert {by_pod["default/web-0"].node, by_pod["default/web-1"].node} == {"n1", "n2"}
    assert by_pod["default/web-2"].node is None
    message = "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    assert by_pod["default/web-2"].message.startswith(message)
    assert report.placed == 2 and report.unschedulable == 1 and report.errors == 0


def test_a_pod_with_a_claim_is_not_placed_and_its_message_names_the_plugin():
    claim = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}]}
    pods = [make_pod("web-0", labels={"app": "web"}, spec=claim), make_pod("plain")]
    report = simulate(LoadedObjects(nodes=[make_node("n1"), make_node("n2")], pods=pods), autoload=False)
    by_pod = {p.pod: p for p in report.placements}
    assert by_pod["default/plain"].node is not None
    assert by_pod["default/web-0"].node is None
    message = ("0/2 nodes are available: pod has a volume backed by a PersistentVolumeClaim, which needs the "
               "VolumeBinding plugin; scorer does not implement it yet, so the pod is not placed.")
    assert by_pod["default/web-0"].message == message
    assert report.placed == 1 and report.unschedulable == 1 and report.errors == 0
    assert {e.note for e in report.cluster.events if e.reason == "FailedScheduling"} == {message}
