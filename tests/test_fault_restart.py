"""Faults against the real API server: watches answered 410 after an etcd compaction, and a
scheduler killed in the middle of its bindings.

Each scenario asserts what issue 20 asks of every fault: no node over its allocatable, every
pod that fits bound (once), the process alive (or, killed, its successor).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from servicekit import (
    Cluster,
    ScorerProcess,
    node_manifest,
    pod_manifest,
    scheduler_config,
    wait_until,
)

pytestmark = [pytest.mark.kube, pytest.mark.slow]
# Without the watch cache, watches are served by etcd: one from a compacted revision gets 410.
PLANE_ARGS = ("--watch-cache=false",)


def pods_per_node(cluster: Cluster, namespace: str) -> dict[str, int]:
    bound = list(cluster.bound(namespace).values())
    return {node: bound.count(node) for node in set(bound)}


def test_watches_answered_410_after_a_compaction_relist_and_see_the_deletes_of_the_gap(plane, cluster, proxy,
                                                                                        tmp_path):
    namespace, scheduler = "compacted", "scorer-compacted"
    cluster.ensure_namespace(namespace)
    cluster.create_all([node_manifest(f"c-{i}", cpu="1") for i in range(4)])  # two pods of 500m each
    proc = ScorerProcess(tmp_path, scheduler_config(tmp_path / "c.yaml", scheduler),
                         proxy.write_kubeconfig(tmp_path / "kubeconfig"))
    try:
        proc.wait_ready()
        first = [f"a-{i}" for i in range(8)]
        cluster.create_all([pod_manifest(n, namespace=namespace, scheduler=scheduler, cpu="500m") for n in first])
        wait_until(lambda: set(first) <= set(cluster.bound(namespace)), 30, "the first pods bound (nodes full)")

        # Hold every watch scorer opens from now on, cut the open ones, change the cluster, compact.
        proxy.add(watch=True, delay=4.0, count=None)
        proxy.drop_streams()
        for name in first[:4]:  # deletes scorer's watches will never deliver: only a re-list shows them
            cluster.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}",
                         {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}, ok=(200, 202))
        cluster.call("POST", "/api/v1/namespaces/default/configmaps",
                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "compact-"}})
        plane.compact_etcd()
        proxy.clear()
        gone = {"resource": "pods", "reason": "gone"}
        wait_until(lambda: proc.metric("scorer_reflector_relists_total", gone) >= 1, 40, "a re-list of pods after 410")

        second = [f"b-{i}" for i in range(4)]
        cluster.create_all([pod_manifest(n, namespace=namespace, scheduler=scheduler, cpu="500m") for n in second])
        wait_until(lambda: set(second) <= set(cluster.bound(namespace)), 30, "the new pods bound in the freed room")
        assert max(pods_per_node(cluster, namespace).values()) <= 2  # none over its allocatable
        assert proc.probe("/readyz") == 200 and not proc.exited() and "Traceback" not in proc.log()
    finally:
        proc.stop()


def test_a_scheduler_killed_mid_binding_is_succeeded_by_one_that_binds_every_pod_once(plane, cluster, tmp_path):
    namespace, scheduler, nodes, per_node = "killed", "scorer-killed", 20, 40
    cluster.ensure_namespace(namespace)
    cluster.create_all([node_manifest(f"k-{i}", cpu="4") for i in range(nodes)])  # 40 pods of 100m each
    names = [f"p-{i}" for i in range(nodes * per_node)]  # all fit, and wait for the scheduler
    cluster.create_all([pod_manifest(n, namespace=namespace, scheduler=scheduler) for n in names])
    # 100 requests a second: the 800 bindings (and their Events) take seconds, so the kill lands among them. With
    # the tests' usual 500 qps and burst 1,000, scorer bound all 800 before the harness saw 20 (a fresh clone's run).
    config = scheduler_config(tmp_path / "k.yaml", scheduler, extra={"clientConnection": {"qps": 100, "burst": 100}})
    first = ScorerProcess(tmp_path, config, plane.kubeconfig, name="first")
    second = None
    try:
        wait_until(lambda: len(cluster.bound(namespace)) >= 20, 60, "the first bindings", interval=0.05)
        first.kill()  # SIGKILL in the middle of the bindings: nothing released, nothing flushed
        killed_at = len(cluster.bound(namespace))
        second = ScorerProcess(tmp_path, config, plane.kubeconfig, name="second")
        second.wait_ready()
        wait_until(lambda: set(names) <= set(cluster.bound(namespace)), 60, "every pod bound by the successor")
        time.sleep(1.0)
        assert set(pods_per_node(cluster, namespace).values()) == {per_node}  # full, none over its allocatable
        # The predecessor's bindings still on the wire and the successor's race for the same pods: the API
        # binds each pod once and refuses the other (409), whichever came second; a refused binding of the
        # successor's is not retried (the pod stays where the first binding put it).
        bindings = [r for r in plane.audited_requests() if r.subresource == "binding" and r.namespace == namespace]
        assert {r.code for r in bindings} <= {0, 201, 409}  # (0: the killed process never read its answer)
        bound_by = Counter(r.name for r in bindings if r.code == 201)
        assert max(bound_by.values()) == 1  # no pod bound twice
        assert second.metric("scorer_bind_results_total", {"result": "conflict"}) <= len(
            [r for r in bindings if r.code == 409])
        assert killed_at < len(names)  # (the kill did interrupt the bindings)
        assert second.probe("/healthz") == 200 and "Traceback" not in second.log()
    finally:
        first.stop()
        if second is not None:
            second.stop()
