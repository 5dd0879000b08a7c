"""Preemption by `scorer run` against a real kube-apiserver (tests/kubekit.py, tests/servicekit.py).

A high-priority pod that fits nowhere makes scorer delete exactly the chosen victim (a DELETE with
the victim's UID as precondition, no grace period override), patch the preemptor's
``status.nominatedNodeName``, write a ``Preempted`` Event on the victim, and bind the preemptor
once the victim is gone. No kubelet runs: the test plays it and force-deletes the victim once it
has a deletionTimestamp. A preemptor is preempted for once (issue 22): victims that take 5 s to go
get one Preempted Event each and one attempt is counted; a preemptor retried while its victim's
DELETE is still on its way waits for it instead of preempting it again.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from kubekit import ControlPlane
from servicekit import Cluster, ScorerProcess, node_manifest, pod_manifest, scheduler_config, wait_until

pytestmark = [pytest.mark.kube, pytest.mark.slow]


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    with ControlPlane(tmp_path_factory.mktemp("preemption-plane")) as control_plane:
        yield control_plane


def test_a_high_priority_pod_preempts_exactly_the_chosen_victim_and_is_bound(plane, tmp_path):
    cluster = Cluster(plane)
    namespace, scheduler = "preempt", "scorer-preempt"
    cluster.ensure_namespace(namespace)
    for name, value in (("low", 1), ("mid", 500), ("urgent", 1000)):
        cluster.create_priority_class(name, value)
    # node-a (3 cpu): low-a (1) and low-b (2); node-b (2 cpu): mid (2). The preemptor needs 2 cpu:
    # on node-a only low-b has to go (low-a comes back in the reprieve); node-b's victim has a
    # higher priority, so node-a is chosen.
    cluster.create_all([node_manifest("preempt-a", cpu="3"), node_manifest("preempt-b", cpu="2")])

    def bound_pod(name: str, node: str, cpu: str, klass: str) -> dict:
        return pod_manifest(name, namespace=namespace, scheduler=scheduler, cpu=cpu,
                            spec={"nodeName": node, "priorityClassName": klass})

    cluster.create_all([bound_pod("low-a", "preempt-a", "1", "low"), bound_pod("low-b", "preempt-a", "2", "low"),
                        bound_pod("mid", "preempt-b", "2", "mid")])
    path = scheduler_config(tmp_path / "preempt.yaml", scheduler)
    proc = ScorerProcess(tmp_path, path, plane.kubeconfig, name="scorer-preempt", extra_args=("--seed", "7"))
    try:
        proc.wait_ready()
        cluster.create_all([pod_manifest("urgent", namespace=namespace, scheduler=scheduler, cpu="2",
                                         spec={"priorityClassName": "urgent"})])
        pods = wait_until(lambda: (p := cluster.pods(namespace))["low-b"]["metadata"].get("deletionTimestamp") and p,
                          60, "the victim being deleted")
        assert not pods["low-a"]["metadata"].get("deletionTimestamp")
        assert not pods["mid"]["metadata"].get("deletionTimestamp")
        uid = wait_until(lambda: cluster.pods(namespace)["urgent"]["status"].get("nominatedNodeName") == "preempt-a"
                         and cluster.pods(namespace)["urgent"]["metadata"]["uid"], 30, "the nomination")
        assert not cluster.bound(namespace).get("urgent")  # not before the victim is gone
        events = wait_until(lambda: [e for e in cluster.events(namespace, "low-b") if e["reason"] == "Preempted"],
                            30, "the Preempted Event")
        [event] = events
        assert event["note"] == f"Preempted by pod {uid} on node preempt-a"
        assert (event["type"], event["action"], event["reportingController"]) == ("Normal", "Preempting", scheduler)
        assert event["regarding"]["uid"] == pods["low-b"]["metadata"]["uid"]
        assert (event["related"]["kind"], event["related"]["name"], event["related"]["uid"]) == ("Pod", "urgent", uid)
        # The kubelet's part: the victim terminates.
        cluster.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/low-b",
                     {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        wait_until(lambda: cluster.bound(namespace).get("urgent") == "preempt-a" or proc.exited(), 60,
                   "the preemptor bound")
        assert cluster.bound(namespace) == {"low-a": "preempt-a", "urgent": "preempt-a", "mid": "preempt-b"}
        assert proc.metric("scheduler_preemption_victims_sum") == 1
        assert proc.metric("scheduler_preemption_attempts_total") >= 1
    finally:
        proc.stop()
        cluster.delete_pods(namespace)
        cluster.delete_all_nodes()


def fill_node(cluster: Cluster, namespace: str, scheduler: str, node: str, victims: list[str]) -> None:
    """``namespace``, the PriorityClasses low (1) and urgent (1000), and ``node`` filled by ``victims``:
    one cpu each, priority low, bound to it."""
    cluster.ensure_namespace(namespace)
    for name, value in (("low", 1), ("urgent", 1000)):
        cluster.create_priority_class(name, value)
    cluster.create_all([node_manifest(node, cpu=str(len(victims)))])
    cluster.create_all([pod_manifest(name, namespace=namespace, scheduler=scheduler, cpu="1",
                                     spec={"nodeName": node, "priorityClassName": "low"}) for name in victims])


def test_a_preemptor_whose_victims_take_5_s_to_go_preempts_once(plane, tmp_path):
    # Nine victims on one node, deleted with their own grace period: with no kubelet they stay
    # terminating until the test removes them, 5 s later. Each victim gets one Preempted Event, the
    # metrics count one attempt, and the preemptor is bound to its nominated node once they are gone.
    cluster = Cluster(plane)
    namespace, scheduler, node = "preempt-once", "scorer-once", "once-a"
    victims = [f"victim-{i}" for i in range(9)]
    fill_node(cluster, namespace, scheduler, node, victims)
    # The test removes the victims one by one: the first removal requeues the preemptor, which must not
    # try again before the last one is gone (an attempt that waits for terminating victims counts, as in
    # kube-scheduler): its backoff, 10 s from its attempt, outlasts the 5 s.
    path = scheduler_config(tmp_path / "once.yaml", scheduler,
                            extra={"podInitialBackoffSeconds": 10, "podMaxBackoffSeconds": 10})
    proc = ScorerProcess(tmp_path, path, plane.kubeconfig, name="scorer-once")
    try:
        proc.wait_ready()
        cluster.create_all([pod_manifest("urgent", namespace=namespace, scheduler=scheduler, cpu="9",
                                         spec={"priorityClassName": "urgent"})])
        wait_until(lambda: all(p["metadata"].get("deletionTimestamp") for name, p in cluster.pods(namespace).items()
                               if name in victims), 60, "the victims terminating")
        terminating = time.monotonic()
        wait_until(lambda: cluster.pods(namespace)["urgent"]["status"].get("nominatedNodeName") == node, 30,
                   "the nomination")
        while (left := terminating + 5 - time.monotonic()) > 0:
            assert not cluster.bound(namespace).get("urgent")  # not before the victims are gone
            time.sleep(min(left, 0.5))
        # The kubelet's part, 5 s late: the victims terminate.
        for name in victims:
            cluster.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                         {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        wait_until(lambda: cluster.bound(namespace).get("urgent") == node or proc.exited(), 60, "the preemptor bound")
        assert cluster.bound(namespace) == {"urgent": node}
        events = cluster.call("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        preempted = Counter(e["regarding"]["name"] for e in events if e["reason"] == "Preempted")
        assert preempted == dict.fromkeys(victims, 1)
        assert all(e.get("series") is None for e in events if e["reason"] == "Preempted")  # no repeats either
        assert proc.metric("scheduler_preemption_attempts_total") == 1
        assert proc.metric("scheduler_preemption_victims_count") == 1
        assert proc.metric("scheduler_preemption_victims_sum") == len(victims)
    finally:
        proc.stop()
        cluster.delete_pods(namespace)
        cluster.delete_all_nodes()


def test_a_preemptor_retried_before_its_victims_deletion_is_written_waits_for_it(plane, proxy, tmp_path):
    # The victim's DELETE is held 8 s on its way to the API server (a busy writer), and a new node
    # retries the preemptor meanwhile: it waits for the victim it chose instead of preempting it again.
    cluster = Cluster(plane)
    namespace, scheduler, node = "preempt-held", "scorer-held", "held-a"
    fill_node(cluster, namespace, scheduler, node, ["victim"])
    held = proxy.add(method="DELETE", path=f"/namespaces/{namespace}/pods/victim$", delay=8.0)
    path = scheduler_config(tmp_path / "held.yaml", scheduler)
    proc = ScorerProcess(tmp_path, path, proxy.write_kubeconfig(tmp_path / "proxy.kubeconfig"), name="scorer-held")
    try:
        proc.wait_ready()
        cluster.create_all([pod_manifest("urgent", namespace=namespace, scheduler=scheduler, cpu="1",
                                         spec={"priorityClassName": "urgent"})])
        wait_until(lambda: held.hits, 30, "the victim's DELETE")
        cluster.create_all([node_manifest("held-small", cpu="100m")])  # too small, but the preemptor tries again
        wait_until(lambda: proc.metric("scheduler_preemption_attempts_total") >= 2, 20, "the second attempt")
        assert not cluster.pods(namespace)["victim"]["metadata"].get("deletionTimestamp")  # still held
        wait_until(lambda: cluster.pods(namespace)["victim"]["metadata"].get("deletionTimestamp"), 30,
                   "the victim terminating")
        cluster.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/victim",
                     {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        wait_until(lambda: cluster.bound(namespace).get("urgent") == node or proc.exited(), 60, "the preemptor bound")
        events = cluster.call("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
        [preempted] = [e for e in events if e["reason"] == "Preempted"]
        assert preempted["regarding"]["name"] == "victim" and preempted.get("series") is None
        assert held.hits == 1  # one DELETE
        assert proc.metric("scheduler_preemption_victims_count") == 1
        assert proc.metric("scheduler_preemption_victims_sum") == 1
    finally:
        proc.stop()
        proxy.clear()
        cluster.delete_pods(namespace)
        cluster.delete_all_nodes()
