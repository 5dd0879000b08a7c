"""`scorer run` against a real kube-apiserver: placement, events, conditions, metrics, probes.

Each test runs ``python -m scorer run`` as a process against a control plane of its own
module (nodes are cluster-wide: a shared one would mix other tests' nodes in), deletes its
nodes afterwards, and bounds every wait.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest
from faultproxy import status_body, watch_error_line
from kubekit import free_port
from servicekit import (
    Cluster,
    ScorerProcess,
    node_manifest,
    pod_manifest,
    scheduler_config,
    wait_until,
)

from scorer.assembly import assemble
from scorer.cluster.memory import InMemoryCluster
from scorer.explain import explain_pod
from scorer.framework.cycle_state import CycleState
from scorer.model import load_objects, pod_from_dict
from scorer.quantity import resource_value

pytestmark = [pytest.mark.kube, pytest.mark.slow]


def start(scorers, tmp_path, plane, scheduler, **config) -> ScorerProcess:
    path = scheduler_config(tmp_path / f"{scheduler}-{len(scorers)}.yaml", scheduler, **config)
    proc = ScorerProcess(tmp_path, path, plane.kubeconfig, name=f"scorer-{len(scorers)}",
                         extra_args=("--seed", "7"))
    scorers.append(proc)
    return proc


def test_thousand_pods_bound_once_within_allocatable_where_explain_puts_them(plane, cluster, scorers, tmp_path):
    namespace, scheduler = "bulk", "scorer-bulk"
    cluster.ensure_namespace(namespace)
    sizes = [("2", "4Gi"), ("4", "8Gi"), ("8", "16Gi"), ("16", "64Gi")]
    nodes = [node_manifest(f"bulk-node-{i:03d}", cpu=sizes[i % 4][0], memory=sizes[i % 4][1]) for i in range(100)]
    requests = [("100m", "128Mi"), ("250m", "256Mi"), ("500m", "1Gi"), ("50m", "64Mi"), ("1", "512Mi")]
    pods = [pod_manifest(f"pod-{i:04d}", namespace=namespace, scheduler=scheduler, cpu=requests[i % 5][0],
                         memory=requests[i % 5][1]) for i in range(1000)]
    cluster.create_all(nodes + pods)
    listed_nodes = [{"apiVersion": "v1", "kind": "Node", **n} for n in cluster.call("GET", "/api/v1/nodes")["items"]]
    config = {"percentageOfNodesToScore": 100}
    proc = start(scorers, tmp_path, plane, scheduler, extra=config)
    wait_until(lambda: len(cluster.bound(namespace)) == 1000 or proc.exited(), 180, "1,000 pods bound")
    assert not proc.exited(), proc.log()[-3000:]
    placed = cluster.bound(namespace)
    assert len(placed) == 1000

    # Bound exactly once: every binding the scheduler sent succeeded, none conflicted or was repeated.
    assert proc.metric("scorer_bind_results_total", {"result": "bound"}) == 1000
    assert proc.metric("scorer_bind_results_total", {"result": "conflict"}) == 0
    assert proc.metric("scheduler_schedule_attempts_total", {"result": "scheduled"}) == 1000

    # No node over its allocatable.
    capacity = {n["metadata"]["name"]: n["status"]["allocatable"] for n in listed_nodes}
    used: dict[str, list[int]] = {name: [0, 0, 0] for name in capacity}
    for pod in pods:
        reqs = pod["spec"]["containers"][0]["resources"]["requests"]
        node = used[placed[pod["metadata"]["name"]]]
        node[0] += resource_value("cpu", reqs["cpu"])
        node[1] += resource_value("memory", reqs["memory"])
        node[2] += 1
    for name, (cpu, memory, count) in used.items():
        alloc = capacity[name]
        assert cpu <= resource_value("cpu", alloc["cpu"]) and memory <= resource_value("memory", alloc["memory"])
        assert count <= int(alloc["pods"])

    # Each pod went where the scheduling algorithm (explain's) puts it on the same snapshot: the
    # nodes, plus the pods scheduled before it (the service pops them in the order it listed them,
    # by name) where they went. Ties are allowed to go either way: the pod's node has the top total.
    objects = load_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": listed_nodes}))
    replay = InMemoryCluster(list(objects.nodes), [], [])
    asm = assemble(scheduler_config(tmp_path / "replay.yaml", scheduler, extra=config), replay, seed=7)
    replay.start(asm.handlers)
    fwk = asm.frameworks[scheduler]
    unique = 0
    for pod in pods:
        model = pod_from_dict({**pod, "metadata": {**pod["metadata"], "uid": pod["metadata"]["name"]}})
        result = asm.scheduler.schedule_pod(fwk, CycleState(), model, evaluate_all=True)
        feasible = [asm.cache.table.names[int(r)] for r in result.feasible_rows]
        totals = dict(zip(feasible, result.scores.totals.tolist(), strict=True)) if result.scores else {}
        best = max(totals.values())
        top = {name for name, total in totals.items() if total == best}
        actual = placed[model.name]
        assert actual in top, f"{model.key} went to {actual} (total {totals.get(actual)}), explain's best: {top}"
        unique += len(top) == 1
        bound = pod_from_dict({**pod, "metadata": {**pod["metadata"], "uid": model.uid},
                               "spec": {**pod["spec"], "nodeName": actual}})
        replay.apply(bound)
    assert unique > 100  # the check decides something: many placements had one best node

    # The same through `scorer explain`'s own function for a few pods.
    for index in (0, 1, 500, 999):
        before = [{**p, "spec": {**p["spec"], "nodeName": placed[p["metadata"]["name"]]}} for p in pods[:index]]
        snapshot = load_objects(json.dumps({"apiVersion": "v1", "kind": "List",
                                            "items": listed_nodes + before + [pods[index]]}))
        explanation = explain_pod(snapshot, str(tmp_path / "replay.yaml"), f"{namespace}/pod-{index:04d}", seed=7)
        best = max(n["total"] for n in explanation["nodes"].values() if n["feasible"])
        assert explanation["nodes"][placed[f"pod-{index:04d}"]]["total"] == best


def test_unschedulable_pod_gets_event_and_condition_then_lands_on_a_new_node(plane, cluster, scorers, tmp_path):
    namespace, scheduler = "unsched", "scorer-unsched"
    proc = ready(cluster, scorers, tmp_path, plane, namespace, scheduler,
                 [node_manifest("small-0", cpu="1"), node_manifest("small-1", cpu="1")])
    cluster.create_all([pod_manifest("big", namespace=namespace, scheduler=scheduler, cpu="3")])
    message = ("0/2 nodes are available: 2 Insufficient cpu. "
               "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")

    def failed_event():
        return [e for e in cluster.events(namespace, "big") if e["reason"] == "FailedScheduling"]

    events = wait_until(failed_event, 30, "a FailedScheduling event")
    assert events[0]["note"] == message
    assert events[0]["type"] == "Warning"
    condition = wait_until(lambda: [c for c in cluster.pods(namespace)["big"]["status"].get("conditions") or []
                                    if c["type"] == "PodScheduled"], 30, "the PodScheduled condition")[0]
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", message)
    assert proc.metric("scheduler_schedule_attempts_total", {"result": "unschedulable"}) >= 1
    assert proc.metric("scheduler_pending_pods", {"queue": "unschedulable"}) == 1
    cluster.create_all([node_manifest("large-0", cpu="8")])
    wait_until(lambda: cluster.bound(namespace).get("big") == "large-0", 30, "the pod placed on the new node")
    scheduled = wait_until(lambda: [e for e in cluster.events(namespace, "big") if e["reason"] == "Scheduled"],
                           30, "the Scheduled event")
    note = scheduled[0]["note"]
    assert note == f"Successfully assigned {namespace}/big to large-0"


def ready(cluster, scorers, tmp_path, plane, namespace: str, scheduler: str, nodes: list[dict]) -> ScorerProcess:
    """Namespace and nodes created, then a `scorer run` for ``scheduler`` started and ready."""
    cluster.ensure_namespace(namespace)
    cluster.create_all(nodes)
    proc = start(scorers, tmp_path, plane, scheduler)
    proc.wait_ready()
    return proc


def test_metrics_move_and_readyz_has_verbose_detail(plane, cluster, scorers, tmp_path):
    namespace, scheduler = "metrics", "scorer-metrics"
    proc = ready(cluster, scorers, tmp_path, plane, namespace, scheduler, [node_manifest("m-0")])
    status, body = proc.get("/readyz?verbose")
    assert status == 200
    assert "[+]informer-sync ok" in body and body.rstrip().endswith("readyz check passed")
    before = proc.metric("scheduler_schedule_attempts_total", {"result": "scheduled", "profile": scheduler})
    assert before == 0
    cluster.create_all([pod_manifest(f"p{i}", namespace=namespace, scheduler=scheduler) for i in range(5)])
    wait_until(lambda: len(cluster.bound(namespace)) == 5, 30, "5 pods bound")
    wait_until(lambda: proc.metric("scheduler_schedule_attempts_total",
                                   {"result": "scheduled", "profile": scheduler}) == 5, 10, "attempts counted")
    assert proc.metric("scheduler_pod_scheduling_attempts_count") == 5
    assert proc.metric("scheduler_scheduling_algorithm_duration_seconds_count") == 5
    assert proc.metric("scheduler_queue_incoming_pods_total", {"queue": "active", "event": "PodAdd"}) == 5
    assert proc.metric("scorer_reflector_lists_total", {"resource": "pods"}) >= 1
    assert proc.metric("scorer_build_info") == 1
    status, _ = proc.get("/livez")
    assert status == 200
    assert proc.terminate() == 0
    assert "stopped (exit status 0)" in proc.log()


@pytest.mark.parametrize("case", ["missing", "unreadable", "garbage"])
def test_a_bad_kubeconfig_is_one_clear_line_and_exit_2(tmp_path, case):
    config = scheduler_config(tmp_path / "c.yaml", "s")
    kubeconfig = tmp_path / "kubeconfig"
    if case == "unreadable":
        kubeconfig.mkdir()
    elif case == "garbage":
        kubeconfig.write_text("clusters: [1, 2\n")
    proc = subprocess.run([sys.executable, "-m", "scorer", "run", "--config", str(config), "--kubeconfig",
                           str(kubeconfig), "--port", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(kubeconfig) in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_leader_election_timings_kube_would_refuse_are_a_config_error(tmp_path):
    config = scheduler_config(tmp_path / "c.yaml", "s", leader_elect=True, lease_duration="4s",
                              renew_deadline="1s", retry_period="1s")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                          "clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
                          "users:\n- name: u\n  user: {token: t}\n"
                          "contexts:\n- name: c\n  context: {cluster: c, user: u}\n")
    proc = subprocess.run([sys.executable, "-m", "scorer", "run", "--config", str(config), "--kubeconfig",
                           str(kubeconfig), "--port", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {config}: leaderElection: renewDeadline (1.0s) must be greater than retryPeriod*JitterFactor "
        "(1.0s * 1.2)"], proc.stderr


def test_unreachable_api_server_at_start_is_logged_not_fatal(tmp_path, scorers):
    port = free_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                          f"clusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:{port}', "
                          "insecure-skip-tls-verify: true}\n"
                          "users:\n- name: u\n  user: {token: t}\n"
                          "contexts:\n- name: c\n  context: {cluster: c, user: u}\n")
    config = scheduler_config(tmp_path / "c.yaml", "s")
    proc = ScorerProcess(tmp_path, config, kubeconfig)
    scorers.append(proc)
    wait_until(lambda: proc.probe("/livez") == 200, 30, "/livez")
    status, body = proc.get("/readyz?verbose")
    assert status == 503 and "[-]informer-sync failed" in body
    wait_until(lambda: "127.0.0.1" in proc.log() and "Connect" in proc.log(), 30, "a log line about the connection")
    assert not proc.exited()
    assert "Traceback" not in proc.log()
    assert proc.terminate() == 0


def leader_of(procs: list[ScorerProcess]) -> list[ScorerProcess]:
    return [p for p in procs if not p.exited() and p.metric("scorer_leader_election_is_leader") == 1]


def test_two_replicas_one_leads_and_the_other_takes_over(plane, cluster, scorers, tmp_path):
    namespace, scheduler = "ha", "scorer-ha"
    cluster.ensure_namespace(namespace)
    cluster.create_all([node_manifest(f"ha-{i}") for i in range(3)])
    election = {"leader_elect": True, "lease": "scorer-ha", "namespace": namespace, "lease_duration": "4s",
                "renew_deadline": "3s", "retry_period": "500ms"}
    first, second = (start(scorers, tmp_path, plane, scheduler, **election) for _ in range(2))
    for proc in (first, second):
        wait_until(lambda proc=proc: proc.probe("/readyz") == 200, 60, "both replicas ready")
    leaders = wait_until(lambda: leader_of([first, second]), 30, "a leader")
    assert len(leaders) == 1
    leader, standby = leaders[0], (second if leaders[0] is first else first)

    def created(prefix: str, count: int) -> list[str]:
        names = [f"{prefix}-{i}" for i in range(count)]
        cluster.create_all([pod_manifest(n, namespace=namespace, scheduler=scheduler) for n in names])
        return names

    batch = created("a", 20)
    wait_until(lambda: set(batch) <= set(cluster.bound(namespace)), 30, "the first batch bound")
    assert leader.metric("scheduler_schedule_attempts_total", {"result": "scheduled"}) == 20
    assert standby.metric("scheduler_schedule_attempts_total") == 0  # a standby never schedules

    # SIGKILL: the lease is not released; the standby takes over once it expires.
    leader.kill()
    killed = time.monotonic()
    wait_until(lambda: leader_of([standby]), 15, "the standby to take over after SIGKILL")
    takeover = time.monotonic() - killed
    assert takeover <= 4 + 0.5 * 1.2 + 2.0  # leaseDuration + retryPeriod (jittered), plus polling slack
    batch = created("b", 20)
    wait_until(lambda: set(batch) <= set(cluster.bound(namespace)), 30, "the second batch bound")

    # SIGTERM: the leader releases the lease, exits 0, and a new standby takes over at once.
    third = start(scorers, tmp_path, plane, scheduler, **election)
    wait_until(lambda: third.probe("/readyz") == 200, 60, "the third replica ready")
    signalled = time.monotonic()
    assert standby.terminate() == 0
    stopped = time.monotonic()
    assert stopped - signalled < 15  # the shutdown is bounded: bindings, lease release, sessions
    wait_until(lambda: leader_of([third]), 10, "the third replica to take over after SIGTERM")
    assert time.monotonic() - stopped < 4  # the lease was released: no waiting for it to expire
    assert "released" in standby.log().lower()
    batch = created("c", 20)
    wait_until(lambda: set(batch) <= set(cluster.bound(namespace)), 30, "the third batch bound")

    # No pod bound twice: one Scheduled event at most per pod, and every pod bound.
    for name in cluster.bound(namespace):
        scheduled = [e for e in cluster.events(namespace, name) if e["reason"] == "Scheduled"]
        assert len(scheduled) <= 1, name
    assert len(cluster.bound(namespace)) == 60


def bound_once(cluster: Cluster, namespace: str, names: list[str]) -> None:
    """Every pod of ``names`` bound, and none bound twice (one Scheduled event at most)."""
    bound = cluster.bound(namespace)
    missing = sorted(set(names) - set(bound))
    assert not missing, f"not bound: {missing[:10]}"
    for name in names:
        assert len([e for e in cluster.events(namespace, name) if e["reason"] == "Scheduled"]) <= 1, name


def test_dropped_watches_410_and_failed_bindings_lose_no_pod(plane, cluster, scorers, tmp_path, proxy):
    namespace, scheduler = "faults", "scorer-faults"
    cluster.ensure_namespace(namespace)
    cluster.create_all([node_manifest(f"f-{i}", cpu="16") for i in range(4)])
    proc = ScorerProcess(tmp_path, scheduler_config(tmp_path / "c.yaml", scheduler),
                         proxy.write_kubeconfig(tmp_path / "kubeconfig"))
    scorers.append(proc)
    proc.wait_ready()
    names: list[str] = []

    def create(prefix: str, count: int, batches: int = 1) -> None:
        for batch in range(batches):
            new = [f"{prefix}-{batch}-{i}" for i in range(count)]
            cluster.create_all([pod_manifest(n, namespace=namespace, scheduler=scheduler) for n in new])
            names.extend(new)
            time.sleep(0.3)

    # Every watch is cut after 3 lines, over and over: the reflectors resume from the last version.
    rule_at = time.monotonic()
    proxy.add(watch=True, drop_after_lines=3, count=None)

    def pods_watch_under_the_rule() -> bool:
        # A watch opened before the rule is cut; so is one on its way then (not streaming yet at the first cut).
        proxy.drop_streams()
        return any(r.time >= rule_at for r in proxy.proxy.watches("/api/v1/pods"))

    wait_until(pods_watch_under_the_rule, 30, "a pods watch opened under the rule")
    create("drop", 10, batches=5)
    wait_until(lambda: set(names) <= set(cluster.bound(namespace)), 60, "pods bound through dropped watches")
    assert proc.metric("scorer_reflector_watch_restarts_total", {"resource": "pods"}) >= 5
    proxy.clear()

    # A 410 in the pods watch: the reflector re-lists and goes on.
    proxy.add(watch=True, path="^/api/v1/pods$", status=200, body=watch_error_line(), count=1)
    proxy.drop_streams()
    # A watch cut after it worked resumes at once, and a 410 re-lists within half a second.
    wait_until(lambda: proc.metric("scorer_reflector_relists_total", {"resource": "pods", "reason": "gone"}) >= 1,
               30, "a re-list after 410")
    create("gone", 10)
    wait_until(lambda: set(names) <= set(cluster.bound(namespace)), 30, "pods bound after the re-list")

    # Bindings answered 500: forgotten, retried after backoff, bound once.
    errors_before = proc.metric("scorer_bind_results_total", {"result": "error"})
    proxy.add(method="POST", path="/binding$", status=500, body=status_body(500, "InternalError", "injected"),
              count=4)
    create("err", 4)
    wait_until(lambda: set(names) <= set(cluster.bound(namespace)), 60, "pods bound after 500s")
    assert proc.metric("scorer_bind_results_total", {"result": "error"}) - errors_before == 4

    # A binding that conflicts (409: someone bound the pod while scorer's request was on its way):
    # forgotten, not retried, no FailedScheduling.
    proxy.add(method="POST", path="/pods/race-0/binding$", delay=3.0, count=1)
    cluster.create_all([pod_manifest("race-0", namespace=namespace, scheduler=scheduler)])
    wait_until(lambda: proxy.proxy.faults[-1].hits == 1, 30, "scorer's binding of race-0 held at the proxy")
    cluster.call("POST", f"/api/v1/namespaces/{namespace}/pods/race-0/binding",
                 {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "race-0"},
                  "target": {"kind": "Node", "name": "f-3"}})
    wait_until(lambda: proc.metric("scorer_bind_results_total", {"result": "conflict"}) == 1, 30, "the conflict")
    time.sleep(1.0)
    assert cluster.bound(namespace)["race-0"] == "f-3"
    assert not [e for e in cluster.events(namespace, "race-0") if e["reason"] == "FailedScheduling"]
    assert proc.metric("scorer_bind_results_total", {"result": "conflict"}) == 1

    bound_once(cluster, namespace, names)
    assert proc.metric("scorer_bind_results_total", {"result": "bound"}) == len(names)
    assert not proc.exited() and "Traceback" not in proc.log()


def test_malformed_objects_are_reported_and_the_rest_scheduled(plane, cluster, scorers, tmp_path, proxy):
    namespace, scheduler = "malformed", "scorer-malformed"
    cluster.ensure_namespace(namespace)

    def corrupt(document):
        obj = document.get("object", document) if isinstance(document, dict) else None
        if isinstance(obj, dict) and obj.get("metadata", {}).get("name") == "bad-pod":
            obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
        if isinstance(obj, dict) and obj.get("metadata", {}).get("name") == "bad-node":
            obj["spec"]["taints"] = [{"key": "k", "effect": "Sometimes"}]
        for item in document.get("items", []) if isinstance(document, dict) else []:
            corrupt({"object": item})
        return document

    proxy.add(path="^/api/v1/(pods|nodes)$", rewrite=corrupt, count=None)
    cluster.create_all([node_manifest("bad-node", cpu="64"), node_manifest("good-node", cpu="2")])
    proc = ScorerProcess(tmp_path, scheduler_config(tmp_path / "c.yaml", scheduler),
                         proxy.write_kubeconfig(tmp_path / "kubeconfig"))
    scorers.append(proc)
    proc.wait_ready()
    cluster.create_all([pod_manifest("bad-pod", namespace=namespace, scheduler=scheduler)]
                       + [pod_manifest(f"ok-{i}", namespace=namespace, scheduler=scheduler) for i in range(3)])
    wait_until(lambda: len(cluster.bound(namespace)) == 3, 30, "the readable pods bound")
    assert set(cluster.bound(namespace).values()) == {"good-node"}  # the unreadable node is not used
    events = wait_until(lambda: [e for e in cluster.events(namespace, "bad-pod") if e["reason"] == "FailedScheduling"],
                        30, "the unreadable pod's event")
    time.sleep(1.0)
    events = [e for e in cluster.events(namespace, "bad-pod") if e["reason"] == "FailedScheduling"]
    assert "cannot be read" in events[0]["note"] and "cpu" in events[0]["note"]
    log = proc.log()
    assert "bad-node" in log and "Sometimes" in log
    # One line per version of the object (created; then its PodScheduled condition was written).
    assert 1 <= len([line for line in log.splitlines() if "bad-pod" in line]) <= 2
    assert len(events) == 1
    assert "Traceback" not in log
    assert 1 <= proc.metric("scorer_reflector_invalid_objects_total", {"resource": "pods"}) <= 2


def test_a_pod_whose_claim_is_missing_waits_with_kubes_message(plane, cluster, scorers, tmp_path):
    namespace, scheduler = "affinity", "scorer-affinity"
    proc = ready(cluster, scorers, tmp_path, plane, namespace, scheduler, [node_manifest("aff-0")])
    claim = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}]}
    cluster.create_all([pod_manifest("web-0", namespace=namespace, scheduler=scheduler, labels={"app": "web"},
                                     spec=claim),
                        pod_manifest("plain", namespace=namespace, scheduler=scheduler)])
    wait_until(lambda: "plain" in cluster.bound(namespace), 30, "the plain pod bound")
    events = wait_until(lambda: [e for e in cluster.events(namespace, "web-0") if e["reason"] == "FailedScheduling"],
                        30, "the claim pod's FailedScheduling event")
    # VolumeRestrictions, the first volume plugin in kube's order, looks the claim up at PreFilter.
    message = '0/1 nodes are available: persistentvolumeclaim "data-web-0" not found.'
    assert events[0]["note"].startswith(message)
    assert "web-0" not in cluster.bound(namespace)
    condition = [c for c in cluster.pods(namespace)["web-0"]["status"].get("conditions") or []
                 if c["type"] == "PodScheduled"]
    assert condition and condition[0]["reason"] == "Unschedulable" and condition[0]["message"].startswith(message)
    assert proc.metric("scheduler_unschedulable_pods", {"plugin": "VolumeRestrictions"}) == 1


# -- kube-scheduler parity: default spreading of a ReplicaSet's pods, pod anti-affinity (no controller
# manager runs: the ReplicaSet is an inert API object scorer reads; the test creates the pods it would own)

ZONE = "topology.kubernetes.io/zone"


def bound_when(cluster: Cluster, namespace: str, count: int) -> dict[str, str] | None:
    """The bound pods of ``namespace`` once there are ``count`` of them."""
    bound = cluster.bound(namespace)
    return bound if len(bound) == count else None


def test_replicaset_pods_spread_across_zones_by_the_system_default_constraints(plane, cluster, scorers, tmp_path):
    namespace, scheduler = "spread", "scorer-spread"
    cluster.ensure_namespace(namespace)
    # One big node in zone a, a small one in b and c: without spreading, every pod would go to the
    # big node (NodeResourcesFit and BalancedAllocation both prefer it, by a few points).
    cluster.create_all([node_manifest("a1", cpu="64", memory="256Gi", labels={ZONE: "a"}),
                        node_manifest("b1", cpu="4", memory="16Gi", labels={ZONE: "b"}),
                        node_manifest("c1", cpu="4", memory="16Gi", labels={ZONE: "c"})])
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "pause"}]}}
    cluster.call("POST", f"/apis/apps/v1/namespaces/{namespace}/replicasets",
                 {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
                  "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}}, "template": template}})
    proc = start(scorers, tmp_path, plane, scheduler)
    proc.wait_ready()
    wait_until(lambda: proc.metric("scorer_reflector_lists_total", {"resource": "replicasets"}) >= 1, 20,
               "the ReplicaSet reflector listed")

    # Control: pods no ReplicaSet or Service selects have no default constraints and all go to a1.
    cluster.create_all([pod_manifest(f"solo-{i}", namespace=namespace, scheduler=scheduler,
                                     labels={"app": "solo"}) for i in range(3)])
    solo = wait_until(lambda: bound_when(cluster, namespace, 3), 30, "3 solo pods bound")
    assert set(solo.values()) == {"a1"}

    cluster.create_all([pod_manifest(f"web-{i}", namespace=namespace, scheduler=scheduler,
                                     labels={"app": "web"}) for i in range(6)])
    bound = wait_until(lambda: bound_when(cluster, namespace, 9), 30, "6 web pods bound")
    zones = Counter({"a1": "a", "b1": "b", "c1": "c"}[node] for name, node in bound.items() if name.startswith("web"))
    assert zones == {"a": 2, "b": 2, "c": 2}, bound


def test_required_pod_anti_affinity_is_evaluated(plane, cluster, scorers, tmp_path):
    namespace, scheduler = "anti", "scorer-anti"
    cluster.ensure_namespace(namespace)
    cluster.create_all([node_manifest("anti-0"), node_manifest("anti-1")])
    proc = start(scorers, tmp_path, plane, scheduler)
    proc.wait_ready()
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    cluster.create_all([pod_manifest(f"web-{i}", namespace=namespace, scheduler=scheduler, labels={"app": "web"},
                                     spec={"affinity": anti}) for i in range(3)])
    bound = wait_until(lambda: bound_when(cluster, namespace, 2), 30, "two web pods bound")
    assert sorted(bound.values()) == ["anti-0", "anti-1"]
    (pending,) = {"web-0", "web-1", "web-2"} - set(bound)
    events = wait_until(lambda: [e for e in cluster.events(namespace, pending) if e["reason"] == "FailedScheduling"],
                        30, "the third pod's FailedScheduling event")
    note = events[0]["note"]
    # Each node holds a web pod the pending pod's own anti-affinity excludes (kube checks that before the symmetry).
    assert note.startswith("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules"), note
    # Parked among the unschedulable pods, rejected by InterPodAffinity (a binding of the other pods may
    # move it to be retried first: wait for it to settle).
    wait_until(lambda: proc.metric("scheduler_unschedulable_pods", {"plugin": "InterPodAffinity"}) == 1, 20,
               "the pod counted as unschedulable by InterPodAffinity")


def test_api_server_restart_mid_run(plane, cluster, scorers, tmp_path):
    namespace, scheduler = "restart", "scorer-restart"
    proc = ready(cluster, scorers, tmp_path, plane, namespace, scheduler, [node_manifest(f"r-{i}") for i in range(3)])
    first = [f"before-{i}" for i in range(10)]
    cluster.create_all([pod_manifest(n, namespace=namespace, scheduler=scheduler) for n in first])
    wait_until(lambda: set(first) <= set(cluster.bound(namespace)), 30, "pods bound before the restart")
    plane.stop_apiserver()
    time.sleep(3)
    assert not proc.exited()
    plane.start_apiserver()
    after = [f"after-{i}" for i in range(10)]
    cluster.create_all([pod_manifest(n, namespace=namespace, scheduler=scheduler) for n in after])
    wait_until(lambda: set(after) <= set(cluster.bound(namespace)), 60, "pods bound after the restart")
    bound_once(cluster, namespace, first + after)
    assert not proc.exited() and "Traceback" not in proc.log()
