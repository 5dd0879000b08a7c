"""Fencing a leader whose lease ran out: no scheduling cycle starts and no write is sent.

In process: a fenced ``ApiClient`` sends reads but no write, and a fenced scheduling loop
starts no cycle and loses no pod. Against the real API server: two replicas, the leader
paused with SIGSTOP past its lease while pods arrive; on SIGCONT it sends no binding (its
requests go through a recording proxy; the API server's audit log counts every binding),
no node ends over its allocatable, every pod that fits is bound, and the old leader exits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from schedkit import build
from servicekit import (
    Cluster,
    ScorerProcess,
    node_manifest,
    pod_manifest,
    scheduler_config,
    wait_until,
)

from scorer.kube.client import ApiClient, FencedWrite
from scorer.kube.config import load_kubeconfig
from scorer.testing import make_node, make_pod

kube = pytest.mark.kube


# --- in process ----------------------------------------------------------------------------------


@kube
async def test_a_fenced_client_sends_reads_but_no_write(control_plane) -> None:
    leading = [True]
    # (Not scorer's user agent: tests/test_k8s_rbac.py holds scorer's own calls to the shipped RBAC rules.)
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig), fence=lambda: leading[0],
                         user_agent="fence-test") as client:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fence-a"}, "data": {"k": "v"}}
        assert (await client.request("POST", "/api/v1/namespaces/default/configmaps", body=body)).status == 201
        leading[0] = False
        sent = client.requests
        body["metadata"]["name"] = "fence-b"
        with pytest.raises(FencedWrite, match="not sent: this process does not hold the leader lease"):
            await client.request("POST", "/api/v1/namespaces/default/configmaps", body=body)
        for method in ("PUT", "PATCH", "DELETE"):
            with pytest.raises(FencedWrite):
                await client.request(method, "/api/v1/namespaces/default/configmaps/fence-a", body={})
        assert client.requests == sent and client.fenced == 4
        response = await client.request("GET", "/api/v1/namespaces/default/configmaps/fence-b")
        assert response.status == 404  # the read was sent; the write never was
        assert (await client.request("GET", "/api/v1/namespaces/default/configmaps/fence-a")).status == 200
        # Paused (or slow) after the first check, until the lease is gone: the check made once the connection is
        # ready, right before the request is written, refuses it too.
        answers = iter([True, False] * 3)
        client.fence = lambda: next(answers)
        sent = client.requests
        for method in ("POST", "PATCH", "DELETE"):
            with pytest.raises(FencedWrite):
                await client.request(method, "/api/v1/namespaces/default/configmaps/fence-a", body={})
        assert client.requests == sent and client.fenced == 7
        assert (await client.request("GET", "/api/v1/namespaces/default/configmaps/fence-a")).status == 200


async def test_a_fenced_loop_starts_no_cycle_and_loses_no_pod(caplog) -> None:
    asm, cluster = build(None, [make_node("n1")], [make_pod("p1"), make_pod("p2")])
    leading = [False]
    asm.scheduler.fence = lambda: leading[0]
    loop = asyncio.create_task(asm.scheduler.run())
    try:
        for _ in range(20):
            await asyncio.sleep(0.01)
        scheduled = {"result": "scheduled", "profile": "default-scheduler"}
        attempts = asm.metrics.collector_registry.get_sample_value("scheduler_schedule_attempts_total", scheduled)
        assert attempts in (None, 0)
        assert {p.node_name for p in cluster.pods.values()} == {""}
        assert "default/p1" in asm.queue and "default/p2" in asm.queue
        assert "does not hold the leader lease" in caplog.text
        leading[0] = True  # (an elector never leads again after this; the loop does not care)
        for _ in range(400):
            if all(p.node_name for p in cluster.pods.values()):
                break
            await asyncio.sleep(0.01)
        assert {p.node_name for p in cluster.pods.values()} == {"n1"}
    finally:
        await asm.scheduler.stop()
        await loop


# --- against the real API server -------------------------------------------------------------------


@kube
@pytest.mark.slow
def test_a_leader_paused_past_its_lease_sends_nothing_when_it_wakes(plane, proxy, tmp_path):
    cluster = Cluster(plane)
    namespace, scheduler, pods, nodes, per_node = "fence", "scorer-fence", 200, 3, 40
    cluster.ensure_namespace(namespace)
    election = {"leader_elect": True, "lease": "scorer-fence", "namespace": namespace, "lease_duration": "15s",
                "renew_deadline": "10s", "retry_period": "2s"}
    config = scheduler_config(tmp_path / "fence.yaml", scheduler, **election)
    # The first replica talks through the recording proxy: what it sends is what the proxy saw.
    old = ScorerProcess(tmp_path, config, proxy.write_kubeconfig(tmp_path / "kubeconfig-old"), name="old")
    new = None
    try:
        old.wait_ready()
        wait_until(lambda: old.metric("scorer_leader_election_is_leader") == 1, 30, "the first replica to lead")
        new = ScorerProcess(tmp_path, config, plane.kubeconfig, name="new")
        new.wait_ready()
        # Pods that fit nowhere yet wait in both replicas' queues...
        names = [f"p-{i}" for i in range(pods)]
        cluster.create_all([pod_manifest(n, namespace=namespace, scheduler=scheduler,
                                         spec={"nodeSelector": {"pool": "burst"}}) for n in names])
        wait_until(lambda: old.metric("scheduler_schedule_attempts_total", {"result": "unschedulable"}) >= pods, 30,
                   "every pod tried and found unschedulable by the leader")
        # ... until nodes arrive: the leader starts a burst of cycles, and is paused in the middle of it
        # (or just before it reads the nodes): either way it wakes with pods to place on a stale cache.
        cluster.create_all([node_manifest(f"burst-{i}", cpu="4", labels={"pool": "burst"}) for i in range(nodes)])
        old.proc.send_signal(signal.SIGSTOP)
        paused = time.monotonic()
        wait_until(lambda: new.metric("scorer_leader_election_is_leader") == 1, 25, "the standby to take over")
        wait_until(lambda: len(cluster.bound(namespace)) == nodes * per_node, 20, "the new leader filling the nodes")
        time.sleep(max(0.0, 25.0 - (time.monotonic() - paused)))
        resumed = time.monotonic()
        old.proc.send_signal(signal.SIGCONT)

        wait_until(old.exited, 20, "the old leader to exit")
        assert old.proc.returncode == 1
        sent_after = [(r.method, r.path) for r in proxy.proxy.requests if r.time >= resumed and r.method != "GET"]
        assert not [r for r in sent_after if "/pods/" in r[1]], sent_after  # no binding, status patch or delete
        assert "lost lease" in old.log() and "Traceback" not in old.log()

        time.sleep(2.0)  # anything still on its way lands
        bound = cluster.bound(namespace)
        pods_on = {node: list(bound.values()).count(node) for node in set(bound.values())}
        assert len(bound) == nodes * per_node and set(pods_on.values()) == {per_node}, pods_on  # none over 4 CPUs
        # Every binding the API server received bound its pod: no second attempt, none refused.
        bindings = [r for r in plane.audited_requests() if r.subresource == "binding" and r.namespace == namespace]
        assert sorted(r.name for r in bindings) == sorted(bound), sorted((r.name, r.code) for r in bindings)
        assert {r.code for r in bindings} == {201}
        assert new.probe("/healthz") == 200 and not new.exited()
    finally:
        if not old.exited():
            os.kill(old.proc.pid, signal.SIGCONT)
        old.stop()
        if new is not None:
            new.stop()
        cluster.delete_all_nodes()
