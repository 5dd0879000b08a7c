"""simulate drives the Scheduler on a virtual clock: bounded attempts per pod, retries after
backoff without waiting, terminal pending pods reported, deterministic output."""

from __future__ import annotations

import attrs
from schedkit import Plugins, config_with

from scorer.model import LoadedObjects
from scorer.registry import build_registry
from scorer.simulate import simulate
from scorer.testing import make_node, make_pod, make_pv, make_pvc, make_storage_class


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


def test_a_pod_whose_claim_does_not_exist_is_not_placed_and_its_message_names_the_claim():
    claim = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}]}
    pods = [make_pod("web-0", labels={"app": "web"}, spec=claim), make_pod("plain")]
    report = simulate(LoadedObjects(nodes=[make_node("n1"), make_node("n2")], pods=pods), autoload=False)
    by_pod = {p.pod: p for p in report.placements}
    assert by_pod["default/plain"].node is not None
    assert by_pod["default/web-0"].node is None
    message = ('0/2 nodes are available: persistentvolumeclaim "data-web-0" not found. preemption: 0/2 nodes '
               "are available: 2 Preemption is not helpful for scheduling.")
    assert by_pod["default/web-0"].message == message
    assert report.placed == 1 and report.unschedulable == 1 and report.errors == 0
    assert {e.note for e in report.cluster.events if e.reason == "FailedScheduling"} == {message}


def _claim_pod(name, claim):
    return make_pod(name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])


def test_wait_for_first_consumer_claims_take_free_volumes_in_turn_and_later_pods_see_them_taken():
    """Two local PVs on n1, none on n2: the first two pods each bind one (in memory, as the PersistentVolume
    controller would), the third finds none left and says so per node."""
    hostname = "kubernetes.io/hostname"
    nodes = [make_node("n1", labels={hostname: "n1"}), make_node("n2", labels={hostname: "n2"})]
    storage = [make_storage_class("local", binding_mode="WaitForFirstConsumer"),
               make_pv("pv-a", storage_class="local", node_affinity={hostname: ["n1"]}),
               make_pv("pv-b", storage_class="local", node_affinity={hostname: ["n1"]})]
    storage += [make_pvc(f"data-{i}", storage_class="local") for i in range(3)]
    pods = [_claim_pod(f"db-{i}", f"data-{i}") for i in range(3)]
    report = simulate(LoadedObjects(nodes=nodes, pods=pods, storage=storage), autoload=False)
    by_pod = {p.pod: p for p in report.placements}
    assert [by_pod[f"default/db-{i}"].node for i in range(3)] == ["n1", "n1", None]
    volumes = {by_pod["default/db-0"].volumes, by_pod["default/db-1"].volumes}
    assert volumes == {(("data-0", "pv-a"),), (("data-1", "pv-b"),)} or \
        volumes == {(("data-0", "pv-b"),), (("data-1", "pv-a"),)}
    assert by_pod["default/db-2"].message.startswith(
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.")
    assert report.cluster.pvc("default/data-2").volume_name == ""


def test_a_claim_to_provision_is_provisioned_on_the_chosen_node():
    nodes = [make_node("n1", labels={"kubernetes.io/hostname": "n1"})]
    storage = [make_storage_class("fast", provisioner="example.com/fast", binding_mode="WaitForFirstConsumer"),
               make_pvc("data", storage_class="fast")]
    report = simulate(LoadedObjects(nodes=nodes, pods=[_claim_pod("db", "data")], storage=storage),
                      autoload=False)
    [placement] = report.placements
    claim = report.cluster.pvc("default/data")
    assert placement.node == "n1" and claim.fully_bound and claim.selected_node == "n1"
    assert placement.volumes == (("data", claim.volume_name),)
    assert report.cluster.pv(claim.volume_name).node_affinity.matches(nodes[0])
